#!/bin/sh
# Reader semantics of /dev/oprofile/buffer: EBUSY for a second opener,
# EAGAIN when empty with O_NONBLOCK, EINVAL for a read too small for the
# header or the next record, whole records otherwise; rmmod refused while
# a reader blocks, fine after it is interrupted.
. /tmp/lib.sh
check "insmod" insmod /oprofile_rs.ko
expect_eq "second open gets EBUSY" "$(/tmp/probe open2 $DEV)" "err EBUSY"
expect_eq "read of 95 bytes: EINVAL (header is 96)" "$(/tmp/probe read $DEV 95 nonblock)" "err EINVAL"
expect_eq "read of 96 bytes: the header alone" "$(/tmp/probe read $DEV 96 nonblock)" "ok 96"
echo 0 >$DBG/tracing_on; echo 1 >$DBG/flush
/tmp/probe read $DEV 1048576 nonblock >/dev/null  # drain
# Now empty: after the header and the records that restate the naming and
# tracing state (COMM records, TRACING off), a non-blocking read gets EAGAIN.
out=$(/tmp/probe reads $DEV nonblock 96 4096 4096)
case $out in "ok 96 ok "[1-9]*" err EAGAIN") pass "header, restated state, then EAGAIN when empty ($out)" ;;
             *) fail "header, restated state, then EAGAIN when empty: got '$out'" ;; esac
echo 1 >$DBG/tracing_on; sleep 0.5; echo 1 >$DBG/flush
expect_eq "an 8-byte read cannot hold the next record: EINVAL" "$(/tmp/probe read2 $DEV 8 nonblock)" "ok 96 err EINVAL"
# 118 bytes: room for the opening CONFIG record (112 bytes with one event), not
# for the record after it (8 bytes at least): that read returns the CONFIG alone.
reads=$(/tmp/probe read2 $DEV 118 nonblock)
case $reads in "ok 96 ok 112") pass "a 118-byte read returns whole records ($reads)" ;; *) fail "118-byte read: $reads" ;; esac
cat $DEV >/dev/null &
wait_for in_read $!
out=$(rmmod oprofile_rs 2>&1); rc=$?
check "rmmod refused while a reader is open ($out)" [ "$rc" -ne 0 ]
kill $!; wait $! 2>/dev/null
check "rmmod after the reader ended" rmmod oprofile_rs

check "insmod sample_freq=250" insmod /oprofile_rs.ko sample_freq=250
/tmp/workload 1 >/dev/null
echo 0 >$DBG/tracing_on
before=$(stat_of event_buffer bytes_waiting)
mark=$(sed -n 's/^buffer_watershed=//p' $DBG/config)
in_range "recording off: bytes waiting below the watershed ($mark)" "$before" 1 $((mark - 1))
# Opened after the switch (so the switch's wake-up is not its own), reading
# 512 bytes at a time: each read returns at once until nothing waits.
out=$(/tmp/probe readoff $DEV 512 2)
got=$(echo "$out" | sed -n 's/^read \([0-9]*\) bytes, then EINTR$/\1/p')
in_range "blocking reads while off take all that waited, then wait ($out)" "${got:-none}" "$before" 1073741824
expect_eq "nothing left waiting below the watershed" "$(stat_of event_buffer bytes_waiting)" 0
check "rmmod" rmmod oprofile_rs
finish
