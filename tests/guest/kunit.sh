#!/bin/sh
# The module's KUnit suites run at insmod; their KTAP results must all pass.
# kernels: normal debug
. /tmp/lib.sh
mark kunit
check "insmod" insmod /oprofile_rs.ko
log=$(dmesg_since kunit)
suites=$(echo "$log" | grep -cE '^\[[ 0-9.]+\] *# Subtest: oprofile_rs_|# Subtest: oprofile_rs_')
results=$(echo "$log" | grep -E '(not )?ok [0-9]+ oprofile_rs_')
echo "$results"
check "KUnit suites ran ($suites)" [ "$suites" -ge 2 ]
check "every suite reported" [ "$(echo "$results" | grep -c .)" -eq "$suites" ]
check "no KUnit failure" sh -c "! echo \"\$0\" | grep -q 'not ok'" "$log"
check "rmmod" rmmod oprofile_rs
finish
