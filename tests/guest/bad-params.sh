#!/bin/sh
# Out-of-range module parameters fail insmod with EINVAL and one log line
# naming the parameter; nothing is left behind.
. /tmp/lib.sh
n=0
for p in cpu_buffer_size=5000 cpu_buffer_size=1024 cpu_buffer_size=134217728 \
         buffer_size=1 buffer_size=1073741824 buffer_watershed=1048576 \
         sample_period=9999 sample_period=2000000000 backtrace_depth=65 \
         user_backtrace_depth=65 user_backtrace_depth=-1 user_backtrace_depth=18446744073709551615 \
         cpu_buffer_size=abc sample_period=-1 sample_freq=100001 event=bogus event=CYCLES \
         exclude_user=maybe event=cpu-clock,cpu-clock event=cpu-clock, event=,cpu-clock \
         event=default,cpu-clock event=cpu-clock,,page-faults \
         event=cycles,instructions,cache-references,cache-misses,branch-instructions,branch-misses,cpu-clock,task-clock,page-faults \
         sample_period=100000,x sample_period=, sample_period=100000, sample_freq=1,,2 \
         sample_period=18446744073709551616 sample_freq=0x10; do
    name=${p%%=*}
    mark "bad$n"
    out=$(insmod /oprofile_rs.ko "$p" 2>&1) && fail "insmod $p succeeded"
    echo "insmod $p: $out"
    case $out in *"Invalid argument"*|*"Invalid parameters"*) pass "insmod $p: EINVAL" ;;
        *) fail "insmod $p: expected EINVAL, got: $out" ;; esac
    check "log names $name" dmesg_has "bad$n" "$name"
    [ -e $DEV ] && fail "$DEV exists after failed insmod $p"
    [ -e $DBG ] && fail "$DBG exists after failed insmod $p"
    n=$((n + 1))
done
# Combinations: named in the log line too.
for p in "sample_period=100000 sample_freq=1000" "exclude_user=1 exclude_kernel=1" \
         "event=cpu-clock,page-faults sample_period=100000,1,1" "event=cpu-clock,page-faults sample_freq=1,2,3" \
         "event=cpu-clock,page-faults sample_period=100000,100 sample_freq=0,10" \
         "event=cpu-clock,page-faults sample_period=1,1" "event=page-faults,cpu-clock sample_period=0,0,0"; do
    mark "bad$n"
    out=$(insmod /oprofile_rs.ko $p 2>&1) && fail "insmod $p succeeded"
    case $out in *"Invalid argument"*) pass "insmod $p: EINVAL" ;; *) fail "insmod $p: $out" ;; esac
    check "log names ${p%%=*}" dmesg_has "bad$n" "${p%%=*}"
    n=$((n + 1))
done
# A PMU event on a machine without a PMU fails the load with perf's error
# and a line naming the event; the default falls back to cpu-clock. (The
# rig's VM, QEMU TCG's `-cpu max`, has no PMU, on every kernel: a PMU there
# is a failure, not a reason to leave this out.)
check "the default event loads" insmod /oprofile_rs.ko
default_event=$(cat $DBG/event)
check "rmmod" rmmod oprofile_rs
if expect_eq "no PMU in the VM: the default event is cpu-clock" "$default_event" cpu-clock; then
    mark "bad$n"
    out=$(insmod /oprofile_rs.ko event=instructions 2>&1) && fail "insmod event=instructions succeeded without a PMU"
    echo "insmod event=instructions: $out"
    case $out in *"not supported"*) pass "insmod event=instructions: EOPNOTSUPP" ;;
        *) fail "insmod event=instructions: expected EOPNOTSUPP, got: $out" ;; esac
    check "log says instructions cannot be sampled" dmesg_has "bad$n" 'cannot sample instructions'
    [ -e $DEV ] && fail "$DEV exists after failed insmod event=instructions"
fi
# Buffers past a quarter of RAM fail the load with ENOMEM and a log line
# naming the sizes (buffer_memory.rs): 64 MiB CPU buffers and a 256 MiB
# event buffer are more than a quarter of the VM's 1 GiB on 2 CPUs or more
# (the lockdep and stock VMs have 2, the normal ones 4); 32 MiB CPU buffers
# and the default event buffer load on up to 4. At run time a change past the
# cap (a 256 MiB event buffer beside them) is refused (ENOMEM) and changes
# nothing.
mark "bad$n"
big="cpu_buffer_size=67108864 buffer_size=268435456"
out=$(insmod /oprofile_rs.ko $big 2>&1) && { fail "insmod $big succeeded"; rmmod oprofile_rs; }
echo "insmod $big: $out"
case $out in *"Cannot allocate memory"*|*"Out of memory"*) pass "insmod $big: ENOMEM" ;;
    *) fail "insmod $big: expected ENOMEM, got: $out" ;; esac
check "log says the buffers exceed the cap" dmesg_has "bad$n" 'exceed the cap of'
check "cpu_buffer_size=33554432 (within the cap) loads" insmod /oprofile_rs.ko cpu_buffer_size=33554432
mark "cap-runtime"
echo 0 >$DBG/tracing_on
out=$(sh -c "echo 268435456 > $DBG/buffer_size" 2>&1) && fail "writing buffer_size=268435456 succeeded"
echo "write buffer_size=268435456: $out"
case $out in *"Cannot allocate memory"*|*"Out of memory"*) pass "run time: buffer_size=268435456: ENOMEM" ;;
    *) fail "run time: buffer_size=268435456: expected ENOMEM, got: $out" ;; esac
expect_eq "the refused change changed nothing" "$(cat $DBG/cpu_buffer_size) $(cat $DBG/buffer_size)" "33554432 1048576"
check "its log line" dmesg_has cap-runtime 'exceed the cap of'
check "rmmod" rmmod oprofile_rs
n=$((n + 1))
check "event=cpu-clock sample_freq=2000 exclude_kernel=1 loads" insmod /oprofile_rs.ko event=cpu-clock sample_freq=2000 exclude_kernel=1
expect_eq "debugfs event_info shows them" "$(cat $DBG/event_info)" "cpu-clock period=0 freq=2000 context=hardirq exclude_user=0 exclude_kernel=1"
check "rmmod" rmmod oprofile_rs
check "good parameters load" insmod /oprofile_rs.ko cpu_buffer_size=4096 buffer_size=65536 sample_period=10000 backtrace_depth=64 user_backtrace_depth=64
expect_eq "debugfs config shows the user depth" "$(sed -n 's/^user_backtrace_depth=\([0-9]*\)$/\1/p' $DBG/config)" 64
check "rmmod" rmmod oprofile_rs
check "a list of events with one value each loads" insmod /oprofile_rs.ko event=page-faults,cpu-clock sample_period=0,200000 sample_freq=50,0
expect_eq "debugfs event_info shows each" "$(cut -d' ' -f1-4 $DBG/event_info | tr '\n' ';')" \
    "page-faults period=0 freq=50 context=task;cpu-clock period=200000 freq=0 context=hardirq;"
check "rmmod" rmmod oprofile_rs
finish
