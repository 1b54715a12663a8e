#!/bin/sh
# Kernel callchains (backtrace_depth): kernel-mode samples carry return
# addresses that resolve to kernel functions, never more than the depth;
# user-mode samples carry none; the header announces the depth. (User
# callchains, on by default, are ustack.sh's: kernel frames are told from
# them by their addresses.)
. /tmp/lib.sh
check "insmod backtrace_depth=8" insmod /oprofile_rs.ko backtrace_depth=8
grep -q '^backtrace_depth=8$' $DBG/config && pass "debugfs config shows the depth" || fail "config: $(cat $DBG/config)"
# -a: the idle CPUs' chains too (do_idle), which a command profiled alone
# does not give.
check "record" oprofile-rs record -q -a -o /tmp/c.bin -- /tmp/workload 2
oprofile-rs script --all -i /tmp/c.bin --callchain >/tmp/c.txt 2>/tmp/c.err; rc=$?
head -5 /tmp/c.err
expect_eq "stream decodes with callchains (script's status)" "$rc" 0
# Sample lines: the lines not tab-indented (those are callchain frames).
check "it decoded samples ($(grep -vc "$(printf '^\t')" /tmp/c.txt))" grep -vq "$(printf '^\t')" /tmp/c.txt
head -12 /tmp/c.txt
# Callchain frames are tab-indented lines below their sample line; kernel
# ones have kernel addresses (not the [truncated] mark of a cut user stack,
# whose value, -1024, prints as one).
frames=$(awk '/^\tffff/ && !/\[truncated\]/ { n++ } END { print n + 0 }' /tmp/c.txt)
check "kernel samples carry callchain frames ($frames)" [ "$frames" -gt 20 ]
known=$(awk '/^\t/ && /(do_idle|cpu_startup_entry|do_syscall_64|default_idle_call)/ { n++ } END { print n + 0 }' /tmp/c.txt)
check "frames resolve to kernel functions such as do_idle ($known)" [ "$known" -gt 0 ]
deepest=$(awk '/^\tffff/ && !/\[truncated\]/ { n++; if (n > m) m = n; next } /^\t/ { next } { n = 0 } END { print m + 0 }' /tmp/c.txt)
check "no callchain deeper than 8 ($deepest)" [ "$deepest" -le 8 ]
user_with_chain=$(awk '/^\tffff/ && !/\[truncated\]/ { if (u) n++; next } /^\t/ { next } /\[[0-9]+\]/ { u = ($0 ~ /hot_(three_quarters|one_quarter)/) } END { print n + 0 }' /tmp/c.txt)
expect_eq "user-mode samples carry no kernel callchain" "$user_with_chain" 0
grep '^cpu' $DBG/stats
# The idle chains are deeper than 8: cut at the depth, which is no abort.
aborted=$(stat_total backtrace_aborted)
received=$(stat_total sample_received)
check "few aborted callchains ($aborted of $received samples)" [ $((aborted * 20)) -lt "$received" ]
check "rmmod" rmmod oprofile_rs

# The scheduler's software events (context-switches) come with registers
# perf makes with perf_fetch_caller_regs(), not an interrupted frame: the
# walk starts from the stack, as perf's does. Every walk completes (before:
# every one failed at once, no kernel frame), and the chains are those the
# kernel's perf gives for the same event at the same time (miniperf: perf's
# own callchains, through perf_event_open): every return address in 5 % or
# more of perf's chains is in ours.
check "insmod event=context-switches" insmod /oprofile_rs.ko event=context-switches sample_period=1 backtrace_depth=16
MINIPERF_EVENT=context-switches MINIPERF_CALLCHAIN=16 /tmp/miniperf record /tmp/cs.perf 1 2>/tmp/mp.err & mp=$!
mp_ready() { grep -q "recording on" /tmp/mp.err; }
wait_for mp_ready
# -a: every task's switches, as miniperf records them.
check "record context-switches" oprofile-rs record -q -a -o /tmp/cs.bin -- sh -c 'for i in $(seq 100); do usleep 2000; done'
kill -INT $mp; wait $mp
cat /tmp/mp.err
oprofile-rs script --all -i /tmp/cs.bin --callchain >/tmp/cs.txt 2>&1
# Ours: the samples' addresses (perf's chain starts with it when the walk
# does) and their chains' return addresses.
awk '/^\tffff/ { print $1; next } $5 ~ /^ffff/ { print $5 }' /tmp/cs.txt | sort | uniq -c | sort -rn >/tmp/ours
/tmp/miniperf chains /tmp/cs.perf >/tmp/theirs.chains
nperf=$(wc -l </tmp/theirs.chains)
tr ' ' '\n' </tmp/theirs.chains | grep . | sort | uniq -c | sort -rn >/tmp/theirs
echo "perf: $nperf chains; the most frequent return addresses, perf's then ours:"
head -8 /tmp/theirs; head -8 /tmp/ours
missing=$(awk -v n="$nperf" '$1 * 20 >= n { print $2 }' /tmp/theirs | while read -r a; do
    grep -q " $a\$" /tmp/ours || echo "$a"; done | tee /tmp/missing | wc -l)
sed 's/^/not in ours: /' /tmp/missing
common=$(awk -v n="$nperf" '$1 * 20 >= n' /tmp/theirs | wc -l)
check "perf gave context-switch chains ($nperf)" [ "$nperf" -ge 50 ]
check "with return addresses in 5 % of them or more ($common)" [ "$common" -ge 3 ]
expect_eq "perf's frequent return addresses all in our chains" "$missing" 0
aborted=$(stat_total backtrace_aborted)
received=$(stat_total sample_received)
check "few aborted kernel walks ($aborted of $received samples)" [ $((aborted * 20)) -lt "$received" ]
check "rmmod" rmmod oprofile_rs
finish
