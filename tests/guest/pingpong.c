// SPDX-License-Identifier: GPL-2.0
/*
 * pingpong ROUNDS: two processes pass a byte back and forth through two
 * pipes ROUNDS times: each round trip is two wakeups and at least two
 * context switches (four on one CPU). Prints `pingpong rounds=N ms=T
 * per_s=R` (round trips per second), for the cost of `record --off-cpu`
 * (tests/guest/offcpu.sh, Documentation/benchmarks.md).
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int main(int argc, char **argv)
{
	long rounds = argc > 1 ? atol(argv[1]) : 10000;
	int ab[2], ba[2];
	char c = 'x';
	double start;
	pid_t pid;

	if (pipe(ab) || pipe(ba))
		return 1;
	pid = fork();
	if (pid < 0)
		return 1;
	if (pid == 0) {
		close(ab[1]);
		close(ba[0]);
		while (read(ab[0], &c, 1) == 1)
			if (write(ba[1], &c, 1) != 1)
				break;
		_exit(0);
	}
	close(ab[0]);
	close(ba[1]);
	start = now_ms();
	for (long i = 0; i < rounds; i++)
		if (write(ab[1], &c, 1) != 1 || read(ba[0], &c, 1) != 1)
			return 1;
	double ms = now_ms() - start;
	close(ab[1]);
	waitpid(pid, NULL, 0);
	printf("pingpong rounds=%ld ms=%.0f per_s=%.0f\n", rounds, ms, rounds / ms * 1e3);
	return 0;
}
