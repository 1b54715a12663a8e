#!/bin/sh
# hotplug-cycles.sh SECONDS [--storm] [MODULE_ARGS...] (scripts/hotplug-probe):
# CPU 1 goes offline and online every 0.2 to 1 s for SECONDS while two
# CPU-bound workloads run; --storm adds /tmp/ipi-storm (cross-CPU perf calls
# by IPI, without the module); with MODULE_ARGS (e.g. "sample_freq=20000"),
# the module is loaded with them first and a reader streams the device
# throughout; without, the module is never loaded. Prints the cycles done; a
# guest that freezes is caught by scripts/vm-run's hang dump.
. /tmp/lib.sh
secs=${1:-60}; shift
storm=
[ "${1:-}" = --storm ] && { storm=1; shift; }
CPU1=/sys/devices/system/cpu/cpu1/online
if [ $# -gt 0 ]; then
    check "insmod $*" insmod /oprofile_rs.ko "$@"
    cat $DEV >/dev/null & reader=$!
else
    echo "(the module is not loaded)"
fi
/tmp/workload $((secs + 5)) >/dev/null & /tmp/workload $((secs + 5)) >/dev/null &
if [ -n "$storm" ]; then /tmp/ipi-storm "$secs" >/tmp/storm.txt & storm_pid=$!; fi
end=$(( $(cut -d. -f1 /proc/uptime) + secs )) n=0
while [ "$(cut -d. -f1 /proc/uptime)" -lt $end ]; do
    echo 0 >$CPU1 || fail "cpu1 offline (cycle $n)"
    usleep $(( (($(od -An -N2 -tu2 /dev/urandom) % 5) + 1) * 200000 ))
    echo 1 >$CPU1 || fail "cpu1 online (cycle $n)"
    usleep $(( (($(od -An -N2 -tu2 /dev/urandom) % 5) + 1) * 200000 ))
    n=$((n + 1))
    [ $((n % 50)) -eq 0 ] && echo "cycle $n"
done
echo "hotplug cycles: $n in $secs s"
if [ -n "$storm" ]; then wait $storm_pid; cat /tmp/storm.txt
    check "the IPI storm ran" grep -q 'cross-CPU perf calls' /tmp/storm.txt; fi
check "CPU 1 went offline and online ($n cycles)" [ "$n" -gt 0 ]
if [ $# -gt 0 ]; then
    echo 0 >$DBG/tracing_on; kill $reader; wait $reader
    check "rmmod" rmmod oprofile_rs
fi
finish
