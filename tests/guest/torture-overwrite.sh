#!/bin/sh
# vm-run: --smp 2 --no-kunit --timeout 420
# The torture in flight-recorder mode (mode=overwrite): the same hostile,
# concurrent use of every file as tests/guest/torture.sh (readers, control
# writers, rmmod attempts, CPU 1 going offline and online; TORTURE_ROLES
# default `rrcmh`) while a loop takes snapshots, for TORTURE_SECS (default
# 15) seconds. In this mode nothing syncs (no per-CPU sync state, sync.rs)
# and only snapshots drain the CPU buffers; a snapshot after tracing_on=0
# holds samples taken before it, which the stream checks allow in this mode
# only. Meanwhile a resizer switches recording off, gives the CPU buffers
# another size (4, 8 or 16 KiB: the snapshots' staging follows) and switches
# it back on, and every third time switches to consume mode instead (after
# a snapshot, which empties the CPU buffers; tried again while the module
# answers EBUSY), records 0.3 s in it and switches back (the `mode` file:
# the periodic syncs start and stop, the staging areas of each mode are
# freed and allocated). Afterwards: every
# CPU online, a resize still works, a snapshot still delivers samples,
# unload is clean, kmemleak (debug kernel) finds nothing. Seeded as
# torture.sh: SEED=N replays the random choices.
. /tmp/lib.sh
torture_args torture-overwrite 15
opts="mode=overwrite cpu_buffer_size=4096 buffer_size=65536 event=cpu-clock,context-switches sample_freq=20000,0 backtrace_depth=16"
check "insmod ($opts)" insmod /oprofile_rs.ko $opts
/tmp/workload $((secs + 5)) >/dev/null & /tmp/workload $((secs + 5)) >/dev/null &
rm -f /tmp/snap.stop
( while [ ! -e /tmp/snap.stop ]; do echo 1 >$DBG/snapshot 2>/dev/null; sleep 0.1; done ) & snapper=$!
( i=0 n=0 m=0; while [ ! -e /tmp/snap.stop ]; do
      echo 0 >$DBG/tracing_on
      if [ $((i % 3)) -eq 2 ]; then
          # Both ways the module may answer EBUSY, and tries again: while the
          # torture's control writer has switched recording on again; while
          # the event buffer has no room for the CONFIG record (until a
          # reader of the torture takes some); and, to consume mode, while
          # the CPU buffers hold records (the snapshot that empties them
          # needs room in the event buffer too).
          echo 1 >$DBG/snapshot
          t=0
          until r=$(/tmp/cfgctl write $DBG/mode consume); [ "$r" = ok ] || [ $t -ge 40 ]; do
              echo "$r" >>/tmp/switch-refused; echo 0 >$DBG/tracing_on; echo 1 >$DBG/snapshot
              sleep 0.05; t=$((t + 1))
          done
          if [ "$r" = ok ]; then
              m=$((m + 1))
              echo 1 >$DBG/tracing_on; sleep 0.3; echo 0 >$DBG/tracing_on
          fi
          t=0
          until r=$(/tmp/cfgctl write $DBG/mode overwrite); [ "$r" = ok ] || [ $t -ge 100 ]; do
              echo "$r" >>/tmp/switch-refused; echo 0 >$DBG/tracing_on; sleep 0.05; t=$((t + 1))
          done
      else
          echo $((4096 << (i % 3))) >$DBG/cpu_buffer_size && n=$((n + 1))
      fi
      echo 1 >$DBG/tracing_on
      i=$((i + 1)); sleep 0.3
  done 2>/dev/null; echo "$n of $i" >/tmp/resizes; echo "$m of $((i / 3))" >/tmp/switches ) & resizer=$!
/tmp/torture "$seed" "$secs" ${TORTURE_ROLES:-rrcmh} >/tmp/t.txt; rc=$?
touch /tmp/snap.stop; wait $snapper $resizer
cat /tmp/t.txt
expect_eq "torture: only documented answers, no hang, every stream well formed" "$rc" 0
check "the torture read streams ($(torture_count streams))" [ "$(torture_count streams)" -gt 0 ]
case ${TORTURE_ROLES:-rrcmh} in *h*) check "CPU 1 went offline and online ($(torture_count cycles))" [ "$(torture_count cycles)" -gt 0 ] ;; esac
wait
expect_eq "every CPU is online again" "$(cat /sys/devices/system/cpu/online)" "0-$((NCPU - 1))"
check "the CPU buffers were resized during the torture ($(cat /tmp/resizes))" [ "$(cut -d' ' -f1 /tmp/resizes)" -gt 0 ]
check "consume mode and back during the torture ($(cat /tmp/switches))" [ "$(cut -d' ' -f1 /tmp/switches)" -gt 0 ]
[ -f /tmp/switch-refused ] && echo "mode switches refused (and tried again): $(sort /tmp/switch-refused | uniq -c | tr '\n' ' ')"
check "only EBUSY refused a mode switch" sh -c "! grep -qv 'err EBUSY' /tmp/switch-refused 2>/dev/null"
# The resizer may have stopped in consume mode, its switch back refused for
# want of room in the event buffer once the torture's readers were gone
# (EBUSY: read the stream first).
if [ "$(cat $DBG/mode)" != overwrite ]; then
    echo 0 >$DBG/tracing_on
    /tmp/torture drain >/dev/null
    expect_eq "back to overwrite mode once the stream is read" "$(/tmp/cfgctl write $DBG/mode overwrite)" ok
fi
expect_eq "overwrite mode after the torture" "$(cat $DBG/mode)" overwrite
echo 0 >$DBG/tracing_on
expect_eq "a resize after the torture" "$(/tmp/cfgctl write $DBG/cpu_buffer_size 8192)" ok
echo 1 >$DBG/tracing_on
/tmp/workload 1 >/dev/null
echo 1 >$DBG/snapshot
/tmp/torture drain >/tmp/d.txt
samples=$(awk '$2 == "samples" { n += $3 } END { print n + 0 }' /tmp/d.txt)
check "a snapshot after the torture delivers samples ($samples)" [ "$samples" -gt 0 ]
check "rmmod after the torture" rmmod oprofile_rs
check_kmemleak
finish
