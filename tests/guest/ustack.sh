#!/bin/sh
# User call stacks (user_backtrace_depth, on by default): a program built
# with frame pointers whose split is known (ustack: main → outer → hot_a /
# hot_b, 3:1) comes out whole and in that proportion in the folded stacks
# and in pprof; the same program without frame pointers (ustack_nofp) gives
# short stacks and no crash with the chain alone, and whole ones, 3:1, with
# the hybrid (`record --call-graph dwarf,1K`: a 1 KiB stack copy beside the
# chain, continued along the chain past the copy); a leaf without a frame
# record called from two callers 3:1 (leafcall, -O1 -fno-omit-frame-pointer)
# keeps its callers with the hybrid, where the chain alone loses them; a
# hostile process (badfp) whose frame pointer leads to garbage (a loop,
# kernel addresses, unmapped or absent pages, misaligned, 1000 records deep)
# costs a bounded walk and yields no user frame above the garbage;
# a recording after a backlog of losses (nobody read while the CPU buffers
# overflowed) counts none of them as its own; user_backtrace_depth=0 turns
# them off.
. /tmp/lib.sh

check "insmod" insmod /oprofile_rs.ko
expect_eq "user stacks are on by default (depth 32)" \
    "$(sed -n 's/^user_backtrace_depth=\([0-9]*\)$/\1/p' $DBG/config)" 32

# --- the known split, with frame pointers
oprofile-rs record -q -o /tmp/u.bin -- /tmp/ustack 4
oprofile-rs folded -i /tmp/u.bin >/tmp/u.folded 2>/dev/null
sort -k2 -n -r -t' ' /tmp/u.folded | head -8
a=$(folded_count ';main;outer;hot_a( |;)' /tmp/u.folded)
b=$(folded_count ';main;outer;hot_b( |;)' /tmp/u.folded)
all=$(folded_count . /tmp/u.folded)
echo "folded: main;outer;hot_a $a, main;outer;hot_b $b, of $all samples"
check "most samples have the whole stack main;outer;hot_x ($((a + b)) of $all)" \
    [ "$(pct $((a + b)) "$all")" -ge 80 ]
share=$(pct "$a" $((a + b)))
in_range "hot_a:hot_b is about 3:1 (hot_a's share in %)" "$share" 65 85
# pprof: every sample's locations are its whole stack.
oprofile-rs pprof -q -i /tmp/u.bin -o /tmp/u.pb.gz 2>/dev/null
oprofile-rs pprof-folded /tmp/u.pb.gz >/tmp/u.pprof
pa=$(folded_count '(^|;)main;outer;hot_a( |;)' /tmp/u.pprof)
pb=$(folded_count '(^|;)main;outer;hot_b( |;)' /tmp/u.pprof)
echo "pprof: main;outer;hot_a $pa, main;outer;hot_b $pb"
pall=$(folded_count . /tmp/u.pprof)
check "pprof: most samples have the whole stack ($((pa + pb)) of $pall)" [ "$(pct $((pa + pb)) "$pall")" -ge 80 ]
pshare=$(pct "$pa" $((pa + pb)))
in_range "pprof: hot_a:hot_b is about 3:1 (hot_a's share in %)" "$pshare" 65 85
# script: the user frames under each sample line, innermost first. (A sample
# at hot_a's first instruction, before it saved its frame pointer, misses
# outer: the frame-pointer walk's known blind spot.)
oprofile-rs script -i /tmp/u.bin --callchain 2>/dev/null >/tmp/u.script
grep -A3 -m1 ' hot_a ' /tmp/u.script
awk '/^\t/ { if (h) f = f " " $2; next } { if (h) print f; h = / hot_a /; f = "" }
     END { if (h) print f }' /tmp/u.script >/tmp/u.hot_a
under=$(grep -c '^ outer main' /tmp/u.hot_a)
n=$(wc -l </tmp/u.hot_a)
check "script: outer then main under most hot_a samples ($under of $n)" [ "$(pct "$under" "$n")" -ge 80 ]
grep '^cpu' $DBG/stats | sed 's/ handler_avg/\n      handler_avg/'
# report --children: main holds nearly everything, outer as much.
oprofile-rs report -q -i /tmp/u.bin --children --top 4 2>/dev/null | tee /tmp/u.report
main_share=$(awk '$NF ~ /ustack/ && $4 == "main" { print int($1) }' /tmp/u.report)
check "report --children: main is in most stacks (${main_share:-none}%)" [ "${main_share:-0}" -ge 80 ]

# --- without frame pointers, the hybrid: whole stacks, 3:1, from the copy
oprofile-rs record -q --call-graph dwarf,1K -o /tmp/d.bin -- /tmp/ustack_nofp 3
oprofile-rs folded -i /tmp/d.bin >/tmp/d.folded 2>/dev/null
sort -k2 -n -r -t' ' /tmp/d.folded | head -5
a=$(folded_count ';main;outer;hot_a( |;)' /tmp/d.folded)
b=$(folded_count ';main;outer;hot_b( |;)' /tmp/d.folded)
all=$(folded_count . /tmp/d.folded)
check "no frame pointers, the hybrid: whole stacks main;outer;hot_x ($((a + b)) of $all)" \
    [ "$(pct $((a + b)) "$all")" -ge 80 ]
in_range "no frame pointers, the hybrid: hot_a:hot_b about 3:1 (hot_a's share in %)" "$(pct "$a" $((a + b)))" 65 85
oprofile-rs report -q -i /tmp/d.bin --top 1 2>/dev/null | grep '^# call' || true

# --- a leaf without a frame record, two callers 3:1
oprofile-rs record -q --call-graph dwarf,1K -o /tmp/l.bin -- /tmp/leafcall 3
oprofile-rs folded -i /tmp/l.bin >/tmp/l.folded 2>/dev/null
sort -k2 -n -r -t' ' /tmp/l.folded | head -5
x=$(folded_count ';main;outer_x;leaf( |;)' /tmp/l.folded)
y=$(folded_count ';main;outer_y;leaf( |;)' /tmp/l.folded)
all=$(folded_count 'leaf( |;)' /tmp/l.folded)
check "leaf, the hybrid: its samples name their caller ($((x + y)) of $all)" [ "$(pct $((x + y)) "$all")" -ge 80 ]
in_range "leaf, the hybrid: outer_x:outer_y about 3:1 (outer_x's share in %)" "$(pct "$x" $((x + y)))" 65 85
# -g is the chain alone: a copy the module was set to take is off for the
# recording, and put back after it. (Recording goes on system-wide between
# the recordings, nobody reading: a change needs room in the event buffer
# for its CONFIG record, so what waits is drained first, with recording
# off; on the debug kernel the buffer filled in the seconds after a
# recording and the write was refused, EBUSY, in a CI run.)
echo 0 >$DBG/tracing_on; drain
check "user_stack_size=1024 (the event buffer drained)" sh -c "echo 1024 >$DBG/user_stack_size"
echo 1 >$DBG/tracing_on
oprofile-rs record -q -g -o /tmp/lg.bin -- /tmp/leafcall 1
expect_eq "record -g: no sample carries a stack copy" \
    "$(oprofile-rs report -q -i /tmp/lg.bin --top 1 2>/dev/null | grep -c 'samples with a user stack copy')" 0
expect_eq "record -g put user_stack_size back" "$(cat $DBG/user_stack_size)" 1024
echo 0 >$DBG/tracing_on; drain
check "user_stack_size=0 (the event buffer drained)" sh -c "echo 0 >$DBG/user_stack_size"
echo 1 >$DBG/tracing_on
oprofile-rs folded -i /tmp/lg.bin >/tmp/lg.folded 2>/dev/null
echo "leaf, record -g (the chain alone): $(folded_count ';outer_[xy];leaf( |;)' /tmp/lg.folded) of $(folded_count 'leaf( |;)' /tmp/lg.folded) samples name the caller"

# --- without frame pointers, the chain alone (-g): short stacks, never a crash
before=$(stat_total user_backtrace_aborted)
oprofile-rs record -q -g -o /tmp/n.bin -- /tmp/ustack_nofp 2
oprofile-rs folded -i /tmp/n.bin >/tmp/n.folded 2>/dev/null
sort -k2 -n -r -t' ' /tmp/n.folded | head -5
whole=$(folded_count ';main;outer;hot_[ab]( |;)' /tmp/n.folded)
all=$(folded_count . /tmp/n.folded)
check "no frame pointers: the stacks are short ($whole of $all whole)" [ "$(pct "$whole" "$all")" -le 5 ]
hot=$(folded_count 'hot_[ab]( |;)' /tmp/n.folded)
check "no frame pointers: the samples are still in hot_a/hot_b ($hot of $all)" [ "$(pct "$hot" "$all")" -ge 80 ]
echo "user_backtrace_aborted: $before before, $(stat_total user_backtrace_aborted) after"

# --- the backlog's losses are not the recording's: nobody reads while
# the CPU buffers overflow, then (as in a CI run where a refused change
# switched recording off and on) a tracing_on switch, and a recording
# whose settings (pid) need room for their CONFIG record in the full event
# buffer: record reads it first. A CI run on the debug kernel counted
# 1,266 lost beside 1,784 samples of a recording that lost none.
lost0=$(stat_total sample_lost_overflow)
losing() { [ "$(stat_total sample_lost_overflow)" -gt $((lost0 + 500)) ]; }
full() { [ "$(stat_of event_buffer bytes_waiting)" -ge $(($(cat $DBG/buffer_size) - 2048)) ]; }
/tmp/ustack 60 >/dev/null & busy=$!
wait_for losing; wait_for full
kill $busy; wait $busy 2>/dev/null
echo "losses before the recording: $(($(stat_total sample_lost_overflow) - lost0)); $(grep ^event_buffer $DBG/stats)"
echo 0 >$DBG/tracing_on; echo 1 >$DBG/tracing_on
oprofile-rs record -q -g -o /tmp/b.bin -- /tmp/ustack 1
grep -E '^(samples|lost|backlog-skipped|read before)' /tmp/b.bin.meta/info
bsamples=$(sed -n 's/^samples: \([0-9]*\)$/\1/p' /tmp/b.bin.meta/info)
blost=$(sed -n 's/^lost: \([0-9]*\)$/\1/p' /tmp/b.bin.meta/info)
check "after a backlog of losses: the recording lost at most 2 % (${blost:-?} lost, ${bsamples:-?} samples)" \
    [ "${bsamples:-0}" -gt 0 -a $((${blost:-999999} * 50)) -le "${bsamples:-0}" ]
check "rmmod" rmmod oprofile_rs

# --- hostile frame pointers, at the deepest walk
check "insmod user_backtrace_depth=64" insmod /oprofile_rs.ko user_backtrace_depth=64
for mode in self loop2 down kernel kchain unmapped notpresent misaligned deep; do
    ab0=$(stat_total user_backtrace_aborted)
    tr0=$(stat_total user_backtrace_truncated)
    out=$(oprofile-rs record -q --call-graph 0,64 -o /tmp/h.bin -- /tmp/badfp $mode 1 2>&1)
    echo "$out" | grep '^badfp'
    frames=$(echo "$out" | sed -n 's/.* frames=\(-*[0-9]*\) .*/\1/p')
    [ "$frames" = -1 ] && frames=64
    # The loop's addresses, [lo, hi): zero-padded hex as script prints a
    # PC, compared as strings. (A sample at spin's first instructions,
    # before rbp holds the garbage, walks the program's own frames: one in
    # about a thousand; CI runs counted such samples as the loop's, with
    # one frame where none or two were readable.)
    lo=$(echo "$out" | sed -n 's/.* loop=\([0-9a-f]*\)-\([0-9a-f]*\)$/\1/p')
    hi=$(echo "$out" | sed -n 's/.* loop=\([0-9a-f]*\)-\([0-9a-f]*\)$/\2/p')
    ab=$(($(stat_total user_backtrace_aborted) - ab0))
    tr=$(($(stat_total user_backtrace_truncated) - tr0))
    # User frames below each sample of the loop: their count, most and
    # fewest.
    oprofile-rs script -i /tmp/h.bin --callchain 2>/dev/null | awk -v lo="$lo" -v hi="$hi" '
        /^\t/ { if (s && $1 !~ /^ffff/) u++; next }
        { if (s) print u; s = / spin / && $5 >= lo && $5 < hi; u = 0 }
        END { if (s) print u }' | sort -n | uniq -c >/tmp/h.counts
    n=$(awk '{ n += $1 } END { print n + 0 }' /tmp/h.counts)
    most=$(awk '{ m = $2 } END { print m + 0 }' /tmp/h.counts)
    fewest=$(awk 'NR == 1 { print $2 + 0 }' /tmp/h.counts)
    echo "$mode: $n samples in the loop ($lo-$hi), user frames $fewest..$most; aborted +$ab, truncated +$tr"
    check "$mode: samples in the loop" [ "$n" -gt 0 ]
    expect_eq "$mode: every loop sample has exactly the $frames readable user frames" "$fewest $most" "$frames $frames"
    if [ $mode = deep ]; then
        check "$mode: chains cut at the depth are counted truncated" [ "$tr" -ge "$n" ]
    else
        check "$mode: chains cut by garbage are counted aborted" [ "$ab" -ge "$n" ]
    fi
done
grep '^cpu' $DBG/stats
check "rmmod" rmmod oprofile_rs

# --- off
check "insmod user_backtrace_depth=0" insmod /oprofile_rs.ko user_backtrace_depth=0
oprofile-rs record -q -o /tmp/o.bin -- /tmp/ustack 1
oprofile-rs folded -i /tmp/o.bin >/tmp/o.folded 2>/dev/null
cat /tmp/o.folded
expect_eq "no user frames with user_backtrace_depth=0" "$(folded_count ';(main|outer);' /tmp/o.folded)" 0
expect_eq "nothing counted" "$(stat_total user_backtrace_aborted) $(stat_total user_backtrace_truncated)" "0 0"
check "rmmod" rmmod oprofile_rs
finish
