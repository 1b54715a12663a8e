#!/bin/sh
# The ring-buffer benchmark is a module of its own (oprofile_rs_bench.ko):
# oprofile_rs.ko has no benchmark parameter; the benchmark refuses a run
# time out of 1..60 s and, given one, runs, accounts every record and unloads.
# vm-run: --smp 2
# kernels: normal debug
. /tmp/lib.sh
check "insmod oprofile_rs" insmod /oprofile_rs.ko
check "oprofile_rs.ko has no bench_ring_secs" [ ! -e /sys/module/oprofile_rs/parameters/bench_ring_secs ]
check "and no benchmark code" sh -c "! grep -q ringbuf_bench /proc/kallsyms"
check "rmmod oprofile_rs" rmmod oprofile_rs
check "oprofile_rs_bench.ko is there" [ -f /oprofile_rs_bench.ko ]
for bad in 0 61 100000000000; do
    out=$(insmod /oprofile_rs_bench.ko secs=$bad 2>&1)
    check "secs=$bad refused ($out)" [ $? -ne 0 ]
done
check "the refusals say why" sh -c "dmesg | grep -q 'invalid secs=61: must be between 1 and 60'"
check "secs=1 runs" insmod /oprofile_rs_bench.ko secs=1
line=$(dmesg | grep 'oprofile_rs_bench: bench: entries' | tail -1)
echo "$line"
case $line in *" torn=0 "*"accounted=yes"*) pass "no torn record, every record accounted" ;;
              *) fail "benchmark result: '$line'" ;; esac
check "rmmod oprofile_rs_bench" rmmod oprofile_rs_bench
finish
