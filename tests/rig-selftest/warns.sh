#!/bin/sh
# Rig self-test: a problem in the scenario's part of the kernel log fails it
# though its checks pass, and ends the boot (expected: FAILED, the kernel log).
. /tmp/lib.sh
echo "WARNING: rig self-test: a synthetic warning" >/dev/kmsg
check "true passes" true
finish
