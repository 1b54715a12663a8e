#!/bin/sh
# Out-of-range module parameters fail insmod with EINVAL and one log line
# naming the parameter; nothing is left behind.
. /tmp/lib.sh
n=0
for p in cpu_buffer_size=5000 cpu_buffer_size=1024 cpu_buffer_size=134217728 \
         buffer_size=1 buffer_size=1073741824 buffer_watershed=1048576 \
         sample_period=0 sample_period=2000000000 backtrace_depth=65 \
         cpu_buffer_size=abc sample_period=-1; do
    name=${p%%=*}
    mark "bad$n"
    out=$(insmod /oprofile_rs.ko "$p" 2>&1) && fail "insmod $p succeeded"
    echo "insmod $p: $out"
    case $out in *"Invalid argument"*|*"Invalid parameters"*) pass "insmod $p: EINVAL" ;;
        *) fail "insmod $p: expected EINVAL, got: $out" ;; esac
    check "log names $name" sh -c "dmesg | sed -n '/oprofile-test-mark bad$n\$/,\$p' | grep -q '$name'"
    [ -e $DEV ] && fail "$DEV exists after failed insmod $p"
    [ -e $DBG ] && fail "$DBG exists after failed insmod $p"
    n=$((n + 1))
done
check "good parameters load" insmod /oprofile_rs.ko cpu_buffer_size=4096 buffer_size=65536 sample_period=10000 backtrace_depth=64
check "rmmod" rmmod oprofile_rs
finish
