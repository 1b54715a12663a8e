// SPDX-License-Identifier: GPL-2.0
// cflags: -O1 -fno-omit-frame-pointer -fno-inline -fno-optimize-sibling-calls -fno-ipa-icf
/*
 * leafcall SECONDS: one leaf function called from two callers in a known
 * proportion, built as a frame-pointer build is (-O1
 * -fno-omit-frame-pointer): main -> outer_x -> leaf with 3/4 of the work,
 * main -> outer_y -> leaf with 1/4. GCC gives the leaf no frame record, so
 * a frame-pointer walk from a sample in it starts at its caller's record
 * and loses the caller (main;leaf): which caller is hot is the question a
 * call stack answers. `oprofile-rs record`'s default (a stack copy beside
 * the chain) finds it.
 *
 * The count varies from one round to the next (3:1 in every round), so
 * that the rounds' length does not keep the samples at a few fixed places
 * of it: see tests/guest/ustack.c.
 */
#include <stdlib.h>
#include <time.h>

#include "vary.h"

volatile unsigned long sink;

__attribute__((noinline)) unsigned long leaf(unsigned long n)
{
	unsigned long s = 0;
	for (unsigned long i = 0; i < n; i++)
		s += (i * 7) ^ (s >> 3);
	return s;
}

__attribute__((noinline)) void outer_x(unsigned long n)
{
	sink += leaf(3 * n);
}

__attribute__((noinline)) void outer_y(unsigned long n)
{
	sink += leaf(n);
}

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 1;
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
