#!/bin/sh
# Rig self-test: a scenario past its time limit fails as hung, and the
# scenarios after it run in a fresh boot (expected: FAILED, hung).
# vm-run: --timeout 20
. /tmp/lib.sh
check "true passes" true
sleep 600
finish
