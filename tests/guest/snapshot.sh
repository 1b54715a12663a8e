#!/bin/sh
# vm-run: --timeout 600
# Flight recorder (mode=overwrite): the CPU buffers keep the newest records
# and a snapshot (debugfs `snapshot`, the SNAPSHOT ioctl) moves them into the
# stream, framed by SNAPSHOT records, merged by time, every sample named.
# Sampling at 10 kHz into 4 KiB CPU buffers for seconds overwrites them many
# times over; then, for every CPU, exactly:
#   records in all snapshots + overwritten (SNAPSHOT records) == records the
#   ring buffer committed (debugfs buffer_committed), nothing left behind;
#   SAMPLE records committed (buffer_committed - comm_records - switch_records) ==
#   sample_received - sample_invalid_eip - sample_lost_overflow;
#   LOST counts in the stream == sample_lost_overflow.
# snapcheck (tests/guest/snapcheck.c) checks each snapshot's framing, order,
# names and newness. Hostile: consume mode (EINVAL), bad mode=, garbage
# writes, concurrent snapshots, no reader, a full event buffer (ENOSPC, then
# the newest that fit), rmmod while snapshotting, CPU hotplug meanwhile, and
# the CPU buffers resized between snapshots (grown, then shrunk while they
# hold records).
. /tmp/lib.sh
SNAP=$DBG/snapshot
CPU1=/sys/devices/system/cpu/cpu1/online
snaps() { sed -n 's/.*snapshots=\([0-9]*\).*/\1/p' $SNAP; }
# write_err DATA: what one write(2) of DATA to the snapshot file answers.
write_err() { /tmp/probe write $SNAP "$1"; }

# Consume mode: no snapshot.
check "insmod (consume mode)" insmod /oprofile_rs.ko
expect_eq "snapshot file says consume" "$(cut -d' ' -f1 $SNAP)" "mode=consume"
expect_eq "snapshot in consume mode: EINVAL" "$(write_err 1)" "err EINVAL"
expect_eq "SNAPSHOT ioctl in consume mode: EINVAL" "$(/tmp/snapcheck ioctl $DEV)" "err EINVAL"
check "rmmod" rmmod oprofile_rs
for bad in bogus OVERWRITE over 1; do
    if insmod /oprofile_rs.ko "mode=$bad" 2>/dev/null; then fail "mode=$bad loaded"; rmmod oprofile_rs; else pass "mode=$bad refused"; fi
done

# Overwrite mode, several buffer lengths of samples.
CPUBUF=4096
check "insmod mode=overwrite, 4 KiB CPU buffers, 10 kHz" \
    insmod /oprofile_rs.ko mode=overwrite cpu_buffer_size=$CPUBUF buffer_size=1048576 sample_period=100000
expect_eq "mode parameter" "$(cat /sys/module/oprofile_rs/parameters/mode)" overwrite
expect_eq "snapshot file says overwrite" "$(cut -d' ' -f1 $SNAP)" "mode=overwrite"
cat $DEV >/tmp/s.bin &
catpid=$!
/tmp/workload 4 & /tmp/workload 4 &
# Short-lived tasks: many COMM records, some overwritten.
( i=0; while [ $i -lt 60 ]; do /tmp/workload 0.03; i=$((i + 1)); done ) &
sleep 1.5
expect_eq "nothing is drained without a snapshot" "$(stat_total buffer_read)" 0
check "snapshot by debugfs while recording" sh -c "echo 1 >$SNAP"
expect_eq "one snapshot taken" "$(snaps)" 1
sleep 0.5
expect_eq "snapshot by ioctl (control file)" "$(/tmp/snapcheck ioctl $DEV)" "ok"
expect_eq "snapshot by ioctl (while a reader has the device)" "$(/tmp/snapcheck ioctl $DEV)" "ok"
# Garbage changes nothing.
n=$(snaps)
for g in 0 2 abc "" "1 " 11 "-1"; do
    expect_eq "write '$g' to snapshot: EINVAL" "$(write_err "$g")" "err EINVAL"
done
expect_eq "a 4 KiB write to snapshot: EINVAL" "$(/tmp/probe writen $SNAP 4096)" "err EINVAL"
expect_eq "garbage took no snapshot" "$(snaps)" "$n"
# Concurrent snapshots are serialised: each is one.
sleep 0.3
# (waited for, not slept on: a slow guest takes more than seconds for them)
snappers=
for i in 1 2 3 4; do sh -c "echo 1 >$SNAP" & snappers="$snappers $!"; done
/tmp/snapcheck ioctl $DEV >/dev/null & snappers="$snappers $!"
/tmp/snapcheck ioctl $DEV >/dev/null & snappers="$snappers $!"
# shellcheck disable=SC2086 # the pids are words
wait $snappers
expect_eq "six concurrent snapshots, six taken" "$(snaps)" $((n + 6))
# CPU hotplug while snapshots are taken (the rig's VM: 4 vCPUs, CPU hotplug;
# without it, a failure).
if check "CPU 1 can go offline ($CPU1 writable)" [ -w $CPU1 ]; then
    n=$(snaps)
    ( for i in 1 2 3 4 5; do echo 0 >$CPU1 || exit 1; sleep 0.1; echo 1 >$CPU1 || exit 1; sleep 0.1; done ) &
    hp=$!
    refused=0
    for i in 1 2 3 4 5 6 7 8; do echo 1 >$SNAP || refused=$((refused + 1)); sleep 0.1; done
    wait $hp; hprc=$?
    expect_eq "CPU 1 went offline and online 5 times (the hotplug loop's status)" "$hprc" 0
    expect_eq "snapshots during CPU hotplug: none refused" "$refused" 0
    expect_eq "snapshots during CPU hotplug: eight taken" "$(snaps)" $((n + 8))
    expect_eq "every CPU online again" "$(cat /sys/devices/system/cpu/online)" "0-$((NCPU - 1))"
fi
sleep 1
# Resized between snapshots (recording off): grown to 16 KiB, whose snapshot
# holds more records than a 4 KiB buffer can (the snapshot's staging follows
# the buffers), then shrunk back with records in the buffers (the oldest that
# do not fit are dropped and counted overwritten: the accounting below stays
# exact).
echo 0 >$DBG/tracing_on
expect_eq "cpu_buffer_size grows to 16 KiB" "$(/tmp/cfgctl write $DBG/cpu_buffer_size 16384)" ok
echo 1 >$DBG/tracing_on
/tmp/workload 1 & w1=$!; /tmp/workload 1 & w2=$!; wait $w1 $w2
echo 0 >$DBG/tracing_on
n16=$(($(snaps) + 1))
check "snapshot of the 16 KiB buffers" sh -c "echo 1 >$SNAP"
echo 1 >$DBG/tracing_on
/tmp/workload 1 & w1=$!; /tmp/workload 1 & w2=$!; wait $w1 $w2
echo 0 >$DBG/tracing_on
held=$(stat_total buffer_entries)
expect_eq "cpu_buffer_size shrinks to 4 KiB with $held records held" \
    "$(/tmp/cfgctl write $DBG/cpu_buffer_size $CPUBUF)" ok
echo 1 >$DBG/tracing_on
/tmp/workload 0.5
# Frozen: tracing_on=0 keeps the buffers' content; the last snapshot takes it.
echo 0 >$DBG/tracing_on
sleep 0.2
check "snapshot while tracing is off" sh -c "echo 1 >$SNAP"
cat $SNAP
expect_eq "nothing left in the CPU buffers" "$(stat_total buffer_entries)" 0
echo 1 >$DBG/flush
stop_reader $catpid
cat $DBG/stats | tee /tmp/stats.txt
check_snapshots /tmp/s.bin
expect_eq "snapshots in the stream" "$(sed -n 's/^snapshots //p' /tmp/snap.txt)" "$(snaps)"
tot() { awk -v c="$1" -v f="$2" '$1 == "cpu" && $2 == c { for (i = 3; i < NF; i += 2) if ($i == f) print $(i + 1) }' /tmp/snap.txt; }
many=0
for cpu in $(stat_cpus /tmp/stats.txt); do
    committed=$(stat_of $cpu buffer_committed /tmp/stats.txt)
    comms=$(stat_of $cpu comm_records /tmp/stats.txt)
    switches=$(stat_of $cpu switch_records /tmp/stats.txt)
    recv=$(stat_of $cpu sample_received /tmp/stats.txt)
    inval=$(stat_of $cpu sample_invalid_eip /tmp/stats.txt)
    lost=$(stat_of $cpu sample_lost_overflow /tmp/stats.txt)
    rec=$(tot $cpu records); ow=$(tot $cpu overwritten); slost=$(tot $cpu lost)
    expect_eq "cpu$cpu: snapshot records + overwritten == ring records committed" $((${rec:-0} + ${ow:-0})) "$committed"
    expect_eq "cpu$cpu: SAMPLEs committed == received - invalid - lost" $((committed - comms - ${switches:-0})) $((recv - inval - lost))
    expect_eq "cpu$cpu: LOST in the stream == sample_lost_overflow" "${slost:-0}" "$lost"
    [ "${ow:-0}" -gt $((3 * CPUBUF / 48)) ] && many=$((many + 1))
done
check "buffers overwritten several times over on $many CPUs" [ "$many" -ge 2 ]
big=$(awk -v n=$n16 -v b=$CPUBUF '$1 == "snap" && $2 == n && $6 > b / 40 { k++ } END { print k + 0 }' /tmp/snap.txt)
grep "^snap $n16 " /tmp/snap.txt
check "snapshot $n16 holds more records than a 4 KiB buffer can, on $big CPUs" [ "$big" -ge 1 ]
# Each snapshot of a CPU that overwrote holds the newest records: most of a
# buffer's worth (the rest is ring overhead and at most 1/8 nameless).
awk -v b=$CPUBUF '$1 == "snap" && $8 > 0 && $12 < b / 2' /tmp/snap.txt
short=$(awk -v b=$CPUBUF '$1 == "snap" && $8 > 0 && $12 < b / 2 { n++ } END { print n + 0 }' /tmp/snap.txt)
expect_eq "snapshots of overwritten CPUs hold at least half a buffer of records" "$short" 0
echo 1 >$DBG/tracing_on

# No reader: the snapshot waits in the event buffer for the next one.
n=$(snaps)
sleep 0.5
check "snapshot with no reader" sh -c "echo 1 >$SNAP"
timeout 2 cat $DEV >/tmp/late.bin
/tmp/snapcheck /tmp/late.bin >/tmp/late.txt; rc=$?
expect_eq "the next reader gets it, well formed" "$rc" 0
check "the next reader gets snapshot $((n + 1))" grep -q "^snap $((n + 1)) " /tmp/late.txt
check "rmmod" rmmod oprofile_rs

# A full event buffer: 64 KiB, no reader, 64 KiB CPU buffers at 10 kHz.
check "insmod overwrite, 64 KiB event buffer" \
    insmod /oprofile_rs.ko mode=overwrite cpu_buffer_size=65536 buffer_size=65536 sample_period=100000
/tmp/workload 3 & /tmp/workload 3 &
sleep 2.5
r1=$(write_err 1); r2=$(write_err 1); r3=$(write_err 1)
echo "three snapshots into a full buffer: $r1 / $r2 / $r3"
expect_eq "the first fits (the newest that fit)" "$r1" "ok 1"
check "later ones: ENOSPC when not even the framing fits" sh -c "[ '$r2' = 'err ENOSPC' ] || [ '$r3' = 'err ENOSPC' ]"
cat $SNAP
dropped=$(sed -n 's/.*dropped=\([0-9]*\).*/\1/p' $SNAP)
echo 0 >$DBG/tracing_on
cat $DEV >/tmp/f.bin & catpid=$!
sleep 1
expect_eq "after the reader, a snapshot fits again" "$(write_err 1)" "ok 1"
stop_reader $catpid
cat $DBG/stats >/tmp/stats2.txt
/tmp/snapcheck /tmp/f.bin >/tmp/f.txt; rc=$?
grep -v '^snap ' /tmp/f.txt; grep FAIL /tmp/f.txt | head
expect_eq "snapcheck of the full-buffer stream" "$rc" 0
for cpu in $(stat_cpus /tmp/stats2.txt); do
    committed=$(stat_of $cpu buffer_committed /tmp/stats2.txt)
    rec=$(awk -v c="$cpu" '$1 == "cpu" && $2 == c { print $4 + $6 }' /tmp/f.txt)
    expect_eq "cpu$cpu: records + overwritten (dropped for room included) == committed" "${rec:-0}" "$committed"
done
echo 1 >$DBG/tracing_on

# The tool: record --snapshot switches a module in consume mode to the
# flight recorder for the recording and back after it; it writes one
# snapshot per SIGUSR2 and one at the end, as sections of one file that
# script --events and --snapshot N read.
check "rmmod" rmmod oprofile_rs
check "insmod consume mode, 16 KiB CPU buffers, 4 kHz" \
    insmod /oprofile_rs.ko cpu_buffer_size=16384 sample_period=250000
# The workload outlasts the recording, however long record takes to start
# (seconds on the lockdep kernel): every snapshot holds its hot function.
/tmp/workload 60 & wl=$!
oprofile-rs record --snapshot -q -o /tmp/r.data 2>/tmp/rec.err &
rp=$!
# (Not before it catches SIGUSR2, which ends a process by default.)
wait_for reading_device $rp
# Each SIGUSR2 once the one before was taken: signals that come while record
# is busy make one snapshot (as documented), and a slow guest (the lockdep
# kernel beside the stock stage) kept it busy for more than the second between.
snaps_above() { [ "$(snaps)" -gt "$1" ]; }
sleep 1.5; s=$(snaps); kill -USR2 $rp; wait_for snaps_above "$s"
sleep 1; s=$(snaps); kill -USR2 $rp; wait_for snaps_above "$s"
sleep 1; kill -INT $rp; wait $rp
echo "record exited with status $?"
cat /tmp/rec.err
grep -q ", 3 snapshots" /tmp/rec.err || dmesg | tail -20
check "record --snapshot: two on SIGUSR2, one at the end" grep -q ", 3 snapshots" /tmp/rec.err
expect_eq "record --snapshot put consume mode back" "$(cat $DBG/mode)" consume
expect_eq "and recording on" "$(cat $DBG/tracing_on)" 1
# The recording is done: the workload and 4 kHz sampling would only slow
# the tool's reading of it below (the lockdep VM's `script --events` took 37 s).
echo 0 >$DBG/tracing_on
kill $wl; wait $wl 2>/dev/null
grep -q '^settings: .*mode=overwrite ' /tmp/r.data.meta/info && pass "the side-car names the switch" ||
    fail "side-car: $(grep '^settings' /tmp/r.data.meta/info)"
/tmp/snapcheck /tmp/r.data >/tmp/r.check; rc=$?
grep -v '^snap ' /tmp/r.check; grep FAIL /tmp/r.check | head
expect_eq "snapcheck of the recorded file" "$rc" 0
oprofile-rs script -i /tmp/r.data --events >/tmp/r.txt 2>/dev/null
grep SNAPSHOT /tmp/r.txt | head -20
expect_eq "script --events shows 3 snapshot ends" "$(grep -c 'SNAPSHOT [0-9]* end' /tmp/r.txt)" 3
for n in 1 2 3; do
    want=$(awk -v n=$n '$1 == "snap" && $2 == n { s += $10 } END { print s + 0 }' /tmp/r.check)
    got=$(oprofile-rs script -i /tmp/r.data --snapshot $n 2>/dev/null | wc -l)
    expect_eq "script --snapshot $n: that snapshot's samples" "$got" "$want"
done
# (The whole list: a snapshot is the CPUs' last ~50 ms, where on a loaded
# lockdep VM the workload was once not among the first three.)
check "report --snapshot 2 names the workload" sh -c "oprofile-rs report -i /tmp/r.data --snapshot 2 | grep -q hot_"
out=$(oprofile-rs report -i /tmp/r.data --snapshot 9 2>&1) && fail "report --snapshot 9 succeeded"
expect_eq "report --snapshot 9: an error naming the snapshots" "$(echo "$out" | grep -c 'snapshots 1 to 3')" 1

# rmmod while snapshotting: an open snapshot file (one open, many writes)
# pins the module, rmmod says "in use" meanwhile, and works afterwards.
# (The event buffer, unread since record ended, needs room for the CONFIG
# record of the switch: read it first.)
echo 0 >$DBG/tracing_on
drain
expect_eq "overwrite mode again (debugfs)" "$(/tmp/cfgctl write $DBG/mode overwrite)" ok
echo 1 >$DBG/tracing_on
rm -f /tmp/opened /tmp/release
( exec 3>$SNAP; touch /tmp/opened; i=0
  while [ $i -lt 200 ]; do echo 1 >&3 || exit 1; i=$((i + 1)); done
  while [ ! -f /tmp/release ]; do sleep 0.05; done ) &
sn=$!
while [ ! -f /tmp/opened ]; do sleep 0.05; done
refused=0
for i in 1 2 3 4 5; do rmmod oprofile_rs 2>/dev/null || refused=$((refused + 1)); sleep 0.05; done
touch /tmp/release
wait $sn; rc=$?
expect_eq "rmmod refused while snapshots are taken" "$refused" 5
expect_eq "every snapshot of the pinned file succeeded" "$rc" 0
if lsmod | grep -q oprofile_rs; then check "rmmod after the snapshots" rmmod oprofile_rs
else fail "the module was already unloaded: an rmmod succeeded while snapshots were taken"; fi
check "module unloaded" sh -c "! lsmod | grep -q oprofile_rs"

# Large buffers under the cap (buffer_memory.rs: a quarter of RAM, the VM's
# 1 GiB; 2 to 4 possible CPUs): 16 MiB CPU buffers in overwrite mode with a
# 64 MiB event buffer load, 64 MiB ones with a 256 MiB event buffer do not
# (ENOMEM). A snapshot of tens of thousands of records is planned and merged
# with resched points; the lockdep kernel's hung-task and soft-lockup
# detectors watch (the rig fails a scenario whose kernel log has their
# reports).
out=$(insmod /oprofile_rs.ko mode=overwrite cpu_buffer_size=67108864 buffer_size=268435456 2>&1) \
    && { fail "64 MiB CPU buffers in overwrite mode loaded"; rmmod oprofile_rs; }
case $out in *"Cannot allocate memory"*) pass "64 MiB CPU buffers in overwrite mode: ENOMEM" ;;
    *) fail "64 MiB CPU buffers in overwrite mode: expected ENOMEM, got: $out" ;; esac
check "insmod overwrite, 16 MiB CPU buffers, 64 MiB event buffer, 10 kHz" \
    insmod /oprofile_rs.ko mode=overwrite cpu_buffer_size=16777216 buffer_size=67108864 sample_period=100000
cat $DEV >/tmp/big.bin &
catpid=$!
# Until the buffers hold 25,000 records, 30 s at most: on the lockdep
# kernel's 2 vCPUs 3 s held about 11,000 records, and a fixed 6 s on the
# stock kernel of a host running two other VMs only 16,150 (the emulated
# timer's overruns are not samples).
/tmp/workload 30 & w1=$!; /tmp/workload 30 & w2=$!
n=0
while [ "$(stat_total buffer_entries)" -lt 25000 ] && [ $n -lt 300 ]; do sleep 0.1; n=$((n + 1)); done
kill $w1 $w2; wait $w1 $w2 2>/dev/null
held=$(stat_total buffer_entries)
t0=$(cut -d' ' -f1 /proc/uptime)
check "snapshot of the large buffers ($held records held)" sh -c "echo 1 >$SNAP"
echo "the snapshot took $t0 -> $(cut -d' ' -f1 /proc/uptime) s (uptime)"
echo 1 >$DBG/flush
stop_reader $catpid
check_snapshots /tmp/big.bin
bigrec=$(awk '$1 == "snap" { n += $6 } END { print n + 0 }' /tmp/snap.txt)
check "it holds them ($bigrec of $held records)" [ "$bigrec" -ge "$held" ]
check "tens of thousands ($bigrec)" [ "$bigrec" -ge 20000 ]
check "rmmod" rmmod oprofile_rs
check_kmemleak
finish
