#!/bin/sh
# perf throttling in the stream. With kernel.perf_event_max_sample_rate=1,
# perf allows one overflow per counter and tick (ceil(1 / HZ)): it throttles
# the counter at the first overflow of every tick and restarts it at the
# next. So while the module asks for 10 kHz, each CPU delivers about HZ
# samples a second, every one followed by a throttle: every SAMPLE carries
# the THROTTLED flag, `sample_throttled` counts them all, and the report
# says so and names the sysctl. Then, with the limit back above the rate
# asked for, a new stream holds no throttled sample and the counter stays.
# Last, `oprofile-rs record` under the low limit counts the throttles too.
. /tmp/lib.sh
RATE=/proc/sys/kernel/perf_event_max_sample_rate
PCT=/proc/sys/kernel/perf_cpu_time_max_percent
old_rate=$(cat $RATE)
echo "perf_event_max_sample_rate=$old_rate perf_cpu_time_max_percent=$(cat $PCT)"
# perf refuses rate writes while its handler-time limit is off (0 or 100).
case $(cat $PCT) in 0 | 100) echo 25 >$PCT ;; esac
check "perf_event_max_sample_rate=1" sh -c "echo 1 >$RATE"

# Buffers large enough that nothing is lost: the counts must be exact.
check "insmod cpu-clock at 10 kHz" insmod /oprofile_rs.ko event=cpu-clock sample_period=100000 \
    cpu_buffer_size=1048576 buffer_size=4194304
cat $DEV >/tmp/t.bin & catpid=$!
workload_every_cpu 2
echo 0 >$DBG/tracing_on
stop_reader $catpid
cat $DBG/stats | tee /tmp/stats.txt | sed 's/ handler_avg.* event_samples/ ... event_samples/'
recv=$(stat_total sample_received /tmp/stats.txt)
thr=$(stat_total sample_throttled /tmp/stats.txt)
expect_eq "no sample lost" "$(stat_total sample_lost_overflow /tmp/stats.txt)" 0
check "samples received ($recv)" [ "$recv" -gt 0 ]
expect_eq "every overflow throttled its counter (sample_throttled = sample_received)" "$thr" "$recv"
check_stream "the throttled stream" /tmp/t.bin /tmp/stats.txt
grep -q "throttled by perf: $((recv - $(stat_total sample_invalid_eip /tmp/stats.txt)))\$" /tmp/rep.txt &&
    pass "report: every sample in the stream throttled" || fail "report: $(grep '^# samples' /tmp/rep.txt)"
for cpu in $(stat_cpus /tmp/stats.txt); do
    want=$(($(stat_of "$cpu" sample_throttled /tmp/stats.txt) - $(stat_of "$cpu" sample_invalid_eip /tmp/stats.txt)))
    expect_eq "cpu$cpu: throttled column = its SAMPLEs" \
        "$(awk -v c="$cpu" '$1 == "#" && $2 == c { print $6 }' /tmp/rep.txt)" "$want"
    # About HZ samples a second instead of 10,000 (2 s of workload).
    check "cpu$cpu: perf's throttling cut the rate ($(stat_of "$cpu" sample_received /tmp/stats.txt) in 2 s)" \
        [ "$(stat_of "$cpu" sample_received /tmp/stats.txt)" -lt 4000 ]
done
grep -q 'warning: perf throttled the sampling .*kernel.perf_event_max_sample_rate' /tmp/rep.err &&
    pass "report warns and names the sysctl" || fail "report warning: $(cat /tmp/rep.err)"
oprofile-rs script -i /tmp/t.bin --events >/tmp/t.txt 2>/dev/null
expect_eq "script --events: one THROTTLE line per throttled SAMPLE" \
    "$(grep -c ' THROTTLE cpu-clock: ' /tmp/t.txt)" "$(grep -c ' cpu-clock [0-9]*$' /tmp/t.txt)"

# The limit above the rate asked for: no throttling in a new stream.
check "perf_event_max_sample_rate=100000" sh -c "echo 100000 >$RATE"
cat $DEV >/tmp/u.bin & catpid=$!
echo 1 >$DBG/tracing_on
workload_every_cpu 1
echo 0 >$DBG/tracing_on
stop_reader $catpid
cat $DBG/stats >/tmp/stats2.txt
expect_eq "sample_throttled did not grow" "$(stat_total sample_throttled /tmp/stats2.txt)" "$thr"
check "samples received meanwhile" [ "$(stat_total sample_received /tmp/stats2.txt)" -gt "$recv" ]
oprofile-rs report -i /tmp/u.bin --top 1 >/tmp/rep2.txt 2>/tmp/rep2.err
grep '^# samples' /tmp/rep2.txt
check "the new stream has samples and none throttled" \
    grep -q '^# samples: [1-9][0-9]*, lost: 0$' /tmp/rep2.txt

# oprofile-rs record says so at its end (throttled again).
echo 1 >$RATE
echo 1 >$DBG/tracing_on
oprofile-rs record -o /tmp/r.bin -- /tmp/workload 1 >/dev/null 2>/tmp/r.err
grep 'recorded' /tmp/r.err
grep -q 'recorded .* perf throttled the sampling [1-9][0-9]* times' /tmp/r.err &&
    pass "record: its summary counts the throttles" || fail "record: $(cat /tmp/r.err)"
echo "$old_rate" >$RATE
check "rmmod" rmmod oprofile_rs
finish
