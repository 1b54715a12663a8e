#!/bin/sh
# Runtime control while recording is off (oprofilefs's control files): each
# setting's debugfs file reads back in its parameter's syntax and takes a
# new value; writes while recording is on get EBUSY, garbage EINVAL, and
# neither changes anything; a change between two recording phases shows in
# the stream as a CONFIG record and the samples after it use the new
# event and period; the buffers resize without losing waiting records; the
# device's SET/GET ioctls do the same (the lockdown path); and two
# configuration writers, a tracing_on toggler and CPU hotplug at once for
# some seconds neither hang nor leave a trace in the kernel log.
. /tmp/lib.sh
CPU1=/sys/devices/system/cpu/cpu1/online
# try FILE VALUE: one write of VALUE to the debugfs file, prints "ok" or
# "err ENAME".
try() { /tmp/cfgctl write "$DBG/$1" "$2"; }
cfg() { sed -n "s/^$1=//p" $DBG/config; }

check "insmod" insmod /oprofile_rs.ko event=cpu-clock sample_period=1000000
cat $DBG/config
for f in event sample_period sample_freq backtrace_depth user_backtrace_depth cpu_buffer_size buffer_size buffer_watershed exclude_user exclude_kernel mode cgroup user_stack_size pid; do
    expect_eq "$f reads as config says" "$(cat $DBG/$f)" "$(cfg $f)"
done

# --- EBUSY while recording is on, nothing changed
for f in event sample_period backtrace_depth cpu_buffer_size buffer_size buffer_watershed; do
    before=$(cat $DBG/$f)
    expect_eq "$f: EBUSY while recording" "$(try $f "$before")" "err EBUSY"
done
expect_eq "ioctl: EBUSY while recording" "$(/tmp/cfgctl set backtrace_depth=4)" "err EBUSY"
echo 0 >$DBG/tracing_on
# Room for the CONFIG records of the changes below: on a slow guest the
# load's recording, unread, fills the 1-MiB event buffer before this point,
# and a change is then refused (EBUSY, "read the stream first").
drain

# --- garbage: EINVAL, nothing changed
snap=$(cat $DBG/config)
for bad in "event=" "event=\\n" "event=bogus" "event=cpu-clock,cpu-clock" "event=default,cpu-clock" "event=cpu-clock," \
           "event=a,b,c,d,e,f,g,h,i" "sample_period=" "sample_period=abc" "sample_period=-1" \
           "sample_period=99999999999999999999" "sample_period=1" "sample_period=1000000,1000000" \
           "sample_freq=100001" "sample_freq=1,2" "backtrace_depth=65" "backtrace_depth=1x" \
           "user_backtrace_depth=18446744073709551616" "cpu_buffer_size=5000" "cpu_buffer_size=1024" \
           "cpu_buffer_size=134217728" "buffer_size=1" "buffer_size=1073741824" "buffer_watershed=1048576" \
           "buffer_watershed= 5" "backtrace_depth=1 2" "mode=bogus" "mode=Overwrite" "mode=1" \
           "mode=overwrite,consume"; do
    f=${bad%%=*} v=${bad#*=}
    expect_eq "$bad: EINVAL" "$(try "$f" "$v")" "err EINVAL"
done
expect_eq "a 600-byte write: EINVAL" "$(try backtrace_depth "$(printf '%0600d' 1)")" "err EINVAL"
expect_eq "nothing changed by refused writes" "$(cat $DBG/config)" "$snap"
for bad in "" "backtrace_depth" "bogus=1" "mode=bogus" "backtrace_depth=1 backtrace_depth=2" \
           "event=cpu-clock,page-faults sample_period=1000000,1,1" "sample_period=100000 sample_freq=100"; do
    expect_eq "ioctl '$bad': EINVAL" "$(/tmp/cfgctl set "$bad")" "err EINVAL"
done
expect_eq "nothing changed by refused ioctls" "$(cat $DBG/config)" "$snap"
/tmp/cfgctl hostile | tee /tmp/hostile.out
expect_eq "hostile ioctl arguments" "$(tr '\n' ' ' </tmp/hostile.out)" \
    "null-pointer EFAULT kernel-pointer EFAULT empty EINVAL spaces EINVAL too-long EINVAL longest ok huge-len EINVAL nul-inside EINVAL get-null EFAULT set-arg-null EFAULT "
expect_eq "the longest text applied" "$(cfg backtrace_depth)" 1
check "set back" sh -c "echo 0 >$DBG/backtrace_depth"

# --- each file takes a value (with or without a newline) and reads it back
expect_eq "backtrace_depth=8" "$(try backtrace_depth 8)" ok
expect_eq "reads 8" "$(cat $DBG/backtrace_depth)" 8
echo 16 >$DBG/user_backtrace_depth
expect_eq "user_backtrace_depth=16 (newline)" "$(cat $DBG/user_backtrace_depth)" 16
echo 8192 >$DBG/cpu_buffer_size
expect_eq "cpu_buffer_size=8192" "$(cat $DBG/cpu_buffer_size)" 8192
# What the load's recording left waiting could exceed the smaller buffer.
drain
echo 262144 >$DBG/buffer_size
expect_eq "buffer_size=262144, the default watershed follows" "$(cat $DBG/buffer_size) $(cat $DBG/buffer_watershed)" "262144 65536"
echo 1000 >$DBG/buffer_watershed
expect_eq "buffer_watershed=1000" "$(cat $DBG/buffer_watershed)" 1000
echo 2000 >$DBG/sample_freq
expect_eq "sample_freq=2000 puts the event in frequency mode" "$(cat $DBG/sample_period) $(cat $DBG/sample_freq)" "0 2000"
echo 500000 >$DBG/sample_period
expect_eq "sample_period=500000 back to period mode" "$(cat $DBG/sample_period) $(cat $DBG/sample_freq)" "500000 0"

# --- two recording phases with a change between them, in one stream
# (buffers large enough, no user stacks: no page-fault sample is lost)
expect_eq "larger buffers, no user stacks (ioctl)" \
    "$(/tmp/cfgctl set "cpu_buffer_size=1048576 buffer_size=8388608 user_backtrace_depth=0")" ok
expect_eq "a watershed given stays" "$(cat $DBG/buffer_watershed)" 1000
echo 0 >$DBG/buffer_watershed
expect_eq "buffer_watershed=0: a quarter" "$(cat $DBG/buffer_watershed)" 2097152
lost0=$(stat_total sample_lost_overflow)
cat $DEV >/tmp/c.bin & catpid=$!
echo 1 >$DBG/tracing_on
/tmp/workload 0.5
echo 0 >$DBG/tracing_on
echo cpu-clock,page-faults >$DBG/event
expect_eq "event list changed; periods back to the defaults" "$(cat $DBG/event) $(cat $DBG/sample_period)" \
    "cpu-clock,page-faults 1000000,1000"
echo 200000,1 >$DBG/sample_period
echo 1 >$DBG/tracing_on
/tmp/evcheck faults 3000 >/tmp/f.out
/tmp/workload 0.5
echo 0 >$DBG/tracing_on
stop_reader $catpid
read -r _ pid _ _ total </tmp/f.out
expect_eq "no sample lost" "$(stat_total sample_lost_overflow)" "$lost0"
/tmp/evcheck stream /tmp/c.bin "$pid" >/tmp/c.out; rc=$?
cat /tmp/c.out | head -20
expect_eq "evcheck: two configurations, consistent" "$rc" 0
gens=$(awk '/^config/ { print $2 ":" $4 }' /tmp/c.out | tr '\n' ' ')
echo "CONFIG records: $gens"
case $gens in
    *":cpu-clock:500000 "*":cpu-clock:200000,page-faults:1 ") pass "CONFIG records: the old then the new events" ;;
    *) fail "CONFIG records: $gens" ;;
esac
last=$(awk '/^config/ { g = $2 } END { print g }' /tmp/c.out)
pf=$(awk -v g=$last '$1 == "samples" && $2 == g && $3 == "page-faults" { print $5 }' /tmp/c.out)
in_range "page-fault samples of the new configuration: every fault ($total faults)" "${pf:-none}" 3000 $((total + 16))
old=$(awk -v g=$last '$1 == "samples" && $2 < g - 1 && $3 == "cpu-clock" { n += $4 } END { print n + 0 }' /tmp/c.out)
check "cpu-clock samples of the old configuration (${old:-0})" [ "${old:-0}" -gt 0 ]

# --- a new stream restates the configuration in force
timeout 1 cat $DEV >/tmp/d.bin
/tmp/evcheck stream /tmp/d.bin >/tmp/d.out
expect_eq "a new stream opens with the latest CONFIG" "$(awk '/^config/ { print $4; exit }' /tmp/d.out)" \
    "cpu-clock:200000,page-faults:1"

# --- resizing never loses waiting records; refused while mapped
echo 1 >$DBG/tracing_on; /tmp/workload 0.3; echo 0 >$DBG/tracing_on
waiting=$(sed -n 's/.*bytes_waiting=\([0-9]*\).*/\1/p' $DBG/stats)
if [ "$waiting" -gt 65536 ]; then
    expect_eq "buffer_size below the $waiting bytes waiting: EBUSY" "$(try buffer_size 65536)" "err EBUSY"
else
    echo "(only $waiting bytes wait: the EBUSY of a shrink below them is not tried)"
fi
# A size that holds what waits (the fill varies with the machine's speed).
target=$(( (waiting / 65536 + 2) * 65536 ))
echo $target >$DBG/buffer_size
expect_eq "buffer_size shrinks to $target with $waiting bytes waiting" "$(cat $DBG/buffer_size)" $target
# Kept, and the change's CONFIG record (of two events: 48 + 2 * 48 + 16 bytes) after them.
expect_eq "the waiting bytes are kept" "$(sed -n 's/.*bytes_waiting=\([0-9]*\).*/\1/p' $DBG/stats)" \
    "$((waiting + 160))"
timeout 1 cat $DEV >/tmp/r.bin
/tmp/evcheck stream /tmp/r.bin >/tmp/r.out; rc=$?
expect_eq "the records that waited read back whole" "$rc" 0
check "they include the samples of the phase before ($(awk '$1 == "samples" { n += $4 } END { print n + 0 }' /tmp/r.out))" \
    [ "$(awk '$1 == "samples" { n += $4 } END { print n + 0 }' /tmp/r.out)" -gt 0 ]
/tmp/mmap hold 3 >/tmp/m.out 2>&1 & mpid=$!
wait_for grep -q held /tmp/m.out
expect_eq "buffer_size: EBUSY while mapped" "$(try buffer_size $((target + 65536)))" "err EBUSY"
wait $mpid
expect_eq "buffer_size changes after the mapping is gone" "$(try buffer_size $((target + 65536)))" ok

# --- the ioctls (what lockdown=integrity leaves)
/tmp/cfgctl get 4096 | tee /tmp/get.out
expect_eq "GET_CONFIG is the config file" "$(tail -n +2 /tmp/get.out)" "$(cat $DBG/config)"
expect_eq "GET_CONFIG length" "$(head -1 /tmp/get.out)" "len $(wc -c <$DBG/config)"
expect_eq "GET_CONFIG too small: ERANGE" "$(/tmp/cfgctl get 10)" "err ERANGE"
expect_eq "SET_CONFIG several keys" "$(/tmp/cfgctl set "event=cpu-clock
sample_freq=1000 backtrace_depth=4")" ok
expect_eq "they apply" "$(cat $DBG/event) $(cat $DBG/sample_freq) $(cat $DBG/backtrace_depth)" "cpu-clock 1000 4"
expect_eq "all or nothing: a bad key spoils the good ones" "$(/tmp/cfgctl set "backtrace_depth=9 bogus=1")" "err EINVAL"
expect_eq "nothing applied" "$(cat $DBG/backtrace_depth)" 4

# --- a change the counters refuse (the VM has no PMU: cycles is
# EOPNOTSUPP, see bad-params.sh) changes nothing: not the keys given with
# it, not the stream (no CONFIG record); and recording resumes after it
snap=$(cat $DBG/config)
# A new stream then opens with the CONFIG in force (the changes above read).
drain
cat $DEV >/tmp/x.bin & catpid=$!
wait_for reading_device $catpid
expect_eq "event=cycles with other keys: EOPNOTSUPP" "$(/tmp/cfgctl set "event=cycles buffer_size=131072 \
backtrace_depth=8 cpu_buffer_size=16384 buffer_watershed=5000 user_stack_size=512 exclude_kernel=1")" "err EOPNOTSUPP"
expect_eq "event=cycles (debugfs): EOPNOTSUPP" "$(try event cycles)" "err EOPNOTSUPP"
expect_eq "mode=overwrite event=cycles: EOPNOTSUPP" "$(/tmp/cfgctl set "mode=overwrite event=cycles")" "err EOPNOTSUPP"
expect_eq "refused: the config file is unchanged" "$(cat $DBG/config)" "$snap"
expect_eq "refused: GET_CONFIG is unchanged" "$(/tmp/cfgctl get 4096 | tail -n +2)" "$snap"
r0=$(stat_total sample_received)
echo 1 >$DBG/tracing_on
/tmp/workload 0.5
echo 0 >$DBG/tracing_on
r1=$(stat_total sample_received)
check "recording resumes after the refused changes ($r0 -> $r1 samples)" [ "$r1" -gt "$r0" ]
stop_reader $catpid
/tmp/evcheck stream /tmp/x.bin >/tmp/x.out; rc=$?
cat /tmp/x.out
expect_eq "evcheck: the stream of the refused changes" "$rc" 0
expect_eq "the stream's only CONFIG is the one in force (none of a refused change)" \
    "$(awk '/^config/ { print $4 }' /tmp/x.out | tr '\n' ' ')" "cpu-clock:1000:freq "

# --- concurrency: two writers, a tracing_on toggler and CPU hotplug
# (the debugfs writer also makes, filters on and removes a cgroup, /s2).
# The ioctl writer goes on past the 8 s until one change of its was applied
# and one refused by the counters: on the lockdep kernel the storm once kept
# all its 575 tries EBUSY or EINVAL, and the checks below had nothing to see.
grep -q " /sys/fs/cgroup cgroup2 " /proc/mounts || mount -t cgroup2 none /sys/fs/cgroup
mkdir -p /sys/fs/cgroup/s1
dmesg -c >/dev/null
/tmp/cfgctl hammer 8 "event=cpu-clock,page-faults" "event=cpu-clock sample_period=100000" "backtrace_depth=3" \
    "cpu_buffer_size=16384" "cpu_buffer_size=8192" "buffer_size=131072" "buffer_size=196608" \
    "exclude_user=1 exclude_kernel=0" "exclude_user=0 exclude_kernel=1" "exclude_user=0" \
    "mode=overwrite" "mode=consume" "cgroup=/s1" "cgroup=/" "user_stack_size=4096" \
    "cpu_buffer_size=32768 user_stack_size=8192" "user_stack_size=0" \
    "event=cycles backtrace_depth=7 buffer_size=131072" "mode=overwrite event=cycles" >/tmp/h1.out &
h1=$!
(end=$(($(date +%s) + 8)); while [ "$(date +%s)" -lt $end ]; do
    echo 2 >$DBG/user_backtrace_depth; echo 0,0 >$DBG/sample_freq; echo cpu-clock,task-clock >$DBG/event
    echo 4 >$DBG/user_backtrace_depth; echo 1 >$DBG/exclude_kernel; echo 0 >$DBG/exclude_kernel
    echo overwrite >$DBG/mode; echo 1 >$DBG/snapshot; echo consume >$DBG/mode
    mkdir /sys/fs/cgroup/s2; echo /s2 >$DBG/cgroup; rmdir /sys/fs/cgroup/s2; echo / >$DBG/cgroup
    echo 512 >$DBG/user_stack_size; echo 0 >$DBG/user_stack_size
    done) 2>/dev/null &
h2=$!
(end=$(($(date +%s) + 8)); while [ "$(date +%s)" -lt $end ]; do
    echo 1 >$DBG/tracing_on; echo 0 >$DBG/tracing_on; done) &
tog=$!
check "CPU 1 can go offline for the storm ($CPU1 writable)" [ -w $CPU1 ]
(end=$(($(date +%s) + 8)); while [ "$(date +%s)" -lt $end ] && [ -w $CPU1 ]; do
    echo 0 >$CPU1; echo 1 >$CPU1; done) &
hp=$!
cat $DEV >/dev/null & catpid=$!
wait $h1 $h2 $tog $hp
cat /tmp/h1.out
check "the ioctl writer got only ok, EBUSY, EINVAL or EOPNOTSUPP" grep -q ' other 0$' /tmp/h1.out
check "some changes applied" sh -c "! grep -q 'hammer ok 0 ' /tmp/h1.out"
check "some changes refused by the counters (cycles)" sh -c "! grep -q ' eopnotsupp 0 ' /tmp/h1.out"
# Only the refused change gives backtrace_depth=7.
check "no key of a refused change stays" [ "$(cat $DBG/backtrace_depth)" != 7 ]
echo 0 >$DBG/tracing_on
# The storm may have left the flight recorder on: a snapshot empties its
# buffers, then consume mode again.
[ "$(cat $DBG/mode)" = overwrite ] && echo 1 >$DBG/snapshot
expect_eq "consume mode again after the storm" "$(try mode consume)" ok
expect_eq "every task again after the storm" "$(try cgroup /)" ok
expect_eq "no stack copies after the storm" "$(try user_stack_size 0)" ok
kill $catpid; wait $catpid
cat $DBG/config
echo cpu-clock >$DBG/event
expect_eq "both modes again" "$(/tmp/cfgctl set "exclude_user=0 exclude_kernel=0")" ok
echo 1 >$DBG/tracing_on
r0=$(stat_total sample_received); /tmp/workload 0.5; r1=$(stat_total sample_received)
check "still sampling after the storm ($r0 -> $r1)" [ "$r1" -gt "$r0" ]
expect_eq "cpu1 online" "$(cat $CPU1)" 1

# --- two `oprofile-rs ctl --pause` at once for 4 s, a reader streaming (without
# one the event buffer fills and every change is EBUSY for want of room): each
# change is applied, or refused with its EBUSY explained (the other one switched
# recording on between this one's off and its change); nothing else
# ctl_loop NAME WORD...: prints "ctl NAME ok N busy N bad N". Past the 4 s,
# a loop none of whose changes was applied yet goes on (up to 60 s): on the
# one host thread of the stock VM, beside the other loop and the reader, a
# loop once made 2 tries in its 4 s, both EBUSY.
ctl_loop() {
    local name=$1 n=0 busy=0 bad=0 end=$(($(date +%s) + 4)) w t
    local last=$((end + 56))
    shift
    while t=$(date +%s); [ "$t" -lt $end ] || { [ $n -eq 0 ] && [ "$t" -lt $last ]; }; do
        for w in "$@"; do
            if oprofile-rs ctl --pause "$w" >/dev/null 2>/tmp/ctl.$name.err; then n=$((n + 1))
            elif grep -q "EBUSY: recording is on" /tmp/ctl.$name.err; then busy=$((busy + 1))
            else bad=$((bad + 1)); cat /tmp/ctl.$name.err; fi
        done
    done
    echo "ctl $name ok $n busy $busy bad $bad"
}
cat $DEV >/dev/null & catpid=$!
ctl_loop a backtrace_depth=2 backtrace_depth=5 >/tmp/ctl.a & ca=$!
ctl_loop b cgroup=/s1 cgroup=/ >/tmp/ctl.b & cb=$!
wait $ca $cb
kill $catpid; wait $catpid
cat /tmp/ctl.a /tmp/ctl.b
check "two ctl at once: only applied or EBUSY explained" grep -q ' bad 0$' /tmp/ctl.a
check "two ctl at once: the other one too" grep -q ' bad 0$' /tmp/ctl.b
check "two ctl at once: the first one's changes applied" sh -c "! grep -q ' ok 0 ' /tmp/ctl.a"
check "two ctl at once: the second one's too" sh -c "! grep -q ' ok 0 ' /tmp/ctl.b"
echo 0 >$DBG/tracing_on
expect_eq "every task again" "$(try cgroup /)" ok
check "rmmod" rmmod oprofile_rs

# --- overwrite mode: cpu_buffer_size resizes; events only after a snapshot
check "insmod mode=overwrite" insmod /oprofile_rs.ko mode=overwrite sample_period=100000
/tmp/workload 0.3
echo 0 >$DBG/tracing_on
expect_eq "overwrite: cpu_buffer_size resizes (the snapshot staging follows)" "$(try cpu_buffer_size 8192)" ok
expect_eq "overwrite: event EBUSY while the CPU buffers hold records" "$(try event page-faults)" "err EBUSY"
expect_eq "overwrite: excluded modes EBUSY too" "$(try exclude_kernel 1)" "err EBUSY"
expect_eq "overwrite: depth changes are fine" "$(try backtrace_depth 2)" ok
expect_eq "overwrite: mode=consume EBUSY while the CPU buffers hold records" "$(try mode consume)" "err EBUSY"
cat $DEV >/dev/null & catpid=$!
echo 1 >$DBG/snapshot
stop_reader $catpid
expect_eq "overwrite: event changes after a snapshot" "$(try event page-faults)" ok
expect_eq "overwrite: and excluded modes" "$(try exclude_kernel 1)" ok
expect_eq "overwrite: and the mode (consume)" "$(try mode consume)" ok
expect_eq "consume: the snapshot file says so" "$(cut -d' ' -f1 $DBG/snapshot)" "mode=consume"
expect_eq "consume: a snapshot is EINVAL" "$(/tmp/probe write $DBG/snapshot 1)" "err EINVAL"
check "rmmod" rmmod oprofile_rs

# --- nobody reads: the event buffer fills, and a change finds no room for
# its CONFIG record (EBUSY); `oprofile-rs ctl` says why and what to do. Small
# records (no callchains), so the room left is less than a CONFIG record.
check "insmod buffer_size=65536, no callchains" insmod /oprofile_rs.ko event=cpu-clock \
    sample_period=100000 buffer_size=65536 user_backtrace_depth=0
nearly_full() { [ "$(stat_of event_buffer bytes_waiting)" -ge $((65536 - 512)) ]; }
wait_for nearly_full
# names_full: ctl's refusal ($out) names the full event buffer.
names_full() {
    case $out in *"(EBUSY: the event buffer holds "*" bytes unread: no room for the CONFIG record"*"read /dev/oprofile/buffer first"*) ;;
        *) return 1 ;; esac
}
out=$(oprofile-rs ctl --pause backtrace_depth=8 2>&1) && fail "ctl --pause with the event buffer full succeeded"
echo "$out"
check "ctl --pause names the full event buffer" names_full
expect_eq "recording on again" "$(cat $DBG/tracing_on)" 1
# Two at once against the full buffer: each refused with its reason named (the
# full buffer, or recording switched on again by the other one's --pause);
# recording on again afterwards, nothing changed.
oprofile-rs ctl --pause backtrace_depth=8 >/tmp/full.a 2>&1 & fa=$!
oprofile-rs ctl --pause user_backtrace_depth=4 >/tmp/full.b 2>&1 & fb=$!
wait $fa; ra=$?; wait $fb; rb=$?
cat /tmp/full.a /tmp/full.b
for f in a b; do
    out=$(cat /tmp/full.$f)
    if names_full || grep -q "EBUSY: recording is on" /tmp/full.$f; then
        pass "two ctl --pause at once, full buffer: $f refused with its reason"
    else fail "two ctl --pause at once, full buffer: $f said: $out"; fi
done
check "both refused (status $ra and $rb)" [ "$ra" -ne 0 -a "$rb" -ne 0 ]
expect_eq "recording on again after both" "$(cat $DBG/tracing_on)" 1
expect_eq "neither changed anything" "$(cat $DBG/backtrace_depth) $(cat $DBG/user_backtrace_depth)" "0 0"
echo 0 >$DBG/tracing_on
out=$(oprofile-rs ctl backtrace_depth=8 2>&1) && fail "ctl with the event buffer full succeeded"
echo "$out"
check "ctl names the full event buffer" names_full
expect_eq "nothing changed" "$(cat $DBG/backtrace_depth)" 0
drain
check "read: the change is made" oprofile-rs ctl backtrace_depth=8
expect_eq "reads 8" "$(cat $DBG/backtrace_depth)" 8
check "rmmod" rmmod oprofile_rs
check_kmemleak
finish
