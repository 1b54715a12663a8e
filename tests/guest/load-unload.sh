#!/bin/sh
# Load and unload 20 times: the device and debugfs files come and go, and
# nothing leaks (kmemleak on the debug kernel). The module as users build
# it runs no KUnit suite at load (a suite left without its
# cfg(oprofile_rs_kunit) gate printed an ENOMEM line at every insmod).
. /tmp/lib.sh
mark load-unload-kunit
i=0
while [ $i -lt 20 ]; do
    insmod /oprofile_rs.ko || fail "insmod #$i"
    [ -c $DEV ] || fail "no $DEV after insmod #$i"
    [ -f $DBG/tracing_on ] || fail "no $DBG/tracing_on after insmod #$i"
    [ "$(/tmp/probe read $DEV 96 nonblock)" = "ok 96" ] || fail "read of the stream header #$i"
    rmmod oprofile_rs || fail "rmmod #$i"
    [ -e $DEV ] && fail "$DEV still there after rmmod #$i"
    [ -e $DBG ] && fail "$DBG still there after rmmod #$i"
    i=$((i + 1))
done
expect_eq "20 load/unload cycles" "$i" 20
expect_eq "the users' build ran no KUnit suite at load" \
    "$(dmesg_since load-unload-kunit | grep -c 'Subtest: oprofile_rs_')" 0
expect_eq "and logged no ENOMEM at load" "$(dmesg_since load-unload-kunit | grep -c 'ENOMEM')" 0
check_kmemleak
finish
