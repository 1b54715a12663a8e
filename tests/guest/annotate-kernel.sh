#!/bin/sh
# kernels: normal debug
# vm-run: --add-vmlinux
# `oprofile-rs annotate SYMBOL --vmlinux` on the kernel that ran: a
# recording of a kernel-heavy load (reads of /dev/zero: the kernel clears
# the reader's buffer), its hottest kernel function annotated from the
# booted kernel's image (/tmp/vmlinux). Every sample the report gives the
# function lands on an instruction start of its code (an interrupted pc
# always does: so the code and the addresses match), and the disassembly
# starts where kallsyms puts the function. Without --vmlinux the tool says
# which option it needs. (The stock kernel's build tree has no vmlinux with
# symbols; the host tests cover a kernel moved by KASLR.)
. /tmp/lib.sh
check "insmod" insmod /oprofile_rs.ko sample_period=250000
# (At most 4 s of it: the lockdep kernel took 80 s for the 100 MB, and the
# analyses of that stream took the scenario past its 300 s.)
oprofile-rs record -q -o /tmp/k.bin -- sh -c 'timeout 4 head -c 100000000 /dev/zero >/dev/null; true'
oprofile-rs report -q -i /tmp/k.bin --comm head --top 40 >/tmp/k.rep
cat /tmp/k.rep
# The first row in the core kernel: SAMPLES PERCENT SYMBOL [kernel.kallsyms] PID/COMM.
row=$(grep -v '^#' /tmp/k.rep | grep -m1 ' \[kernel\.kallsyms\] ')
sym=$(echo "$row" | awk '{ print $3 }')
n=$(echo "$row" | awk '{ print $1 }')
check "a kernel function is hot ($sym)" [ -n "$sym" ]
in_range "$sym: more than 10 samples" "${n:-none}" 11 999999999

oprofile-rs annotate -q "$sym" -i /tmp/k.bin --comm head --vmlinux /tmp/vmlinux >/tmp/k.ann 2>/tmp/k.err; rc=$?
cat /tmp/k.err
want=$(awk -v s="$sym" '$3 == s && ($2 == "t" || $2 == "T") { print $1; exit }' /proc/kallsyms | sed 's/^0*//')
check_annotation /tmp/k.ann "$rc" "$sym" /tmp/vmlinux "$n" "$want"

oprofile-rs annotate -q "$sym" -i /tmp/k.bin >/dev/null 2>/tmp/k.err; rc=$?
check "without --vmlinux: refused (status $rc)" [ "$rc" -ne 0 ]
grep -q -- '--vmlinux PATH' /tmp/k.err && pass "and the error names --vmlinux" || fail "error: $(cat /tmp/k.err)"
oprofile-rs annotate -q "$sym" -i /tmp/k.bin --vmlinux /oprofile_rs.ko >/dev/null 2>/tmp/k.err; rc=$?
check "another image (the module): refused (status $rc)" [ "$rc" -ne 0 ]
cat /tmp/k.err
check "rmmod" rmmod oprofile_rs
finish
