// SPDX-License-Identifier: GPL-2.0
// cflags: -fno-omit-frame-pointer -fno-shrink-wrap -fno-optimize-sibling-calls -fno-ipa-icf -fno-inline
/*
 * ustack SECONDS: user call stacks with a known split, built with frame
 * pointers. main() calls outer(), which calls hot_a() with three times the
 * loop count of hot_b(): the samples' stacks are main;outer;hot_a and
 * main;outer;hot_b, about 3:1. tests/guest/ustack_nofp.c is the same program
 * built without frame pointers.
 *
 * The loop counts vary from one call of outer() to the next (the split
 * stays 3:1 in every call): with a fixed period, outer()'s length could
 * be close to a divisor of the sampling period, and the samples would land
 * at the same few places of it, far from the 3:1 split (64 % once on the
 * lockdep kernel, where the sample handler's own time shifts the phase).
 *
 * GCC sets up no frame in a function that needs no stack frame, whatever
 * -fno-omit-frame-pointer says: the hot functions end with a call (so they
 * are not leaves) and the prologue is not shrink-wrapped past the loop
 * (-fno-shrink-wrap), so that a sample in the loop finds the hot function's
 * own frame record, whose return address names outer().
 */
#include <stdlib.h>
#include <time.h>

#include "vary.h"

volatile unsigned long sink;

__attribute__((noinline)) void tick(void)
{
	__asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void hot_a(unsigned long n)
{
	for (unsigned long i = 0; i < n; i++)
		sink += i * 7;
	tick();
}

__attribute__((noinline)) void hot_b(unsigned long n)
{
	for (unsigned long i = 0; i < n; i++)
		sink += i * 11;
	tick();
}

__attribute__((noinline)) void outer(void)
{
	unsigned long n = next_count(5000, 10000);

	hot_a(3 * n);
	hot_b(n);
	__asm__ volatile("" ::: "memory");
}

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 2;
	struct timespec start, now;

	clock_gettime(CLOCK_MONOTONIC, &start);
	do {
		outer();
		clock_gettime(CLOCK_MONOTONIC, &now);
	} while ((now.tv_sec - start.tv_sec) + (now.tv_nsec - start.tv_nsec) / 1e9 < secs);
	return 0;
}
