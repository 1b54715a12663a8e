// SPDX-License-Identifier: GPL-2.0
// cflags: -fomit-frame-pointer -fno-optimize-sibling-calls -fno-ipa-icf -fno-inline
// dynamic:
/*
 * shlib_dlopen SECONDS: tests/guest/shlib.c with the library loaded late:
 * after DELAY ms (default 300; a second argument) it dlopen()s libhot.so
 * (beside it: /tmp in the guest, found through its rpath $ORIGIN) and
 * calls lib_outer through dlsym, main -> outer_x -> lib_outer -> hot_a 3/4
 * of the time, main -> outer_y -> lib_outer -> hot_b 1/4, for SECONDS from
 * then. A recording started with the program meets the library's mapping
 * only in the kernel's map records (`oprofile-rs record` then loads its
 * unwind table). Exits 2 if the library cannot be loaded.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "vary.h"

static void (*lib_outer)(int which, unsigned long n);

volatile unsigned long sink;

__attribute__((noipa)) void outer_x(unsigned long n)
{
	lib_outer(1, 3 * n);
	sink++;
}

__attribute__((noipa)) void outer_y(unsigned long n)
{
	lib_outer(0, n);
	sink++;
}

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 2;
	long delay_ms = argc > 2 ? atol(argv[2]) : 300;
	struct timespec t0, t, nap = { delay_ms / 1000, delay_ms % 1000 * 1000000 };
	void *lib;

	nanosleep(&nap, NULL);
	lib = dlopen("libhot.so", RTLD_NOW);
	if (!lib) {
		fprintf(stderr, "shlib_dlopen: %s\n", dlerror());
		return 2;
	}
	*(void **)&lib_outer = dlsym(lib, "lib_outer");
	if (!lib_outer) {
		fprintf(stderr, "shlib_dlopen: %s\n", dlerror());
		return 2;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		unsigned long n = next_count(10000, 20000);

		outer_x(n);
		outer_y(n);
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while (t.tv_sec - t0.tv_sec + (t.tv_nsec - t0.tv_nsec) / 1e9 < secs);
	return 0;
}
