#!/bin/sh
# User stacks through a shared library, with `oprofile-rs record`'s default
# unwind tables (ustack-tables.sh has static programs): libhot.so
# (tests/guest/lib/libhot.c, /tmp/libhot.so), -O2 -fPIC without frame
# pointers, called from programs without frame pointers 3:1 from two
# callers: main;outer_x;lib_outer;hot_a and main;outer_y;lib_outer;hot_b.
# The guest carries the host's loader and libc for them (scripts/vm-run).
# - linked at build time (shlib): the library, mapped by the loader after
#   the exec, has its table loaded with the program's or from the kernel's
#   map records: whole stacks, the library's frames named, 3:1;
# - dlopen()ed 300 ms after the start (shlib_dlopen): the same, but for
#   the moments before record loads the new library's table, which the
#   module asks for (table_wakes);
# - system-wide with the program running before: the tables of the
#   binaries processes map, and the running processes' mappings, are
#   loaded before the recording (prefetch): whole stacks from the start;
# - -g (frame pointers alone) for comparison: short stacks, printed.
. /tmp/lib.sh

check "the library is there" [ -f /tmp/libhot.so ]
check "a dynamically linked program runs (the host's loader and libc)" /tmp/shlib 0.1
check "insmod" insmod /oprofile_rs.ko event=cpu-clock sample_period=1000000 \
    cpu_buffer_size=1048576 buffer_size=8388608

# shlib_stacks NAME FOLDED: sets x, y (the samples with the whole stack
# main;outer_x;lib_outer;hot_a and main;outer_y;lib_outer;hot_b), all (the
# program's samples), hot (those in hot_a or hot_b, named) and unknown
# (those with an [unknown] frame).
shlib_stacks() {
    x=$(folded_count ";main;outer_x;lib_outer;hot_a( |;)" "$2")
    y=$(folded_count ";main;outer_y;lib_outer;hot_b( |;)" "$2")
    all=$(folded_count "^$1;" "$2")
    hot=$(folded_count "^$1;.*;hot_[ab] [0-9]+\$" "$2")
    unknown=$(folded_count "^$1;.*unknown" "$2")
    echo "$1: main;outer_x;lib_outer;hot_a $x, main;outer_y;lib_outer;hot_b $y, in hot_a/hot_b $hot, with [unknown] $unknown, of $all samples"
}
# show FOLDED: its five heaviest stacks.
show() { sort -k2 -n -r -t' ' "$1" | head -5; }

# --- linked at build time
oprofile-rs record -q -o /tmp/s.bin -- /tmp/shlib 3
oprofile-rs folded -i /tmp/s.bin >/tmp/s.folded 2>/dev/null
show /tmp/s.folded
grep -h '^unwind-tables' /tmp/s.bin.meta/* | tee /tmp/s.ut
check "shlib: record loaded tables" grep -q '^unwind-tables: 1 processes, [1-9][0-9]* mappings, [1-9][0-9]* tables' /tmp/s.ut
shlib_stacks shlib /tmp/s.folded
check "shlib: samples ($all)" [ "$all" -gt 200 ]
check "shlib, default: whole stacks through the library ($((x + y)) of $all)" [ "$(pct $((x + y)) "$all")" -ge 80 ]
in_range "shlib, default: outer_x:outer_y about 3:1 (outer_x's share in %)" "$(pct "$x" $((x + y)))" 65 85
check "shlib: the library's frames named (hot_a/hot_b in $hot of $all)" [ "$(pct "$hot" "$all")" -ge 80 ]
check "shlib: no [unknown] frame in most ($unknown of $all)" [ "$(pct "$unknown" "$all")" -le 5 ]
check "shlib: the stacks reach _start" grep -q '^shlib;_start;' /tmp/s.folded

# --- dlopen()ed after the start
wakes0=$(stat_total table_wakes)
oprofile-rs record -q -o /tmp/d.bin -- /tmp/shlib_dlopen 3
wakes=$(($(stat_total table_wakes) - wakes0))
oprofile-rs folded -i /tmp/d.bin >/tmp/d.folded 2>/dev/null
show /tmp/d.folded
grep -h '^unwind-tables' /tmp/d.bin.meta/* | tee /tmp/d.ut
shlib_stacks shlib_dlopen /tmp/d.folded
check "shlib_dlopen: samples ($all)" [ "$all" -gt 200 ]
# The module wakes record when samples find the library's table missing
# (debugfs table_wakes): the table is in within a sync period of the
# dlopen. Without, record's 1 s nap left a quarter of the samples cut.
check "shlib_dlopen: the module asked for the library's table ($wakes table_wakes)" [ "$wakes" -ge 1 ]
check "shlib_dlopen, default: whole stacks through the library ($((x + y)) of $all)" [ "$(pct $((x + y)) "$all")" -ge 85 ]
in_range "shlib_dlopen, default: outer_x:outer_y about 3:1 (outer_x's share in %)" "$(pct "$x" $((x + y)))" 65 85
check "shlib_dlopen: the library's frames named (hot_a/hot_b in $hot of $all)" [ "$(pct "$hot" "$all")" -ge 80 ]

# --- system-wide, the program running before the recording: record loads
# the tables of the binaries the processes map (the program, the library,
# the C library, the loader, the vDSO) and the mappings of those running
# (shlib) before it opens the stream: their loads do not fall in the
# recording, and shlib is unwound from its first sample, however late
# record gets to read it (with the tables alone, a guest on a loaded host
# walked a second of it by frame pointers: 1,011 of 1,719 samples cut)
# (Long enough to outlive a slow start: it is killed after the recording.)
/tmp/shlib 60 >/dev/null & sp=$!
sleep 0.5
oprofile-rs record -q -o /tmp/w.bin --duration 2
kill $sp 2>/dev/null; wait $sp 2>/dev/null
grep -h '^unwind-tables' /tmp/w.bin.meta/* | tee /tmp/w.ut
pre=$(sed -n 's/.*before the recording: \([0-9]*\) tables of the binaries processes mapped, \([0-9]*\) running processes.*/\1 \2/p' /tmp/w.ut)
check "system-wide: tables loaded before the recording (tables, processes: ${pre:-none})" \
    [ "${pre%% *}" -ge 4 -a "${pre##* }" -ge 1 ]
oprofile-rs folded -i /tmp/w.bin --comm shlib >/tmp/w.folded 2>/dev/null
show /tmp/w.folded
shlib_stacks shlib /tmp/w.folded
check "system-wide, shlib running before: whole stacks through the library ($((x + y)) of $all)" \
    [ "$all" -gt 200 -a "$(pct $((x + y)) "$all")" -ge 90 ]

# --- system-wide, the program started after the recording, nothing running
# before: record has loaded tables (the binaries processes map) but mapped
# no process, and the module asks for the new process's tables at its first
# sample all the same (table_wakes), not a second later when record would
# have read the stream anyway (the first second of the program's samples
# were walked by frame pointers before)
wakes0=$(stat_total table_wakes)
oprofile-rs record -q -o /tmp/i.bin --duration 4 & rp=$!
wait_for reading_device $rp
/tmp/shlib 1.5 >/dev/null
wait $rp
wakes=$(($(stat_total table_wakes) - wakes0))
grep -h '^unwind-tables' /tmp/i.bin.meta/*
oprofile-rs folded -i /tmp/i.bin --comm shlib >/tmp/i.folded 2>/dev/null
show /tmp/i.folded
shlib_stacks shlib /tmp/i.folded
check "system-wide, shlib started after: the module asked for its tables ($wakes table_wakes)" [ "$wakes" -ge 1 ]
check "system-wide, shlib started after: whole stacks through the library ($((x + y)) of $all)" \
    [ "$all" -gt 200 -a "$(pct $((x + y)) "$all")" -ge 85 ]

# --- -g: frame pointers alone, for comparison (printed, not checked)
oprofile-rs record -q -g -o /tmp/g.bin -- /tmp/shlib 1
oprofile-rs folded -i /tmp/g.bin >/tmp/g.folded 2>/dev/null
show /tmp/g.folded
shlib_stacks shlib /tmp/g.folded
echo "-g, for comparison: $((x + y)) of $all whole"

check "rmmod" rmmod oprofile_rs
finish
