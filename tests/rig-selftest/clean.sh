#!/bin/sh
# Rig self-test: what leaves.sh left behind is gone (expected: ok).
. /tmp/lib.sh
check "the module is not loaded" [ ! -d /sys/module/oprofile_rs ]
check "no sleep left running" sh -c '! ps | grep -q "[s]leep 1000"'
expect_eq "cpu1 online" "$(cat /sys/devices/system/cpu/cpu1/online)" 1
check "perf_event_max_sample_rate is not 1234" [ "$(cat /proc/sys/kernel/perf_event_max_sample_rate)" != 1234 ]
check "no file of leaves.sh in /tmp" [ ! -e /tmp/left-behind ]
check "the scenario files are still there" [ -f /tmp/lib.sh ]
finish
