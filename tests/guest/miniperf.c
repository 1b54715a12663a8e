// SPDX-License-Identifier: GPL-2.0
/*
 * miniperf: a minimal `perf record`, for scripts/bench-overhead to measure
 * oprofile_rs against perf's own sampling path in the same boot.
 *
 * miniperf record FILE PERIOD_NS [PAGES]
 *   One perf_event_open() per online CPU (pid -1): the software cpu-clock
 *   event, a sample every PERIOD_NS ns, PERF_SAMPLE_IP|TID|TIME|CPU, user
 *   and kernel mode (exclude_hv, pinned: as oprofile_rs's counters), each
 *   with perf's mmap ring buffer (a meta page and PAGES data pages, default
 *   128 = 512 KiB: `perf record`'s default). It polls the events and, as
 *   `perf record` does, writes the bytes between data_tail and data_head of
 *   each ring straight from the mapping to FILE (records wrap with the
 *   ring), then advances data_tail. Prints "miniperf: recording on N CPUs"
 *   on stderr once every event is enabled; stops at SIGINT or SIGTERM
 *   (disables the events, drains the rings) and prints the bytes written.
 *
 *   With MINIPERF_EVENT=context-switches in the environment, perf's
 *   context-switches software event instead (fired from the scheduler with
 *   perf_fetch_caller_regs()); with MINIPERF_CALLCHAIN=N, kernel callchains
 *   (PERF_SAMPLE_CALLCHAIN, exclude_callchain_user, at most N entries).
 *   User call stacks as oprofile-rs record's, without kernel callchains
 *   (its default has none): MINIPERF_STACKS=fp, the user frame-pointer
 *   chain of `perf record -g` (PERF_SAMPLE_CALLCHAIN, exclude_callchain_kernel,
 *   at most 32 entries: `record --call-graph 0,32`); MINIPERF_STACKS=dwarf,
 *   the user part of `perf record --call-graph dwarf`: the user registers
 *   and 8 KiB of the user stack per sample (PERF_SAMPLE_REGS_USER|STACK_USER)
 *   for an unwinder to read afterwards (record's default unwinds in the
 *   kernel instead).
 *
 * miniperf chains FILE [PID...]
 *   Prints one line per sample (of the PIDs, tgid, if any) with a callchain: the
 *   kernel return addresses of its callchain in hexadecimal, innermost first
 *   (perf's context markers left out), for callchain.sh to compare with
 *   oprofile_rs's chains of the same event.
 *
 * miniperf report FILE LO HI [PID...]
 *   Decodes FILE (perf records as the kernel wrote them) and prints one line
 *     samples=N lost=N throttled=N pid_samples=N pid_in_range=N pid_kernel=N
 *   samples: all PERF_RECORD_SAMPLE; lost: the sum of PERF_RECORD_LOST;
 *   throttled: PERF_RECORD_THROTTLE records; pid_samples: samples of the
 *   PIDs (tgid); pid_in_range: those with LO <= ip < HI (hexadecimal, e.g. a
 *   function's extent from `nm -S` on the host: the workload is static and
 *   not position independent, so its addresses are those of the file);
 *   pid_kernel: those of the PIDs taken in kernel mode.
 *
 * Written in C as the other guest programs (static, no library but libc).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MAX_CPUS 64

struct ring {
	int fd;
	struct perf_event_mmap_page *meta;
	char *data;
	uint64_t size; /* bytes of data pages, a power of two */
};

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static void die(const char *what)
{
	fprintf(stderr, "miniperf: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void write_all(int fd, const char *p, uint64_t len, uint64_t *total)
{
	while (len > 0) {
		ssize_t n = write(fd, p, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			die("write");
		}
		p += n;
		len -= n;
		*total += n;
	}
}

/*
 * Writes what waits in the ring to `out` and frees it: data_head is read
 * with acquire semantics (the kernel's records before it are visible), and
 * data_tail is stored with release semantics once the bytes are copied
 * (the kernel may overwrite them after it sees the new tail). Whole records
 * only lie between the two: the kernel advances data_head past complete
 * records.
 */
static void drain(struct ring *r, int out, uint64_t *total)
{
	uint64_t head = __atomic_load_n(&r->meta->data_head, __ATOMIC_ACQUIRE);
	uint64_t tail = r->meta->data_tail;
	uint64_t len = head - tail, off = tail & (r->size - 1);
	uint64_t first = len < r->size - off ? len : r->size - off;

	if (len == 0)
		return;
	write_all(out, r->data + off, first, total);
	if (len > first)
		write_all(out, r->data, len - first, total);
	__atomic_store_n(&r->meta->data_tail, head, __ATOMIC_RELEASE);
}

static int record(const char *file, uint64_t period, uint64_t pages)
{
	struct ring rings[MAX_CPUS];
	struct pollfd pfd[MAX_CPUS];
	long psz = sysconf(_SC_PAGESIZE);
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	uint64_t total = 0;
	struct sigaction sa = { .sa_handler = on_signal };
	int out, n = 0;

	if (ncpu < 1 || ncpu > MAX_CPUS) {
		fprintf(stderr, "miniperf: %ld CPUs: 1..%d supported\n", ncpu, MAX_CPUS);
		return 1;
	}
	if (pages == 0 || (pages & (pages - 1)) != 0) {
		fprintf(stderr, "miniperf: PAGES must be a power of two\n");
		return 1;
	}
	out = open(file, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (out < 0)
		die(file);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	for (long cpu = 0; cpu < ncpu; cpu++) {
		const char *ev = getenv("MINIPERF_EVENT"), *cc = getenv("MINIPERF_CALLCHAIN");
		const char *st = getenv("MINIPERF_STACKS");
		struct perf_event_attr attr = {
			.type = PERF_TYPE_SOFTWARE,
			.size = sizeof(attr),
			.config = PERF_COUNT_SW_CPU_CLOCK,
			.sample_period = period,
			.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME |
				       PERF_SAMPLE_CPU,
			.disabled = 1,
			.pinned = 1,
			.exclude_hv = 1,
		};

		if (ev && strcmp(ev, "context-switches") == 0)
			attr.config = PERF_COUNT_SW_CONTEXT_SWITCHES;
		else if (ev && strcmp(ev, "cpu-clock") != 0) {
			fprintf(stderr, "miniperf: MINIPERF_EVENT: cpu-clock or context-switches\n");
			return 1;
		}
		if (cc && atoi(cc) > 0) {
			attr.sample_type |= PERF_SAMPLE_CALLCHAIN;
			attr.exclude_callchain_user = 1;
			attr.sample_max_stack = atoi(cc);
		}
		if (st && strcmp(st, "fp") == 0) {
			attr.sample_type |= PERF_SAMPLE_CALLCHAIN;
			attr.exclude_callchain_kernel = 1;
			attr.sample_max_stack = 32;
		} else if (st && strcmp(st, "dwarf") == 0) {
			/* perf's x86-64 mask: the general registers, ip, flags, cs, ss. */
			attr.sample_type |= PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER;
			attr.sample_regs_user = 0xff0fff;
			attr.sample_stack_user = 8192;
		} else if (st && *st) {
			fprintf(stderr, "miniperf: MINIPERF_STACKS: fp or dwarf\n");
			return 1;
		}
		struct ring *r = &rings[n];
		void *base;

		r->fd = syscall(SYS_perf_event_open, &attr, -1, (int)cpu, -1, PERF_FLAG_FD_CLOEXEC);
		if (r->fd < 0) {
			if (errno == ENODEV) /* offline */
				continue;
			die("perf_event_open");
		}
		r->size = pages * psz;
		base = mmap(NULL, (pages + 1) * psz, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd, 0);
		if (base == MAP_FAILED)
			die("mmap");
		r->meta = base;
		r->data = (char *)base + psz;
		pfd[n] = (struct pollfd){ .fd = r->fd, .events = POLLIN };
		n++;
	}
	for (int i = 0; i < n; i++)
		if (ioctl(rings[i].fd, PERF_EVENT_IOC_ENABLE, 0) < 0)
			die("PERF_EVENT_IOC_ENABLE");
	fprintf(stderr, "miniperf: recording on %d CPUs\n", n);
	while (!stop) {
		/* Woken at each ring's watermark (half of it); the timeout
		 * bounds the wait for the stop signal. */
		if (poll(pfd, n, 1000) < 0 && errno != EINTR)
			die("poll");
		for (int i = 0; i < n; i++)
			drain(&rings[i], out, &total);
	}
	for (int i = 0; i < n; i++)
		ioctl(rings[i].fd, PERF_EVENT_IOC_DISABLE, 0);
	for (int i = 0; i < n; i++)
		drain(&rings[i], out, &total);
	if (close(out) < 0)
		die("close");
	fprintf(stderr, "miniperf: wrote %llu bytes\n", (unsigned long long)total);
	return 0;
}

struct sample {
	uint64_t ip;
	uint32_t pid, tid;
	uint64_t time;
	uint32_t cpu, res;
};

static int report(const char *file, uint64_t lo, uint64_t hi, char **pidv, int npid)
{
	FILE *f = fopen(file, "rb");
	struct perf_event_header h;
	char body[65536];
	unsigned long long samples = 0, lost = 0, throttled = 0, pid_samples = 0, in_range = 0,
			   kernel = 0;
	long pids[256];

	if (!f)
		die(file);
	if (npid > 256) {
		fprintf(stderr, "miniperf: at most 256 PIDs\n");
		return 1;
	}
	for (int i = 0; i < npid; i++)
		pids[i] = strtol(pidv[i], NULL, 10);
	while (fread(&h, sizeof(h), 1, f) == 1) {
		size_t len = h.size - sizeof(h);

		if (h.size < sizeof(h) || len > sizeof(body) || fread(body, 1, len, f) != len) {
			fprintf(stderr, "miniperf: %s: corrupt record at offset %ld\n", file, ftell(f));
			return 1;
		}
		if (h.type == PERF_RECORD_SAMPLE && len >= sizeof(struct sample)) {
			struct sample s;

			memcpy(&s, body, sizeof(s));
			samples++;
			for (int i = 0; i < npid; i++) {
				if (s.pid == pids[i]) {
					pid_samples++;
					in_range += s.ip >= lo && s.ip < hi;
					kernel += (h.misc & PERF_RECORD_MISC_CPUMODE_MASK) ==
						  PERF_RECORD_MISC_KERNEL;
					break;
				}
			}
		} else if (h.type == PERF_RECORD_LOST && len >= 16) {
			uint64_t l;

			memcpy(&l, body + 8, 8);
			lost += l;
		} else if (h.type == PERF_RECORD_THROTTLE) {
			throttled++;
		}
	}
	printf("samples=%llu lost=%llu throttled=%llu pid_samples=%llu pid_in_range=%llu "
	       "pid_kernel=%llu\n",
	       samples, lost, throttled, pid_samples, in_range, kernel);
	fclose(f);
	return 0;
}

/* The records' callchain (after IP, TID, TIME, CPU): nr, then nr entries. */
static int chains(const char *file, char **pidv, int npid)
{
	FILE *f = fopen(file, "rb");
	struct perf_event_header h;
	char body[65536];

	if (!f)
		die(file);
	while (fread(&h, sizeof(h), 1, f) == 1) {
		size_t len = h.size - sizeof(h);
		struct sample s;
		uint64_t nr;
		int mine = 0;

		if (h.size < sizeof(h) || len > sizeof(body) || fread(body, 1, len, f) != len) {
			fprintf(stderr, "miniperf: %s: corrupt record at offset %ld\n", file, ftell(f));
			return 1;
		}
		if (h.type != PERF_RECORD_SAMPLE || len < sizeof(s) + 8)
			continue;
		memcpy(&s, body, sizeof(s));
		mine = npid == 0;
		for (int i = 0; i < npid; i++)
			mine |= s.pid == strtoul(pidv[i], NULL, 10);
		memcpy(&nr, body + sizeof(s), 8);
		if (!mine || nr == 0 || sizeof(s) + 8 + nr * 8 > len)
			continue;
		for (uint64_t i = 0, n = 0; i < nr; i++) {
			uint64_t a;

			memcpy(&a, body + sizeof(s) + 8 + i * 8, 8);
			if (a < (uint64_t)PERF_CONTEXT_MAX)
				printf("%s%016llx", n++ ? " " : "", (unsigned long long)a);
		}
		printf("\n");
	}
	fclose(f);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 3 && strcmp(argv[1], "chains") == 0)
		return chains(argv[2], argv + 3, argc - 3);
	if (argc >= 4 && argc <= 5 && strcmp(argv[1], "record") == 0)
		return record(argv[2], strtoull(argv[3], NULL, 10),
			      argc == 5 ? strtoull(argv[4], NULL, 10) : 128);
	if (argc >= 5 && strcmp(argv[1], "report") == 0)
		return report(argv[2], strtoull(argv[3], NULL, 16), strtoull(argv[4], NULL, 16),
			      argv + 5, argc - 5);
	fprintf(stderr, "usage: miniperf record FILE PERIOD_NS [PAGES]\n"
			"       miniperf chains FILE [PID...]\n"
			"       miniperf report FILE LO HI [PID...]\n");
	return 2;
}
