#!/bin/sh
# Several events at once (event= lists): two software events, cpu-clock
# (hard IRQ) and page-faults at period 1 (task context, in the fault
# handler), on every CPU. A process that touches a known number of fresh
# small pages (evcheck faults: MADV_NOHUGEPAGE) has that many page-fault
# samples in the stream (at least the pages, at most what getrusage counted
# for the whole process); the stream opens with a CONFIG record listing both
# events, and every SAMPLE's event index and period match it (evcheck
# stream). Then all five software events at once through CPU hotplug, and
# the debugfs files that show the list.
. /tmp/lib.sh
PAGES=20000
CPU1=/sys/devices/system/cpu/cpu1/online
# perf throttles an event past perf_event_max_sample_rate/HZ samples per
# tick: the fault loop must stay below it (a fast host faults quicker).
echo 400000 >/proc/sys/kernel/perf_event_max_sample_rate 2>/dev/null
echo "perf_event_max_sample_rate: $(cat /proc/sys/kernel/perf_event_max_sample_rate 2>/dev/null || echo none)"

# Buffers large enough (and no user stacks) that no sample is lost: the
# count must be exact.
check "insmod event=cpu-clock,page-faults sample_period=1000000,1" \
    insmod /oprofile_rs.ko event=cpu-clock,page-faults sample_period=1000000,1 \
    cpu_buffer_size=2097152 buffer_size=16777216 user_backtrace_depth=0
expect_eq "debugfs event lists both" "$(cat $DBG/event)" "cpu-clock,page-faults"
cat $DBG/event_info
expect_eq "event_info: contexts" "$(awk '{ print $1, $4 }' $DBG/event_info | tr '\n' ' ')" \
    "cpu-clock context=hardirq page-faults context=task "
grep -q '^sample_period=1000000,1$' $DBG/config && pass "config: sample_period per event" \
    || fail "config: $(cat $DBG/config)"
grep -q '^sample_freq=0,0$' $DBG/config && pass "config: sample_freq per event" || fail "config"
grep -q '^user_backtrace_depth=0$' $DBG/config && pass "config: user_backtrace_depth" || fail "config"

cat $DEV >/tmp/e.bin & catpid=$!
wait_for reading_device $catpid
/tmp/evcheck faults $PAGES >/tmp/f.out
cat /tmp/f.out
/tmp/workload 0.5
echo 0 >$DBG/tracing_on
stop_reader $catpid
grep '^cpu' $DBG/stats | sed 's/ handler_avg.* sync_records/ ... sync_records/'
expect_eq "no sample lost" "$(stat_total sample_lost_overflow)" 0
read -r _ pid pages loop total </tmp/f.out
/tmp/evcheck stream /tmp/e.bin "$pid" >/tmp/e.out; rc=$?
grep -v '^FAIL' /tmp/e.out; grep '^FAIL' /tmp/e.out | head -5
expect_eq "evcheck: the stream's events and periods are consistent" "$rc" 0
expect_eq "one CONFIG: generation 1, both events" "$(grep -c '^config' /tmp/e.out) $(awk '/^config/ { print $2, $3, $4; exit }' /tmp/e.out)" \
    "1 1 2 cpu-clock:1000000,page-faults:1"
got=$(awk '$1 == "samples" && $3 == "page-faults" { print $5 }' /tmp/e.out)
echo "page-fault samples of pid $pid: $got; it touched $pages pages ($loop faults in the loop, $total in all)"
check "at least one page-fault sample per page touched ($got >= $pages)" [ "${got:-0}" -ge "$pages" ]
check "no more page-fault samples than faults counted for the process ($got <= $total + 16)" \
    [ "${got:-0}" -le $((total + 16)) ]
clock=$(awk '$1 == "samples" && $3 == "cpu-clock" { print $4 }' /tmp/e.out)
check "cpu-clock samples too ($clock)" [ "${clock:-0}" -gt 0 ]
# stats: the per-event counts of every CPU add up to the samples received.
recv=$(stat_total sample_received); inval=$(stat_total sample_invalid_eip)
byev=$(sed -n 's/.* event_samples=\([0-9,]*\).*/\1/p' $DBG/stats | tr ',' '\n' | awk '{ n += $1 } END { print n + 0 }')
lost=$(stat_total sample_lost_overflow)
expect_eq "stats: event_samples sum to received - invalid - lost" "$byev" $((recv - inval - lost))
expect_eq "stats: no sample on a wrong CPU" "$(stat_total sample_wrong_cpu)" 0
check "rmmod" rmmod oprofile_rs

# --- the five software events at once, through CPU hotplug
check "insmod five software events" insmod /oprofile_rs.ko \
    event=cpu-clock,task-clock,page-faults,context-switches,cpu-migrations sample_period=100000,100000,10,10,1
cat $DBG/event_info
cat $DEV >/tmp/s.bin & catpid=$!
/tmp/workload 3 & w1=$!; /tmp/workload 3 & w2=$!
# (The rig's VM has 4 vCPUs and CPU hotplug: CPU 1 can always go offline.)
check "CPU 1 can go offline ($CPU1 writable)" [ -w $CPU1 ]
hpfail=0
for i in 1 2 3 4 5; do
    echo 0 >$CPU1 || hpfail=$((hpfail + 1)); sleep 0.2; echo 1 >$CPU1 || hpfail=$((hpfail + 1)); sleep 0.2
done
expect_eq "CPU 1 went offline and online 5 times (failed writes)" "$hpfail" 0
wait $w1 $w2; sleep 0.5
# The task-context events' counters come back with a CPU: a work item makes
# them after its online callback, outside the CPU hotplug lock (profiler.rs).
# CPU 1, online again, keeps sampling its context switches.
cs1() { sed -n 's/^cpu1 .* event_samples=\([0-9,]*\).*/\1/p' $DBG/stats | cut -d, -f4; }
a=$(cs1); workload_every_cpu 1; sleep 1; b=$(cs1)
check "cpu1 samples context-switches after it came online again ($a -> $b)" [ "${b:-0}" -gt "${a:-0}" ]
/tmp/evcheck faults 1000 >/dev/null
echo 0 >$DBG/tracing_on
stop_reader $catpid
/tmp/evcheck stream /tmp/s.bin >/tmp/s.out; rc=$?
grep -v '^FAIL' /tmp/s.out; grep '^FAIL' /tmp/s.out | head -5
expect_eq "evcheck: five events consistent" "$rc" 0
for e in cpu-clock task-clock page-faults context-switches; do
    n=$(awk -v e=$e '$1 == "samples" && $3 == e { print $4 }' /tmp/s.out)
    check "$e has samples (${n:-0})" [ "${n:-0}" -gt 0 ]
done
expect_eq "stats: no sample on a wrong CPU" "$(stat_total sample_wrong_cpu)" 0
check "rmmod" rmmod oprofile_rs
check_kmemleak
finish
