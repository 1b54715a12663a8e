#!/bin/sh
# load-cycles.sh N: N insmod/rmmod cycles under load (scripts/soak): two
# CPU-bound workloads, a reader that opens, reads and closes the device
# while it comes and goes, and tracing_on toggles; every 100 cycles a
# kmemleak scan (debug kernel). Every insmod and rmmod must succeed (rmmod
# is retried while a file is open: "in use").
. /tmp/lib.sh
n=${1:-1000}
/tmp/workload 100000 >/dev/null & w1=$!
/tmp/workload 100000 >/dev/null & w2=$!
rm -f /tmp/cycles.stop
( while [ ! -e /tmp/cycles.stop ]; do
      /tmp/probe read $DEV 65536 nonblock
      /tmp/probe write $DBG/tracing_on 0; /tmp/probe write $DBG/tracing_on 1
  done >/tmp/cycles-reads.txt 2>&1 ) &
racer=$!
i=0 bad=0
while [ $i -lt "$n" ]; do
    insmod /oprofile_rs.ko sample_freq=10000 backtrace_depth=8 || bad=$((bad + 1))
    sleep 0.05
    t=0; while ! rmmod oprofile_rs 2>/dev/null; do
        t=$((t + 1)); [ $t -lt 500 ] || { fail "rmmod #$i refused 500 times"; break; }
    done
    i=$((i + 1))
    if [ $((i % 100)) -eq 0 ]; then
        echo "cycle $i"
        check_kmemleak "after $i cycles"
    fi
done
touch /tmp/cycles.stop; wait $racer
kill $w1 $w2; wait $w1 $w2 2>/dev/null
expect_eq "$n insmod/rmmod cycles, every insmod succeeded" "$bad" 0
sed 's/^ok [0-9]*$/ok N/' /tmp/cycles-reads.txt | sort | uniq -c
odd=$(grep -cvE '^(ok [0-9]+|err (EAGAIN|EBUSY|ENOENT|ENODEV|ENXIO))$' /tmp/cycles-reads.txt)
check "reads and tracing_on writes racing the cycles got only documented answers ($odd others)" [ "$odd" -eq 0 ]
finish
