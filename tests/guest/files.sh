#!/bin/sh
# The device node and the debugfs files exist, are root-only, and behave:
# flush takes only 1 (anything else: EINVAL and a log line), the read-only
# files refuse writes.
. /tmp/lib.sh
check "insmod" insmod /oprofile_rs.ko
check "$DEV is a character device" [ -c $DEV ]
expect_eq "$DEV mode and owner" "$(stat -c '%a %u %g' $DEV)" "600 0 0"
expect_eq "$DBG/tracing_on mode and owner" "$(stat -c '%a %u %g' $DBG/tracing_on)" "600 0 0"
expect_eq "nobody cannot open tracing_on" "$(/tmp/probe -u 65534 read $DBG/tracing_on 16)" "err EACCES"
expect_eq "debugfs mount is root-only" "$(stat -c '%a' /sys/kernel/debug)" "700"
expect_eq "nobody cannot open $DEV" "$(/tmp/probe -u 65534 read $DEV 4096 nonblock)" "err EACCES"
expect_eq "flush takes 1" "$(/tmp/probe write $DBG/flush 1)" "ok 1"
expect_eq "flush takes 1 with a newline" "$(/tmp/probe write $DBG/flush '1
')" "ok 2"
mark flush
for bad in 0 2 x "" " 1"; do
    expect_eq "flush refuses '$bad'" "$(/tmp/probe write $DBG/flush "$bad")" "err EINVAL"
done
expect_eq "flush refuses a 4 KiB write" "$(/tmp/probe writen $DBG/flush 4096)" "err EINVAL"
logs=$(dmesg_since flush | grep -c 'oprofile_rs: flush: refused')
check "each refusal logged ($logs lines)" [ "$logs" -ge 6 ]
# A loop of refused writes does not flood the log (10 lines per 5 s per message).
mark flood
t0=$(date +%s)
# (one process makes the 600 writes: 600 processes took a minute and a half
# on the lockdep kernel's single TCG thread, for the same writes.)
expect_eq "600 writes, each refused" "$(/tmp/probe writes $DBG/flush 0 $DBG/tracing_on x 300)" "refused 600 of 600"
windows=$(( ($(date +%s) - t0) / 5 + 2 ))   # 5-s windows the loop touched, rounded up
lines=$(dmesg_since flood | grep -c 'oprofile_rs: .*refused')
check "600 refused writes (2 messages, $windows windows) log at most $((20 * windows)) lines ($lines)" [ "$lines" -le $((20 * windows)) ]
sleep 5; /tmp/probe write $DBG/flush 0 >/dev/null   # the next window's first line
check "and the next window says how many were held back" dmesg_has flood 'log lines suppressed (rate limit)'
for f in stats event buffer_sizes; do
    out=$(/tmp/probe write $DBG/$f 1)
    check "$f refuses writes ($out)" [ "${out#err }" != "$out" ]
done
check "rmmod" rmmod oprofile_rs
finish
