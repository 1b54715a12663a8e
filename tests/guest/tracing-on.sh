#!/bin/sh
# tracing_on round-trips 0/1 (with or without newline) and refuses anything
# else with EINVAL and a log line, leaving the value unchanged. Under
# sampling at 20 kHz, toggled many times: once `echo 0` returns, no CPU
# records anything more (the counters stand still) and a blocked reader gets
# everything recorded until then without a flush,
# no sample lies between a TRACING off and the next on in the stream, no
# TRACING off is stamped before a sample it follows, and the accounting is
# exact.
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

check "insmod at 20 kHz" insmod /oprofile_rs.ko sample_period=50000
cat $DEV >/tmp/t.bin &
catpid=$!
/tmp/workload 4 & /tmp/workload 4 &
sleep 0.5
i=0
while [ $i -lt 50 ]; do echo 0 >$T; echo 1 >$T; i=$((i + 1)); done
echo 0 >$T
cat $DBG/stats >/tmp/stats-at-off.txt
sleep 0.5
cat $DBG/stats >/tmp/stats-later.txt
counts() { grep "^cpu" "$1" | sed "s/ handler_.*//"; }
expect_eq "no CPU records after echo 0 returned" "$(counts /tmp/stats-later.txt)" "$(counts /tmp/stats-at-off.txt)"
# The blocked reader must take everything without a flush; stop_reader waits
# for it (a reader left asleep times the wait out and fails the scenario).
stop_reader $catpid
wait
# No flush: echo 0 alone hands everything to the blocked reader (the stream
# is far below the 256 KiB watershed).
expect_eq "cat got everything recorded before echo 0" \
    "$(stat_of event_buffer bytes_waiting)" 0
check_stream "the toggled stream" /tmp/t.bin /tmp/stats-at-off.txt
oprofile-rs script -i /tmp/t.bin --events >/tmp/t.txt 2>/dev/null
expect_eq "51 TRACING off markers" "$(grep -c 'TRACING off' /tmp/t.txt)" 51
expect_eq "no sample between TRACING off and on" "$(samples_while_off /tmp/t.txt)" 0
early=$(awk '/TRACING off/ { if ($1 + 0 < last) n++; next } /TRACING|LOST/ { next } { last = $1 + 0 }
             END { print n + 0 }' /tmp/t.txt)
expect_eq "no TRACING off stamped before a sample it follows" "$early" 0

# Off costs nothing: once echo 0 returned the counters stand still, no
# overflow reaches the module (sample_while_off stays), also none of the
# counter of a CPU that comes up while off, nor of those a configuration
# change makes (a clock, made by the hotplug callbacks, and page faults, made
# by the module's work); echo 1 starts them all.
CPU1=/sys/devices/system/cpu/cpu1/online
off0=$(stat_total sample_while_off)
/tmp/workload 0.5
echo 0 >$CPU1; echo 1 >$CPU1
echo cpu-clock,page-faults >$DBG/event
/tmp/workload 0.5
sh -c 'i=0; while [ $i -lt 200 ]; do i=$((i + 1)); done'
expect_eq "no overflow while off (CPU 1 replugged, events changed)" "$(stat_total sample_while_off)" "$off0"
r1=$(stat_of 1 sample_received); r1=${r1:-0}
pf=$(stat_total sample_received)
echo 1 >$T
/tmp/workload 0.5 & /tmp/workload 0.5 & wait
check "CPU 1 samples again after echo 1 ($r1 -> $(stat_of 1 sample_received))" [ "$(stat_of 1 sample_received)" -gt "$r1" ]
check "samples again after echo 1 ($pf -> $(stat_total sample_received))" [ "$(stat_total sample_received)" -gt "$pf" ]
# Unloaded with the counters stopped and a reader holding the device: the
# stopped counters are released as running ones are.
echo 0 >$T
cat $DEV >/dev/null & catpid=$!
wait_for reading_device $catpid
check "rmmod refused while a reader holds the device (counters stopped)" sh -c "! rmmod oprofile_rs"
check "the module is still loaded" grep -q '^oprofile_rs ' /proc/modules
kill $catpid; wait $catpid 2>/dev/null
check "rmmod with the counters stopped" rmmod oprofile_rs
finish
