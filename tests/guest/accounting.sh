#!/bin/sh
# Accounting under stress with small buffers: for every CPU, samples in the
# stream + LOST counts == sample_received - sample_invalid_eip, exactly.
# The reader starts 1.5 s late, so that the event buffer, the CPUs' 32 KiB
# staging areas and their rings fill, and samples are lost on purpose (the
# sync's kicks drain 4 KiB rings in time while one reads; half a second
# late, four CPUs sampled at 1,600 a second lost none: what the event
# buffer refused waited in the staging areas).
# Also: tracing_on=0 stops samples (none timed after the switch) and 1
# resumes; a signal interrupts a blocking read (SIGTERM: background jobs of a
# non-interactive shell ignore SIGINT).
. /tmp/lib.sh
check "insmod small buffers, 4 kHz" insmod /oprofile_rs.ko cpu_buffer_size=4096 buffer_size=65536 sample_period=250000
/tmp/workload 2 & /tmp/workload 2 &
sleep 1.5
cat $DEV >/tmp/a.bin &
catpid=$!
sleep 1
echo 0 >$DBG/tracing_on
sleep 0.3
echo 1 >$DBG/tracing_on
/tmp/workload 0.5
echo 0 >$DBG/tracing_on
echo 1 >$DBG/flush
stop_reader $catpid TERM; rc=$?
check "SIGTERM ends the blocked reader (status $rc)" [ "$rc" -ne 0 ]
cat $DBG/stats | tee /tmp/stats.txt
check_stream "the stressed stream" /tmp/a.bin /tmp/stats.txt
check "the stress run lost samples on purpose ($lost_total)" [ "$lost_total" -gt 0 ]
oprofile-rs script -i /tmp/a.bin --events >/tmp/a.txt 2>/dev/null
grep -c TRACING /tmp/a.txt
expect_eq "no sample between TRACING off and on" "$(samples_while_off /tmp/a.txt)" 0
resumed=$(awk '/TRACING on/ { on = 1; next } /TRACING off/ { on = 0 } on && !/LOST/ { n++ } END { print n + 0 }' /tmp/a.txt)
check "samples resume after TRACING on ($resumed)" [ "$resumed" -gt 0 ]
check "rmmod" rmmod oprofile_rs
finish
