#!/bin/sh
# vm-run: --timeout 600
# `oprofile-rs record`'s module settings (issue 11 part 3, the tool side):
# -e/-c/-F/-g/--call-graph/--buffer-size/--watershed are applied while
# recording is off through the device's OPROFILE_RS_IOC_SET_CONFIG (the tool
# is given no debugfs: it must use the ioctls), the recording holds the
# opening CONFIG and the new one, its samples carry the new events and
# periods, and every value is put back when recording stops: at the
# command's exit, on SIGINT and on SIGTERM. Contradictory options and values
# the module refuses change nothing; recording stays on.
. /tmp/lib.sh
NODBG=/nonexistent-debugfs
check "insmod" insmod /oprofile_rs.ko
cat $DBG/config >/tmp/before
cat /tmp/before
expect_eq "recording on after load" "$(cat $DBG/tracing_on)" 1
# config_is_back WHAT: the module's configuration and tracing_on as at load.
config_is_back() {
    expect_eq "$1: the configuration is put back" "$(cat $DBG/config)" "$(cat /tmp/before)"
    expect_eq "$1: recording is on again" "$(cat $DBG/tracing_on)" 1
}
# wait_config LINE: until the configuration has LINE (at most 30 s: record
# reads kallsyms first, slowly under TCG).
wait_config() {
    i=0
    while ! grep -qx "$1" $DBG/config && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
    grep -qx "$1" $DBG/config && pass "while recording: $1" || fail "while recording: no $1 in: $(cat $DBG/config)"
}
# Page faults: a hundred short processes.
faulter='i=0; while [ $i -lt 100 ]; do /bin/true; i=$((i + 1)); done; /tmp/workload 1'

echo "== 1. two events, periods, depths, buffer sizes; stops when the command exits"
oprofile-rs record -q -o /tmp/r.data --debugfs $NODBG -e cpu-clock,page-faults -c 1000000,100 \
    --call-graph 16,8 --buffer-size 2M --watershed 512K -- sh -c "$faulter" 2>/tmp/r.err
rc=$?; cat /tmp/r.err
expect_eq "record -e cpu-clock,page-faults -c 1000000,100 ... exits 0" $rc 0
config_is_back "after the command"
check "it says so" grep -q "put the module's settings back: event=" /tmp/r.err
grep '^settings' /tmp/r.data.meta/info
check "side-car: applied through the device's ioctls" grep -q "^settings: .*through the device's ioctls" /tmp/r.data.meta/info
check "side-car: restored" grep -q "^settings-restored: " /tmp/r.data.meta/info
oprofile-rs script -i /tmp/r.data --events >/tmp/r.txt 2>/dev/null
grep ' CONFIG ' /tmp/r.txt
configs=$(grep -c ' CONFIG ' /tmp/r.txt)
check "the stream holds the opening CONFIG and the new one ($configs)" [ "$configs" -ge 2 ]
check "the new one lists both events, the depths and the buffer" \
    grep -q 'CONFIG generation [0-9]*: cpu-clock period 1000000, page-faults period 100; backtrace depth 16 kernel, 8 user; .*buffer_size 2097152, watershed 524288' /tmp/r.txt
oprofile-rs script -q -i /tmp/r.data --all --event page-faults >/tmp/pf.txt
pf=$(wc -l </tmp/pf.txt)
echo "page-fault samples: $pf"
check "page-fault samples ($pf)" [ "$pf" -gt 0 ]
expect_eq "each page-fault sample stands for 100 faults" "$(awk '{ print $(NF-1), $NF }' /tmp/pf.txt | sort -u)" "page-faults 100"
oprofile-rs report -q -i /tmp/r.data --all >/tmp/rep.txt
grep '^# event' /tmp/rep.txt
expect_eq "report: a section per event" "$(grep -c '^# event: ' /tmp/rep.txt)" 2
check "report: the workload's hot function in the cpu-clock section" grep -q hot_three_quarters /tmp/rep.txt
deep=$(oprofile-rs script -q -i /tmp/r.data --all --event cpu-clock -g | awk '/^\tffff/ { n++; if (n > m) m = n; next } /^\t/ { next } { n = 0 } END { print m + 0 }')
check "kernel callchains recorded (deepest $deep, at most 16)" [ "$deep" -ge 1 -a "$deep" -le 16 ]

echo "== 2. frequency mode, stopped by SIGINT"
oprofile-rs record -q -o /tmp/f.data --debugfs $NODBG -e cpu-clock -F 2000 -g 2>/tmp/f.err &
rp=$!
wait_config sample_freq=2000
wait_config backtrace_depth=32
wait_config user_backtrace_depth=32
/tmp/workload 1
kill -INT $rp; wait $rp; rc=$?; cat /tmp/f.err
expect_eq "record exits 0 on SIGINT" $rc 0
config_is_back "after SIGINT"
oprofile-rs script -q -i /tmp/f.data --all >/tmp/f.txt
n=$(wc -l </tmp/f.txt)
zero=$(awk '$NF == "-" || $NF == 0' /tmp/f.txt | wc -l)
check "samples ($n)" [ "$n" -gt 0 ]
expect_eq "every sample carries its period" "$zero" 0
echo "distinct periods: $(awk '{ print $NF }' /tmp/f.txt | sort -u | wc -l)"
oprofile-rs report -q -i /tmp/f.data --all --json >/tmp/f.json
grep -E '"(event|event_settings|weight_unit|kept_samples|kept_weight)"' /tmp/f.json

echo "== 3. SIGTERM"
oprofile-rs record -q -o /tmp/t.data --debugfs $NODBG -e task-clock,context-switches --cpu-buffer-size 128K 2>/tmp/t.err &
rp=$!
wait_config event=task-clock,context-switches
wait_config cpu_buffer_size=131072
kill -TERM $rp; wait $rp; rc=$?; cat /tmp/t.err
expect_eq "record exits 0 on SIGTERM" $rc 0
config_is_back "after SIGTERM"

echo "== 4. refusals change nothing"
for args in "-c 1000 -F 100" "-e cpu-clock -c 1,2" "-e cpu-clock,cpu-clock" \
        "--buffer-size 1M --watershed 1M" "-e cpu-clock,no-such-event" "-c 1" "--buffer-size 1" \
        "-F 1000000000"; do
    # shellcheck disable=SC2086
    oprofile-rs record -q -o /tmp/x.data --debugfs $NODBG $args --duration 1 2>/tmp/x.err
    rc=$?
    echo "record $args: $(cat /tmp/x.err)"
    check "record $args fails" [ $rc -ne 0 ]
    config_is_back "after record $args"
done

echo "== 5. an error after the settings were applied (the output cannot be created)"
# Recording off and the event buffer read first: putting back the 1 MiB
# buffer_size needs what waits to fit in it (else EBUSY, and the tool says
# which value it could not put back), and the sections above leave the
# buffer full of 1-kHz samples that nobody read (slow guests take long).
echo 0 >$DBG/tracing_on
drain
oprofile-rs record -q -o /nonexistent-dir/x.data --debugfs $NODBG -e page-faults -c 10 --buffer-size 2M --duration 1 2>/tmp/e.err
rc=$?; cat /tmp/e.err
check "record fails" [ $rc -ne 0 ]
check "it says it put the settings back" grep -q "the module's settings were put back (event=cpu-clock" /tmp/e.err
expect_eq "after the error: the configuration is put back" "$(cat $DBG/config)" "$(cat /tmp/before)"
expect_eq "after the error: recording is off, as it was" "$(cat $DBG/tracing_on)" 0
echo 1 >$DBG/tracing_on

echo "== 6. a second reader holds the device: record fails at once, says why, changes nothing"
# (record opens the device to read before it applies a setting: the one
# reader slot is taken, EBUSY.)
cat $DEV >/dev/null &
catpid=$!
wait_for reading_device $catpid
oprofile-rs record -q -o /tmp/s.data --debugfs $NODBG -e page-faults -c 10 --duration 1 2>/tmp/s.err
rc=$?; cat /tmp/s.err
check "record with another reader fails (status $rc)" [ "$rc" -ne 0 ]
check "it says the device is busy" grep -q 'cannot open /dev/oprofile/buffer.*busy' /tmp/s.err
kill $catpid; wait $catpid 2>/dev/null
config_is_back "with another reader"

check_kmemleak
check "rmmod" rmmod oprofile_rs
finish
