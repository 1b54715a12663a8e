# Helpers for guest test scenarios (sourced inside the test VM).
# A failed check does not stop a scenario: it prints `FAIL: ...`, is counted,
# and the scenario goes on; `finish` (its last line) prints the counts and
# fails the scenario when any check failed. A check is one command: `check
# DESC [ A ] && [ B ]` checks only A (tests/lint-guest-checks refuses it);
# write a range as `in_range`, alternatives as `expect_one_of`.
# A check that cannot apply calls `skip DESC` (a `SKIP:` line, counted); a
# scenario that may skip says why in a header line `# may-skip: WHY`
# (tests/run-guest fails a scenario that skips without one).
set -u
DBG=/sys/kernel/debug/oprofile
DEV=/dev/oprofile/buffer
NCPU=$(grep -c ^processor /proc/cpuinfo)
passes=0 failures=0 skips=0
# Where a scenario's time goes: a check that comes a second or more after
# the one before it says how long (`PASS: ... [+2.4 s]`), read from
# /proc/uptime without a fork.
# (centiseconds: "12.08" is 12 * 100 + 108 - 100, no octal "08")
read -r _lib_t _ </proc/uptime
_lib_t=$((${_lib_t%.*} * 100 + 1${_lib_t#*.} - 100))
since_last() {
    local now d
    read -r now _ </proc/uptime
    now=$((${now%.*} * 100 + 1${now#*.} - 100))
    d=$((now - _lib_t)) _lib_t=$now _lib_gap=
    [ "$d" -lt 100 ] || _lib_gap=$(printf ' [+%d.%d s]' $((d / 100)) $((d % 100 / 10)))
}
pass() { since_last; echo "PASS: $*$_lib_gap"; passes=$((passes + 1)); }
fail() { since_last; echo "FAIL: $*$_lib_gap"; failures=$((failures + 1)); return 1; }
skip() { echo "SKIP: $*"; skips=$((skips + 1)); }
# Each check returns its result (0 passed, else failed), for `if check ...;
# then` (what depends on it); never follow one with && or ||.
# check DESCRIPTION COMMAND...: COMMAND must succeed (one command: for two
# conditions, two checks or `sh -c '...'`).
check() {
    local d=$1
    shift
    [ $# -gt 0 ] || { fail "$d: check without a command (lib.sh misuse)"; return; }
    if "$@"; then pass "$d"; else fail "$d"; fi
}
# insmod ARGS...: busybox's insmod, timed: the rig's scenario runner
# (scripts/guest/run-scenarios) adds up each scenario's module loads (the
# KUnit build's include its suites) from /rig/insmod.times.
insmod() {
    local a b rc
    read -r a _ </proc/uptime
    busybox insmod "$@"; rc=$?
    read -r b _ </proc/uptime
    [ ! -d /rig ] || echo "${a%.*}${a#*.} ${b%.*}${b#*.}" >>/rig/insmod.times
    return $rc
}
# expect_eq DESCRIPTION ACTUAL EXPECTED
expect_eq() {
    [ $# -eq 3 ] || { fail "$1: expect_eq takes 3 arguments, got $# (lib.sh misuse)"; return; }
    if [ "$2" = "$3" ]; then pass "$1"; else fail "$1: got '$2', expected '$3'"; fi
}
# expect_one_of DESCRIPTION ACTUAL EXPECTED...: ACTUAL is one of EXPECTED.
expect_one_of() {
    local d=$1 got=$2 want
    shift 2
    [ $# -gt 0 ] || { fail "$d: expect_one_of without an expected value (lib.sh misuse)"; return; }
    for want in "$@"; do
        [ "$got" = "$want" ] && { pass "$d"; return; }
    done
    fail "$d: got '$got', expected one of: $*"
}
# is_int VALUE: VALUE is a decimal integer (an optional leading -).
is_int() { case ${1#-} in '' | *[!0-9]*) return 1 ;; esac; }
# in_range DESCRIPTION VALUE MIN MAX: MIN <= VALUE <= MAX (integers; an empty
# or non-numeric VALUE fails); the value and the bounds are printed.
in_range() {
    [ $# -eq 4 ] || { fail "$1: in_range takes 4 arguments, got $# (lib.sh misuse)"; return; }
    if ! is_int "$2"; then fail "$1: got '$2', not a number (expected $3..$4)"; return; fi
    if [ "$2" -ge "$3" ] && [ "$2" -le "$4" ]; then pass "$1: $2 in $3..$4"
    else fail "$1: got $2, expected $3..$4"; fi
}
# dmesg_since MARK: kernel log lines after the line containing MARK.
mark() { echo "oprofile-test-mark $1" >/dev/kmsg; }
# The last line containing MARK counts: scenarios share a boot
# (scripts/guest/run-scenarios), and an earlier one may have set the same mark.
dmesg_since() {
    dmesg | awk -v m="oprofile-test-mark $1" '
        length($0) >= length(m) && substr($0, length($0) - length(m) + 1) == m { n = 0; on = 1 }
        on { out[++n] = $0 }
        END { for (i = 1; i <= n; i++) print out[i] }'
}
# dmesg_has MARK TEXT: the kernel log after MARK (dmesg_since) has TEXT (a grep pattern).
dmesg_has() { dmesg_since "$1" | grep -q -- "$2"; }
# The debugfs `stats` counters: stat_of CPU FIELD [FILE] (one CPU's; CPU
# may also name another line, e.g. event_buffer), stat_total FIELD [FILE]
# and stat_max FIELD [FILE] (summed over CPUs, their largest), stat_cpus
# [FILE] (the CPU numbers); FILE defaults to the live $DBG/stats.
stat_line() { case $1 in [0-9]*) echo "cpu$1" ;; *) echo "$1" ;; esac; }
stat_of() { sed -n "s/^$(stat_line "$1")\( .*\)* $2=\([0-9]*\).*/\2/p" "${3:-$DBG/stats}"; }
stat_all() { sed -n "s/^cpu[0-9]*\( .*\)* $1=\([0-9]*\).*/\2/p" "${2:-$DBG/stats}"; }
stat_total() { stat_all "$@" | awk '{ n += $1 } END { print n + 0 }'; }
stat_max() { stat_all "$@" | awk '{ if ($1 > m) m = $1 } END { print m + 0 }'; }
stat_cpus() { sed -n 's/^cpu\([0-9]*\) .*/\1/p' "${1:-$DBG/stats}"; }
# check_accounting STATS REPORT: for every CPU in STATS (debugfs `stats`
# saved to a file), the stream's samples + LOST counts in REPORT (the `#`
# header of `oprofile-rs report`) equal sample_received - sample_invalid_eip.
# Sets lost_total to the sum of the LOST counts.
check_accounting() {
    local cpu recv inval got lost
    lost_total=0
    for cpu in $(stat_cpus "$1"); do
        recv=$(stat_of "$cpu" sample_received "$1")
        inval=$(stat_of "$cpu" sample_invalid_eip "$1")
        got=$(awk -v c="$cpu" '$1 == "#" && $2 == c { print $3 + $4 }' "$2")
        lost=$(awk -v c="$cpu" '$1 == "#" && $2 == c { print $4 }' "$2")
        lost_total=$((lost_total + ${lost:-0}))
        expect_eq "cpu$cpu: stream samples + lost == received - invalid" "${got:-none}" $((recv - inval))
    done
}
# check_stream NAME STREAM STATS: decodes STREAM (`oprofile-rs report`; its `#`
# header printed, kept in /tmp/rep.txt) and checks its accounting against the
# debugfs `stats` saved in STATS (check_accounting).
check_stream() {
    local rc n
    oprofile-rs report -i "$2" --top 1 >/tmp/rep.txt 2>/tmp/rep.err; rc=$?
    [ "$rc" = 0 ] || head -5 /tmp/rep.err
    expect_eq "$1: the stream decodes (report's status)" "$rc" 0
    # `# samples: N, lost: M`: at least one sample decoded.
    n=$(sed -n 's/^# samples: \([0-9]*\),.*/\1/p' /tmp/rep.txt | head -1)
    in_range "$1: samples decoded" "${n:-none}" 1 999999999
    grep '^#' /tmp/rep.txt
    check_accounting "$3" /tmp/rep.txt
}
# check_snapshots STREAM: runs snapcheck (tests/guest/snapcheck.c) on STREAM,
# its per-CPU totals kept in /tmp/snap.txt, and checks that it found nothing
# wrong.
check_snapshots() {
    /tmp/snapcheck "$1" >/tmp/snap.txt; local rc=$?
    grep -v '^snap ' /tmp/snap.txt
    grep FAIL /tmp/snap.txt | head -20
    expect_eq "snapcheck $1: framing, merge order, names, newness, modes" "$rc" 0
}
# check_annotation ANN RC SYM IMAGE N ADDR: the output ANN (exit status RC)
# of `oprofile-rs annotate SYM`, from IMAGE, holds the report's N samples
# of SYM, all on instruction starts, and its code starts at ADDR (hex,
# without leading zeros: where kallsyms puts SYM). The instructions are the
# rows after the listing's column header (`# percent ... instruction`) that
# start with a percentage or an address: where the image has DWARF, a
# summary of the hottest source lines comes before it, and source rows
# (FILE:LINE) between them.
check_annotation() {
    head -40 "$1"
    expect_eq "annotate $3 succeeds" "$2" 0
    expect_eq "its header: the report's samples, all on instruction starts" "$(head -1 "$1")" \
        "# $3 ($4), $5 samples"
    expect_eq "the per-instruction samples add up" \
        "$(awk '/^# +percent .*instruction$/ { on = 1; next }
            on && $1 ~ /^[0-9]+\.[0-9]+$/ && $3 ~ /^[0-9a-f]+$/ { n += $2 }
            END { print n + 0 }' "$1")" "$5"
    expect_eq "the code starts where kallsyms puts $3" \
        "$(awk '/^# +percent .*instruction$/ { on = 1; next }
            on && $1 ~ /^[0-9]+\.[0-9]+$/ { print $3; exit }
            on && $1 ~ /^[0-9a-f]+$/ { print $1; exit }' "$1")" "$6"
}
# samples_while_off SCRIPT: SAMPLE lines (not LOST or CONFIG) of `oprofile-rs script --events`
# output that stand between a TRACING off and the next TRACING on.
samples_while_off() {
    awk '/TRACING off/ { off = 1; next } /TRACING on/ { off = 0; next }
         off && !/ LOST / && !/ CONFIG / { n++ } END { print n + 0 }' "$1"
}
# The torture scenarios (torture.sh, torture-overwrite.sh): torture_args NAME
# DEFAULT_SECS sets `seed` (SEED, to replay a run, or a fresh one) and `secs`
# (TORTURE_SECS or DEFAULT_SECS) and prints them with the replay command;
# torture_count WHAT is a count /tmp/torture printed to /tmp/t.txt.
torture_args() {
    seed=${SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}
    secs=${TORTURE_SECS:-$2}
    echo "$1: seed $seed, $secs s (replay: SEED=$seed tests/run-guest [--debug] $1)"
}
torture_count() { sed -n "s/.*[ (]$1 \([0-9]*\).*/\1/p" /tmp/t.txt | head -1; }

# check_kmemleak [WHEN]: on a kernel with kmemleak (the debug one), scans
# and checks that nothing leaked; elsewhere says the check runs on --debug.
check_kmemleak() {
    local k=/sys/kernel/debug/kmemleak leaks
    if [ ! -f $k ]; then echo "(kmemleak not in this kernel; leak check runs on --debug)"; return; fi
    echo scan >$k; echo scan >$k
    leaks=$(grep -c 'unreferenced object' $k)
    grep -A12 'unreferenced object' $k | head -40
    expect_eq "kmemleak finds no leak${1:+ $1}" "$leaks" 0
}
# workload_every_cpu SECS [PROGRAM]: the workload (workload.c, with its rate
# line; PROGRAM: another build of it, default /tmp/workload) pinned to each
# CPU for SECS s; returns when all have ended. Their pids are in $pids, their
# output in /tmp/w.CPU.
workload_every_cpu() {
    local c=0 prog=${2:-/tmp/workload}
    pids=
    while [ $c -lt "$NCPU" ]; do
        taskset "$(printf %x $((1 << c)))" "$prog" "$1" rate >/tmp/w.$c & pids="$pids $!"
        c=$((c + 1))
    done
    # shellcheck disable=SC2086 # the pids are words
    wait $pids
}
# wait_for COMMAND...: until it succeeds, at most 30 s (else the run ends).
wait_for() {
    local n=0
    until "$@"; do
        n=$((n + 1)); [ $n -gt 300 ] && { echo "timed out waiting for: $*"; exit 1; }
        sleep 0.1
    done
}
# runs_niced NICE PID...: each PID runs /tmp/workload at nice NICE (fields
# 2 and 19 of its stat). (The guest's busybox has renice, not nice: start
# a background load reniced, and check it with this.)
runs_niced() {
    local n=$1 p
    shift
    for p in "$@"; do
        [ "$(awk '{ print $2, $19 }' /proc/$p/stat 2>/dev/null)" = "(workload) $n" ] || return 1
    done
}
# pct N TOTAL: N as a share of TOTAL in percent (0 if TOTAL is 0).
pct() { [ "$2" -gt 0 ] && echo $(($1 * 100 / $2)) || echo 0; }
# folded_count RE FILE: the summed count of the folded stacks of FILE that match RE.
folded_count() { awk -v re="$1" '$0 ~ re { n += $NF } END { print n + 0 }' "$2"; }
# waiting_below N: fewer than N bytes wait in the event buffer.
waiting_below() { [ "$(stat_of event_buffer bytes_waiting)" -lt "$1" ]; }
# in_read PID: PID is in the read system call (number 0 on x86_64), i.e. a
# `cat` that wrote out what it read before and waits for more.
in_read() { [ "$(cut -d' ' -f1 "/proc/$1/syscall" 2>/dev/null)" = 0 ]; }
# stop_reader PID [SIGNAL]: once the reader PID (a `cat $DEV`) took everything
# waiting (recording is off, or its records only come from snapshots) and is
# back in read (so it wrote out what it took), sends it SIGNAL (TERM) and
# waits for it; its exit status is stop_reader's. A fixed sleep was too short
# for a slow guest: the reader was killed before the records it was meant to
# keep (the lockdep kernel on a loaded host); and a reader killed as soon as
# nothing waits may still hold its last read, not yet written.
stop_reader() {
    wait_for waiting_below 1
    wait_for in_read "$1"
    kill -"${2:-TERM}" "$1"; wait "$1" 2>/dev/null
}
# stop_reader_flushed PID [SIGNAL]: stop_reader while recording may still be
# on (new records keep coming: nothing waiting may never be seen): flushes
# the CPU buffers, waits until the readers consumed what the event buffer
# had then, and for the reader PID back in read (it wrote out what it took),
# then sends it SIGNAL (TERM) and waits for it.
stop_reader_flushed() {
    echo 1 >$DBG/flush
    wait_for flushed_through "$(stat_of event_buffer bytes_total)"
    wait_for in_read "$1"
    kill -"${2:-TERM}" "$1"; wait "$1" 2>/dev/null
}
# consumed_at_least N: the readers consumed at least N bytes of the event
# buffer in all (its bytes_total less bytes_waiting, read at once).
consumed_at_least() {
    cat $DBG/stats >/tmp/.drain.stats
    [ $(($(stat_of event_buffer bytes_total /tmp/.drain.stats) - $(stat_of event_buffer bytes_waiting /tmp/.drain.stats))) -ge "$1" ]
}
# flushed_through N: consumed_at_least N, after a flush. What comes after
# a flush waits for the next one (or the watershed): the total read just
# after a flush, with recording on, may already hold a few such records,
# and a reader that emptied the buffer before them then slept until the
# watershed (22 s of task-bound's 150 s on the lockdep kernel).
flushed_through() {
    echo 1 >$DBG/flush
    consumed_at_least "$1"
}
# drain: reads and drops what waits (the CPU buffers flushed first), with
# recording left as it is, to make room (a smaller buffer_size, a CONFIG
# record). (`oprofile-rs record` skips the backlog itself before it starts its
# command.) It waits for what was there at the flush, not for an empty buffer:
# with recording on, new records may come faster than a slow guest's reader
# takes them.
drain() {
    cat $DEV >/dev/null & dp=$!
    wait_for reading_device $dp; echo 1 >$DBG/flush
    wait_for flushed_through "$(stat_of event_buffer bytes_total)"
    kill $dp; wait $dp 2>/dev/null
}
# reading_device PID: PID has /dev/oprofile/buffer open (`oprofile-rs record`
# has then set up its signal handlers: wait_for reading_device PID).
reading_device() { ls -l "/proc/$1/fd" 2>/dev/null | grep -q oprofile/buffer; }
# send_file FILE [NAME]: hands FILE to the host on stdout, base64 between
# `=== FILE NAME` and `=== END` (NAME defaults to FILE's name), which
# scripts/lib.sh's receive_files DIR writes to DIR/NAME.
send_file() { echo "=== FILE ${2:-$(basename "$1")}"; base64 "$1"; echo "=== END"; }
# finish: the scenario's last line: prints `checks: P passed, F failed, S
# skipped` last and fails when a check failed or none ran.
finish() {
    [ $((passes + failures + skips)) -gt 0 ] || fail "the scenario ran no check"
    if [ "$failures" -ne 0 ]; then echo "$failures check(s) failed"; else echo "all checks passed"; fi
    echo "checks: $passes passed, $failures failed, $skips skipped"
    [ "$failures" -eq 0 ] || exit 1
}
