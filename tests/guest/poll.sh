#!/bin/sh
# poll/select/epoll on /dev/oprofile/buffer: not readable while nothing waits
# (tracing off, drained: the wait times out), readable as soon as a flush
# pushes buffered samples (a child writes the flush file after 300 ms).
. /tmp/lib.sh
check "insmod" insmod /oprofile_rs.ko
for how in poll select epoll; do
    echo 0 >$DBG/tracing_on; echo 1 >$DBG/flush
    expect_eq "$how: nothing to read, times out" "$(/tmp/probe wait $DEV $how 500)" "timeout"
    echo 1 >$DBG/tracing_on
    out=$(/tmp/probe wait $DEV $how 5000 $DBG/flush)
    ms=$(echo "$out" | sed -n 's/^readable after \([0-9]*\) ms ok [1-9][0-9]*$/\1/p')
    check "$how: the flush wakes it and a read gets data ($out)" [ -n "$ms" ]
    check "$how: not before the flush (${ms:-?} ms >= 250)" [ "${ms:-0}" -ge 250 ]
done
check "rmmod" rmmod oprofile_rs
finish
