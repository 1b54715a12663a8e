#!/bin/sh
# tracing_on round-trips 0/1 (with or without newline) and refuses anything
# else with EINVAL and a log line, leaving the value unchanged.
. /tmp/lib.sh
T=$DBG/tracing_on
check "insmod" insmod /oprofile_rs.ko
expect_eq "reads 1 after load" "$(cat $T)" 1
echo 0 >$T; expect_eq "echo 0" "$(cat $T)" 0
echo 1 >$T; expect_eq "echo 1" "$(cat $T)" 1
expect_eq "write '0' without newline" "$(/tmp/probe write $T 0)" "ok 1"
expect_eq "now 0" "$(cat $T)" 0
expect_eq "write '1' without newline" "$(/tmp/probe write $T 1)" "ok 1"
mark garbage
for bad in 2 -1 abc " 1" "1 " "11"; do
    expect_eq "refuses '$bad'" "$(/tmp/probe write $T "$bad")" "err EINVAL"
    expect_eq "still 1 after '$bad'" "$(cat $T)" 1
done
expect_eq "refuses an empty write" "$(/tmp/probe write $T '')" "err EINVAL"
expect_eq "refuses a 4 KiB write" "$(/tmp/probe writen $T 4096)" "err EINVAL"
echo 0 >$T
expect_eq "refuses a 4 KiB write while 0" "$(/tmp/probe writen $T 4096)" "err EINVAL"
expect_eq "still 0" "$(cat $T)" 0
logs=$(dmesg_since garbage | grep -c 'oprofile_rs: tracing_on: refused')
check "each refusal logged ($logs lines)" [ "$logs" -ge 9 ]
check "rmmod" rmmod oprofile_rs
finish
