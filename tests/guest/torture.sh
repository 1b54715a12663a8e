#!/bin/sh
# vm-run: --smp 2 --no-kunit --timeout 420
# The torture: hostile, concurrent use of every file of the module while it
# samples at 20 kHz with tiny buffers and callchains, CPU 1 going offline
# and online, for TORTURE_SECS (default 20) seconds. Seeded: it prints its
# seed, and `SEED=N tests/run-guest [--debug] torture` replays it
# (TORTURE_ROLES picks the processes, see torture.c).
# Afterwards the accounting is exact for everything the streams held, the
# module still records, unload is clean; then insmod/rmmod race with opens,
# and kmemleak (debug kernel) finds nothing.
. /tmp/lib.sh
torture_args torture 20
# cpu-clock (hard IRQ) and context-switches (task context, in the scheduler:
# its counters are made and released outside the CPU hotplug lock, by a work
# item, profiler.rs) at once.
tiny="cpu_buffer_size=4096 buffer_size=65536 event=cpu-clock,context-switches sample_freq=20000,0 backtrace_depth=16"
check "insmod ($tiny)" insmod /oprofile_rs.ko $tiny
/tmp/workload $((secs + 5)) >/dev/null & /tmp/workload $((secs + 5)) >/dev/null &
/tmp/torture "$seed" "$secs" ${TORTURE_ROLES:-} >/tmp/t.txt; rc=$?
cat /tmp/t.txt
expect_eq "torture: only documented answers, no hang, every stream well formed" "$rc" 0
# It tested what it says: each path was taken (counts printed above).
for what in streams eagain eintr einval polls busy; do
    check "the torture took the '$what' path ($(torture_count $what))" [ "$(torture_count $what)" -gt 0 ]
done
case ${TORTURE_ROLES:-rrrcmh} in *m*) check "rmmod was refused while files were open ($(torture_count refused))" [ "$(torture_count refused)" -gt 0 ] ;; esac
case ${TORTURE_ROLES:-rrrcmh} in *h*) check "CPU 1 went offline and online ($(torture_count cycles))" [ "$(torture_count cycles)" -gt 0 ] ;; esac
cat $DBG/stats >/tmp/stats.txt
wait
# The accounting, exact for what every stream held: per CPU, samples + lost
# == received - invalid.
for cpu in $(stat_cpus /tmp/stats.txt); do
    recv=$(stat_of "$cpu" sample_received /tmp/stats.txt)
    inval=$(stat_of "$cpu" sample_invalid_eip /tmp/stats.txt)
    got=$(awk -v c="cpu$cpu" '$1 == c && $2 == "samples" { print $3 + $5 }' /tmp/t.txt)
    expect_eq "cpu$cpu: samples + lost in all streams == received - invalid" "${got:-0}" $((recv - inval))
done
expect_eq "every CPU is online again" "$(cat /sys/devices/system/cpu/online)" "0-$((NCPU - 1))"

# Still records.
echo 1 >$DBG/tracing_on
/tmp/workload 2 >/dev/null
echo 1 >$DBG/flush
/tmp/torture drain >/tmp/d.txt
samples=$(awk '$2 == "samples" { n += $3 } END { print n + 0 }' /tmp/d.txt)
check "the module still records after the torture ($samples samples)" [ "$samples" -gt 0 ]
check "rmmod after the torture" rmmod oprofile_rs

# insmod/rmmod racing with opens: every open or read gets a documented answer.
rm -f /tmp/race.stop /tmp/race.txt
( while [ ! -e /tmp/race.stop ]; do
      /tmp/probe read $DEV 4096 nonblock
      /tmp/probe ioctl $DEV flush wronly
      cat $DBG/stats >/dev/null 2>&1
  done >/tmp/race.txt ) &
racer=$!
i=0 loaded=0
while [ $i -lt 20 ]; do
    insmod /oprofile_rs.ko 2>/dev/null && loaded=$((loaded + 1))
    n=0; while ! rmmod oprofile_rs 2>/dev/null && [ $n -lt 200 ]; do n=$((n + 1)); done
    i=$((i + 1))
done
touch /tmp/race.stop; wait $racer
expect_eq "20 insmods succeeded while opens raced" "$loaded" 20
check "the module is gone" sh -c "! grep -q '^oprofile_rs ' /proc/modules"
sort /tmp/race.txt | sed 's/^ok [0-9]*$/ok N/' | sort | uniq -c
odd=$(grep -cvE '^(ok [0-9]+|err (EAGAIN|EBUSY|ENOENT|ENODEV|ENXIO))$' /tmp/race.txt)
check "opens and reads racing insmod/rmmod get only documented answers ($odd others)" [ "$odd" -eq 0 ]

check_kmemleak
finish
