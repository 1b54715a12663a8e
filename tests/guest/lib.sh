# Helpers for guest test scenarios (sourced inside the test VM).
# A scenario fails at its first failed check; its output says which.
set -u
DBG=/sys/kernel/debug/oprofile
DEV=/dev/oprofile/buffer
failures=0
pass() { echo "PASS: $*"; }
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
# check DESCRIPTION COMMAND...: COMMAND must succeed.
check() { local d=$1; shift; if "$@"; then pass "$d"; else fail "$d"; fi; }
# expect_eq DESCRIPTION ACTUAL EXPECTED
expect_eq() { if [ "$2" = "$3" ]; then pass "$1"; else fail "$1: got '$2', expected '$3'"; fi; }
# dmesg_since MARK: kernel log lines after the line containing MARK.
mark() { echo "oprofile-test-mark $1" >/dev/kmsg; }
dmesg_since() { dmesg | sed -n "/oprofile-test-mark $1\$/,\$p"; }
finish() {
    if [ "$failures" -ne 0 ]; then echo "$failures check(s) failed"; exit 1; fi
    echo "all checks passed"
}
