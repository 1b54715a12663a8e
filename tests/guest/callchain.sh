#!/bin/sh
# Kernel callchains (backtrace_depth): kernel-mode samples carry return
# addresses that resolve to kernel functions, never more than the depth;
# user-mode samples carry none; the header announces the depth. (User
# callchains, on by default, are ustack.sh's: kernel frames are told from
# them by their addresses.)
. /tmp/lib.sh
check "insmod backtrace_depth=8" insmod /oprofile_rs.ko backtrace_depth=8
grep -q '^backtrace_depth=8$' $DBG/config && pass "debugfs config shows the depth" || fail "config: $(cat $DBG/config)"
check "record" oprofile-rs record -q -o /tmp/c.bin -- /tmp/workload 2
oprofile-rs script --all -i /tmp/c.bin --callchain >/tmp/c.txt 2>/tmp/c.err; rc=$?
head -5 /tmp/c.err
expect_eq "stream decodes with callchains (script's status)" "$rc" 0
# Sample lines: the lines not tab-indented (those are callchain frames).
check "it decoded samples ($(grep -vc "$(printf '^\t')" /tmp/c.txt))" grep -vq "$(printf '^\t')" /tmp/c.txt
head -12 /tmp/c.txt
# Callchain frames are tab-indented lines below their sample line; kernel
# ones have kernel addresses.
frames=$(awk '/^\tffff/ { n++ } END { print n + 0 }' /tmp/c.txt)
check "kernel samples carry callchain frames ($frames)" [ "$frames" -gt 20 ]
known=$(awk '/^\t/ && /(do_idle|cpu_startup_entry|do_syscall_64|default_idle_call)/ { n++ } END { print n + 0 }' /tmp/c.txt)
check "frames resolve to kernel functions such as do_idle ($known)" [ "$known" -gt 0 ]
deepest=$(awk '/^\tffff/ { n++; if (n > m) m = n; next } /^\t/ { next } { n = 0 } END { print m + 0 }' /tmp/c.txt)
check "no callchain deeper than 8 ($deepest)" [ "$deepest" -le 8 ]
user_with_chain=$(awk '/^\tffff/ { if (u) n++; next } /^\t/ { next } /\[[0-9]+\]/ { u = ($0 ~ /hot_(three_quarters|one_quarter)/) } END { print n + 0 }' /tmp/c.txt)
expect_eq "user-mode samples carry no kernel callchain" "$user_with_chain" 0
grep '^cpu' $DBG/stats
# The idle chains are deeper than 8: cut at the depth, which is no abort.
aborted=$(stat_total backtrace_aborted)
received=$(stat_total sample_received)
check "few aborted callchains ($aborted of $received samples)" [ $((aborted * 20)) -lt "$received" ]
check "rmmod" rmmod oprofile_rs
finish
