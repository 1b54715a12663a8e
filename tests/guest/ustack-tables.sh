#!/bin/sh
# vm-run: --timeout 900
# In-kernel unwinding with unwind tables (record's default, --call-graph
# cfi): record builds tables from the binaries' .eh_frame and loads them
# (OPROFILE_RS_IOC_UNWIND_TABLE/_MAP) for the processes it records; the
# module walks their user stacks with them.
# - programs without frame pointers (ustack_nofp: main → outer → hot_a /
#   hot_b, 3:1) get whole stacks in the 3:1 split, by default, where -g
#   gets short ones; with frame pointers (ustack) too;
# - a leaf without a frame (leafcall: called from outer_x and outer_y 3:1)
#   keeps its caller, in the split;
# - a false frame record (fakefp) never names decoy;
# - garbage stacks (badfp) neither crash nor hang the walk;
# - code in no file (jitloop, a JIT's) asks record for tables at a slowing
#   pace, not at each sample;
# - the vDSO is unwound too (fakefp's clock_gettime);
# - no rule for an address (unwindctl cut) cuts every stack, marked
#   [truncated], and report says why;
# - the ioctls refuse garbage with documented errors (unwindctl hostile):
#   bad tables EINVAL, a process that is not there ESRCH, a mapping it does
#   not have ENOENT, another file's table EINVAL, an unprivileged holder of
#   the fd EPERM; tables go with their file (kmemleak clean).
. /tmp/lib.sh

check "insmod" insmod /oprofile_rs.ko event=cpu-clock sample_period=1000000 \
    cpu_buffer_size=1048576 buffer_size=8388608

whole() { # FOLDED PROG CALLERS...: "A B ALL"
    f=$1; p=$2
    a=$(folded_count ";main;$3;$4( |;)" "$f")
    b=$(folded_count ";main;$5;$6( |;)" "$f")
    all=$(folded_count "^$p;" "$f")
    echo "$a $b $all"
}

# --- without frame pointers: the default against -g
oprofile-rs record -q -o /tmp/t.bin -- /tmp/ustack_nofp 2
oprofile-rs folded -i /tmp/t.bin >/tmp/t.folded 2>/dev/null
sort -k2 -n -r -t' ' /tmp/t.folded | head -5
grep -h '^unwind-tables' /tmp/t.bin.meta/* | tee /tmp/t.ut
check "record loaded tables (its side-car says so)" grep -q '^unwind-tables: 1 processes, [1-9][0-9]* mappings, [1-9][0-9]* tables' /tmp/t.ut
set -- $(whole /tmp/t.folded ustack_nofp outer hot_a outer hot_b)
echo "default, ustack_nofp: main;outer;hot_a $1, main;outer;hot_b $2, of $3 samples"
check "default, without frame pointers: whole stacks ($(( $1 + $2 )) of $3)" [ "$(pct $(( $1 + $2 )) "$3")" -ge 80 ]
in_range "default, without frame pointers: hot_a:hot_b about 3:1 (hot_a's share in %)" "$(pct "$1" $(( $1 + $2 )))" 65 85
check "the stacks reach _start" grep -q '^ustack_nofp;_start;' /tmp/t.folded
expect_eq "no sample carries a stack copy" "$(oprofile-rs report -q -i /tmp/t.bin --top 1 2>/dev/null | grep -c 'samples with a user stack copy')" 0
oprofile-rs record -q -g -o /tmp/g.bin -- /tmp/ustack_nofp 1
oprofile-rs folded -i /tmp/g.bin >/tmp/g.folded 2>/dev/null
set -- $(whole /tmp/g.folded ustack_nofp outer hot_a outer hot_b)
check "-g, without frame pointers: short stacks ($(( $1 + $2 )) of $3 whole)" [ "$(pct $(( $1 + $2 )) "$3")" -le 5 ]

# --- with frame pointers
oprofile-rs record -q -o /tmp/t.bin -- /tmp/ustack 2
oprofile-rs folded -i /tmp/t.bin >/tmp/t.folded 2>/dev/null
sort -k2 -n -r -t' ' /tmp/t.folded | head -6
grep -h '^command-start\|^unwind-tables' /tmp/t.bin.meta/info
set -- $(whole /tmp/t.folded ustack outer hot_a outer hot_b)
check "default, with frame pointers: whole stacks ($(( $1 + $2 )) of $3)" [ "$(pct $(( $1 + $2 )) "$3")" -ge 80 ]
in_range "default, with frame pointers: hot_a:hot_b about 3:1" "$(pct "$1" $(( $1 + $2 )))" 65 85

# --- a leaf without a frame keeps its caller
oprofile-rs record -q -o /tmp/l.bin -- /tmp/leafcall 3
oprofile-rs folded -i /tmp/l.bin >/tmp/l.folded 2>/dev/null
sort -k2 -n -r -t' ' /tmp/l.folded | head -4
x=$(folded_count ';main;outer_x;leaf( |;)' /tmp/l.folded)
y=$(folded_count ';main;outer_y;leaf( |;)' /tmp/l.folded)
all=$(folded_count 'leaf( |;)' /tmp/l.folded)
check "default, leaf: its samples name their caller ($((x + y)) of $all)" [ "$(pct $((x + y)) "$all")" -ge 80 ]
in_range "default, leaf: outer_x:outer_y about 3:1 (outer_x's share in %)" "$(pct "$x" $((x + y)))" 65 85

# --- a false frame record: never decoy
oprofile-rs record -q -o /tmp/f.bin -- /tmp/fakefp 1
oprofile-rs folded -i /tmp/f.bin >/tmp/f.folded 2>/dev/null
# Stopped at its exec while record loaded its tables: its first samples
# are walked with them (before, a window after the exec fell back to frame
# pointers, and named decoy on the slow debug kernel).
check "fakefp: stopped at its exec while its tables loaded" grep -q '^command-start: stopped' /tmp/f.bin.meta/info
runs=$(folded_count ';run( |;)' /tmp/f.folded)
check "fakefp: samples in run ($runs)" [ "$runs" -gt 20 ]
grep decoy /tmp/f.folded
expect_eq "fakefp: no stack names decoy" "$(grep -c decoy /tmp/f.folded)" 0

# --- garbage stacks
for mode in loop2 kernel unmapped notpresent misaligned deep sp-kernel sp-unmapped sp-notpresent sp-top sp-misaligned; do
    oprofile-rs record -q -o /tmp/h.bin -- /tmp/badfp $mode 1 >/dev/null 2>&1
    check "badfp $mode: the tool reads it" sh -c 'oprofile-rs folded -i /tmp/h.bin >/tmp/h.folded'
    check "badfp $mode: samples in spin" grep -q 'spin' /tmp/h.folded
done

# --- code in no file (a JIT's): the module asks record for its tables
# (debugfs table_wakes) at once, then 100 ms later, 200 ms... (at most
# 1.6 s apart), and at once after each change of the tables: a few times
# per CPU in 2 s, not at each sync (40) or sample (2000)
wakes0=$(stat_total table_wakes)
oprofile-rs record -q -o /tmp/j.bin -- /tmp/jitloop 2
wakes=$(($(stat_total table_wakes) - wakes0))
oprofile-rs folded -i /tmp/j.bin >/tmp/j.folded 2>/dev/null
head -3 /tmp/j.folded
n=$(folded_count '^jitloop;' /tmp/j.folded)
check "jitloop: samples ($n)" [ "$n" -gt 500 ]
check "jitloop: tables asked for a few times, not at each sample ($wakes table_wakes, $n samples)" [ "$wakes" -le 20 ]

# --- no rule: every stack cut and marked
# (-g: record loads no tables of its own, which would replace the program's.)
oprofile-rs record -q -a -g -o /tmp/c.bin -- /tmp/unwindctl cut 1
oprofile-rs folded -i /tmp/c.bin --comm unwindctl >/tmp/c.folded 2>/dev/null
head -3 /tmp/c.folded
spin=$(folded_count ';spin( |;)' /tmp/c.folded)
cut=$(folded_count '^unwindctl;.truncated.;spin( |;)' /tmp/c.folded)
check "cut: samples in spin ($spin)" [ "$spin" -gt 20 ]
check "cut: they end in [truncated] ($cut of $spin)" [ "$(pct "$cut" "$spin")" -ge 90 ]
oprofile-rs report -q -i /tmp/c.bin --comm unwindctl --top 3 2>&1 | grep -i 'call stacks cut' | tee /tmp/c.note
check "report says why" grep -q "unwind tables found no rule" /tmp/c.note

# --- hostile requests
/tmp/unwindctl hostile >/tmp/u.out
cat /tmp/u.out
r() { sed -n "s/^$1 //p" /tmp/u.out; }
for t in table-len-0 table-len-head-only table-len-huge table-len-short table-magic table-unsorted \
        table-rule table-no-end map-no-table map-table-0 map-other-files-table map-after-reset; do
    expect_eq "$t: EINVAL" "$(r $t)" "err EINVAL"
done
expect_eq "table-null: EFAULT" "$(r table-null)" "err EFAULT"
expect_eq "map-null: EFAULT" "$(r map-null)" "err EFAULT"
expect_eq "table-good" "$(r table-good)" ok
for t in map-pid-0 map-pid-none map-pid-kthread map-kernel map-empty; do
    expect_eq "$t: ESRCH" "$(r $t)" "err ESRCH"
done
expect_eq "map-inode: ENOENT" "$(r map-inode)" "err ENOENT"
expect_eq "map-range: ENOENT" "$(r map-range)" "err ENOENT"
expect_eq "map-good" "$(r map-good)" ok
expect_eq "map-again (replaces)" "$(r map-again)" ok
expect_eq "a table of the most rows (32 MiB)" "$(r table-max-rows)" ok
expect_eq "a second one: over the 64 MiB cap, ENOSPC" "$(r table-over-the-cap)" "err ENOSPC"
expect_eq "reset" "$(r reset)" ok
expect_eq "after the reset the cap has room again" "$(r table-max-rows-after-reset)" ok
expect_eq "reset-again" "$(r reset-again)" ok
expect_eq "map-unprivileged: EPERM" "$(r map-unprivileged)" "err EPERM"
expect_eq "table-unprivileged (its own file's memory)" "$(r table-unprivileged)" ok
check "rmmod" rmmod oprofile_rs
check_kmemleak "after the unwind tables"
finish
