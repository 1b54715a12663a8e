#!/bin/sh
# hotplug-cycles.sh SECONDS [--storm] [--perf FREQ] [MODULE_ARGS...]
# (scripts/hotplug-probe): CPU 1 goes offline and online every 0.2 to 1 s for
# SECONDS while two CPU-bound workloads run; --storm adds /tmp/ipi-storm
# (cross-CPU perf calls by IPI, without the module); --perf adds
# /tmp/perf-load (perf's own cpu-clock sampling at FREQ Hz with callchains on
# every online CPU, counters closed and opened as CPU 1 goes and comes, the
# module's load without the module); with MODULE_ARGS (e.g. "sample_freq=20000"),
# the module is loaded with them first and a reader streams the device
# throughout; without, the module is never loaded. Prints the cycles done; a
# guest that freezes is caught by scripts/vm-run's hang dump.
. /tmp/lib.sh
secs=${1:-60}; shift
storm=
[ "${1:-}" = --storm ] && { storm=1; shift; }
perf=
[ "${1:-}" = --perf ] && { perf=${2:?--perf needs a frequency}; shift 2; }
CPU1=/sys/devices/system/cpu/cpu1/online
# What decides whether the AP's TSC sync check runs at CPU online
# (check_tsc_sync_target: skipped with tsc=reliable, or with TSC_ADJUST when
# CPU 0 shares CPU 1's package).
echo "TSC: flags [$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -xE 'tsc|constant_tsc|nonstop_tsc|tsc_adjust|tsc_reliable|tsc_known_freq' | tr '\n' ' ')]," \
    "clocksource $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource)," \
    "CPU 0 package: CPUs $(cat /sys/devices/system/cpu/cpu0/topology/package_cpus_list 2>/dev/null)," \
    "cmdline: $(grep -oE 'tsc=[a-z]+' /proc/cmdline || echo 'no tsc=')"
if [ $# -gt 0 ]; then
    check "insmod $*" insmod /oprofile_rs.ko "$@"
    cat $DEV >/dev/null & reader=$!
else
    echo "(the module is not loaded)"
fi
/tmp/workload $((secs + 5)) >/dev/null & /tmp/workload $((secs + 5)) >/dev/null &
if [ -n "$storm" ]; then /tmp/ipi-storm "$secs" >/tmp/storm.txt & storm_pid=$!; fi
if [ -n "$perf" ]; then
    # perf's per-tick limit at 100000 samples/s (far above the load), then
    # its handler-time limit off, which would otherwise lower that limit
    # when handlers take long (TCG). In this order: perf refuses rate
    # writes while the handler-time limit is off.
    echo 100000 >/proc/sys/kernel/perf_event_max_sample_rate
    echo 0 >/proc/sys/kernel/perf_cpu_time_max_percent
    /tmp/perf-load "$secs" "$perf" >/tmp/perf-load.txt & perf_pid=$!
fi
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
if [ -n "$perf" ]; then wait $perf_pid; cat /tmp/perf-load.txt
    check "perf sampled" grep -q 'counters opened' /tmp/perf-load.txt; fi
check "CPU 1 went offline and online ($n cycles)" [ "$n" -gt 0 ]
if [ $# -gt 0 ]; then
    echo 0 >$DBG/tracing_on; kill $reader; wait $reader
    check "rmmod" rmmod oprofile_rs
fi
finish
