// SPDX-License-Identifier: GPL-2.0
/*
 * ipi-storm SECONDS (scripts/hotplug-probe --storm): cross-CPU function
 * calls without oprofile_rs. Pinned to CPU 0, it opens a perf cpu-clock
 * counter on every other CPU, disables, enables and reads it, and closes it,
 * in a loop: each step makes the perf core run a function on that CPU by a
 * synchronous IPI (cpu_function_call), the same kind of call the module's
 * counters cause when they are created, switched and released. A CPU that is
 * offline answers ENODEV and is skipped. Prints how many calls it made.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/perf_event.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	double end = now() + (argc > 1 ? atof(argv[1]) : 10);
	long ncpu = sysconf(_SC_NPROCESSORS_CONF), calls = 0, offline = 0;
	struct perf_event_attr attr;
	cpu_set_t set;
	uint64_t v;

	CPU_ZERO(&set);
	CPU_SET(0, &set);
	if (sched_setaffinity(0, sizeof(set), &set)) {
		perror("ipi-storm: sched_setaffinity");
		return 1;
	}
	memset(&attr, 0, sizeof(attr));
	attr.size = sizeof(attr);
	attr.type = PERF_TYPE_SOFTWARE;
	attr.config = PERF_COUNT_SW_CPU_CLOCK;
	attr.sample_period = 1000000;
	while (now() < end) {
		for (long cpu = 1; cpu < ncpu; cpu++) {
			int fd = syscall(SYS_perf_event_open, &attr, -1, (int)cpu, -1, 0);

			if (fd < 0) {
				if (errno != ENODEV) {
					perror("ipi-storm: perf_event_open");
					return 1;
				}
				offline++;
				continue;
			}
			ioctl(fd, PERF_EVENT_IOC_DISABLE, 0);
			ioctl(fd, PERF_EVENT_IOC_ENABLE, 0);
			if (read(fd, &v, sizeof(v)) != sizeof(v)) {
				perror("ipi-storm: read");
				return 1;
			}
			close(fd);
			calls += 4;
		}
	}
	printf("ipi-storm: %ld cross-CPU perf calls, %ld opens on an offline CPU\n", calls, offline);
	return 0;
}
