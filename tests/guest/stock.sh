#!/bin/sh
# Debian's own kernel (scripts/vm-run --kernel stock): the module built for it
# by scripts/build-module-debian has its vermagic, loads unsigned (tainting
# the kernel: out-of-tree, unsigned), streams a workload's samples through
# /dev/oprofile/buffer, and unloads cleanly.
# kernels: stock
# boot: first (it checks that the kernel is untainted before the first load)
. /tmp/lib.sh
rel=$(uname -r)
check "the stock kernel ($rel, $(cut -d' ' -f3- /proc/version | cut -c1-60))" sh -c "echo '$rel' | grep -q '+deb13-'"
expect_eq "the module's vermagic is the running kernel's" "$(strings /oprofile_rs.ko | sed -n 's/^vermagic=\([^ ]*\) .*/\1/p')" "$rel"
expect_eq "kernel untainted before insmod" "$(cat /proc/sys/kernel/tainted)" 0
mark stock
check "insmod" insmod /oprofile_rs.ko
dmesg_since stock | grep -q 'module verification failed: signature and/or required key missing - tainting kernel' \
    && pass "the kernel says it loaded it unsigned" || fail "no 'module verification failed' line: $(dmesg_since stock)"
t=$(cat /proc/sys/kernel/tainted)
# 4096 = O (out-of-tree), 8192 = E (unsigned); nothing else.
expect_eq "taint is O and E only" "$t" 12288
check "$DEV is there" [ -c $DEV ]
check "it is in /proc/modules" grep -q '^oprofile_rs ' /proc/modules
oprofile-rs record -q -o /tmp/s.bin -- /tmp/workload 3
grep '^cpu' $DBG/stats
oprofile-rs script -i /tmp/s.bin >/tmp/s.txt 2>/dev/null
a=$(grep -c ' hot_three_quarters ' /tmp/s.txt)
b=$(grep -c ' hot_one_quarter ' /tmp/s.txt)
check "the stream has the workload's samples ($a + $b)" [ "$a" -ge 100 -a "$b" -ge 20 ]
oprofile-rs report -i /tmp/s.bin --top 8 2>/dev/null
# The kallsyms check takes every row of every process: the workload alone
# has a handful of kernel samples at most, and they need not be among its
# first eight rows (the CI of stop 20 failed here when they were not).
oprofile-rs report -i /tmp/s.bin --all >/tmp/r.txt 2>/dev/null
grep '\[kernel\.kallsyms\]' /tmp/r.txt | head -3
check "kernel samples resolve to named functions through the stock kernel's kallsyms" \
    grep -qE '^ *[0-9]+ +[0-9.]+% +[a-z_][A-Za-z0-9_.]* +\[kernel\.kallsyms\]' /tmp/r.txt
check "rmmod" rmmod oprofile_rs
check "$DEV gone after rmmod" [ ! -e $DEV ]
check "debugfs directory gone after rmmod" [ ! -e $DBG ]
check "insmod again" insmod /oprofile_rs.ko
check "rmmod again" rmmod oprofile_rs
finish
