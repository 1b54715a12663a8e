#!/bin/sh
# CPU hotplug while sampling and streaming: an offline CPU records nothing,
# an onlined CPU samples again, repeated off/on cycles leave no trace in
# the kernel log, and the accounting stays exact for every CPU.
. /tmp/lib.sh
CPU1=/sys/devices/system/cpu/cpu1/online
recv() { stat_of "$1" sample_received; }
check "cpu1 is hotpluggable" [ -w $CPU1 ]
check "insmod" insmod /oprofile_rs.ko
cat $DEV >/tmp/h.bin &
catpid=$!
/tmp/workload 6 & /tmp/workload 6 &
sleep 1
check "cpu1 goes offline while sampling" sh -c "echo 0 >$CPU1"
a=$(recv 1); sleep 1; b=$(recv 1)
check "cpu1 sampled before going offline (${a:-0})" [ "${a:-0}" -gt 0 ]
expect_eq "no sample on cpu1 while offline" "$b" "$a"
check "cpu1 comes back online" sh -c "echo 1 >$CPU1"
sleep 1; c=$(recv 1)
check "cpu1 samples again after coming online ($a -> $c)" [ "$c" -gt "$a" ]
for i in 1 2 3 4 5; do echo 0 >$CPU1; sleep 0.1; echo 1 >$CPU1; done
expect_eq "cpu1 online after 5 quick off/on cycles" "$(cat $CPU1)" 1
sleep 0.5
echo 0 >$DBG/tracing_on
echo 1 >$DBG/flush
stop_reader $catpid
wait
cat $DBG/stats | tee /tmp/stats.txt
check_stream "the stream across hotplug" /tmp/h.bin /tmp/stats.txt
check "rmmod" rmmod oprofile_rs
check "cpu1 can still go offline and online after rmmod" sh -c "echo 0 >$CPU1 && echo 1 >$CPU1"
finish
