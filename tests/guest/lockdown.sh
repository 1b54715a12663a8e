#!/bin/sh
# Under lockdown=integrity (what Secure Boot gives) debugfs refuses writes:
# the device's ioctls still stop, restart and flush recording, and change
# the configuration (SET_CONFIG/GET_CONFIG).
# vm-run: --append lockdown=integrity
# kernels: normal debug
. /tmp/lib.sh
check "booted with lockdown=integrity" grep -q 'lockdown=integrity' /proc/cmdline
check "insmod" insmod /oprofile_rs.ko
out=$(/tmp/probe write $DBG/tracing_on 0)
check "debugfs refuses the tracing_on write ($out)" [ "$out" = "err EPERM" ] || [ "$out" = "err EACCES" ]
expect_eq "ioctl TRACING_OFF" "$(/tmp/probe ioctl $DEV off wronly)" "ok 0"
expect_eq "GET_TRACING says off" "$(/tmp/probe ioctl $DEV get wronly)" "value 0 ok 0"
expect_eq "ioctl TRACING_ON" "$(/tmp/probe ioctl $DEV on wronly)" "ok 0"
expect_eq "ioctl FLUSH" "$(/tmp/probe ioctl $DEV flush wronly)" "ok 0"
cat $DEV >/tmp/l.bin & catpid=$!
/tmp/workload 2 >/dev/null
expect_eq "ioctl TRACING_OFF hands everything to the reader" "$(/tmp/probe ioctl $DEV off wronly)" "ok 0"
sleep 1; kill $catpid; wait $catpid 2>/dev/null
oprofile-rs script -i /tmp/l.bin --events >/tmp/l.txt 2>/dev/null
n=$(grep -c 'workload' /tmp/l.txt)
check "the stream has the workload's samples ($n)" [ "$n" -ge 10 ]
expect_eq "and ends with the off record" "$(grep TRACING /tmp/l.txt | tail -1 | awk '{print $NF}')" "off"
check "the read-only debugfs files stay readable" grep -q "^event_buffer" $DBG/stats
# The configuration through the ioctls only.
out=$(/tmp/cfgctl write $DBG/backtrace_depth 4)
check "debugfs refuses the backtrace_depth write ($out)" [ "$out" = "err EPERM" ] || [ "$out" = "err EACCES" ]
/tmp/probe ioctl $DEV on wronly >/dev/null
expect_eq "SET_CONFIG while recording: EBUSY" "$(/tmp/cfgctl set backtrace_depth=4)" "err EBUSY"
expect_eq "nothing changed" "$(sed -n 's/^backtrace_depth=//p' $DBG/config)" 0
/tmp/probe ioctl $DEV off wronly >/dev/null
expect_eq "SET_CONFIG" "$(/tmp/cfgctl set "event=cpu-clock,page-faults backtrace_depth=4")" ok
/tmp/cfgctl get 4096 >/tmp/get.out
expect_eq "GET_CONFIG shows it" "$(grep -E '^(event|backtrace_depth)=' /tmp/get.out | tr '\n' ' ')" \
    "event=cpu-clock,page-faults backtrace_depth=4 "
expect_eq "and the config file too" "$(sed -n 's/^event=//p' $DBG/config)" "cpu-clock,page-faults"
check "rmmod" rmmod oprofile_rs
finish
