#!/bin/sh
# vm-run: --timeout 600
# One process profiled alone (debugfs `pid`, the SET ioctl's key): counters
# bound to its threads and inherited by the tasks they create, none per CPU.
# - values: 0 at load (every task); EINVAL for garbage, ESRCH for no such
#   process (an exited one included), EBUSY while recording, EACCES for an
#   unprivileged user; nothing changed by a refusal;
# - a target held before it forks, bound, then let run pinned to CPU 0 beside
#   another workload pinned to CPU 1: every sample is of the target or of the
#   processes it forked after the bind (inherit), the CPU 1 sampler takes no
#   overflow at all (the other task costs nothing), and the CONFIG record
#   carries the pid;
# - every thread of a process bound after its threads started is sampled;
# - the target gone, nothing is sampled; pid=0 samples every task again;
# - `oprofile-rs record -- COMMAND` sets pid to the command's process, held
#   before its exec, beside busy workloads on every CPU: every sample is the
#   command's, `report` says `# profiled: pid N ...`, pid is 0 again after;
#   a command that forks: its children are sampled (inherit); `record -a`:
#   every task; `record -p PID`: PID alone, pid put back at its exit; SIGINT
#   while recording a command: pid put back, the command ended;
# - a CPU replugged while a bound process runs; rmmod while bound, the
#   process still running; kmemleak.
. /tmp/lib.sh
try() { /tmp/cfgctl write "$DBG/pid" "$1"; }
cfg() { sed -n "s/^$1=//p" $DBG/config; }
[ "$NCPU" -ge 2 ] || { skip "task-bound needs 2 CPUs"; finish; }
cp /tmp/workload /tmp/otherload
# streamed FILE CMD...: a new stream into FILE while recording is on and CMD
# runs (CMD's status in $st).
streamed() {
    f=$1; shift
    cat $DEV >"$f" & catpid=$!
    wait_for reading_device $catpid
    echo 1 >$DBG/tracing_on; "$@"; st=$?; echo 0 >$DBG/tracing_on
    stop_reader $catpid
}
# comms FILE: "COMM SAMPLES" per command of the stream's samples.
comms() {
    oprofile-rs script --all -i "$1" 2>/dev/null |
        awk '$2 ~ /^\[[0-9]+\]$/ { n[$4]++ } END { for (c in n) print c, n[c] }' | sort
}
# release FIFO PID: lets the held process PID (a child of this shell) go on,
# and waits for it.
release() { echo go >"$1"; wait "$2"; }
NODBG=/nonexistent-debugfs
# busy: the workload on every CPU for 600 s, in the background (its pids
# in $busy); stop_busy ends them. At nice 19: they take every CPU the
# recorder and its command leave (and would be sampled were the filter
# wrong), not their time (on the one host thread of the lockdep and stock
# VMs, at nice 0, a 2 s command took 25 s to record and a `sh -c` of two
# 1 s ones 46 s).
# (busybox has renice, not nice.)
busy() {
    local c=0
    busy=
    while [ $c -lt "$NCPU" ]; do
        sh -c "renice -n 19 \$\$ >/dev/null && exec taskset $(printf %x $((1 << c))) /tmp/workload 600" >/dev/null &
        busy="$busy $!"
        c=$((c + 1))
    done
    wait_for busy_niced
}
# busy_niced: every busy pid runs the workload at nice 19.
# shellcheck disable=SC2086 # the pids are words
busy_niced() { runs_niced 19 $busy; }
stop_busy() {
    # shellcheck disable=SC2086 # the pids are words
    kill $busy 2>/dev/null; wait $busy 2>/dev/null
}
# tgids FILE: the distinct tgids of the samples of a recording (every
# process: --all), one per line.
tgids() { oprofile-rs script -q --all -i "$1" | awk '{ split($3, a, "/"); print a[1] }' | sort -u; }

count() { awk -v c="$1" '$1 == c { print $2 }' "$2" | grep . || echo 0; }

check "insmod" insmod /oprofile_rs.ko event=cpu-clock sample_period=1000000 \
    cpu_buffer_size=1048576 buffer_size=8388608
expect_eq "every task at load" "$(cat $DBG/pid)" 0
expect_eq "config lists it" "$(cfg pid)" 0
expect_eq "EBUSY while recording" "$(try 1)" "err EBUSY"
expect_eq "ioctl: EBUSY while recording" "$(/tmp/cfgctl set pid=1)" "err EBUSY"
echo 0 >$DBG/tracing_on

# --- hostile values: documented errors, nothing changed
mark pid-refusals
snap=$(cat $DBG/config)
for bad in abc -1 " " 0x10 1.5 2147483648 4294967296 18446744073709551616 "1 2" "1=1"; do
    expect_eq "pid='$bad': EINVAL" "$(try "$bad")" "err EINVAL"
done
sh -c 'exit 0' & gone=$!; wait $gone
for nope in 2147483647 4194305 $gone; do
    expect_eq "pid=$nope: ESRCH" "$(try $nope)" "err ESRCH"
done
expect_eq "ioctl: given twice: EINVAL" "$(/tmp/cfgctl set "pid=1 pid=1")" "err EINVAL"
expect_eq "nobody cannot write it" "$(/tmp/probe -u 65534 write $DBG/pid 1)" "err EACCES"
expect_eq "nothing changed by refused writes" "$(cat $DBG/config)" "$snap"
check "refusals logged" dmesg_has pid-refusals "config: pid=$gone: no such process"

# --- a target held before it forks, bound, let run on CPU 0 beside another
# workload on CPU 1 (what recording since the load left is read first)
drain
taskset 2 /tmp/otherload 600 >/dev/null & other=$!
rm -f /tmp/go; mkfifo /tmp/go
# (taskset execs sh: $! is the shell, not a subshell that would start it)
taskset 1 sh -c 'read x </tmp/go; /tmp/workload 1.5 & /tmp/workload 1.5; wait' & target=$!
expect_eq "bind the target" "$(try $target)" ok
expect_eq "reads back" "$(cat $DBG/pid)" "$target"
expect_eq "config too" "$(cfg pid)" "$target"
cpu1=$(stat_of 1 sample_received)
streamed /tmp/t.bin release /tmp/go $target
comms /tmp/t.bin >/tmp/comms.txt
mine=$(count workload /tmp/comms.txt)
others=$(awk '$1 != "workload" && $1 != "sh" { n += $2 } END { print n + 0 }' /tmp/comms.txt)
check "the forked workloads are sampled ($mine samples)" [ "$mine" -ge 300 ]
expect_eq "nothing else is sampled ($(tr '\n' ' ' </tmp/comms.txt))" "$others" 0
expect_eq "CPU 1 took no overflow" "$(stat_of 1 sample_received)" "$cpu1"
/tmp/evcheck stream /tmp/t.bin >/tmp/ev.out || fail "evcheck: $(grep FAIL /tmp/ev.out | head -3)"
expect_eq "the CONFIG record carries the pid" \
    "$(awk '$1 == "config" { for (i = 1; i < NF; i++) if ($i == "pid") p = $(i + 1) } END { print p }' /tmp/ev.out)" "$target"

# --- the target gone: nothing is sampled
r0=$(stat_total sample_received)
streamed /tmp/gone.bin sleep 0.5
expect_eq "the target gone, nothing sampled (otherload runs)" "$(stat_total sample_received)" "$r0"

# --- every thread of a process bound after its threads started
rm -f /tmp/go2; mkfifo /tmp/go2
/tmp/spinthreads 3 0.5 /tmp/go2 >/tmp/threads.txt & tp=$!
wait_for grep -q spinthreads /tmp/threads.txt
expect_eq "bind a process of 3 threads" "$(try $tp)" ok
streamed /tmp/th.bin release /tmp/go2 $tp
tids=$(oprofile-rs script --all -i /tmp/th.bin 2>/dev/null |
    awk '$2 ~ /^\[[0-9]+\]$/ && $4 == "spinthreads" { split($3, a, "/"); print a[2] }' | sort -u | tr '\n' ' ')
expect_eq "each of its threads is sampled" "$(echo $tids | wc -w)" 3
expect_eq "and only they ($(cut -d: -f2 /tmp/threads.txt))" \
    "$(echo $tids | tr ' ' '\n' | sort -n | tr '\n' ' ')" \
    "$(cut -d: -f2 /tmp/threads.txt | tr ' ' '\n' | grep . | sort -n | tr '\n' ' ')"

# --- pid=0: every task again
expect_eq "back to every task" "$(try 0)" ok
streamed /tmp/all.bin sleep 0.5
comms /tmp/all.bin >/tmp/comms.txt
check "otherload sampled again ($(count otherload /tmp/comms.txt))" [ "$(count otherload /tmp/comms.txt)" -gt 0 ]
# Its work is done: at nice 0 beside the recorder and the 20 kHz command
# below it made `record -- /tmp/workload 2` take 11 to 16 s on the stock VM
# (4 s without it).
kill $other; wait $other 2>/dev/null

# --- oprofile-rs record: a command, -a, -p, SIGINT
echo 1 >$DBG/tracing_on
drain
busy
check "a workload at nice 19 on every CPU ($(echo $busy | wc -w))" busy_niced
echo "== 1. record -- COMMAND: the command alone"
# 20 kHz: the dynamic loader's millisecond or so gets samples.
oprofile-rs record -q -o /tmp/c.data --debugfs $NODBG -c 50000 -- /tmp/workload 2 2>/tmp/c.err
rc=$?; cat /tmp/c.err
expect_eq "record -- /tmp/workload 2 exits 0" $rc 0
expect_eq "pid is put back" "$(cat $DBG/pid)" 0
check "the side-car says so" grep -q "^settings-restored: .*pid=0" /tmp/c.data.meta/info
cmd=$(sed -n 's/^command: .* (pid \([0-9]*\))$/\1/p' /tmp/c.data.meta/info)
grep -E '^(settings|profiled|command)' /tmp/c.data.meta/info
check "side-car: pid set to the command's ($cmd)" grep -q "^settings: sample_period=50000 sample_freq=0 pid=$cmd " /tmp/c.data.meta/info
# (the stream's accounting is accounting.sh's: here, whose samples)
oprofile-rs report -q --all -i /tmp/c.data >/tmp/rep.txt; rc=$?
expect_eq "report -i the recording" $rc 0
check "report: profiled the command alone" grep -q "^# profiled: pid $cmd and the tasks it created$" /tmp/rep.txt
expect_eq "every sample is the command's (no other workload's)" "$(tgids /tmp/c.data)" "$cmd"
check "its hot function" grep -q hot_three_quarters /tmp/rep.txt

echo "== 2. a command that forks: its child process is sampled too"
oprofile-rs record -q -o /tmp/f.data --debugfs $NODBG -- sh -c '/tmp/workload 1; /tmp/workload 1' 2>/tmp/f.err
rc=$?; cat /tmp/f.err
expect_eq "record -- sh -c ... exits 0" $rc 0
n=$(tgids /tmp/f.data | wc -l)
in_range "processes sampled: the shell's two children, maybe the shell" "$n" 2 3
expect_eq "pid is put back" "$(cat $DBG/pid)" 0

echo "== 3. record -a -- COMMAND: every task"
oprofile-rs record -q -o /tmp/a.data --debugfs $NODBG -a -- /tmp/workload 1 2>/tmp/a.err
rc=$?; cat /tmp/a.err
expect_eq "record -a exits 0" $rc 0
check "side-car: nothing set" sh -c '! grep -q "^settings:" /tmp/a.data.meta/info'
n=$(tgids /tmp/a.data | wc -l)
check "the other workloads' samples too ($n processes)" [ "$n" -gt "$NCPU" ]
oprofile-rs report -q --all -i /tmp/a.data >/tmp/rep.txt
check "report: every task" grep -q '^# profiled: every task (system-wide)$' /tmp/rep.txt

echo "== 4. record -p PID: that process alone, until it exits"
/tmp/workload 600 >/dev/null & target=$!
oprofile-rs record -q -o /tmp/p.data --debugfs $NODBG -p $target 2>/tmp/p.err & rp=$!
wait_for sh -c "[ \"\$(cat $DBG/pid)\" = $target ]"
sleep 1; kill $target; wait $target 2>/dev/null
wait $rp; rc=$?; cat /tmp/p.err
expect_eq "record -p exits 0" $rc 0
expect_eq "pid is put back" "$(cat $DBG/pid)" 0
expect_eq "every sample is the process's" "$(tgids /tmp/p.data)" "$target"

echo "== 5. SIGINT while recording a command"
oprofile-rs record -q -o /tmp/i.data --debugfs $NODBG -- /tmp/workload 600 2>/tmp/i.err &
rp=$!
wait_for sh -c "[ \"\$(cat $DBG/pid)\" != 0 ]"
held=$(cat $DBG/pid)
kill -INT $rp; wait $rp; rc=$?; cat /tmp/i.err
expect_eq "record exits 0 on SIGINT" $rc 0
expect_eq "pid is put back" "$(cat $DBG/pid)" 0
check "the command was ended" sh -c "! kill -0 $held 2>/dev/null"
stop_busy
echo 0 >$DBG/tracing_on

# --- a CPU replugged while a bound process runs; rmmod while bound
/tmp/workload 600 >/dev/null & w=$!
expect_eq "bind a running workload" "$(try $w)" ok
echo 1 >$DBG/tracing_on
sleep 0.3
echo 0 >/sys/devices/system/cpu/cpu1/online; echo 1 >/sys/devices/system/cpu/cpu1/online
sleep 0.3
r0=$(stat_total sample_received)
sleep 0.3
check "samples across the replug ($r0 -> $(stat_total sample_received))" [ "$(stat_total sample_received)" -gt "$r0" ]
check "rmmod while bound" rmmod oprofile_rs
check "the bound process still runs" kill -0 $w
kill $w 2>/dev/null; wait $w 2>/dev/null
check_kmemleak
finish
