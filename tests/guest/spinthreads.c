// SPDX-License-Identifier: GPL-2.0
/*
 * spinthreads THREADS SECONDS [FIFO]: THREADS threads (the main one
 * included) that spin for SECONDS each (wall time, CLOCK_MONOTONIC).
 * With FIFO, the threads are all started first, then they wait for a line
 * on FIFO (a process made with its threads, then bound by the test, then
 * let run). Prints "spinthreads TGID: TID..." once the threads exist.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static double seconds;
static pthread_barrier_t started, go;
static volatile unsigned long sink;

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

static void *spin(void *arg)
{
	long *tid = arg;
	*tid = syscall(SYS_gettid);
	pthread_barrier_wait(&started);
	pthread_barrier_wait(&go);
	double end = now() + seconds;
	while (now() < end)
		for (int i = 0; i < 100000; i++)
			sink += i;
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: spinthreads THREADS SECONDS [FIFO]\n");
		return 2;
	}
	int n = atoi(argv[1]);
	seconds = atof(argv[2]);
	if (n < 1 || n > 64)
		return 2;
	pthread_t th[64];
	long tids[64];
	pthread_barrier_init(&started, NULL, n);
	pthread_barrier_init(&go, NULL, n);
	for (int i = 1; i < n; i++)
		pthread_create(&th[i], NULL, spin, &tids[i]);
	tids[0] = syscall(SYS_gettid);
	pthread_barrier_wait(&started);
	printf("spinthreads %d:", getpid());
	for (int i = 0; i < n; i++)
		printf(" %ld", tids[i]);
	printf("\n");
	fflush(stdout);
	if (argc > 3) {
		FILE *f = fopen(argv[3], "r");
		char line[64];
		if (!f || !fgets(line, sizeof(line), f))
			return 1;
		fclose(f);
	}
	pthread_barrier_wait(&go);
	double end = now() + seconds;
	while (now() < end)
		for (int i = 0; i < 100000; i++)
			sink += i;
	for (int i = 1; i < n; i++)
		pthread_join(th[i], NULL);
	return 0;
}
