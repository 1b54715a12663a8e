#!/bin/sh
# The module's KUnit suites: the KUnit build (/oprofile_rs_kunit.ko; every
# other scenario loads the module users build) runs every suite at each
# load. It is loaded here once with the defaults and once with each set of
# parameters that changes what the suites meet in the running module (the
# flight recorder, a cgroup filter, several events, user-space-only
# sampling with user stacks, small buffers): every suite of the source
# (/tmp/kunit-suites, from tests/run-guest) must report, and pass, at every
# load.
# kernels: normal debug
. /tmp/lib.sh
expected=$(sort -u /tmp/kunit-suites)
nexp=$(echo "$expected" | grep -c .)
check "the source has KUnit suites ($nexp)" [ "$nexp" -ge 10 ]
CG=/sys/fs/cgroup
grep -q " $CG cgroup2 " /proc/mounts || mount -t cgroup2 none $CG
mkdir -p $CG/kunit
n=0
for params in "" "mode=overwrite cpu_buffer_size=65536" "cgroup=/kunit" \
        "event=cpu-clock,page-faults sample_period=1000000,1" \
        "exclude_kernel=1 user_backtrace_depth=64 user_stack_size=2048 cpu_buffer_size=16384 buffer_size=65536"; do
    n=$((n + 1))
    mark "kunit$n"
    # shellcheck disable=SC2086 # the parameters are words
    check "insmod the KUnit build ${params:-(defaults)}" insmod /oprofile_rs_kunit.ko $params
    log=$(dmesg_since "kunit$n")
    ran=$(echo "$log" | sed -n 's/.*# Subtest: \(oprofile_rs_[a-z_0-9]*\).*/\1/p' | sort -u)
    results=$(echo "$log" | grep -E '(not )?ok [0-9]+ oprofile_rs_')
    echo "$results"
    expect_eq "load $n: the suites that ran are the source's" "$(echo "$ran" | tr '\n' ' ')" "$(echo "$expected" | tr '\n' ' ')"
    expect_eq "load $n: every suite reported ok" "$(echo "$results" | grep -vc 'not ok')" "$nexp"
    check "load $n: no KUnit failure" sh -c "! echo \"\$0\" | grep -q 'not ok'" "$log"
    check "rmmod" rmmod oprofile_rs
done
rmdir $CG/kunit
finish
