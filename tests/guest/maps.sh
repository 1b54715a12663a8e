#!/bin/sh
# vm-run: --timeout 600
# Exact process maps (the kernel's MMAP2/COMM/FORK/EXIT records, kept by
# `oprofile-rs record`): every user-mode sample is matched with the mapping in
# force when it was taken. Processes that live 20 ms; code mapped and unmapped
# (dlopen/dlclose) between samples, two files in turn at one address; an exec
# to another binary at the same addresses; the vDSO. Then what the analyses
# show of a recording with -a (every process) and without (the command
# alone), and `record -p`.
. /tmp/lib.sh
check "insmod" insmod /oprofile_rs.ko
cat >/tmp/run.sh <<'RUN'
for i in 1 2 3 4 5 6 7 8 9 10; do /tmp/maps short; sleep 0.05; done
/tmp/maps plugin
/tmp/maps exec
/tmp/maps vdso
RUN
echo "clocksource: $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null)"
# -a: every task is sampled, so that the analyses' default limit to the
# command's processes has others to leave out (the recorder's own samples).
check "record --maps events" oprofile-rs record -q -a --maps events -o /tmp/m.bin -- sh /tmp/run.sh
grep -E '^(maps|map-records|vdso)' /tmp/m.bin.meta/info
check "stream decodes" sh -c 'oprofile-rs script -i /tmp/m.bin >/tmp/m.txt 2>/tmp/m.err'
cat /tmp/m.err
# Script lines: TIME [CPU] TGID/PID COMM ADDRESS SYMBOL (BINARY); user-mode
# addresses print with leading zeros.
user() { awk '$5 ~ /^0000/' /tmp/m.txt; }
count() { user | awk "$1" | wc -l; }

n=$(count '$4 == "maps" && $6 == "short_lived_spin" && $7 == "(maps)"')
procs=$(user | awk '$6 == "short_lived_spin" { print $3 }' | sed 's,/.*,,' | sort -u | wc -l)
echo "short-lived: $n samples in $procs processes"
check "20-ms processes' samples are in short_lived_spin ($n)" [ "$n" -ge 20 ]
check "of several of the 10 processes ($procs)" [ "$procs" -ge 5 ]

a=$(count '$6 == "plugin_a_work" && $7 == "(plugin-a)"')
b=$(count '$6 == "plugin_b_work" && $7 == "(plugin-b)"')
wrong=$(count '($6 == "plugin_a_work" && $7 != "(plugin-a)") || ($6 == "plugin_b_work" && $7 != "(plugin-b)") || ($7 ~ /plugin-a/ && $6 != "plugin_a_work") || ($7 ~ /plugin-b/ && $6 != "plugin_b_work")')
echo "mapped code: plugin-a $a, plugin-b $b, misattributed $wrong"
user | awk '$7 ~ /plugin/ || $6 ~ /plugin_/' | awk '{ print $6, $7 }' | sort | uniq -c
check "samples in plugin_a_work of plugin-a ($a)" [ "$a" -ge 20 ]
check "samples in plugin_b_work of plugin-b ($b)" [ "$b" -ge 20 ]
expect_eq "no sample of the mapped code given the other file or symbol" "$wrong" 0
oprofile-rs annotate -q -i /tmp/m.bin plugin_a_work >/tmp/ann.txt
head -3 /tmp/ann.txt
ann=$(sed -n 's/^# plugin_a_work (\/tmp\/plugin-a), \([0-9]*\) samples.*/\1/p' /tmp/ann.txt)
annsum=$(awk '!/^#/ && $1 ~ /\./ { n += $2 } END { print n + 0 }' /tmp/ann.txt)
expect_eq "annotate plugin_a_work: the samples of plugin-a" "$ann" "$a"
expect_eq "annotate: every one on an instruction" "$annsum" "$a"
pluginpid=$(user | awk '$7 == "(plugin-a)" { print $3; exit }' | sed 's,/.*,,')
unknown=$(user | awk -v p="$pluginpid/" 'index($3, p) == 1 && $7 == "([unknown])"' | wc -l)
expect_eq "no [unknown] user sample of the mapping process" "$unknown" 0

execpid=$(user | awk '$6 == "before_exec_spin" { print $3; exit }' | sed 's,/.*,,')
before=$(count "index(\$3, \"$execpid/\") == 1 && \$4 == \"maps\" && \$6 == \"before_exec_spin\" && \$7 == \"(maps)\"")
after=$(count "index(\$3, \"$execpid/\") == 1 && \$4 == \"workload\" && \$6 ~ /^hot_/ && \$7 == \"(workload)\"")
# (The pid's first moments are the forked shell's, before its exec of maps:
# busybox, rightly; sampled now and then.)
bad=$(count "index(\$3, \"$execpid/\") == 1 && \$7 != \"([vdso])\" && !((\$4 == \"maps\" && \$7 == \"(maps)\") || (\$4 == \"workload\" && \$7 == \"(workload)\") || (\$4 == \"sh\" && \$7 == \"(busybox)\"))")
echo "exec (pid $execpid): before $before, after $after, other $bad"
user | awk -v p="$execpid/" 'index($3, p) == 1 { print $4, $6, $7 }' | sort | uniq -c
check "samples before the exec in before_exec_spin of maps ($before)" [ "$before" -ge 20 ]
check "samples after the exec in hot_* of workload ($after)" [ "$after" -ge 50 ]
expect_eq "no sample of the exec'ing pid given the other binary" "$bad" 0

v=$(count '$7 == "([vdso])"')
vsym=$(count '$7 == "([vdso])" && $6 ~ /clock_gettime|vdso/')
echo "vDSO: $v samples, $vsym symbolised"
user | awk '$7 == "([vdso])" { print $6 }' | sort | uniq -c
check "samples in the vDSO ($v)" [ "$v" -ge 1 ]
expect_eq "every vDSO sample symbolised from the captured vDSO" "$vsym" "$v"

# Recorded with -a: the analyses show every process by default (the
# recorder's own samples too), and --all adds none.
tgids() { awk '{ sub("/.*", "", $3); print $3 }' "$1" | sort -u; }
oprofile-rs script -q --all -i /tmp/m.bin >/tmp/all.txt
tgids /tmp/m.txt >/tmp/t1; tgids /tmp/all.txt >/tmp/t2
# (The command's pid is the recorder's trampoline: named oprofile-rs until
# its exec.)
cmdpid=$(sed -n 's/^command: .*(pid \([0-9]*\))$/\1/p' /tmp/m.bin.meta/info)
rec=$(awk -v c="$cmdpid/" '$4 == "oprofile-rs" && index($3, c) != 1' /tmp/m.txt | wc -l)
extra=$(grep -vxF -f /tmp/t1 /tmp/t2 | wc -l)
echo "processes: $(wc -l </tmp/t1) by default, $(wc -l </tmp/t2) with --all"
check "-a: the default script shows every process, the recorder's samples too ($rec)" [ "$rec" -gt 0 ]
expect_eq "-a: --all shows no more processes" "$extra" 0

# Polling /proc (the fallback) on the same runs: it records and decodes, says
# so in the side-car, and gets what polling can (Documentation/user-guide.md,
# *Process maps*): the binary after an exec (the last copy of the maps wins;
# 2 s of workload, read every 0.5 s: with 0.6 s, a slow guest's recorder
# busy reading the maps of 40 processes could miss the exec'd binary's, and
# its samples then went to the binary before the exec). The rest (20-ms
# processes, a library loaded and unloaded between reads, the binary before
# the exec) is printed, for comparison: polling misses or misattributes it
# by design.
sed 's,^/tmp/maps exec$,/tmp/maps exec 2,' /tmp/run.sh >/tmp/run-poll.sh
check "record --maps poll" oprofile-rs record -q --maps poll -o /tmp/p.bin -- sh /tmp/run-poll.sh
check "its side-car says the maps were polled" grep -q '^maps: polled' /tmp/p.bin.meta/info
# The minute of analyses above left the module's buffers full (nobody read):
# those losses are the backlog's, not this recording's (they were counted
# as its own: 27k-172k lost beside 11k-20k samples).
grep -E '^(samples|lost|backlog-skipped):' /tmp/p.bin.meta/info
psamples=$(sed -n 's/^samples: \([0-9]*\)$/\1/p' /tmp/p.bin.meta/info)
plost=$(sed -n 's/^lost: \([0-9]*\)$/\1/p' /tmp/p.bin.meta/info)
check "the idle minute's losses are not the recording's: ${plost:-?} lost, ${psamples:-?} samples" \
    [ $((${plost:-999999999} * 4)) -lt "${psamples:-0}" ]
check "the polled stream decodes" sh -c 'oprofile-rs script -q --all -i /tmp/p.bin >/tmp/m.txt'
# Recorded without -a: the command alone, the recorder not sampled at all.
pcmd=$(sed -n 's/^command: .*(pid \([0-9]*\))$/\1/p' /tmp/p.bin.meta/info)
prec=$(awk -v c="$pcmd/" '$2 ~ /^\[[0-9]+\]$/ && $4 == "oprofile-rs" && index($3, c) != 1' /tmp/m.txt | wc -l)
expect_eq "record -- CMD: no sample of the recorder (the command alone)" "$prec" 0
pafter=$(count '$4 == "workload" && $6 ~ /^hot_/ && $7 == "(workload)"')
check "with --maps poll: samples after the exec in hot_* of workload ($pafter)" [ "$pafter" -ge 20 ]
echo "with --maps poll: short_lived_spin $(count '$6 == "short_lived_spin"'), plugin-a $(count '$6 == "plugin_a_work" && $7 == "(plugin-a)"'), before_exec_spin $(count '$6 == "before_exec_spin" && $7 == "(maps)"'), [unknown] $(count '$7 == "([unknown])"')"

# record -p: stops when the process exits; the analysis keeps it. The
# process waits stopped until the recorder reads the device (a slow guest took
# longer to start the recorder than the process lived: no sample of it).
sh -c 'kill -STOP $$; exec /tmp/workload 3' &
wpid=$!
stopped() { [ "$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null)" = T ]; }
wait_for stopped $wpid
timeout 120 oprofile-rs record -q -o /tmp/pp.bin -p $wpid & rpid=$!
wait_for reading_device $rpid
kill -CONT $wpid
wait $rpid; rc=$?
check "record -p stops when the process exits (status $rc)" [ "$rc" = 0 ]
others=$(oprofile-rs script -q -i /tmp/pp.bin | awk -v p="$wpid/" 'index($3, p) != 1' | wc -l)
mine=$(oprofile-rs script -q -i /tmp/pp.bin | awk -v p="$wpid/" 'index($3, p) == 1 && $6 ~ /^hot_/' | wc -l)
expect_eq "record -p: only its samples" "$others" 0
check "record -p: its hot functions ($mine)" [ "$mine" -ge 50 ]
[ "$mine" -ge 50 ] || {
    grep -vE '^maps-missing' /tmp/pp.bin.meta/info; oprofile-rs report -q -i /tmp/pp.bin --top 3; cat $DBG/stats
}
wait
check "record -p of a missing pid fails" sh -c '! oprofile-rs record -q -o /tmp/x.bin -p 999999 2>/dev/null'
check "rmmod" rmmod oprofile_rs
finish
