#!/bin/sh
# The device's interface beyond plain reads: permissions (what perf needs,
# whatever the node's mode), control files (O_WRONLY takes no reader slot),
# ioctls, zero-length reads, pread, threads sharing one file, rate-limited
# log lines.
. /tmp/lib.sh
check "insmod" insmod /oprofile_rs.ko
/tmp/workload 30 >/dev/null &
wl=$!

# Permissions: a chmod 666 of the node lets nobody in.
chmod 666 $DEV
expect_eq "nobody cannot open $DEV even when it is 0666" "$(/tmp/probe -u 65534 read $DEV 4096 nonblock)" "err EACCES"
expect_eq "nobody cannot open it for control either" "$(/tmp/probe -u 65534 ioctl $DEV get wronly)" "err EACCES"
chmod 600 $DEV

# Reads of odd sizes.
expect_eq "a zero-length read returns 0" "$(/tmp/probe read $DEV 0 nonblock)" "ok 0"
expect_eq "pread: ESPIPE (a stream)" "$(/tmp/probe pread $DEV)" "err ESPIPE"

# Control files and ioctls.
expect_eq "an O_WRONLY open takes no reader slot" "$(/tmp/probe openw $DEV)" "ok 4"
expect_eq "GET_TRACING: on" "$(/tmp/probe ioctl $DEV get wronly)" "value 1 ok 0"
expect_eq "TRACING_OFF on a control file" "$(/tmp/probe ioctl $DEV off wronly)" "ok 0"
expect_eq "tracing_on follows the ioctl" "$(cat $DBG/tracing_on)" "0"
expect_eq "GET_TRACING: off" "$(/tmp/probe ioctl $DEV get)" "value 0 ok 0"
r1=$(stat_of 0 sample_received); sleep 0.5
r2=$(stat_of 0 sample_received)
expect_eq "no sample while off by ioctl" "$r2" "$r1"
expect_eq "TRACING_ON on a reader's file" "$(/tmp/probe ioctl $DEV on)" "ok 0"
expect_eq "tracing_on follows the ioctl" "$(cat $DBG/tracing_on)" "1"
expect_eq "FLUSH" "$(/tmp/probe ioctl $DEV flush wronly)" "ok 0"
expect_eq "an unknown ioctl: ENOTTY" "$(/tmp/probe ioctl $DEV bogus wronly)" "err ENOTTY"
# Access mode 3 (open(path, 3): neither read nor write, the kernel gives no
# FMODE_READ): a control file, which neither reads nor consumes nor takes the
# reader slot.
expect_eq "access mode 3 is a control file (no read, no consume, no reader slot)" \
    "$(/tmp/probe open3 $DEV)" "read EBADF consume EBADF get ok reader ok"

# The permission model (user-guide: Security): checked at open; an fd keeps
# what it was opened for in a process that dropped its privileges (or got it
# passed), while that process cannot open the device itself.
expect_eq "a kept fd works after a drop to nobody, a new open does not" \
    "$(/tmp/probe keepfd $DEV 65534)" "reopen EACCES get ok read 96 mmap ok flush ok"

# A blocked read and a signal that does not kill (SIGALRM, no SA_RESTART).
echo 0 >$DBG/tracing_on
expect_eq "a signal interrupts a blocked read: EINTR" "$(/tmp/probe readsig $DEV 1048576 300)" "err EINTR"
echo 1 >$DBG/tracing_on

# Threads sharing one file: one stream, one header.
out=$(/tmp/probe threads $DEV 1500)
expect_eq "two threads reading one file get one header, no error" "$out" "headers 1 errors 0"

# A loop of refused opens does not flood the log.
cat $DEV >/dev/null &
catpid=$!
wait_for reading_device $catpid
mark flood
t0=$(date +%s)
# (One process: 300 of them took 43 s on the lockdep VM.)
expect_eq "300 opens beside the reader: each EBUSY" "$(/tmp/probe opens $DEV 300)" "ok 0 ebusy 300 other 0"
windows=$(( ($(date +%s) - t0) / 5 + 2 ))   # 5-s rate-limit windows the loop touched, rounded up
lines=$(dmesg_since flood | grep -c 'refused a second reader')
check "300 refused opens ($windows windows) log at most $((10 * windows)) lines ($lines)" [ "$lines" -le $((10 * windows)) ]
check "and at least one ($lines)" [ "$lines" -ge 1 ]
kill $catpid; wait $catpid 2>/dev/null
kill $wl; wait $wl 2>/dev/null
check "rmmod" rmmod oprofile_rs
finish
