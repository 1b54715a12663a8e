// SPDX-License-Identifier: GPL-2.0
// cflags: -fomit-frame-pointer -fno-shrink-wrap -fno-optimize-sibling-calls -fno-ipa-icf -fno-inline
/*
 * ustack_nofp SECONDS: tests/guest/ustack.c built without frame pointers
 * (gcc's default at -O2): its user stacks cannot be walked, they come out
 * short, never wrong nor a crash.
 */
#include "ustack.c"
