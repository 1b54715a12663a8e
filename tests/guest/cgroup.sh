#!/bin/sh
# vm-run: --timeout 600
# The cgroup filter (debugfs `cgroup`, the SET ioctl's key, `cgroup=` at
# load, `oprofile-rs record -G`): only tasks of one cgroup (v2) and of its
# descendants are sampled, the others counted as sample_other_cgroup.
# - values: `/` (every task), a path below the cgroup2 root, an id (the
#   directory's inode number); read back as the path; EINVAL for garbage,
#   ENOENT for no such cgroup (`..` included), ENOTDIR for a file, EBUSY while
#   recording, EACCES for an unprivileged user; nothing changed by a refusal;
# - streams: with /box set, every SAMPLE is of the workloads in /box/inner
#   (a descendant), none of those in /other, though both run on every CPU;
#   the CONFIG record carries the filter's id; `/` samples both again;
# - membership at sample time: a task moved out of /box is no longer sampled;
# - a filtering cgroup removed (rmdir) while it filters: shown by its id,
#   nothing sampled, `/` again; rmmod with a filter set; `cgroup=` at load
#   (ENOENT and EINVAL fail the load with a log line);
# - `oprofile-rs record -G DIR -- COMMAND`: the command's samples only, the
#   filter put back after.
. /tmp/lib.sh
try() { /tmp/cfgctl write "$DBG/cgroup" "$1"; }
cfg() { sed -n "s/^$1=//p" $DBG/config; }
CG=/sys/fs/cgroup
grep -q " $CG cgroup2 " /proc/mounts || mount -t cgroup2 none $CG || { fail "mount cgroup2"; exit 1; }
mkdir -p $CG/box/inner $CG/other $CG/gone
# inbox DIR CPU: a workload on CPU, in cgroup DIR, until stopped (its pid in
# $!). Workloads of a fixed length were over before recording started on a
# slow guest (the lockdep kernel on a loaded host): the shell's set-up took
# longer than they lived.
# With NICE, at that nice value (busybox has renice, not nice).
inbox() { sh -c "echo \$\$ >$CG/$1/cgroup.procs && renice -n ${3:-0} \$\$ >/dev/null && exec taskset $(printf %x $((1 << $2))) /tmp/workload 600" >/dev/null & }
# niced TGIDS NICE: each one runs the workload at nice NICE.
# shellcheck disable=SC2046 # the pids are words
niced() { runs_niced "$2" $(echo "$1" | tr , ' '); }
# everywhere DIR [NICE]: inbox on every CPU; their pids, comma-separated, in $tg.
everywhere() {
    local c=0; tg=
    while [ $c -lt "$NCPU" ]; do inbox "$1" $c "${2:-0}"; tg="$tg${tg:+,}$!"; c=$((c + 1)); done
}
# running TGIDS: each one runs the workload (it then is in its cgroup).
running() {
    for p in $(echo "$1" | tr , ' '); do [ "$(cat /proc/$p/comm 2>/dev/null)" = workload ] || return 1; done
}
# stop_all TGIDS: stops them and waits for them.
stop_all() {
    # shellcheck disable=SC2046 # the pids are words
    kill $(echo "$1" | tr , ' ') 2>/dev/null; wait $(echo "$1" | tr , ' ') 2>/dev/null
}
# streamed FILE SECS: a new stream into FILE while recording is on for SECS s.
streamed() {
    cat $DEV >"$1" & catpid=$!
    wait_for reading_device $catpid
    echo 1 >$DBG/tracing_on; sleep "$2"; echo 0 >$DBG/tracing_on
    stop_reader $catpid
}
# procs TGIDS: each one's pid, comm, state, user+system ticks and cgroup (for
# a failure's report).
procs() {
    for p in $(echo "$1" | tr , ' '); do
        printf '%s ' "$(awk '{ print $1 ":" $2 ":" $3 ":" $14 + $15 }' /proc/$p/stat 2>/dev/null):$(sed 's/^0:://' /proc/$p/cgroup 2>/dev/null)"
    done
}
# samples FILE TGIDS [CGROUP_ID]: "TOTAL MINE" (samples, and those of the
# TGIDS) of the stream's last CONFIG generation, or of the last one whose
# filter is CGROUP_ID.
samples() {
    /tmp/evcheck stream "$1" "$2" >/tmp/ev.out || fail "evcheck $1: $(grep FAIL /tmp/ev.out | head -3)"
    local g
    g=$(awk -v id="${3:-}" '$1 == "config" && (id == "" || $(NF - 3) == id) { g = $2 } END { print g }' /tmp/ev.out)
    awk -v g="$g" '$1 == "samples" && $2 == g { print $4, $5 }' /tmp/ev.out | tail -1
}

check "insmod" insmod /oprofile_rs.ko event=cpu-clock sample_period=1000000 \
    cpu_buffer_size=1048576 buffer_size=8388608
expect_eq "no filter at load" "$(cat $DBG/cgroup)" "/"
expect_eq "config lists it" "$(cfg cgroup)" "/"
expect_eq "EBUSY while recording" "$(try /box)" "err EBUSY"
expect_eq "ioctl: EBUSY while recording" "$(/tmp/cfgctl set cgroup=/box)" "err EBUSY"
echo 0 >$DBG/tracing_on

# --- hostile values: documented errors, nothing changed
snap=$(cat $DBG/config)
for bad in box 0 -1 0x5 18446744073709551616 "/box extra" " " "/box=1" ""; do
    expect_eq "cgroup='$bad': EINVAL" "$(try "$bad")" "err EINVAL"
done
long=/$(head -c 600 /dev/zero | tr '\0' a)
expect_eq "a 601-byte value: EINVAL" "$(try "$long")" "err EINVAL"
longer=/$(head -c 4000 /dev/zero | tr '\0' a)
expect_eq "ioctl: a 4001-byte path: ENOENT" "$(/tmp/cfgctl set "cgroup=$longer")" "err ENOENT"
for nope in /nope /box/nope /box/.. /box/../other 999999999; do
    expect_eq "cgroup=$nope: ENOENT" "$(try $nope)" "err ENOENT"
done
expect_eq "a file: ENOTDIR" "$(try /box/cgroup.procs)" "err ENOTDIR"
expect_eq "ioctl: given twice: EINVAL" "$(/tmp/cfgctl set "cgroup=/box cgroup=/")" "err EINVAL"
expect_eq "ioctl: empty: EINVAL" "$(/tmp/cfgctl set "cgroup=")" "err EINVAL"
expect_eq "nobody cannot write it" "$(/tmp/probe -u 65534 write $DBG/cgroup /box)" "err EACCES"
expect_eq "nothing changed by refused writes" "$(cat $DBG/config)" "$snap"

# --- the values that name a cgroup, read back as its path
id=$(stat -c %i $CG/box/inner)
expect_eq "an id" "$(try "$id")" ok
expect_eq "reads back as its path" "$(cat $DBG/cgroup)" "/box/inner"
expect_eq "// is the root: no filter" "$(try //)" ok
expect_eq "reads back as /" "$(cat $DBG/cgroup)" "/"
expect_eq "a path, its newline allowed" "$(try '/box/\n')" ok
expect_eq "reads back" "$(cat $DBG/cgroup)" "/box"
expect_eq "config too" "$(cfg cgroup)" "/box"
# A name a key=value word cannot carry (a space, a tab, '='; cgroup refuses
# newlines): set by its id, shown by its id; config keeps one line per key.
odd=$(printf '%s/a b\tc=d' $CG)
mkdir "$odd"
oddid=$(stat -c %i "$odd")
expect_eq "a cgroup with an odd name, by its id" "$(try "$oddid")" ok
expect_eq "shown by its id" "$(cat $DBG/cgroup)" "$oddid"
# (one line per key: as many lines as keys, each key once, the cgroup's by id)
expect_eq "config: one line per key" "$(wc -l <$DBG/config)" "$(sed 's/=.*//' $DBG/config | sort -u | wc -l)"
expect_eq "config: its cgroup line" "$(grep '^cgroup=' $DBG/config)" "cgroup=$oddid"
expect_eq "back to /box" "$(try /box)" ok
# record -G takes its directory (by id), whatever the name.
oprofile-rs record -q -G "$odd" -o /tmp/odd.data --duration 0.2 2>/tmp/odd.err && \
    grep -q "cgroup: $oddid " /tmp/odd.data.meta/info && pass "record -G DIR with an odd name: by its id" \
    || fail "record -G DIR with an odd name: $(cat /tmp/odd.err)"
expect_eq "the filter put back" "$(cat $DBG/cgroup)" "/box"
rmdir "$odd"

# --- one stream: /box set, workloads in /box/inner and in /other on every CPU
other0=$(stat_total sample_other_cgroup)
everywhere box/inner; intg=$tg
everywhere other; outtg=$tg
wait_for running "$intg,$outtg"
before=$(procs "$intg")
streamed /tmp/g1.bin 2
after=$(procs "$intg")
stop_all "$intg,$outtg"
set -- $(samples /tmp/g1.bin "$intg")
echo "filtered stream: $1 samples, $2 of the /box/inner workloads"
if [ "${1:-0}" -gt 0 ]; then pass "samples of /box/inner"; else
    fail "samples of /box/inner"
    echo "the /box/inner workloads before streaming: $before"
    echo "after: $after"
    echo "the stream: $(wc -c </tmp/g1.bin) bytes; evcheck:"; grep -v '^ustack' /tmp/ev.out | tail -20
    oprofile-rs script --all --events -i /tmp/g1.bin 2>&1 | grep -E "LOST|TRACING|SNAPSHOT|rror" | tail -20
    grep -v '^cpu' $DBG/stats
fi
expect_eq "every sample is of /box/inner" "${2:-x}" "${1:-y}"
# The stream restates the load's CONFIG, then the changes above: the last is /box.
expect_eq "the last CONFIG record carries /box's id" \
    "$(awk '$1 == "config" { id = $(NF - 3) } END { print id }' /tmp/ev.out)" "$(stat -c %i $CG/box)"
other1=$(stat_total sample_other_cgroup)
echo "sample_other_cgroup: $other0 -> $other1"
check "the others are counted in sample_other_cgroup" [ "$other1" -gt "$other0" ]

# --- every task again (ioctl)
expect_eq "ioctl: cgroup=/" "$(/tmp/cfgctl set cgroup=/)" ok
everywhere other; outtg=$tg
wait_for running "$outtg"
before=$(procs "$outtg")
streamed /tmp/g2.bin 1
after=$(procs "$outtg")
stop_all "$outtg"
set -- $(samples /tmp/g2.bin "$outtg")
if [ "${2:-0}" -gt 0 ]; then pass "without a filter, /other is sampled ($2 of $1)"; else
    fail "without a filter, /other is sampled ($2 of $1)"
    echo "the /other workloads before streaming: $before"
    echo "after: $after"
    oprofile-rs report --all -i /tmp/g2.bin --sort comm,pid --top 10 2>&1
fi
expect_eq "the last CONFIG: no filter" "$(awk '$1 == "config" { id = $(NF - 3) } END { print id }' /tmp/ev.out)" 0

# --- membership at sample time: a task moved out is no longer sampled
expect_eq "cgroup=/box" "$(try /box)" ok
inbox box 0; mover=$!
wait_for running $mover
streamed /tmp/g3.bin 1
echo $mover >$CG/other/cgroup.procs
streamed /tmp/g4.bin 1
set -- $(samples /tmp/g3.bin "$mover")
check "in /box: sampled ($2 of $1)" [ "${2:-0}" -gt 0 ]
set -- $(samples /tmp/g4.bin "$mover")
expect_eq "moved to /other: not sampled" "${2:-x}" 0
stop_all $mover

# --- the filtering cgroup removed while it filters
expect_eq "cgroup=/gone" "$(try /gone)" ok
gid=$(stat -c %i $CG/gone)
check "rmdir of the filtering cgroup" rmdir $CG/gone
# dying: removed, but a reference (the filter's) keeps it
dying() { sed -n 's/^nr_dying_descendants //p' $CG/cgroup.stat; }
check "the filter holds the removed cgroup ($(dying) dying)" [ "$(dying)" -ge 1 ]
expect_eq "shown by its id once removed" "$(cat $DBG/cgroup)" "$gid"
expect_eq "its id no longer names a cgroup" "$(try "$gid")" "err ENOENT"
other2=$(stat_total sample_other_cgroup)
recv2=$(stat_total sample_received)
echo 1 >$DBG/tracing_on; workload_every_cpu 1; echo 0 >$DBG/tracing_on
expect_eq "nothing sampled in the removed cgroup" "$(stat_total sample_received)" "$recv2"
check "the rest counted as other cgroups" [ "$(stat_total sample_other_cgroup)" -gt "$other2" ]
expect_eq "back to every task" "$(try /)" ok
expect_eq "reads back" "$(cat $DBG/cgroup)" "/"
# The filter's reference dropped: the removed cgroup is freed (no dying one
# left; the kernel frees it after RCU grace periods and a work item).
n=0; while [ "$(dying)" != 0 ] && [ $n -lt 100 ]; do sleep 0.1; n=$((n + 1)); done
expect_eq "the removed cgroup is released with the filter" "$(dying)" 0

# --- the flight recorder, filtering on an empty cgroup while the workloads run
# elsewhere: a snapshot's pause refuses samples (counted received and lost), but
# not those of other cgroups, which are only counted as such
check "rmmod" rmmod oprofile_rs
check "insmod mode=overwrite cgroup=/box/inner" insmod /oprofile_rs.ko mode=overwrite event=cpu-clock \
    sample_period=100000 cgroup=/box/inner
cat $DEV >/dev/null & catpid=$!
everywhere other; outtg=$tg
wait_for running "$outtg"
n=0; while [ $n -lt 40 ]; do echo 1 >$DBG/snapshot; n=$((n + 1)); done
stop_all "$outtg"
kill $catpid; wait $catpid 2>/dev/null
echo "$(grep -c . $DBG/stats) stats lines; snapshot: $(cat $DBG/snapshot)"
expect_eq "nothing received from an empty cgroup" "$(stat_total sample_received)" 0
expect_eq "nothing lost to the snapshots' pauses" "$(stat_total sample_lost_snapshot)" 0
check "the workloads counted as other cgroups ($(stat_total sample_other_cgroup))" \
    [ "$(stat_total sample_other_cgroup)" -gt 0 ]
# The handler's average is over every overflow it handled (it was over the
# received ones only: 0 here, and doubled where half the samples were filtered).
check "handler_avg_ns covers the overflows of other cgroups ($(stat_max handler_avg_ns))" \
    [ "$(stat_max handler_avg_ns)" -gt 0 ]
echo 0 >$DBG/tracing_on

# --- rmmod with a filter set; cgroup= at load
expect_eq "cgroup=/box before rmmod" "$(try /box)" ok
check "rmmod with a filter set" rmmod oprofile_rs
check "insmod cgroup=/box/inner" insmod /oprofile_rs.ko cgroup=/box/inner
expect_eq "the load's filter" "$(cat $DBG/cgroup)" "/box/inner"
expect_eq "the parameter keeps its text" "$(cat /sys/module/oprofile_rs/parameters/cgroup)" "/box/inner"
check "rmmod" rmmod oprofile_rs
mark cgbad1
out=$(insmod /oprofile_rs.ko cgroup=/nope 2>&1) && fail "insmod cgroup=/nope succeeded"
# (busybox's insmod words ENOENT as "unknown symbol in module, or unknown parameter")
case $out in *"No such file"*|*"unknown symbol in module"*) pass "insmod cgroup=/nope fails" ;;
    *) fail "insmod cgroup=/nope: $out" ;; esac
dmesg_since cgbad1 | grep -q 'cgroup="/nope": no such cgroup here (error -2)' \
    && pass "ENOENT, and the log names cgroup" \
    || fail "log: $(dmesg_since cgbad1 | tail -3)"
[ -e $DEV ] && fail "$DEV exists after a failed load"
out=$(insmod /oprofile_rs.ko cgroup=box 2>&1) && fail "insmod cgroup=box succeeded"
case $out in *"Invalid argument"*) pass "insmod cgroup=box: EINVAL" ;; *) fail "insmod cgroup=box: $out" ;; esac

# --- oprofile-rs record -G: only the command's cgroup
check "insmod" insmod /oprofile_rs.ko event=cpu-clock sample_period=1000000
# At nice 19: every CPU still busy outside the filter, the recorder and its
# command not slowed by them (at nice 0, 20 s of the 2 s command's record
# on the lockdep and stock VMs).
everywhere other 19; outtg=$tg
wait_for niced "$outtg" 19
check "/other busy at nice 19 on every CPU" niced "$outtg" 19
box=$(stat -c %i $CG/box)
oprofile-rs record -q -G $CG/box -o /tmp/r.data -- \
    sh -c "echo \$\$ >/tmp/cmd.pid; echo \$\$ >$CG/box/cgroup.procs && exec /tmp/workload 2" \
    2>/tmp/rec.err || fail "record -G: $(cat /tmp/rec.err)"
stop_all "$outtg"
expect_eq "record put the filter back" "$(cat $DBG/cgroup)" "/"
set -- $(samples /tmp/r.data "$(cat /tmp/cmd.pid)" "$box")
check "record -G: samples under the filter ($1)" [ "${1:-0}" -gt 0 ]
expect_eq "record -G: all of them the command's" "${2:-x}" "${1:-y}"
oprofile-rs report -i /tmp/r.data --top 3 >/tmp/rep.txt 2>&1 || fail "report: $(cat /tmp/rep.txt)"
grep -q "workload" /tmp/rep.txt && pass "report shows the command" || fail "report: $(head -20 /tmp/rep.txt)"
grep -q "cgroup: $box" /tmp/r.data.meta/info 2>/dev/null \
    && pass "the side-car says so" || fail "side-car: $(cat /tmp/r.data.meta/info 2>/dev/null)"
check "rmmod" rmmod oprofile_rs
check_kmemleak
finish
