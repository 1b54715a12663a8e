#!/bin/sh
# tsc-sync-stall.sh (scripts/tsc-sync-probe): in a guest booted with the
# kernel's TSC checks and without the module, takes CPU 1 offline and brings
# it online once (in the background: that write may never return), 20 s
# after it starts (scripts/tsc-sync-probe attaches its debugger meanwhile and
# makes CPU 0 skip its side of the TSC sync check). Then it reports every
# 10 s, for 90 s, that CPU 0 still runs user space and whether CPU 1 came
# online: what a guest whose CPU 0 never answers the incoming CPU's TSC-sync
# IPI looks like from inside.
CPU1=/sys/devices/system/cpu/cpu1/online
sleep 20
echo 0 >$CPU1 || { echo "FAIL: cpu1 offline"; exit 1; }
echo "cpu1 offline at $(cut -d' ' -f1 /proc/uptime) s"
( echo 1 >$CPU1 && echo "cpu1 online at $(cut -d' ' -f1 /proc/uptime) s" ) &
for i in 1 2 3 4 5 6 7 8 9; do
    sleep 10
    # Not $CPU1: reading it waits for the device lock the online write holds.
    echo "CPU 0 runs user space at $(cut -d' ' -f1 /proc/uptime) s; online CPUs: $(cat /sys/devices/system/cpu/online)"
done
echo "done"
