// SPDX-License-Identifier: GPL-2.0
// cflags: -fno-omit-frame-pointer
/*
 * workload_fp SECONDS [rate]: tests/guest/workload.c built with frame
 * pointers (scripts/bench-overhead --fit: the copies that fit the
 * frame-pointer chain, on a program that keeps one).
 */
#include "workload.c"
