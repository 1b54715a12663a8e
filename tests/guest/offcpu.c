// SPDX-License-Identifier: GPL-2.0
// cflags: -O1 -fno-omit-frame-pointer -fno-inline -fno-optimize-sibling-calls -fno-ipa-icf -pthread
/*
 * offcpu ROUNDS: a thread whose blocking is known by construction, for
 * `record --off-cpu` (tests/guest/offcpu.sh). Each round the main thread
 * sleeps 100 ms in nap() (nanosleep), then blocks about 300 ms in
 * wait_pipe() reading a pipe that a helper thread writes 300 ms after the
 * main thread asked it to: blocked 1:3 in the two functions. Both make
 * their system calls inline (no C library wrapper between the function
 * and the kernel), so the address where the thread entered the kernel is
 * in the function itself, whatever unwinding the recording does.
 *
 * It prints its main thread's id and its lifetime (from main's start to
 * its end, CLOCK_MONOTONIC), and the helper thread's (from its function's
 * start to its end): `offcpu main=TID lifetime_ms=N helper=TID
 * helper_ms=N`.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static inline __attribute__((always_inline)) long sys3(long n, long a, long b, long c)
{
	long ret;

	asm volatile("syscall" : "=a"(ret) : "a"(n), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
	return ret;
}

static int req[2], resp[2];

__attribute__((noinline)) void nap(void)
{
	struct timespec ts = { 0, 100 * 1000 * 1000 };

	while (sys3(SYS_nanosleep, (long)&ts, (long)&ts, 0) != 0)
		;
}

__attribute__((noinline)) void wait_pipe(void)
{
	char c;

	while (sys3(SYS_read, resp[0], (long)&c, 1) != 1)
		;
}

__attribute__((noinline)) void helper_sleep(void)
{
	struct timespec ts = { 0, 300 * 1000 * 1000 };

	while (sys3(SYS_nanosleep, (long)&ts, (long)&ts, 0) != 0)
		;
}

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static long helper_tid;
static double helper_ms;

static void *helper(void *arg)
{
	double start = now_ms();
	char c;

	(void)arg;
	helper_tid = syscall(SYS_gettid);
	while (read(req[0], &c, 1) == 1 && c == 'r') {
		helper_sleep();
		if (write(resp[1], "x", 1) != 1)
			break;
	}
	helper_ms = now_ms() - start;
	return NULL;
}

int main(int argc, char **argv)
{
	double start = now_ms();
	int rounds = argc > 1 ? atoi(argv[1]) : 4;
	pthread_t t;

	if (pipe(req) || pipe(resp) || pthread_create(&t, NULL, helper, NULL)) {
		perror("offcpu");
		return 1;
	}
	for (int i = 0; i < rounds; i++) {
		nap();
		if (write(req[1], "r", 1) != 1)
			return 1;
		wait_pipe();
	}
	if (write(req[1], "q", 1) != 1 || pthread_join(t, NULL))
		return 1;
	printf("offcpu main=%ld lifetime_ms=%.0f helper=%ld helper_ms=%.0f\n", (long)syscall(SYS_gettid),
	       now_ms() - start, helper_tid, helper_ms);
	return 0;
}
