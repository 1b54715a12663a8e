#!/bin/sh
# Under lockdown=integrity (what Secure Boot gives) debugfs refuses writes:
# the device's ioctls still stop, restart and flush recording, and change
# the configuration (SET_CONFIG/GET_CONFIG); `oprofile-rs ctl` does all of
# it from the command line (the flight recorder switched on and off, a
# snapshot taken, --pause), with the module's refusals explained.
# vm-run: --append lockdown=integrity
# kernels: normal debug
. /tmp/lib.sh
check "booted with lockdown=integrity" grep -q 'lockdown=integrity' /proc/cmdline
check "insmod" insmod /oprofile_rs.ko
out=$(/tmp/probe write $DBG/tracing_on 0)
expect_one_of "debugfs refuses the tracing_on write" "$out" "err EPERM" "err EACCES"
expect_eq "ioctl TRACING_OFF" "$(/tmp/probe ioctl $DEV off wronly)" "ok 0"
expect_eq "GET_TRACING says off" "$(/tmp/probe ioctl $DEV get wronly)" "value 0 ok 0"
expect_eq "ioctl TRACING_ON" "$(/tmp/probe ioctl $DEV on wronly)" "ok 0"
expect_eq "ioctl FLUSH" "$(/tmp/probe ioctl $DEV flush wronly)" "ok 0"
cat $DEV >/tmp/l.bin & catpid=$!
/tmp/workload 2 >/dev/null
expect_eq "ioctl TRACING_OFF hands everything to the reader" "$(/tmp/probe ioctl $DEV off wronly)" "ok 0"
stop_reader $catpid
oprofile-rs script -i /tmp/l.bin --events >/tmp/l.txt 2>/dev/null
n=$(grep -c 'workload' /tmp/l.txt)
check "the stream has the workload's samples ($n)" [ "$n" -ge 10 ]
expect_eq "and ends with the off record" "$(grep TRACING /tmp/l.txt | tail -1 | awk '{print $NF}')" "off"
check "the read-only debugfs files stay readable" grep -q "^event_buffer" $DBG/stats
# The configuration through the ioctls only.
out=$(/tmp/cfgctl write $DBG/backtrace_depth 4)
expect_one_of "debugfs refuses the backtrace_depth write" "$out" "err EPERM" "err EACCES"
/tmp/probe ioctl $DEV on wronly >/dev/null
expect_eq "SET_CONFIG while recording: EBUSY" "$(/tmp/cfgctl set backtrace_depth=4)" "err EBUSY"
expect_eq "nothing changed" "$(sed -n 's/^backtrace_depth=//p' $DBG/config)" 0
/tmp/probe ioctl $DEV off wronly >/dev/null
expect_eq "SET_CONFIG" "$(/tmp/cfgctl set "event=cpu-clock,page-faults backtrace_depth=4")" ok
/tmp/cfgctl get 4096 >/tmp/get.out
expect_eq "GET_CONFIG shows it" "$(grep -E '^(event|backtrace_depth)=' /tmp/get.out | tr '\n' ' ')" \
    "event=cpu-clock,page-faults backtrace_depth=4 "
expect_eq "and the config file too" "$(sed -n 's/^event=//p' $DBG/config)" "cpu-clock,page-faults"

# oprofile-rs ctl: the same through the ioctls.
oprofile-rs ctl >/tmp/ctl.out; rc=$?
expect_eq "ctl shows the settings" "$rc $(grep -c '=' /tmp/ctl.out)" "0 $(($(wc -l <$DBG/config) + 1))"
expect_eq "and that recording is off" "$(tail -1 /tmp/ctl.out)" "tracing_on=0"
check "ctl: flight recorder on (off, mode=overwrite with 16 KiB CPU buffers, on)" \
    oprofile-rs ctl off mode=overwrite cpu_buffer_size=16384 on
# (Under lockdown debugfs refuses even to open its writable files: `ctl` reads tracing_on.)
tracing() { oprofile-rs ctl show | sed -n 's/^tracing_on=//p'; }
expect_eq "mode and tracing_on say so" "$(sed -n 's/^mode=//p' $DBG/config) $(tracing)" "overwrite 1"
cat $DEV >/tmp/c.bin & catpid=$!
/tmp/workload 1 >/dev/null
check "ctl snapshot" oprofile-rs ctl snapshot
oprofile-rs ctl backtrace_depth=2 2>/tmp/ctl.err; rc=$?
cat /tmp/ctl.err
check "ctl KEY=VALUE while recording: refused (status $rc)" [ "$rc" -ne 0 ]
grep -q 'EBUSY: recording is on' /tmp/ctl.err && pass "the error says why" || fail "error: $(cat /tmp/ctl.err)"
oprofile-rs ctl off mode=consume 2>/tmp/ctl.err; rc=$?
check "ctl mode=consume with records not snapshotted: refused (status $rc)" [ "$rc" -ne 0 ]
check "ctl --pause backtrace_depth=2 (recording off around it)" oprofile-rs ctl on --pause backtrace_depth=2
expect_eq "applied, recording on" "$(sed -n 's/^backtrace_depth=//p' $DBG/config) $(tracing)" "2 1"
check "ctl: back to consume mode (off, snapshot, mode=consume, on)" oprofile-rs ctl off snapshot mode=consume on
expect_eq "consume mode" "$(sed -n 's/^mode=//p' $DBG/config)" consume
check "ctl flush" oprofile-rs ctl flush
oprofile-rs ctl off
stop_reader $catpid
/tmp/snapcheck /tmp/c.bin >/tmp/c.check; rc=$?
grep -v '^snap ' /tmp/c.check; grep FAIL /tmp/c.check | head
expect_eq "the stream: two snapshots, then consume-mode samples (snapcheck)" "$rc $(sed -n 's/^snapshots //p' /tmp/c.check)" "0 2"
check "rmmod" rmmod oprofile_rs
finish
