#!/bin/sh
# What the stream promises, whatever the fill of the event buffer and
# whoever writes tracing_on: (1) tracing_on=0 with a full event buffer
# still puts every sample before its off record (what does not fit is
# counted as lost), and no sample lies between off and on; (2) racing
# tracing_on writers leave the stream's last TRACING record equal to the
# state in force, and the records alternate; (3) a watershed close to
# buffer_size does not leave a blocked reader asleep while samples are lost;
# (4) every stream is self-contained: each sample's task is named before it,
# also when an earlier reader took the COMM records.
. /tmp/lib.sh
T=$DBG/tracing_on
tiny="cpu_buffer_size=4096 buffer_size=65536 sample_freq=20000 backtrace_depth=16"
names_ok() {  # SCRIPT: samples of tasks never named in the stream (":PID")
    awk '$3 ~ /^[0-9]+\/[0-9]+$/ && $4 ~ /^:/ { n++ } END { print n + 0 }' "$1"
}

echo "== (1) tracing_on=0 while the event buffer is full"
check "insmod ($tiny)" insmod /oprofile_rs.ko $tiny
/tmp/workload 6 >/dev/null & /tmp/workload 6 >/dev/null &
sleep 2   # no reader: the 64 KiB event buffer fills
for i in 1 2 3 4 5; do echo 0 >$T; sleep 0.2; echo 1 >$T; sleep 0.3; done
echo 0 >$T
wait
# A flush before any reader: the sync stages the LOST records the off
# switches could not write (the buffer was full) and moves them once the
# reader made room, below the watershed: recording off, that wakes the
# reader (it slept on them once, and stop_reader timed out).
echo 1 >$DBG/flush
cat $DEV >/tmp/p1.bin & catpid=$!
wait_for reading_device $catpid; echo 1 >$DBG/flush
stop_reader $catpid
cat $DBG/stats >/tmp/stats1.txt
oprofile-rs script -i /tmp/p1.bin --events >/tmp/s1.txt 2>/dev/null
expect_eq "no sample between an off and the next on" "$(samples_while_off /tmp/s1.txt)" 0
expect_eq "the stream ends off" "$(grep TRACING /tmp/s1.txt | tail -1 | awk '{print $NF}')" "off"
check_stream "the toggled stream" /tmp/p1.bin /tmp/stats1.txt
check "samples were lost (the buffer was full): $lost_total" [ "$lost_total" -gt 0 ]
full=$(stat_of event_buffer refused_full /tmp/stats1.txt)
check "stats counts the appends the full event buffer refused (${full:-none})" [ "${full:-0}" -gt 0 ]
check "rmmod" rmmod oprofile_rs

echo "== (2) racing tracing_on writers"
check "insmod" insmod /oprofile_rs.ko sample_freq=2000
cat $DEV >/tmp/p2.bin & catpid=$!
( i=0; while [ $i -lt 150 ]; do echo 0 >$T; i=$((i + 1)); done ) &
( i=0; while [ $i -lt 150 ]; do echo 1 >$T; i=$((i + 1)); done ) &
# (The ioctl writer in one process: 200 of them took 36 s on the lockdep VM.)
/tmp/probe toggle $DEV 400 >/tmp/toggle.txt &
wait %2 %3 %4 2>/dev/null; sleep 0.2
expect_eq "the ioctl writer's 800 ioctls succeeded" "$(cat /tmp/toggle.txt)" "ok 800 failed 0"
state=$(cat $T)
stop_reader_flushed $catpid
oprofile-rs script -i /tmp/p2.bin --events >/tmp/s2.txt 2>/dev/null
last=$(grep TRACING /tmp/s2.txt | tail -1 | awk '{print $NF}')
case $state in 1) want=on ;; *) want=off ;; esac
check "the racing writers' TRACING records are in the stream ($(grep -c TRACING /tmp/s2.txt))" grep -q TRACING /tmp/s2.txt
expect_eq "the last TRACING record says what tracing_on says ($state)" "${last:-none}" "$want"
repeats=$(grep TRACING /tmp/s2.txt | awk '{print $NF}' | uniq -d | wc -l)
expect_eq "TRACING records alternate (no off twice in a row)" "$repeats" 0
expect_eq "no sample between an off and the next on" "$(samples_while_off /tmp/s2.txt)" 0
echo 1 >$T
check "rmmod" rmmod oprofile_rs

echo "== (3) a watershed close to buffer_size"
check "insmod" insmod /oprofile_rs.ko $tiny buffer_watershed=65528
/tmp/workload 8 >/dev/null &
out=$(/tmp/probe readto $DEV 1048576 6)
case $out in "ok "[1-9]*) pass "a blocked reader is woken when the buffer is full ($out)" ;;
             *) fail "a blocked reader with watershed 65528: $out" ;; esac
kill %1 2>/dev/null; wait
check "rmmod" rmmod oprofile_rs

echo "== (4) every stream names its tasks"
check "insmod" insmod /oprofile_rs.ko sample_freq=1000
/tmp/workload 6 >/dev/null &
sleep 1
echo 1 >$DBG/flush
/tmp/probe read $DEV 2048 nonblock   # a first reader takes a few records (and COMMs)
sleep 1
/tmp/probe read $DEV 2048 nonblock
sleep 1
cat $DEV >/tmp/p4.bin & catpid=$!
wait_for reading_device $catpid
sleep 1   # a second of samples in this stream
stop_reader_flushed $catpid
oprofile-rs script -i /tmp/p4.bin >/tmp/s4.txt 2>/dev/null
check "the last stream has samples" [ "$(wc -l </tmp/s4.txt)" -gt 10 ]
expect_eq "no sample of an unnamed task" "$(names_ok /tmp/s4.txt)" 0
grep ' :[0-9]' /tmp/s4.txt | head -3
wait
check "rmmod" rmmod oprofile_rs
finish
