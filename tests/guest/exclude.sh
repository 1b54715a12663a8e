#!/bin/sh
# The modes sampled, changed at run time: debugfs exclude_user and
# exclude_kernel (and the SET ioctl's keys of those names) read back as
# 0/1, take 0/1/y/n/Y/N while recording is off (EBUSY while on, EINVAL for
# garbage and for both modes excluded, EACCES for an unprivileged user,
# nothing changed by a refusal), and
# the counters follow: in one stream, a phase in user mode only, one in
# kernel mode only and one in both, each announced by its CONFIG record,
# whose event flags say which modes the samples after it are of (evcheck
# checks every SAMPLE's mode against them). `oprofile-rs record --all-user`
# samples user mode only and puts the module's modes back; --all-user with
# --all-kernel is refused before anything changes.
. /tmp/lib.sh
try() { /tmp/cfgctl write "$DBG/$1" "$2"; }
cfg() { sed -n "s/^$1=//p" $DBG/config; }
modes() { echo "$(cat $DBG/exclude_user) $(cat $DBG/exclude_kernel)"; }
# load: the workload on every CPU (user mode) and reads of /dev/zero (the
# kernel's copy), for SECS s.
load() {
    head -c 400000000 /dev/zero >/dev/null & z=$!
    workload_every_cpu "$1"
    kill $z 2>/dev/null; wait $z 2>/dev/null
}

check "insmod" insmod /oprofile_rs.ko event=cpu-clock sample_period=1000000 \
    cpu_buffer_size=1048576 buffer_size=8388608 user_backtrace_depth=0
expect_eq "both modes sampled at load" "$(modes)" "0 0"
expect_eq "config lists them" "$(cfg exclude_user) $(cfg exclude_kernel)" "0 0"
expect_eq "exclude_kernel: EBUSY while recording" "$(try exclude_kernel 1)" "err EBUSY"
expect_eq "ioctl: EBUSY while recording" "$(/tmp/cfgctl set exclude_user=1)" "err EBUSY"
echo 0 >$DBG/tracing_on

snap=$(cat $DBG/config)
for f in exclude_user exclude_kernel; do
    for bad in 2 yes true -1 01 on "1 1" " " x; do
        expect_eq "$f='$bad': EINVAL" "$(try $f "$bad")" "err EINVAL"
    done
done
expect_eq "ioctl: both excluded: EINVAL" "$(/tmp/cfgctl set "exclude_user=1 exclude_kernel=1")" "err EINVAL"
for f in exclude_user exclude_kernel; do
    expect_eq "nobody cannot write $f" "$(/tmp/probe -u 65534 write $DBG/$f 1)" "err EACCES"
done
expect_eq "nothing changed by refused writes" "$(cat $DBG/config)" "$snap"
expect_eq "exclude_kernel=Y" "$(try exclude_kernel Y)" ok
expect_eq "reads back as 1: user mode only" "$(modes)" "0 1"
expect_eq "exclude_user=1 as well: EINVAL" "$(try exclude_user 1)" "err EINVAL"
expect_eq "still user mode only" "$(modes)" "0 1"

# --- three phases in one stream
cat $DEV >/tmp/x.bin & catpid=$!
echo 1 >$DBG/tracing_on; load 1; echo 0 >$DBG/tracing_on
expect_eq "swap in one change (ioctl): kernel mode only" \
    "$(/tmp/cfgctl set "exclude_user=1 exclude_kernel=0")" ok
expect_eq "reads back" "$(modes)" "1 0"
echo 1 >$DBG/tracing_on; load 1; echo 0 >$DBG/tracing_on
echo n >$DBG/exclude_user
expect_eq "exclude_user=n: both modes" "$(modes)" "0 0"
echo 1 >$DBG/tracing_on; load 1; echo 0 >$DBG/tracing_on
stop_reader $catpid
expect_eq "no sample lost" "$(stat_total sample_lost_overflow)" 0
/tmp/evcheck stream /tmp/x.bin >/tmp/x.out; rc=$?
cat /tmp/x.out
expect_eq "evcheck: every sample of a mode its CONFIG samples" "$rc" 0
# The last three generations are the phases (the load's comes first).
phases=$(awk '$1 == "config" { print $4 }' /tmp/x.out | tail -3 | tr '\n' ' ')
expect_eq "CONFIG records: user only, kernel only, both" "$phases" \
    "cpu-clock:1000000:u cpu-clock:1000000:k cpu-clock:1000000 "
counts=$(awk '$1 == "samples" { print $7 "/" $8 }' /tmp/x.out | tail -3 | tr '\n' ' ')
echo "kernel/user samples per phase: $counts"
set -- $counts
case "$1" in 0/[1-9]*) pass "user-mode phase: user samples only ($1)" ;; *) fail "user-mode phase: $1" ;; esac
case "$2" in [1-9]*/0) pass "kernel-mode phase: kernel samples only ($2)" ;; *) fail "kernel-mode phase: $2" ;; esac
case "$3" in [1-9]*/[1-9]*) pass "both modes again ($3)" ;; *) fail "both-modes phase: $3" ;; esac
oprofile-rs report -i /tmp/x.bin --top 1 2>/dev/null | grep '^# event:' | tee /tmp/ev.txt
# Each distinct setting once, in stream order (the load's first).
grep -q 'period 1000000, then period 1000000 (user mode only), then period 1000000 (kernel mode only),' /tmp/ev.txt &&
    pass "report names the modes of each phase" || fail "report: $(cat /tmp/ev.txt)"

# --- the tool's --all-user / --all-kernel
echo 1 >$DBG/tracing_on
oprofile-rs record -q --all-user -o /tmp/r.bin -- /tmp/workload 1 >/dev/null 2>/tmp/r.err
cat /tmp/r.err
/tmp/evcheck stream /tmp/r.bin >/tmp/r.out; rc=$?
expect_eq "record --all-user: evcheck" "$rc" 0
grep -q '^config .*cpu-clock:1000000:u ' /tmp/r.out && pass "record --all-user: a user-mode-only CONFIG" ||
    fail "record --all-user: $(grep '^config' /tmp/r.out)"
expect_eq "record put the modes back" "$(modes)" "0 0"
expect_eq "and recording on, as it was" "$(cat $DBG/tracing_on)" 1
snap=$(cat $DBG/config)
oprofile-rs record -q --all-user --all-kernel -o /tmp/n.bin -- true >/dev/null 2>/tmp/n.err; rc=$?
check "--all-user with --all-kernel is refused (status $rc)" [ "$rc" -ne 0 ]
expect_eq "nothing changed" "$(cat $DBG/config)" "$snap"
check "rmmod" rmmod oprofile_rs
finish
