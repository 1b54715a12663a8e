// SPDX-License-Identifier: GPL-2.0
// cflags: -fomit-frame-pointer -fno-optimize-sibling-calls -fno-ipa-icf -fno-inline
// dynamic: libhot
/*
 * shlib SECONDS: user call stacks through a shared library linked at build
 * time (tests/guest/lib/libhot.c, /tmp/libhot.so in the guest, found
 * through the rpath $ORIGIN), everything built without frame pointers:
 * main -> outer_x -> lib_outer -> hot_a with 3/4 of the work, main ->
 * outer_y -> lib_outer -> hot_b with 1/4. The library's callers, by name
 * and in that split, are what the unwind tables of both the program and
 * the library give back (tests/guest/ustack-shlib.sh);
 * tests/guest/shlib_dlopen.c is the same with the library dlopen()ed.
 *
 * The rounds' length varies (3:1 in each): see tests/guest/ustack.c.
 */
#include <stdlib.h>
#include <time.h>

#include "vary.h"

void lib_outer(int which, unsigned long n);

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
	struct timespec t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		unsigned long n = next_count(10000, 20000);

		outer_x(n);
		outer_y(n);
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while (t.tv_sec - t0.tv_sec + (t.tv_nsec - t0.tv_nsec) / 1e9 < secs);
	return 0;
}
