#!/bin/sh
# tests/soak/sync-per-cpu.sh [MASK...] (in the test VM, outside CI): the
# sync's cost per record and the losses per CPU, with the reader (`cat`)
# pinned to each CPU mask given (`none`: not pinned; default: none 1 2), at
# period 200,000 ns, the workload pinned to every CPU for 2 s. What showed
# the 2-vCPU rows of scripts/bench-scaling to be QEMU's -icount round robin
# (Documentation/benchmarks.md, "Scaling of the sync"). Run it with:
#   scripts/vm-run --no-kunit --icount 3 --smp 2 --add tests/soak/sync-per-cpu.sh \
#       --add tests/guest/lib.sh --add "$(scripts/lib.sh-guest-bins)/workload" -- sh /tmp/sync-per-cpu.sh
# (the workload binary: `tests/run-guest` builds it into the cache's guest-bin/).
. /tmp/lib.sh
[ $# -gt 0 ] || set -- none 1 2
for catcpu in "$@"; do
    insmod /oprofile_rs.ko sample_period=200000 || exit 1
    if [ "$catcpu" = none ]; then
        cat $DEV >/tmp/s.bin & catpid=$!
    else
        taskset "$catcpu" cat $DEV >/tmp/s.bin & catpid=$!
    fi
    workload_every_cpu 2
    echo 0 >$DBG/tracing_on; sleep 0.5
    kill $catpid; wait $catpid 2>/dev/null
    for c in $(stat_cpus); do
        r=$(stat_of "$c" sync_records)
        echo "cat-mask=$catcpu cpu$c received=$(stat_of "$c" sample_received)" \
            "lost=$(stat_of "$c" sample_lost_overflow) moved=$r ns/rec=$(( $(stat_of "$c" sync_ns) / (r + 1) ))" \
            "workload: $(cat /tmp/w."$c")"
    done
    rm -f /tmp/s.bin /tmp/w.*; rmmod oprofile_rs
done
