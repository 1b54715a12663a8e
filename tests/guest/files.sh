#!/bin/sh
# The device node and the debugfs files exist, are root-only, and behave.
. /tmp/lib.sh
check "insmod" insmod /oprofile_rs.ko
check "$DEV is a character device" [ -c $DEV ]
expect_eq "$DEV mode and owner" "$(stat -c '%a %u %g' $DEV)" "600 0 0"
expect_eq "$DBG/tracing_on mode and owner" "$(stat -c '%a %u %g' $DBG/tracing_on)" "600 0 0"
expect_eq "nobody cannot open tracing_on" "$(/tmp/probe -u 65534 read $DBG/tracing_on 16)" "err EACCES"
expect_eq "debugfs mount is root-only" "$(stat -c '%a' /sys/kernel/debug)" "700"
expect_eq "nobody cannot open $DEV" "$(/tmp/probe -u 65534 read $DEV 4096 nonblock)" "err EACCES"
check "rmmod" rmmod oprofile_rs
finish
