#!/bin/sh
# Memory that follows the machine, not its possible CPUs: on a VM with 4
# possible CPUs of which 2 are online (QEMU -smp 4, maxcpus=2), the module
# allocates the buffers of the 2 online CPUs at load (debugfs
# `buffer_memory`), one CPU's worth more when a third comes online (its
# samples, of a workload pinned to it, reach the stream), keeps that CPU's
# buffer when it goes offline (what it recorded is still read: the stream's
# accounting is exact for it), and a run-time cpu_buffer_size change
# reallocates for the 3 CPUs that have buffers, the new size given to a
# fourth that comes online after it. rmmod with CPUs offline that have
# buffers leaves nothing behind (kmemleak on the debug kernel). Last, the
# cap (a quarter of RAM, 1 GiB here) is checked against the online CPUs at
# load and again for each CPU that comes online: 64 MiB CPU buffers load
# with 2 online (4 possible CPUs' worth, 256 MiB, would be refused), a third
# CPU comes online, a fourth is refused (ENOMEM, stays offline, one log
# line), and the module goes on sampling.
# vm-run: --smp 4 --append maxcpus=2
. /tmp/lib.sh
CPU=/sys/devices/system/cpu
mem() { tr ' ' '\n' <$DBG/buffer_memory | sed -n "s/^$1=//p"; }
try() { /tmp/cfgctl write "$DBG/$1" "$2"; }
# One CPU's buffers in consume mode: the ring (its capacity) and its stack
# copy area, besides the staging and scratch areas (`staging_bytes`).
ring() { echo $(($1 + 8192)); }

expect_eq "4 possible CPUs" "$(cat $CPU/possible)" 0-3
# maxcpus=2 left cpu2 and cpu3 offline (an earlier scenario of the same
# boot is followed by the rig's putting every CPU online: undone here).
for c in 2 3; do
    if [ "$(cat $CPU/cpu$c/online)" = 1 ]; then echo 0 >$CPU/cpu$c/online; fi
done
expect_eq "2 online" "$(cat $CPU/online)" 0-1
check "insmod (64 KiB CPU buffers)" insmod /oprofile_rs.ko cpu_buffer_size=65536
cat $DBG/buffer_memory
expect_eq "buffer_memory: 4 possible CPUs" "$(mem possible_cpus)" 4
expect_eq "buffer_memory: 2 online" "$(mem online_cpus)" 2
expect_eq "buffers for the 2 online CPUs only" "$(mem cpu_buffers)" 2
expect_eq "ring bytes of 2 CPUs" "$(mem ring_bytes)" $((2 * $(ring 65536)))
total2=$(mem bytes) event=$(mem event_buffer_bytes)
one=$(((total2 - event) / 2))
expect_eq "total = the event buffer + 2 CPUs' worth" "$total2" $((event + 2 * one))
in_range "one CPU's worth: its ring, stack area, staging and scratch" "$one" $(($(ring 65536) + 32768)) $(($(ring 65536) + 32768 + 16384))

cat $DEV >/tmp/om.bin & catpid=$!
mark om-online
check "cpu2 comes online" sh -c "echo 1 >$CPU/cpu2/online"
cat $DBG/buffer_memory
expect_eq "cpu2 got its buffers" "$(mem cpu_buffers)" 3
expect_eq "one CPU's worth more" "$(mem bytes)" $((total2 + one))
taskset 4 /tmp/workload 2 >/dev/null
in_range "cpu2 sampled the workload pinned to it" "$(stat_of 2 sample_received)" 1 999999999
check "cpu2 goes offline" sh -c "echo 0 >$CPU/cpu2/online"
c2=$(stat_of 2 sample_received)
expect_eq "cpu2 keeps its buffers offline" "$(mem cpu_buffers)" 3
expect_eq "the memory stays" "$(mem bytes)" $((total2 + one))
sleep 0.5
expect_eq "no sample on cpu2 while offline" "$(stat_of 2 sample_received)" "$c2"
echo 0 >$DBG/tracing_on
stop_reader $catpid
cat $DBG/stats >/tmp/om.stats
check_stream "the stream across cpu2's hotplug" /tmp/om.bin /tmp/om.stats
got2=$(awk '$1 == "#" && $2 == 2 { print $3 }' /tmp/rep.txt)
in_range "cpu2's samples are in the stream after it went offline" "${got2:-0}" 1 999999999

# A run-time change with 3 online: 3 CPUs' worth of the new size.
check "cpu2 online again" sh -c "echo 1 >$CPU/cpu2/online"
expect_eq "cpu_buffer_size=131072 with 3 online" "$(try cpu_buffer_size 131072)" ok
cat $DBG/buffer_memory
expect_eq "buffers: still 3 CPUs" "$(mem cpu_buffers)" 3
expect_eq "ring bytes of 3 CPUs at 128 KiB" "$(mem ring_bytes)" $((3 * $(ring 131072)))
expect_eq "total = the event buffer + 3 CPUs' worth of the new size" "$(mem bytes)" $((event + 3 * (one + 65536)))
check "cpu3 comes online" sh -c "echo 1 >$CPU/cpu3/online"
expect_eq "cpu3 got buffers of the size in force" "$(mem ring_bytes)" $((4 * $(ring 131072)))
expect_eq "cpu_buffer_size=65536 with 4 CPUs" "$(try cpu_buffer_size 65536)" ok
expect_eq "ring bytes of 4 CPUs at 64 KiB" "$(mem ring_bytes)" $((4 * $(ring 65536)))
# The flight recorder: each CPU with buffers gets a snapshot staging area,
# also one offline; a CPU coming online after the switch keeps its own.
check "cpu3 goes offline" sh -c "echo 0 >$CPU/cpu3/online"
expect_eq "mode=overwrite" "$(try mode overwrite)" ok
st_ow=$(mem staging_bytes)
in_range "staging: 4 snapshot areas of 64 KiB and more" "$st_ow" $((4 * 65536)) $((4 * 65536 * 2))
check "cpu3 online in overwrite mode" sh -c "echo 1 >$CPU/cpu3/online"
expect_eq "its staging area stays" "$(mem staging_bytes)" "$st_ow"
echo 1 >$DBG/tracing_on
taskset 8 /tmp/workload 1 >/dev/null
echo 0 >$DBG/tracing_on
cat $DEV >/tmp/ow.bin & catpid=$!
check "a snapshot" sh -c "echo 1 >$DBG/snapshot"
stop_reader $catpid
check_snapshots /tmp/ow.bin
s3=$(awk '$1 == "snap" && $3 == "cpu" && $4 == 3 { n += $6 } END { print n + 0 }' /tmp/snap.txt)
in_range "the snapshot holds records of cpu3, online since the switch" "$s3" 1 999999999
check "cpu2 and cpu3 offline" sh -c "echo 0 >$CPU/cpu2/online && echo 0 >$CPU/cpu3/online"
check "rmmod with two CPUs offline that have buffers" rmmod oprofile_rs
check_kmemleak "after rmmod"

# The cap, per CPU that comes online: 64 MiB CPU buffers.
mark om-cap
check "insmod with 64 MiB CPU buffers, 2 online" insmod /oprofile_rs.ko cpu_buffer_size=67108864
expect_eq "64 MiB buffers for 2 CPUs" "$(mem ring_bytes)" $((2 * $(ring 67108864)))
check "cpu2 comes online (3 CPUs: within a quarter of RAM)" sh -c "echo 1 >$CPU/cpu2/online"
expect_eq "cpu3 is refused (past the cap): ENOMEM" "$(/tmp/cfgctl write $CPU/cpu3/online 1)" "err ENOMEM"
expect_eq "cpu3 stays offline" "$(cat $CPU/cpu3/online)" 0
expect_eq "3 CPUs have buffers" "$(mem cpu_buffers)" 3
check "the refusal is logged" dmesg_has om-cap "cpu3: no memory for its buffers"
a=$(stat_total sample_received); sleep 0.5
check "still sampling ($a -> $(stat_total sample_received))" [ "$(stat_total sample_received)" -gt "$a" ]
check "rmmod" rmmod oprofile_rs
check "cpu3 comes online without the module" sh -c "echo 1 >$CPU/cpu3/online"
check "and goes offline" sh -c "echo 0 >$CPU/cpu2/online && echo 0 >$CPU/cpu3/online"
finish
