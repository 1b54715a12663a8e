// SPDX-License-Identifier: GPL-2.0
/*
 * perf-load SECONDS FREQ (scripts/hotplug-probe --perf): the module's load
 * made by perf alone, without oprofile_rs. For every CPU that is online it
 * keeps a software cpu-clock sampling counter (pid -1, pinned) that samples
 * every 1/FREQ s in hard-IRQ context with IP, TID, TIME, CPU and a callchain
 * (kernel and user, at most 16 frames: the module's backtrace_depth=16),
 * each with a small perf ring (4 data pages: tiny buffers) that it drains
 * as fast as poll() wakes it, counting samples, lost samples and throttle
 * records. Every 50 ms it looks at the CPUs' online files: a CPU that went
 * offline has its counter closed, a CPU that came online gets a new one, as
 * the module's hotplug callbacks release and create their counters. Between
 * polls it also disables and enables each counter of another CPU (perf's
 * cross-CPU function call, an IPI, as the module's counters cause). Prints
 * those counts, the counters opened and the cross-CPU calls made.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <poll.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define MAX_CPUS 8
#define PAGES 4

struct ring {
	int fd; /* -1: no counter (CPU offline) */
	struct perf_event_mmap_page *meta;
	size_t map_len;
};

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int cpu_online(long cpu)
{
	char path[64], c = '1';
	int fd;

	if (cpu == 0)
		return 1; /* cpu0 has no online file on x86 unless it can go */
	snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu%ld/online", cpu);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return 1;
	if (read(fd, &c, 1) != 1)
		c = '1';
	close(fd);
	return c == '1';
}

static void ring_open(struct ring *r, long cpu, uint64_t period, long psz, long *opened)
{
	struct perf_event_attr attr = {
		.type = PERF_TYPE_SOFTWARE,
		.size = sizeof(attr),
		.config = PERF_COUNT_SW_CPU_CLOCK,
		.sample_period = period,
		.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME |
			       PERF_SAMPLE_CPU | PERF_SAMPLE_CALLCHAIN,
		.sample_max_stack = 16,
		.pinned = 1,
		.exclude_hv = 1,
		.wakeup_events = 1,
	};
	void *base;

	r->fd = syscall(SYS_perf_event_open, &attr, -1, (int)cpu, -1, PERF_FLAG_FD_CLOEXEC);
	if (r->fd < 0) {
		if (errno != ENODEV) { /* ENODEV: it went offline meanwhile */
			perror("perf-load: perf_event_open");
			exit(1);
		}
		r->fd = -1;
		return;
	}
	r->map_len = (PAGES + 1) * psz;
	base = mmap(NULL, r->map_len, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd, 0);
	if (base == MAP_FAILED) {
		perror("perf-load: mmap");
		exit(1);
	}
	r->meta = base;
	(*opened)++;
}

static void ring_close(struct ring *r)
{
	munmap(r->meta, r->map_len);
	close(r->fd);
	r->fd = -1;
}

struct totals {
	uint64_t bytes, samples, lost, throttled;
};

/* Consumes whatever the ring holds, counting its records (records are
 * 8-byte aligned in a power-of-two ring: a header never wraps). */
static void drain(struct ring *r, long psz, struct totals *t)
{
	uint64_t head, tail, size = PAGES * psz;
	const char *data = (const char *)r->meta + psz;

	if (r->fd < 0)
		return;
	head = __atomic_load_n(&r->meta->data_head, __ATOMIC_ACQUIRE);
	tail = r->meta->data_tail;
	t->bytes += head - tail;
	while (tail < head) {
		struct perf_event_header h;
		uint64_t lost = 0;

		memcpy(&h, data + (tail & (size - 1)), sizeof(h));
		if (h.size < sizeof(h))
			break;
		if (h.type == PERF_RECORD_SAMPLE)
			t->samples++;
		else if (h.type == PERF_RECORD_THROTTLE)
			t->throttled++;
		else if (h.type == PERF_RECORD_LOST) {
			for (int i = 0; i < 8; i++) /* u64 id, then u64 lost */
				((char *)&lost)[i] = data[(tail + 16 + i) & (size - 1)];
			t->lost += lost;
		}
		tail += h.size;
	}
	__atomic_store_n(&r->meta->data_tail, head, __ATOMIC_RELEASE);
}

int main(int argc, char **argv)
{
	double end = now() + (argc > 1 ? atof(argv[1]) : 10);
	long freq = argc > 2 ? atol(argv[2]) : 20000;
	long ncpu = sysconf(_SC_NPROCESSORS_CONF), psz = sysconf(_SC_PAGESIZE);
	long opened = 0, calls = 0;
	struct ring rings[MAX_CPUS];
	struct totals t = { 0 };

	if (freq < 1 || freq > 1000000 || ncpu < 1 || ncpu > MAX_CPUS) {
		fprintf(stderr, "usage: perf-load SECONDS FREQ (1..1000000 Hz, at most %d CPUs)\n",
			MAX_CPUS);
		return 1;
	}
	for (long cpu = 0; cpu < ncpu; cpu++)
		rings[cpu].fd = -1;
	while (now() < end) {
		struct pollfd pfd[MAX_CPUS];
		int n = 0;

		for (long cpu = 0; cpu < ncpu; cpu++) {
			int online = cpu_online(cpu);

			if (rings[cpu].fd >= 0 && !online)
				ring_close(&rings[cpu]);
			else if (rings[cpu].fd < 0 && online)
				ring_open(&rings[cpu], cpu, 1000000000 / freq, psz, &opened);
			if (rings[cpu].fd >= 0)
				pfd[n++] = (struct pollfd){ .fd = rings[cpu].fd, .events = POLLIN };
		}
		/* Cross-CPU calls: switching a counter of another CPU runs a
		 * function there by IPI (ESRCH or ENODEV once it is gone). */
		for (long cpu = 0; cpu < ncpu; cpu++)
			if (rings[cpu].fd >= 0 && cpu != sched_getcpu()) {
				ioctl(rings[cpu].fd, PERF_EVENT_IOC_DISABLE, 0);
				ioctl(rings[cpu].fd, PERF_EVENT_IOC_ENABLE, 0);
				calls += 2;
			}
		if (poll(pfd, n, 50) < 0 && errno != EINTR) {
			perror("perf-load: poll");
			return 1;
		}
		for (long cpu = 0; cpu < ncpu; cpu++)
			drain(&rings[cpu], psz, &t);
	}
	printf("perf-load: %llu samples (%llu bytes, %llu lost, %llu throttle records) at %ld Hz, "
	       "%ld counters opened, %ld cross-CPU calls\n",
	       (unsigned long long)t.samples, (unsigned long long)t.bytes,
	       (unsigned long long)t.lost, (unsigned long long)t.throttled, freq, opened, calls);
	return 0;
}
