#!/bin/sh
# kernels: normal debug
# `oprofile-rs annotate SYMBOL --modules` on a module that ran, loaded while
# recording: `record -- insmod oprofile_rs_bench.ko secs=3` (its kthreads
# write and read a ring buffer for 3 s during its init). The module is not
# in the kallsyms captured at the start: record captures kallsyms again at
# the end when the modules changed, and the report names the module's
# functions. The hottest one (with a one-word name) is annotated from the
# module's object file: every sample the report gives it lands on an
# instruction start of its code (an interrupted pc always does: so the
# code and the addresses match), and the disassembly starts where kallsyms
# puts the function. Without --modules the tool looks in the kernel's
# /lib/modules/RELEASE, and says which option it needs when the module is
# not there. (The stock kernel's guest has no benchmark module; the host
# tests cover .ko.xz files, relocations and another build of a module.)
. /tmp/lib.sh
check "insmod" insmod /oprofile_rs.ko sample_period=250000
# -a: the module's code runs in its own kernel thread, not in insmod's process
# (record -- CMD alone would sample insmod only).
oprofile-rs record -q -a -o /tmp/b.bin -- insmod /oprofile_rs_bench.ko secs=3
# (Recorded: 4 kHz sampling on would only slow the reading below, 43 s of
# annotate on the lockdep VM.)
echo 0 >$DBG/tracing_on
check "the side-car has kallsyms from the end (modules changed)" [ -s /tmp/b.bin.meta/kallsyms.end ]
grep -q '^kallsyms-end: captured' /tmp/b.bin.meta/info && pass "info says so" || fail "info: $(cat /tmp/b.bin.meta/info)"
oprofile-rs report -q -i /tmp/b.bin --all --top 60 >/tmp/b.rep
head -25 /tmp/b.rep
# SAMPLES PERCENT SYMBOL [oprofile_rs_bench] PID/COMM: a symbol without spaces.
row=$(grep -v '^#' /tmp/b.rep | awk '$4 == "[oprofile_rs_bench]"' | head -1)
sym=$(echo "$row" | awk '{ print $3 }')
n=$(echo "$row" | awk '{ print $1 }')
check "a function of the module loaded while recording is hot ($sym)" [ -n "$sym" ]
in_range "$sym: more than 10 samples" "${n:-none}" 11 999999999

oprofile-rs annotate -q "$sym" -i /tmp/b.bin --all --modules /oprofile_rs_bench.ko >/tmp/b.ann 2>/tmp/b.err; rc=$?
cat /tmp/b.err
# (kallsyms has the mangled name: its last segment ends it.)
seg=${sym##*::}
want=$(awk -v s="$seg" '$3 ~ (s "$") && ($2 == "t" || $2 == "T") && $4 == "[oprofile_rs_bench]" { print $1; exit }' \
    /tmp/b.bin.meta/kallsyms.end | sed 's/^0*//')
check_annotation /tmp/b.ann "$rc" "$sym" /oprofile_rs_bench.ko "$n" "$want"
check "a relocation named in the code" grep -q '  ; ' /tmp/b.ann

oprofile-rs annotate -q "$sym" -i /tmp/b.bin --all >/dev/null 2>/tmp/b.err; rc=$?
check "without --modules, not in /lib/modules/$(uname -r): refused (status $rc)" [ "$rc" -ne 0 ]
grep -q -- "--modules PATH" /tmp/b.err && pass "and the error names --modules" || fail "error: $(cat /tmp/b.err)"
oprofile-rs annotate -q "$sym" -i /tmp/b.bin --all --modules /oprofile_rs.ko >/dev/null 2>/tmp/b.err; rc=$?
check "another module's file: refused (status $rc)" [ "$rc" -ne 0 ]
cat /tmp/b.err
check "rmmod oprofile_rs_bench" rmmod oprofile_rs_bench
check "rmmod" rmmod oprofile_rs
finish
