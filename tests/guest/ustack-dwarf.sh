#!/bin/sh
# vm-run: --timeout 900
# DWARF user stacks (debugfs `user_stack_size`, the SET ioctl's key,
# `user_stack_size=` at load, `oprofile-rs record --call-graph dwarf`): every
# sample of a user task carries a copy of the top of its user stack, which
# the tool unwinds with the binaries' .eh_frame.
# - values: 0 (off, the default) or a multiple of 8 up to 8192; EINVAL for
#   anything else and for CPU buffers that cannot hold two of the largest
#   records (with a log line naming the size needed), EBUSY while recording,
#   EACCES for an unprivileged user; nothing changed by a refusal; a load
#   with a bad value fails;
# - the records (tests/guest/evcheck.c): every sample of the program carries
#   the part, whose length, copied count, zeroed tail and registers agree;
# - the point of it: ustack_nofp (main → outer → hot_a / hot_b, 3:1, built
#   without frame pointers) has short frame-pointer stacks, and whole ones,
#   in the 3:1 split, unwound from the copies; garbage frame pointers
#   (badfp) neither crash nor hang the copy or the unwinder;
# - user_stack_fit (record --call-graph hybrid): copies of tens of bytes and
#   whole stacks with frame pointers (ustack), whole copies and stacks
#   without (ustack_nofp), and a frame pointer at a false frame record
#   (fakefp) never makes a stack name the record's return address: the
#   stack names the true caller or ends in [truncated].
. /tmp/lib.sh
try() { /tmp/cfgctl write "$DBG/user_stack_size" "$1"; }
cfg() { sed -n "s/^$1=//p" $DBG/config; }

check "insmod" insmod /oprofile_rs.ko event=cpu-clock sample_period=1000000
expect_eq "off by default" "$(cat $DBG/user_stack_size)" 0
expect_eq "config lists it" "$(cfg user_stack_size)" 0
expect_eq "EBUSY while recording" "$(try 64)" "err EBUSY"
echo 0 >$DBG/tracing_on
# Room for the CONFIG records of the changes below (the load's recording,
# unread, can fill the event buffer on a slow guest: a change is then EBUSY).
drain

# --- hostile values: documented errors, nothing changed
snap=$(cat $DBG/config)
for bad in 7 12 8193 8200 16384 -8 abc "8 8" 0x100 18446744073709551616 " " ""; do
    expect_eq "user_stack_size='$bad': EINVAL" "$(try "$bad")" "err EINVAL"
done
expect_eq "ioctl: given twice: EINVAL" "$(/tmp/cfgctl set "user_stack_size=8 user_stack_size=16")" "err EINVAL"
expect_eq "nobody cannot write it" "$(/tmp/probe -u 65534 write $DBG/user_stack_size 8)" "err EACCES"
expect_eq "nothing changed by refused writes" "$(cat $DBG/config)" "$snap"

# --- CPU buffers too small for the records
expect_eq "cpu_buffer_size=16384" "$(/tmp/cfgctl write $DBG/cpu_buffer_size 16384)" ok
mark us1
expect_eq "8192 bytes need CPU buffers of 32 KiB: EINVAL" "$(try 8192)" "err EINVAL"
dmesg_since us1 | grep -q 'user_stack_size=8192 with cpu_buffer_size=16384: needs cpu_buffer_size of at least 32768' \
    && pass "the log names the size needed" || fail "log: $(dmesg_since us1 | tail -2)"
expect_eq "4096 bytes fit them" "$(try 4096)" ok
expect_eq "ioctl: both at once" "$(/tmp/cfgctl set "cpu_buffer_size=32768 user_stack_size=8192")" ok
expect_eq "the CPU buffers cannot shrink below" "$(/tmp/cfgctl write $DBG/cpu_buffer_size 16384)" "err EINVAL"
expect_eq "8 bytes" "$(try '8\n')" ok
expect_eq "reads back" "$(cat $DBG/user_stack_size)" 8
expect_eq "off again" "$(try 0)" ok
check "rmmod" rmmod oprofile_rs
for bad in 4 9000 "8192 cpu_buffer_size=16384"; do
    out=$(insmod /oprofile_rs.ko user_stack_size=$bad 2>&1) && { fail "insmod user_stack_size=$bad succeeded"; rmmod oprofile_rs; }
    case $out in *"Invalid argument"*) pass "insmod user_stack_size=$bad: EINVAL" ;;
        *) fail "insmod user_stack_size=$bad: $out" ;; esac
done
[ -e $DEV ] && fail "$DEV exists after a failed load"

# --- the records: a stream of ustack_nofp with 4 KiB copies
check "insmod user_stack_size=4096" insmod /oprofile_rs.ko event=cpu-clock sample_period=1000000 \
    cpu_buffer_size=1048576 buffer_size=8388608 user_stack_size=4096
expect_eq "the load's value" "$(cat $DBG/user_stack_size)" 4096
echo 0 >$DBG/tracing_on
cat $DEV >/tmp/s.bin & catpid=$!
wait_for reading_device $catpid
echo 1 >$DBG/tracing_on
/tmp/ustack_nofp 2 & pid=$!
wait $pid
echo 0 >$DBG/tracing_on
stop_reader $catpid
cp $DBG/stats /tmp/s.stats
/tmp/evcheck stream /tmp/s.bin $pid 4096 >/tmp/ev.out; rc=$?
grep FAIL /tmp/ev.out | head -5
expect_eq "evcheck: the user stack parts are well formed" "$rc" 0
set -- $(sed -n 's/^ustack //p' /tmp/ev.out)
echo "ustack: $1 samples with a copy; the program's: $3 of $2; $4 bytes copied; largest area $5"
check "the program was sampled ($2)" [ "${2:-0}" -ge 50 ]
# (A kernel-mode sample after the task's exit_mm() has no user stack left.)
expect_eq "every user-mode sample of the program has its copy" "${6:-none}" 0
check "nearly every sample of the program has its copy ($3 of $2)" [ "$(pct "${3:-0}" "${2:-0}")" -ge 98 ]
in_range "copies of up to 4096 bytes (the largest)" "${5:-none}" 1 4096
# The copy ends at the top of the stack's mapping: from main's frames that is
# the environment, the arguments and a random gap (ASLR), 1 to 4 KiB from run
# to run; the frames up to main take a few hundred bytes.
check "the copies reach above main (average $(( ${4:-0} / (${1:-0} + 1) )) bytes)" [ $(( ${4:-0} / (${1:-0} + 1) )) -ge 256 ]
check_stream "with stacks" /tmp/s.bin /tmp/s.stats
check "rmmod" rmmod oprofile_rs

# --- the tool: frame pointers against DWARF on a program without them
check "insmod" insmod /oprofile_rs.ko event=cpu-clock sample_period=1000000 \
    cpu_buffer_size=1048576 buffer_size=8388608
oprofile-rs record -q -g -o /tmp/n.bin -- /tmp/ustack_nofp 2
oprofile-rs folded -i /tmp/n.bin >/tmp/n.folded 2>/dev/null
whole=$(folded_count ';main;outer;hot_[ab]( |;)' /tmp/n.folded)
all=$(folded_count . /tmp/n.folded)
check "frame pointers alone (-g): the stacks are short ($whole of $all whole)" [ "$(pct "$whole" "$all")" -le 5 ]
oprofile-rs record -q --call-graph dwarf -o /tmp/d.bin -- /tmp/ustack_nofp 3
expect_eq "record put user_stack_size back" "$(cat $DBG/user_stack_size)" 0
oprofile-rs folded -i /tmp/d.bin >/tmp/d.folded 2>/dev/null
sort -k2 -n -r -t' ' /tmp/d.folded | head -6
a=$(folded_count ';main;outer;hot_a( |;)' /tmp/d.folded)
b=$(folded_count ';main;outer;hot_b( |;)' /tmp/d.folded)
all=$(folded_count . /tmp/d.folded)
echo "dwarf: main;outer;hot_a $a, main;outer;hot_b $b, of $all samples"
check "dwarf: most samples have the whole stack ($((a + b)) of $all)" [ "$(pct $((a + b)) "$all")" -ge 80 ]
share=$(pct "$a" $((a + b)))
in_range "dwarf: hot_a:hot_b is about 3:1 (hot_a's share in %)" "$share" 65 85
oprofile-rs report -q -i /tmp/d.bin --children --top 4 2>/dev/null | tee /tmp/d.report
main_share=$(awk '$NF ~ /ustack_nofp/ && $4 == "main" { print int($1) }' /tmp/d.report)
check "dwarf: report --children: main is in most stacks (${main_share:-none}%)" [ "${main_share:-0}" -ge 80 ]
oprofile-rs record -q --call-graph dwarf,512 -o /tmp/d512.bin -- /tmp/ustack_nofp 1
/tmp/evcheck stream /tmp/d512.bin 0 512 >/tmp/ev.out
expect_eq "dwarf,512: copies of at most 512 bytes" "$(grep -c FAIL /tmp/ev.out)" 0
set -- $(sed -n 's/^ustack //p' /tmp/ev.out)
check "dwarf,512: with copies ($1)" [ "${1:-0}" -gt 0 ]
in_range "dwarf,512: copies of up to 512 bytes (the largest)" "${5:-none}" 1 512

# --- copies that fit the frame-pointer chain (user_stack_fit, record
# --call-graph hybrid): where rbp holds a plausible frame record the copy
# stops after it, the chain goes on from there; otherwise the whole copy
expect_eq "user_stack_fit: off by default" "$(cat $DBG/user_stack_fit)" 0
expect_eq "config lists user_stack_fit" "$(cfg user_stack_fit)" 0
echo 0 >$DBG/tracing_on
for bad in 2 -1 yes ""; do
    expect_eq "user_stack_fit='$bad': EINVAL" "$(/tmp/cfgctl write $DBG/user_stack_fit "$bad")" "err EINVAL"
done
expect_eq "user_stack_fit=1" "$(/tmp/cfgctl write $DBG/user_stack_fit 1)" ok
expect_eq "reads back" "$(cfg user_stack_fit)" 1
expect_eq "user_stack_fit=0" "$(/tmp/cfgctl write $DBG/user_stack_fit 0)" ok
echo 1 >$DBG/tracing_on
# With frame pointers (ustack): copies of the leaf's frame and its record,
# the stacks whole and in the 3:1 split.
oprofile-rs record -q --call-graph hybrid -o /tmp/y.bin -- /tmp/ustack 2
expect_eq "record put user_stack_fit back" "$(cat $DBG/user_stack_fit)" 0
/tmp/evcheck stream /tmp/y.bin 0 1024 >/tmp/ev.out
expect_eq "hybrid: the records are well formed" "$(grep -c FAIL /tmp/ev.out)" 0
set -- $(sed -n 's/^ustack //p' /tmp/ev.out)
avg=$(( ${4:-0} / (${1:-0} + 1) ))
echo "hybrid, ustack: $1 samples with a copy, $4 bytes copied (average $avg), largest area $5"
check "hybrid, ustack: samples with a copy ($1)" [ "${1:-0}" -gt 50 ]
in_range "hybrid, with frame pointers: copies of tens of bytes (average)" "$avg" 16 128
oprofile-rs folded -i /tmp/y.bin >/tmp/y.folded 2>/dev/null
a=$(folded_count ';main;outer;hot_a( |;)' /tmp/y.folded)
b=$(folded_count ';main;outer;hot_b( |;)' /tmp/y.folded)
all=$(folded_count '^ustack;' /tmp/y.folded)
echo "hybrid, ustack: main;outer;hot_a $a, main;outer;hot_b $b, of $all samples"
check "hybrid, with frame pointers: whole stacks ($((a + b)) of $all)" [ "$(pct $((a + b)) "$all")" -ge 80 ]
in_range "hybrid, with frame pointers: hot_a:hot_b about 3:1 (hot_a's share in %)" "$(pct "$a" $((a + b)))" 65 85
# Without them (ustack_nofp: rbp holds no stack address): whole copies.
oprofile-rs record -q --call-graph hybrid -o /tmp/y.bin -- /tmp/ustack_nofp 2
oprofile-rs folded -i /tmp/y.bin >/tmp/y.folded 2>/dev/null
a=$(folded_count ';main;outer;hot_a( |;)' /tmp/y.folded)
b=$(folded_count ';main;outer;hot_b( |;)' /tmp/y.folded)
all=$(folded_count '^ustack_nofp;' /tmp/y.folded)
check "hybrid, without frame pointers: whole stacks ($((a + b)) of $all)" [ "$(pct $((a + b)) "$all")" -ge 80 ]
# rbp at a false record (fakefp): the chain names decoy() as run()'s
# caller; the copies stop after the false record (hybrid) or end in run()'s
# frame (dwarf,64), and the stacks name main() or are cut, never decoy().
oprofile-rs record -q -g -o /tmp/y.bin -- /tmp/fakefp 1
oprofile-rs folded -i /tmp/y.bin >/tmp/y.folded 2>/dev/null
check "fakefp: the chain names decoy as run's caller (the trap is set)" grep -q ';decoy;run ' /tmp/y.folded
for cg in hybrid dwarf,64; do
    oprofile-rs record -q --call-graph $cg -o /tmp/y.bin -- /tmp/fakefp 1
    oprofile-rs folded -i /tmp/y.bin >/tmp/y.folded 2>/dev/null
    sort -k2 -n -r -t' ' /tmp/y.folded | head -3
    runs=$(folded_count ';run( |;)' /tmp/y.folded)
    good=$(folded_count '(;main|^fakefp;.truncated.);run( |;)' /tmp/y.folded)
    check "fakefp, $cg: samples in run ($runs)" [ "$runs" -gt 20 ]
    expect_eq "fakefp, $cg: no stack names decoy" "$(grep -c decoy /tmp/y.folded)" 0
    expect_eq "fakefp, $cg: run's caller is main or the stack is cut" "$good" "$runs"
done

# --- hostile stacks: garbage frame pointers and stack pointers
for mode in loop2 kernel unmapped notpresent misaligned deep \
        sp-kernel sp-unmapped sp-notpresent sp-top sp-misaligned; do
    out=$(oprofile-rs record -q --call-graph dwarf -o /tmp/h.bin -- /tmp/badfp $mode 1 2>&1)
    echo "$out" | grep '^badfp'
    /tmp/evcheck stream /tmp/h.bin 0 8192 >/tmp/ev.out
    expect_eq "badfp $mode: the records are well formed" "$(grep -c FAIL /tmp/ev.out)" 0
    check "badfp $mode: the tool reads them" sh -c 'oprofile-rs folded -i /tmp/h.bin >/tmp/h.folded'
    check "badfp $mode: samples in spin" grep -q 'spin' /tmp/h.folded
done
grep '^cpu' $DBG/stats
check "rmmod" rmmod oprofile_rs
check_kmemleak "after the stack copies"
finish
