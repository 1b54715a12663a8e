#!/bin/sh
# While any file of the module is open (each debugfs file, the device as a
# reader or as an O_WRONLY control file), rmmod fails with the kernel's "in
# use" answer and the module stays; the close afterwards is safe, and rmmod
# then succeeds. (The kernel crate's debugfs files named no owner: rmmod
# succeeded with one open, and its close oopsed in full_proxy_release.)
. /tmp/lib.sh
check "insmod" insmod /oprofile_rs.ko
try_rmmod_while_open() {   # DESCRIPTION: fd 3 is open on the file
    out=$(rmmod oprofile_rs 2>&1); rc=$?
    check "rmmod refused while $1 is open" [ "$rc" -ne 0 ]
    case $out in *"Resource temporarily unavailable"*) pass "with \"in use\" (EWOULDBLOCK): $out" ;;
                 *) fail "rmmod with $1 open said: '$out'" ;; esac
    check "the module is still loaded" grep -q '^oprofile_rs ' /proc/modules
}
for f in tracing_on stats event buffer_sizes; do
    exec 3<$DBG/$f
    try_rmmod_while_open "$DBG/$f (read)"
    check "$f still reads while held open" [ -n "$(cat $DBG/$f)" ]
    exec 3<&-
done
for f in tracing_on flush; do
    exec 3>>$DBG/$f
    try_rmmod_while_open "$DBG/$f (write)"
    exec 3>&-
done
exec 3<$DEV
try_rmmod_while_open "$DEV (reader)"
exec 3<&-
exec 3>>$DEV
try_rmmod_while_open "$DEV (control, O_WRONLY)"
exec 3>&-
check "every file works after the closes" grep -q '^event_buffer' $DBG/stats
check "rmmod once every file is closed" rmmod oprofile_rs
check "the debugfs directory is gone" [ ! -e $DBG ]
finish
