#!/bin/sh
# Rig self-test: runs after hangs.sh, in the fresh boot that follows it (expected: ok).
. /tmp/lib.sh
check "true passes" true
finish
