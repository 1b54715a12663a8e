#!/bin/sh
# Debian's own kernel under lockdown=integrity (what Secure Boot gives): the
# module as built (unsigned, or signed with a key this kernel does not trust)
# is refused. To load it there, sign it with a key enrolled in the MOK list
# (Documentation/user-guide.md, "Secure Boot"); tests/guest/lockdown.sh
# shows the signed module working under lockdown on the rig's kernel.
# kernels: stock
# vm-run: --append lockdown=integrity
. /tmp/lib.sh
check "booted with lockdown=integrity" grep -q 'lockdown=integrity' /proc/cmdline
mount -t securityfs securityfs /sys/kernel/security 2>/dev/null
expect_eq "lockdown is integrity" "$(cat /sys/kernel/security/lockdown)" "none [integrity] confidentiality"
mark lock
out=$(insmod /oprofile_rs.ko 2>&1); rc=$?
echo "insmod: $out (exit $rc)"
check "insmod of the unsigned module fails" [ $rc -ne 0 ]
check "the module is not loaded" sh -c "! grep -q '^oprofile_rs ' /proc/modules"
check "$DEV does not exist" [ ! -e $DEV ]
dmesg_since lock
dmesg_since lock | grep -qiE 'lockdown|unsigned module loading is restricted|Key was rejected|required key' \
    && pass "the kernel says why" || fail "the kernel log does not say why"
expect_eq "the kernel stays untainted" "$(cat /proc/sys/kernel/tainted)" 0
finish
