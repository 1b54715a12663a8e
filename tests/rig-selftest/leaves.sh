#!/bin/sh
# Rig self-test: a scenario that leaves the module loaded with the device
# open, a process running, CPU 1 offline, a perf sysctl changed and a file
# in /tmp (expected: ok; clean.sh, after it in the same boot, finds none of it).
. /tmp/lib.sh
check "insmod" insmod /oprofile_rs.ko
sleep 1000 <$DEV &
sleep 1000 &
check "cpu1 offline" sh -c 'echo 0 >/sys/devices/system/cpu/cpu1/online'
echo 1234 >/proc/sys/kernel/perf_event_max_sample_rate
echo left >/tmp/left-behind
check "all of it done" [ -f /tmp/left-behind ]
finish
