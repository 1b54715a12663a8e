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
# Every file of the directory (a file added later is covered as well), open
# for reading, and the writable ones for writing too.
files=$(ls $DBG)
echo "debugfs files: $(echo $files)"
check "at least the 17 files of 2026-11-26" [ "$(echo "$files" | wc -w)" -ge 17 ]
for f in $files; do
    exec 3<$DBG/$f
    try_rmmod_while_open "$DBG/$f (read)"
    exec 3<&-
    if [ -n "$(find $DBG/$f -perm -u=w)" ]; then
        exec 3>>$DBG/$f
        try_rmmod_while_open "$DBG/$f (write)"
        exec 3>&-
    fi
done
for f in tracing_on stats event buffer_sizes; do
    exec 3<$DBG/$f
    check "$f still reads while held open" [ -n "$(cat $DBG/$f)" ]
    exec 3<&-
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
