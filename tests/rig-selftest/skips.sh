#!/bin/sh
# Rig self-test: a skip without `# may-skip:` fails (expected: FAILED, skipped).
. /tmp/lib.sh
check "true passes" true
skip "a skip that nothing declares"
finish
