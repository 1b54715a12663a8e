#!/bin/sh
# The recording mode, switched at run time (debugfs `mode`, the SET ioctl's
# `mode=`) while recording is off: EBUSY while on, EINVAL for garbage,
# EACCES for an unprivileged user, and EBUSY for leaving the flight recorder
# while its CPU buffers hold records not yet snapshotted. One stream holds a
# consume phase (4 KiB CPU buffers at 10 kHz with callchains: the CPU
# buffers overflow between syncs, LOST records), a flight-recorder phase
# (switched together with 1 MiB CPU buffers in one ioctl; two snapshots, no
# sync), a consume phase again (switched back through the debugfs files,
# one at a time), then mode switches during CPU hotplug. snapcheck checks
# the snapshots' framing and that SAMPLEs outside snapshots come only after
# a CONFIG record saying consume mode; with nothing overwritten (1 MiB CPU
# buffers, 0.5-s phases) the accounting is exact for every CPU over the
# whole stream: SAMPLEs + LOST counts == sample_received -
# sample_invalid_eip (what the stream has reported of each CPU's losses
# passes between the sync and the snapshots at each switch: nothing twice,
# nothing missing). Last, consume mode with a full event buffer and no
# reader: mode=overwrite is EBUSY until the stream is read (no room for the
# CONFIG record, or a LOST record that tracing_on=0 could not append waits);
# read, the switch succeeds at once (a waiting LOST record is moved by the
# switch itself: it waited for the CPU's next periodic sync before).
. /tmp/lib.sh
SNAP=$DBG/snapshot
CPU1=/sys/devices/system/cpu/cpu1/online
try() { /tmp/cfgctl write "$DBG/$1" "$2"; }
snaps() { sed -n 's/.*snapshots=\([0-9]*\).*/\1/p' $SNAP; }
synced() { stat_total buffer_read; }

check "insmod (consume mode, 4 KiB CPU buffers, 10 kHz, callchains)" insmod /oprofile_rs.ko \
    cpu_buffer_size=4096 buffer_size=8388608 sample_period=100000 backtrace_depth=16 user_backtrace_depth=0
expect_eq "mode reads consume" "$(cat $DBG/mode)" consume
expect_eq "config says consume" "$(sed -n 's/^mode=//p' $DBG/config)" consume
expect_eq "mode: EBUSY while recording" "$(try mode overwrite)" "err EBUSY"
expect_eq "ioctl mode=overwrite: EBUSY while recording" "$(/tmp/cfgctl set mode=overwrite)" "err EBUSY"
cat $DEV >/tmp/m.bin & catpid=$!
workload_every_cpu 1
echo 0 >$DBG/tracing_on
snap=$(cat $DBG/config)
for bad in bogus Overwrite OVERWRITE 1 0 "overwrite consume" "overwrite," " " x; do
    expect_eq "mode='$bad': EINVAL" "$(try mode "$bad")" "err EINVAL"
done
expect_eq "ioctl mode=: EINVAL" "$(/tmp/cfgctl set mode=)" "err EINVAL"
expect_eq "ioctl mode twice: EINVAL" "$(/tmp/cfgctl set 'mode=overwrite mode=overwrite')" "err EINVAL"
expect_eq "nobody cannot write mode" "$(/tmp/probe -u 65534 write $DBG/mode overwrite)" "err EACCES"
expect_eq "nothing changed by refused writes" "$(cat $DBG/config)" "$snap"
expect_eq "snapshot in consume mode: EINVAL" "$(/tmp/probe write $SNAP 1)" "err EINVAL"

# --- to the flight recorder, with 1 MiB CPU buffers, in one change
r0=$(synced)
expect_eq "ioctl: mode=overwrite cpu_buffer_size=1048576" \
    "$(/tmp/cfgctl set 'mode=overwrite cpu_buffer_size=1048576')" ok
expect_eq "mode reads overwrite" "$(cat $DBG/mode)" overwrite
expect_eq "cpu_buffer_size reads 1 MiB" "$(cat $DBG/cpu_buffer_size)" 1048576
expect_eq "the snapshot file says overwrite" "$(cut -d' ' -f1 $SNAP)" "mode=overwrite"
echo 1 >$DBG/tracing_on
workload_every_cpu 0.5
expect_eq "nothing synced in overwrite mode" "$(synced)" "$r0"
check "snapshot while recording" sh -c "echo 1 >$SNAP"
workload_every_cpu 0.5
echo 0 >$DBG/tracing_on
held=$(stat_total buffer_entries)
check "the CPU buffers hold records ($held)" [ "$held" -gt 0 ]
expect_eq "mode=consume while they do: EBUSY" "$(try mode consume)" "err EBUSY"
expect_eq "still overwrite" "$(cat $DBG/mode)" overwrite
check "snapshot while recording is off" sh -c "echo 1 >$SNAP"
expect_eq "nothing left in the CPU buffers" "$(stat_total buffer_entries)" 0

# --- back to consume mode, one debugfs file at a time
expect_eq "mode=consume (debugfs)" "$(try mode consume)" ok
expect_eq "cpu_buffer_size=4096 (debugfs)" "$(try cpu_buffer_size 4096)" ok
expect_eq "snapshot in consume mode again: EINVAL" "$(/tmp/probe write $SNAP 1)" "err EINVAL"
echo 1 >$DBG/tracing_on
workload_every_cpu 1
r1=$(synced)
check "consume mode syncs again ($r0 -> $r1)" [ "$r1" -gt "$r0" ]

# --- switches while CPU 1 goes offline and online (the rig's VM: 4 vCPUs,
# CPU hotplug; without it, a failure)
if check "CPU 1 can go offline ($CPU1 writable)" [ -w $CPU1 ]; then
    ( for i in 1 2 3 4 5 6 7 8; do echo 0 >$CPU1 || exit 1; sleep 0.1; echo 1 >$CPU1 || exit 1; sleep 0.1; done ) &
    hp=$!
    n=0
    for i in 1 2 3; do
        echo 0 >$DBG/tracing_on
        [ "$(/tmp/cfgctl set 'mode=overwrite cpu_buffer_size=1048576')" = ok ] && n=$((n + 1))
        echo 1 >$DBG/tracing_on; sleep 0.15; echo 0 >$DBG/tracing_on
        echo 1 >$SNAP
        [ "$(/tmp/cfgctl set 'mode=consume cpu_buffer_size=4096')" = ok ] && n=$((n + 1))
        echo 1 >$DBG/tracing_on; sleep 0.15
    done
    wait $hp; hprc=$?
    expect_eq "CPU 1 went offline and online 8 times (the hotplug loop's status)" "$hprc" 0
    expect_eq "six switches during CPU hotplug" "$n" 6
    expect_eq "every CPU online" "$(cat /sys/devices/system/cpu/online)" "0-$((NCPU - 1))"
fi
echo 0 >$DBG/tracing_on
echo 1 >$DBG/flush
stop_reader $catpid
cat $DBG/stats | tee /tmp/stats.txt
check_snapshots /tmp/m.bin
expect_eq "snapshots in the stream" "$(sed -n 's/^snapshots //p' /tmp/snap.txt)" "$(snaps)"
sum() { awk -v f="$1" '$1 == "cpu" { for (i = 3; i < NF; i += 2) if ($i == f) n += $(i + 1) } END { print n + 0 }' /tmp/snap.txt; }
expect_eq "nothing overwritten (1 MiB CPU buffers)" "$(sum overwritten)" 0
check "samples of both modes ($(sum consumed) consumed, $(sum samples) in snapshots)" \
    [ "$(sum consumed)" -gt 0 -a "$(sum samples)" -gt 0 ]
echo "LOST counts in the stream: $(sum lost) (sample_lost_overflow: $(stat_total sample_lost_overflow /tmp/stats.txt))"
expect_eq "LOST counts == sample_lost_overflow" "$(sum lost)" "$(stat_total sample_lost_overflow /tmp/stats.txt)"
check_stream "the stream of both modes" /tmp/m.bin /tmp/stats.txt
# oprofile-rs ctl: the same switches from the command line (the device's ioctls).
check "ctl off mode=overwrite on; ctl snapshot; ctl off snapshot mode=consume on" \
    sh -c 'oprofile-rs ctl off mode=overwrite on && sleep 0.3 && oprofile-rs ctl snapshot && oprofile-rs ctl off snapshot mode=consume on'
expect_eq "ctl show: consume mode, recording on" "$(oprofile-rs ctl | grep -E '^(mode|tracing_on)=' | tr '\n' ' ')" \
    "mode=consume tracing_on=1 "
check "rmmod" rmmod oprofile_rs

# --- a LOST record waits for room: EBUSY, then read and switch at once
check "insmod (64 KiB event buffer, 4 KiB CPU buffers, 10 kHz)" insmod /oprofile_rs.ko \
    buffer_size=65536 cpu_buffer_size=4096 sample_period=100000
workload_every_cpu 1
echo 0 >$DBG/tracing_on
echo "event buffer: $(sed -n 's/^event_buffer //p' $DBG/stats)"
mark full
expect_eq "mode=overwrite with the event buffer full: EBUSY" "$(try mode overwrite)" "err EBUSY"
echo "why: $(dmesg_since full | grep -o 'config: .*' | tail -1)"
out=$(/tmp/cfgctl drainset mode=overwrite)
case $out in "drained "*" ok") pass "the stream read, mode=overwrite at once ($out)" ;;
    *) fail "the stream read, mode=overwrite at once: $out" ;; esac
expect_eq "mode reads overwrite" "$(cat $DBG/mode)" overwrite
check "rmmod" rmmod oprofile_rs
check_kmemleak
finish
