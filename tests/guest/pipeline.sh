#!/bin/sh
# End to end: a known workload is profiled through /dev/oprofile/buffer; the
# stream decodes to samples of its pid in its hot functions, in roughly the
# right proportions.
. /tmp/lib.sh
check "insmod" insmod /oprofile_rs.ko
# 3:1 by construction; accept 2:1 .. 4.5:1. Under QEMU TCG (4 vCPUs on a
# 2-core host) a run now and then comes out skewed by host scheduling
# (seen once: 1.6:1, against 2.9:1 typically): one more recording decides.
for attempt in 1 2; do
    oprofile-rs record -q -o /tmp/w.bin -- /tmp/workload 3
    check "stream decodes" sh -c 'oprofile-rs script -i /tmp/w.bin >/tmp/w.txt'
    a=$(grep -c ' hot_three_quarters ' /tmp/w.txt)
    b=$(grep -c ' hot_one_quarter ' /tmp/w.txt)
    echo "attempt $attempt: hot_three_quarters=$a hot_one_quarter=$b"
    [ $((a * 10)) -ge $((b * 20)) ] && [ $((a * 10)) -le $((b * 45)) ] && break
done
check "samples in hot_three_quarters ($a)" [ "$a" -ge 200 ]
check "samples in hot_one_quarter ($b)" [ "$b" -ge 50 ]
check "proportion roughly 3:1 ($a:$b)" [ $((a * 10)) -ge $((b * 20)) -a $((a * 10)) -le $((b * 45)) ]
pids=$(grep -E ' hot_(three_quarters|one_quarter) ' /tmp/w.txt | awk '{print $3}' | sort -u | wc -l)
expect_eq "hot samples come from one process" "$pids" 1
check "those samples name the workload" grep -q 'workload.*hot_three_quarters' /tmp/w.txt
oprofile-rs report -i /tmp/w.bin --top 5 | tee /tmp/r.txt
check "report lists hot_three_quarters first among user symbols" \
    sh -c "grep -v kernel.kallsyms /tmp/r.txt | grep -E 'hot_|\\[' | grep -v '^#' | head -1 | grep -q hot_three_quarters"
check "rmmod" rmmod oprofile_rs
finish
