#!/bin/sh
# Rig self-test: a failed check fails the scenario (expected: FAILED, exit status 1).
. /tmp/lib.sh
check "true passes" true
check "false fails" false
finish
