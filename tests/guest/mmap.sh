#!/bin/sh
# vm-run: --smp 2
# may-skip: the first handoff's "no consume walked" applies only while the event buffer's index did not overflow, which a busy or slow guest (the lockdep kernel, a loaded host) cannot promise; madvise(MADV_DOFORK) can be tried only on a kernel with madvise (the test kernels have CONFIG_ADVISE_SYSCALLS=n; Debian's stock kernel has it)
# Zero-copy reading (Documentation/mmap.md): mmap of /dev/oprofile/buffer.
# - hostile mappings and consumes get their documented errors;
# - buffer_size changes are refused while a mapping (or a piece of one:
#   split, moved, held after close) lives, not after refused or ended ones;
#   fork inherits no mapping, also after madvise(MADV_DOFORK);
# - a stream read through the mapping is byte-identical to what read() gives
#   for the same bytes, and its accounting is exact;
# - a consume notes the COMM records it delivers (the next reader's opening
#   restates them), with the event buffer's index and when it overflows; a
#   consume inside a record or past the head is refused;
# - a slow mapped reader is never lapped: the waiting bytes do not change,
#   the loss shows as LOST records and the accounting stays exact;
# - two threads racing to consume one mapping: the loser gets ESTALE, the
#   stream written in consumption order is whole and exact;
# - a mapping held after close pins the module (rmmod refused) and stays
#   readable; readers killed mid-stream leave nothing behind (kmemleak on
#   the debug kernel);
# - `oprofile-rs record` reads through the mapping.
. /tmp/lib.sh

# mapped WHAT SECS MODE STREAM [ARG]...: `/tmp/mmap MODE STREAM ARG...` while
# two workloads run for SECS s ends without a violation, and the stream it
# wrote decodes with its accounting exact (check_stream). Its output is in $out.
mapped() {
    what=$1 secs=$2
    shift 2
    /tmp/workload "$secs" >/dev/null & /tmp/workload "$secs" >/dev/null &
    out=$(/tmp/mmap "$@"); rc=$?
    echo "$out"
    wait
    expect_eq "$what: no violation" "$rc" 0
    cat $DBG/stats >/tmp/stats.txt
    check_stream "$what" "$2" /tmp/stats.txt
}

check "insmod" insmod /oprofile_rs.ko sample_period=250000
/tmp/workload 1 >/dev/null
out=$(/tmp/mmap hostile); rc=$?
echo "$out"
expect_eq "hostile mappings and consumes: documented answers only" "$rc" 0
out=$(/tmp/mmap lifetime); rc=$?
echo "$out"
expect_eq "live mappings, not attempts, keep the event buffer; fork inherits none" "$rc" 0
dofork=$(echo "$out" | sed -n 's/^madvise(MADV_DOFORK): //p')
if [ "$dofork" = ENOSYS ]; then
    skip "madvise(MADV_DOFORK) on a mapping: this kernel has no madvise (CONFIG_ADVISE_SYSCALLS=n)"
else
    expect_eq "madvise(MADV_DOFORK) on a mapping is refused (VM_SPECIAL)" "$dofork" EINVAL
fi
check "rmmod" rmmod oprofile_rs

# The same bytes through the mapping and read().
check "insmod 4 kHz" insmod /oprofile_rs.ko sample_period=250000 buffer_watershed=4096
mapped "mapped+read stream (compare)" 4 stream /tmp/s.bin 4 compare
compares=$(echo "$out" | sed -n 's/.* compares \([0-9]*\).*/\1/p')
bytes=$(echo "$out" | sed -n 's/^mapped \([0-9]*\).*/\1/p')
check "views compared with read() ($compares)" [ "${compares:-0}" -gt 0 ]
check "bytes consumed through the mapping ($bytes)" [ "${bytes:-0}" -gt 0 ]
check "rmmod" rmmod oprofile_rs

# A slow reader: small buffers fill up while it consumes nothing.
check "insmod small buffers" insmod /oprofile_rs.ko cpu_buffer_size=4096 buffer_size=65536 sample_period=100000
mapped "slow mapped reader (never lapped)" 4 slow /tmp/slow.bin 3
full=$(echo "$out" | sed -n 's/^full \([0-9]*\)$/\1/p')
check "the event buffer filled up meanwhile (full $full)" [ "${full:-0}" -gt 0 ]
check "the loss is reported as LOST records ($lost_total)" [ "$lost_total" -gt 0 ]
check "rmmod" rmmod oprofile_rs

# A consume notes the COMM records it delivers: the next reader's opening
# restates the COMM of a task whose samples it gets, from the event buffer's
# index (Documentation/mmap.md: no overflow here), and also when more COMM
# records wait than the index holds (a 96 KiB buffer: 96 entries) and the
# consume falls back to the walk.
check "insmod" insmod /oprofile_rs.ko sample_period=250000
out=$(/tmp/mmap handoff 1 0); rc=$?
echo "$out"
expect_eq "handoff: the next reader's opening restates the delivered COMM" "$rc" 0
walks=$(sed -n 's/.* index_walks=\([0-9]*\).*/\1/p' $DBG/stats)
overflows=$(sed -n 's/.* index_overflows=\([0-9]*\).*/\1/p' $DBG/stats)
# A consume walks only where the index overflowed: more COMM records waited
# than it lists (one per KiB of buffer), which a busy or slow guest (the
# lockdep kernel: a COMM at nearly every sample while tasks alternate) can
# reach even here (a CI run, 2026-11-26: index_walks=1).
if [ "${overflows:-0}" -eq 0 ]; then
    expect_eq "handoff: noted from the index (no consume walked)" "$walks" 0
else
    skip "handoff: noted from the index: the index overflowed $overflows times ($walks consumes walked)"
fi
check "rmmod" rmmod oprofile_rs
check "insmod 96 KiB buffer, 1 kHz" insmod /oprofile_rs.ko sample_period=1000000 buffer_size=98304
out=$(/tmp/mmap handoff 250 1); rc=$?
echo "$out"
expect_eq "handoff after 250 names: the next reader's opening restates the delivered COMM" "$rc" 0
comms=$(echo "$out" | sed -n 's/^handoff comms \([0-9]*\).*/\1/p')
overflows=$(sed -n 's/.* index_overflows=\([0-9]*\).*/\1/p' $DBG/stats)
walks=$(sed -n 's/.* index_walks=\([0-9]*\).*/\1/p' $DBG/stats)
check "more COMM records waited than the index holds ($comms of the child, index_overflows=$overflows index_walks=$walks)" [ "${overflows:-0}" -gt 0 -a "${walks:-0}" -gt 0 ]
check "rmmod" rmmod oprofile_rs

# Two threads share the mapping.
check "insmod" insmod /oprofile_rs.ko sample_period=100000 buffer_watershed=4096
mapped "two threads on one mapping" 3 threads /tmp/t.bin 3
consumed=$(echo "$out" | sed -n 's/^consumed \([0-9]*\).*/\1/p')
check "the threads consumed ($consumed views)" [ "${consumed:-0}" -gt 0 ]

# A mapping held after close pins the module.
/tmp/mmap hold 4 >/tmp/hold.txt &
holder=$!
wait_for grep -q held /tmp/hold.txt
check "the holder mapped and closed ($(cat /tmp/hold.txt))" grep -q held /tmp/hold.txt
out=$(rmmod oprofile_rs 2>&1); rc=$?
check "rmmod refused while a mapping is held ($out)" [ "$rc" -ne 0 ]
check "the module is still loaded" grep -q '^oprofile_rs ' /proc/modules
out=$(/tmp/probe reads $DEV nonblock 96)
expect_eq "the held mapping keeps the reader slot" "$out" "err EBUSY"
wait $holder; rc=$?
expect_eq "the holder read its mapping after close and unmapped" "$rc" 0
check "unmapped" grep -q unmapped /tmp/hold.txt

# Readers killed mid-stream, with and without their mapping.
out=$(/tmp/mmap die); rc=$?
echo "$out"
expect_eq "killed mapped readers: the device opens again" "$rc" 0
check "rmmod after the killed readers" rmmod oprofile_rs

# oprofile-rs record reads through the mapping.
check "insmod" insmod /oprofile_rs.ko sample_period=250000
oprofile-rs record -o /tmp/r.bin -- /tmp/workload 2 >/tmp/rec.txt 2>&1
cat /tmp/rec.txt
check "record says it read through the mapping" grep -q "reader: mmap" /tmp/r.bin.meta/info
oprofile-rs report -i /tmp/r.bin --top 3 >/tmp/rep.txt 2>&1
cat /tmp/rep.txt
samples=$(sed -n 's/.*recorded .*: \([0-9]*\) samples.*/\1/p' /tmp/rec.txt)
check "record's stream holds samples ($samples)" [ "${samples:-0}" -gt 0 ]
check "the workload is in the report" grep -q workload /tmp/rep.txt
check "rmmod" rmmod oprofile_rs
check_kmemleak "after the mapped readers"
finish
