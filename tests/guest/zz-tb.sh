#!/bin/sh
# vm-run: --timeout 200
. /tmp/lib.sh
date +%s.%N; timeout 60 /tmp/spinthreads 3 0.5; echo "spinthreads alone rc=$?"; date +%s.%N
rm -f /tmp/go; mkfifo /tmp/go
timeout 60 /tmp/spinthreads 3 0.5 /tmp/go & sp=$!
sleep 0.5; echo go >/tmp/go; wait $sp; echo "spinthreads fifo rc=$?"; date +%s.%N
check "insmod" insmod /oprofile_rs.ko event=cpu-clock sample_period=1000000
echo 0 >$DBG/tracing_on
rm -f /tmp/go; mkfifo /tmp/go
sh -c 'read x </tmp/go; /tmp/workload 1 & /tmp/workload 1; wait' & t=$!
/tmp/cfgctl write $DBG/pid $t
cat $DEV >/tmp/t.bin & catpid=$!
wait_for reading_device $catpid
echo 1 >$DBG/tracing_on
echo go >/tmp/go; wait $t
cat $DBG/stats | cut -c1-100
echo 0 >$DBG/tracing_on
stop_reader $catpid
oprofile-rs script --all -i /tmp/t.bin 2>/dev/null | grep -v "^\s" | head -5
oprofile-rs script --all -i /tmp/t.bin 2>/dev/null | awk '/^[^ \t].* \[[0-9][0-9][0-9]\] / { n[$1]++ } END { for (c in n) print c, n[c] }'
rm -f /tmp/go; mkfifo /tmp/go
timeout 60 /tmp/spinthreads 3 0.5 /tmp/go >/tmp/th.txt & sp=$!
sleep 0.5; cat /tmp/th.txt
echo 0 >$DBG/tracing_on
/tmp/cfgctl write $DBG/pid $sp
echo 1 >$DBG/tracing_on
echo go >/tmp/go; wait $sp; echo "spinthreads bound rc=$?"; date +%s.%N
cat $DBG/stats | cut -c1-100
finish
