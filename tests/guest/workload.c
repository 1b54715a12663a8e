// SPDX-License-Identifier: GPL-2.0
/*
 * workload SECONDS [rate]: a CPU-bound process with known hot functions.
 * Spends about 3/4 of its time in hot_three_quarters() and 1/4 in
 * hot_one_quarter(), alternating in slices of ~1 ms of work. With `rate`
 * it prints its throughput when done (scripts/bench-overhead):
 *   workload: ITERATIONS iterations in SECONDS s: RATE iterations/s
 * (one iteration: 30000 steps of hot_three_quarters, 10000 of
 * hot_one_quarter).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

volatile unsigned long sink;

__attribute__((noinline)) void hot_three_quarters(unsigned long n)
{
	for (unsigned long i = 0; i < n; i++)
		sink += i * 7;
}

__attribute__((noinline)) void hot_one_quarter(unsigned long n)
{
	for (unsigned long i = 0; i < n; i++)
		sink += i * 7;
}

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 2;
	struct timespec start, now;
	unsigned long iterations = 0;
	double elapsed;

	clock_gettime(CLOCK_MONOTONIC, &start);
	do {
		hot_three_quarters(30000);
		hot_one_quarter(10000);
		iterations++;
		clock_gettime(CLOCK_MONOTONIC, &now);
		elapsed = (now.tv_sec - start.tv_sec) + (now.tv_nsec - start.tv_nsec) / 1e9;
	} while (elapsed < secs);
	if (argc > 2 && strcmp(argv[2], "rate") == 0)
		printf("workload: %lu iterations in %.3f s: %.1f iterations/s\n", iterations, elapsed,
		       iterations / elapsed);
	return 0;
}
