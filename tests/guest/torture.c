// SPDX-License-Identifier: GPL-2.0
/*
 * torture: hostile, concurrent use of the oprofile_rs module's files,
 * seeded and replayable (tests/guest/torture.sh drives it).
 *
 *   torture SEED SECS [ROLES]  runs these processes for SECS seconds (ROLES
 *                        picks some: r reader, c control, m rmmod, h hotplug,
 *                        one letter per process; default rrrcmh):
 *     3 readers   loop: open the device (random O_NONBLOCK, now and then
 *                 O_WRONLY), 1-12 reads of random sizes (0, tiny, a header,
 *                 odd, 1 MiB), some after poll/select/epoll, blocking reads
 *                 interrupted by SIGALRM from setitimer and from the main
 *                 process (with and without SA_RESTART), random ioctls, close. Every record read is
 *                 checked (whole, well formed, no sample between a TRACING
 *                 off and on) and counted per CPU.
 *     1 control   writes 0/1 and garbage of random lengths to tracing_on and
 *                 flush, the ioctls, reads every debugfs file, writes to
 *                 the read-only ones
 *     1 rmmod     opens each file of the module in turn, then tries to
 *                 unload the module: it must be refused "in use"
 *     1 hotplug   takes every CPU but 0 offline and online again, every
 *                 0.1-0.5 s (when /sys/devices/system/cpu/cpuN/online exists)
 *   then stops them (a process that does not stop within 20 s is a hang),
 *   turns tracing off, flushes, drains the rest of the event buffer and
 *   prints per CPU "cpuN samples S lost L" (what every stream held), then
 *   "violations V" and the first violations.
 *
 *   torture drain        one stream read to EAGAIN; prints the same counts
 *
 * Only documented answers may come back (Documentation/user-guide.md):
 * open EBUSY (a second reader); read EAGAIN (non-blocking, nothing there),
 * EINTR (signal), EINVAL (a buffer too small for the next whole record);
 * debugfs writes EINVAL (not 0/1), EPERM/EACCES (read-only file); rmmod
 * EWOULDBLOCK ("in use"). Anything else is a violation.
 *
 * Exit status 0 when there was no violation, 1 otherwise.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/select.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "oprofile_rs.h"

#define DEV OPROFILE_RS_DEVICE
#define DBG "/sys/kernel/debug/oprofile/"
#define MAX_CPUS 64
#define MAX_VIOLATIONS 16

/* An ioctl the device does not know. */
#define IOC_UNKNOWN _IO(OPROFILE_RS_IOC_MAGIC, 99)

/* What every process counts, in memory shared by all of them. */
struct shared {
	volatile int stop;
	uint64_t samples[MAX_CPUS], lost[MAX_CPUS];
	uint64_t opens, busy, reads, bytes, eagain, eintr, einval, polls;
	uint64_t ctl_writes, ctl_refused, rmmod_refused, hotplugs, streams;
	int violations;
	char what[MAX_VIOLATIONS][160];
};
static struct shared *sh;
static const char *role = "main";

static void violation(const char *fmt, ...)
{
	va_list ap;
	int n = __atomic_fetch_add(&sh->violations, 1, __ATOMIC_RELAXED);
	if (n >= MAX_VIOLATIONS)
		return;
	int at = snprintf(sh->what[n], sizeof(sh->what[n]), "%s: ", role);
	va_start(ap, fmt);
	vsnprintf(sh->what[n] + at, sizeof(sh->what[n]) - at, fmt, ap);
	va_end(ap);
}

#define ADD(field, n) __atomic_add_fetch(&sh->field, (n), __ATOMIC_RELAXED)

/* splitmix64: one stream per process, from the seed and the role. */
static uint64_t rng;
static uint64_t next(void)
{
	uint64_t z = (rng += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}
static unsigned below(unsigned n)
{
	return n ? next() % n : 0;
}
static void nap_us(unsigned us)
{
	struct timespec t = { .tv_sec = us / 1000000, .tv_nsec = us % 1000000 * 1000L };
	nanosleep(&t, NULL);
}

/* One stream being read: its checks carry over from read to read. */
struct stream {
	int header_seen;
	int off; /* a TRACING off record was the last TRACING record */
	int tracing_seen;
	int last_tracing;
	int overwrite; /* the latest CONFIG says mode=overwrite */
};

/* Checks and counts the records of one successful read of n bytes. */
static void parse(struct stream *s, const unsigned char *buf, long n, long asked)
{
	long at = 0;
	if (n > asked) {
		violation("read returned %ld bytes for a %ld-byte buffer", n, asked);
		return;
	}
	if (!s->header_seen) {
		if (n < OPROFILE_RS_HEADER_LEN ||
		    memcmp(buf, OPROFILE_RS_MAGIC, OPROFILE_RS_MAGIC_LEN)) {
			violation("a stream's first read (%ld bytes) is not a header", n);
			return;
		}
		uint16_t hsize;
		memcpy(&hsize, buf + offsetof(struct oprofile_rs_header, header_size), sizeof(hsize));
		if (hsize != OPROFILE_RS_HEADER_LEN) {
			violation("header_size %u", hsize);
			return;
		}
		s->header_seen = 1;
		at = OPROFILE_RS_HEADER_LEN;
		ADD(streams, 1);
	}
	while (at < n) {
		struct oprofile_rs_prefix p;
		if (n - at < (long)sizeof(p)) {
			violation("a read ends in a record header (%ld bytes left)", n - at);
			return;
		}
		memcpy(&p, buf + at, sizeof(p));
		uint16_t type = p.type, size = p.size, cpu = p.cpu;
		if (size < sizeof(p) || size % OPROFILE_RS_RECORD_ALIGN || at + size > n) {
			violation("record at %ld: type %u size %u in a %ld-byte read", at, type, size, n);
			return;
		}
		if (cpu >= MAX_CPUS) {
			violation("record of cpu %u", cpu);
			return;
		}
		if (type == OPROFILE_RS_SAMPLE) {
			/* Version 2: the extended form (OPROFILE_RS_SAMPLE_FLAG_EXT),
			 * its fixed part + both chains. */
			unsigned depth = p.b7;
			int ext = p.b6 & OPROFILE_RS_SAMPLE_FLAG_EXT;
			unsigned user = ext && size >= OPROFILE_RS_SAMPLE_EXT_LEN ?
				buf[at + offsetof(struct oprofile_rs_sample, user_depth)] : 0;
			if (!ext)
				violation("a SAMPLE without the extended flag");
			if (size < OPROFILE_RS_SAMPLE_EXT_LEN + sizeof(__u64) * (depth + user))
				violation("SAMPLE of %u bytes with depths %u and %u", size, depth, user);
			/* Consume mode only: in overwrite mode a snapshot taken after
			 * tracing_on=0 holds the samples taken before it
			 * (Documentation/stream-format.md, SNAPSHOT). */
			if (s->off && !s->overwrite)
				violation("a SAMPLE of cpu %u between a TRACING off and on", cpu);
			ADD(samples[cpu], 1);
		} else if (type == OPROFILE_RS_LOST) {
			uint64_t count;
			memcpy(&count, buf + at + offsetof(struct oprofile_rs_lost, count), sizeof(count));
			ADD(lost[cpu], count);
		} else if (type == OPROFILE_RS_TRACING) {
			int on = p.b6;
			if (s->tracing_seen && s->last_tracing == on)
				violation("two TRACING %s records in a row", on ? "on" : "off");
			s->tracing_seen = 1;
			s->last_tracing = on;
			s->off = !on;
		} else if (type == OPROFILE_RS_CONFIG) {
			s->overwrite = p.b7 == OPROFILE_RS_MODE_OVERWRITE; /* b7: the mode */
		} else if (type == OPROFILE_RS_SWITCH) {
			/* The context-switches event's switch-outs. */
			if (size != OPROFILE_RS_SWITCH_LEN)
				violation("SWITCH of %u bytes", size);
		} else if (type != OPROFILE_RS_COMM && type != OPROFILE_RS_SNAPSHOT) {
			violation("unknown record type %u", type);
		}
		at += size;
	}
}

static void on_alarm(int sig)
{
	(void)sig;
}

static void set_alarm_handler(int restart)
{
	struct sigaction sa = { .sa_handler = on_alarm, .sa_flags = restart ? SA_RESTART : 0 };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGALRM, &sa, NULL);
}

static void alarm_in_us(long us)
{
	struct itimerval it = { .it_value = { .tv_sec = us / 1000000, .tv_usec = us % 1000000 } };
	setitimer(ITIMER_REAL, &it, NULL);
}

static int wait_readable(int fd, int how, int ms)
{
	if (how == 0) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		return poll(&p, 1, ms);
	}
	if (how == 1) {
		fd_set set;
		struct timeval tv = { .tv_sec = 0, .tv_usec = ms * 1000 };
		FD_ZERO(&set);
		FD_SET(fd, &set);
		return select(fd + 1, &set, NULL, NULL, &tv);
	}
	int ep = epoll_create1(0);
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = fd }, out;
	if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev)) {
		violation("epoll on the device: %s", strerrorname_np(errno));
		if (ep >= 0)
			close(ep);
		return -1;
	}
	int r = epoll_wait(ep, &out, 1, ms);
	close(ep);
	return r;
}

static unsigned char readbuf[1 << 20];

static long read_size(void)
{
	static const long sizes[] = { 0, 1, 7, 8, 16, 40, OPROFILE_RS_HEADER_LEN - 1, OPROFILE_RS_HEADER_LEN,
				      OPROFILE_RS_HEADER_LEN + 1, 200, 4095, 4096, 65536, 1 << 20 };
	if (below(4) == 0)
		return below(1 << 14);
	return sizes[below(sizeof(sizes) / sizeof(sizes[0]))];
}

/* Random ioctls on an open file of the device. */
static void random_ioctl(int fd)
{
	static const unsigned long cmds[] = { OPROFILE_RS_IOC_TRACING_ON, OPROFILE_RS_IOC_TRACING_OFF,
					      OPROFILE_RS_IOC_FLUSH, OPROFILE_RS_IOC_GET_TRACING, IOC_UNKNOWN };
	unsigned long cmd = cmds[below(5)];
	uint32_t v = 7;
	int r = ioctl(fd, cmd, &v);
	if (cmd == IOC_UNKNOWN) {
		if (r != -1 || errno != ENOTTY)
			violation("unknown ioctl: %d %s", r, strerrorname_np(errno));
	} else if (r) {
		violation("ioctl %lx: %s", cmd, strerrorname_np(errno));
	} else if (cmd == OPROFILE_RS_IOC_GET_TRACING && v > 1) {
		violation("GET_TRACING wrote %u", v);
	}
}

static void reader(void)
{
	set_alarm_handler(1);
	while (!sh->stop) {
		int nonblock = below(2);
		if (below(10) == 0) { /* a control file: no reader slot */
			int fd = open(DEV, O_WRONLY);
			if (fd < 0) {
				violation("O_WRONLY open: %s", strerrorname_np(errno));
				continue;
			}
			random_ioctl(fd);
			close(fd);
			continue;
		}
		int fd = open(DEV, O_RDONLY | (nonblock ? O_NONBLOCK : 0));
		ADD(opens, 1);
		if (fd < 0) {
			if (errno == EBUSY)
				ADD(busy, 1);
			else
				violation("open: %s", strerrorname_np(errno));
			nap_us(below(3000));
			continue;
		}
		struct stream s = { 0 };
		int reads = 1 + below(12);
		for (int i = 0; i < reads && !sh->stop; i++) {
			long size = read_size();
			if (below(3) == 0) {
				int r = wait_readable(fd, below(3), below(50));
				ADD(polls, 1);
				if (r < 0 && errno != EINTR)
					violation("poll/select/epoll: %s", strerrorname_np(errno));
			}
			if (below(8) == 0)
				random_ioctl(fd);
			long alarm_us = 1000 + below(50000);
			int stopped = 0;
			if (!nonblock && below(2) == 0) {
				/* Stop recording (now and then), drain with O_NONBLOCK set
				 * on the open file, then block on the empty buffer: the
				 * alarm interrupts the wait unless data comes first. */
				stopped = below(2) && ioctl(fd, OPROFILE_RS_IOC_TRACING_OFF) == 0;
				fcntl(fd, F_SETFL, O_NONBLOCK);
				long r = 0;
				for (int j = 0; j < 64 && (r = read(fd, readbuf, sizeof(readbuf))) > 0; j++) {
					ADD(reads, 1);
					ADD(bytes, r);
					parse(&s, readbuf, r, sizeof(readbuf));
				}
				if (r < 0 && errno != EAGAIN)
					violation("draining read: %s", strerrorname_np(errno));
				fcntl(fd, F_SETFL, 0);
				size = sizeof(readbuf);
				alarm_us = 20000 + below(100000); /* while it waits for data */
			}
			if (!nonblock) {
				set_alarm_handler(below(2));
				alarm_in_us(alarm_us);
			}
			long r = read(fd, readbuf, size);
			int e = errno;
			if (!nonblock)
				alarm_in_us(0);
			if (stopped && ioctl(fd, OPROFILE_RS_IOC_TRACING_ON))
				violation("TRACING_ON ioctl: %s", strerrorname_np(errno));
			ADD(reads, 1);
			if (r > 0) {
				ADD(bytes, r);
				parse(&s, readbuf, r, size);
			} else if (r == 0) {
				if (size != 0)
					violation("read of %ld bytes returned 0 (%s)", size,
						  nonblock ? "nonblock" : "block");
			} else if (e == EAGAIN) {
				ADD(eagain, 1);
				if (!nonblock)
					violation("EAGAIN from a blocking read of %ld", size);
			} else if (e == EINTR) {
				ADD(eintr, 1);
				if (nonblock)
					violation("EINTR from a non-blocking read");
			} else if (e == EINVAL) {
				ADD(einval, 1);
				if (size >= 4096)
					violation("EINVAL for a %ld-byte read", size);
			} else {
				violation("read of %ld bytes (%s): %s", size, nonblock ? "nonblock" : "block",
					  strerrorname_np(e));
			}
		}
		close(fd);
	}
}

/* Writes len bytes of data to a debugfs file; returns errno or 0. */
static int write_file(const char *path, const void *data, size_t len)
{
	int fd = open(path, O_WRONLY);
	if (fd < 0)
		return errno;
	long r = write(fd, data, len);
	int e = r < 0 ? errno : 0;
	close(fd);
	return e;
}

/* The last four are read-only (the configuration files, writable while
 * recording is off, get a bad value below instead). */
static const char *const files[] = { "tracing_on", "flush", "stats", "config", "buffer_sizes",
				     "buffer_memory" };

static void control(void)
{
	static const char *const valid[] = { "0", "1", "0\n", "1\n" };
	char junk[300];
	while (!sh->stop) {
		unsigned what = below(10);
		char path[128];
		if (what < 4) { /* tracing_on: 0/1 mostly, garbage sometimes */
			snprintf(path, sizeof(path), DBG "tracing_on");
			int e;
			if (below(3)) {
				const char *v = valid[below(4)];
				e = write_file(path, v, strlen(v));
				if (e)
					violation("tracing_on <- %c: %s", v[0], strerrorname_np(e));
			} else {
				size_t len = below(sizeof(junk));
				for (size_t i = 0; i < len; i++)
					junk[i] = (char)next();
				e = write_file(path, junk, len);
				int valid_junk = (len == 1 && (junk[0] == '0' || junk[0] == '1')) ||
						 (len == 2 && (junk[0] == '0' || junk[0] == '1') && junk[1] == '\n');
				if (e && e != EINVAL)
					violation("tracing_on <- %zu garbage bytes: %s", len, strerrorname_np(e));
				if (!e && !valid_junk)
					violation("tracing_on took %zu garbage bytes", len);
				ADD(ctl_refused, e != 0);
			}
		} else if (what < 6) { /* flush: 1, or garbage */
			snprintf(path, sizeof(path), DBG "flush");
			size_t len = below(2) ? 1 : below(40);
			for (size_t i = 0; i < len; i++)
				junk[i] = len == 1 && below(2) ? '1' : (char)next();
			int e = write_file(path, junk, len);
			int ok = (len == 1 && junk[0] == '1');
			if (ok && e)
				violation("flush <- 1: %s", strerrorname_np(e));
			if (!ok && e != EINVAL)
				violation("flush <- %zu garbage bytes: %s", len, e ? strerrorname_np(e) : "accepted");
			ADD(ctl_refused, e != 0);
		} else if (what < 8) { /* read a file whole */
			snprintf(path, sizeof(path), DBG "%s", files[2 + below(4)]);
			int fd = open(path, O_RDONLY);
			if (fd < 0) {
				violation("open %s: %s", path, strerrorname_np(errno));
			} else {
				char b[8192];
				long r;
				while ((r = read(fd, b, 1 + below(sizeof(b)))) > 0)
					;
				if (r < 0)
					violation("read %s: %s", path, strerrorname_np(errno));
				close(fd);
			}
			snprintf(path, sizeof(path), DBG "tracing_on");
			fd = open(path, O_RDONLY);
			char b[8] = { 0 };
			if (fd < 0 || read(fd, b, sizeof(b)) != 2 || (b[0] != '0' && b[0] != '1'))
				violation("tracing_on reads '%s'", b);
			if (fd >= 0)
				close(fd);
		} else if (what < 9) { /* write to a read-only file */
			snprintf(path, sizeof(path), DBG "%s", files[2 + below(4)]);
			int e = write_file(path, "1", 1);
			if (e != EPERM && e != EACCES && e != EINVAL)
				violation("write to %s: %s", path, e ? strerrorname_np(e) : "accepted");
			/* A configuration file: a bad value is EINVAL, or EBUSY while recording. */
			static const char *const config_files[] = { "event", "backtrace_depth",
								    "exclude_user", "exclude_kernel", "mode",
								    "cgroup", "user_stack_size", "pid" };
			const char *cf = config_files[below(8)];
			snprintf(path, sizeof(path), DBG "%s", cf);
			e = write_file(path, "x", 1);
			if (e != EINVAL && e != EBUSY)
				violation("write x to %s: %s", cf, e ? strerrorname_np(e) : "accepted");
		} else { /* the ioctls on a control file */
			int fd = open(DEV, O_WRONLY);
			if (fd < 0) {
				violation("O_WRONLY open: %s", strerrorname_np(errno));
			} else {
				random_ioctl(fd);
				close(fd);
			}
		}
		ADD(ctl_writes, 1);
		nap_us(below(20000));
	}
}

static void rmmod_while_open(void)
{
	unsigned i = 0;
	while (!sh->stop) {
		char path[128];
		int fd;
		unsigned which = i++ % 7;
		if (which < 5) {
			snprintf(path, sizeof(path), DBG "%s", files[which]);
			fd = open(path, which < 2 ? O_WRONLY : O_RDONLY);
		} else {
			snprintf(path, sizeof(path), DEV " (%s)", which == 5 ? "O_WRONLY" : "reader");
			fd = open(DEV, which == 5 ? O_WRONLY : O_RDONLY | O_NONBLOCK);
			if (fd < 0 && errno == EBUSY) { /* another reader holds the device: also a pin */
				nap_us(1000);
				continue;
			}
		}
		if (fd < 0) {
			violation("open %s: %s", path, strerrorname_np(errno));
			continue;
		}
		long r = syscall(SYS_delete_module, "oprofile_rs", O_NONBLOCK);
		if (r == 0)
			violation("the module was unloaded while %s was open", path);
		else if (errno != EWOULDBLOCK)
			violation("rmmod while %s was open: %s (expected EWOULDBLOCK)", path, strerrorname_np(errno));
		else
			ADD(rmmod_refused, 1);
		close(fd);
		nap_us(50000 + below(200000));
	}
}

static int write_online(int cpu, int on)
{
	char path[80];
	snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu%d/online", cpu);
	int fd = open(path, O_WRONLY);
	if (fd < 0)
		return -1;
	long r = write(fd, on ? "1" : "0", 1);
	int e = errno;
	close(fd);
	if (r < 0 && e != EBUSY)
		violation("cpu%d online <- %d: %s", cpu, on, strerrorname_np(e));
	return r < 0 ? -1 : 0;
}

static void hotplug(void)
{
	long ncpus = sysconf(_SC_NPROCESSORS_CONF);
	while (!sh->stop) {
		for (int cpu = 1; cpu < ncpus && !sh->stop; cpu++) {
			if (write_online(cpu, 0) == 0) {
				nap_us(100000 + below(400000));
				write_online(cpu, 1);
				ADD(hotplugs, 1);
			}
			nap_us(100000 + below(400000));
		}
		if (ncpus < 2)
			nap_us(100000);
	}
	for (int cpu = 1; cpu < ncpus; cpu++)
		write_online(cpu, 1);
}

/* Reads one stream to EAGAIN (everything left in the event buffer). */
static void drain(void)
{
	int fd = open(DEV, O_RDONLY | O_NONBLOCK);
	if (fd < 0) {
		violation("final open: %s", strerrorname_np(errno));
		return;
	}
	struct stream s = { 0 };
	long r;
	while ((r = read(fd, readbuf, sizeof(readbuf))) > 0)
		parse(&s, readbuf, r, sizeof(readbuf));
	if (r < 0 && errno != EAGAIN)
		violation("final read: %s", strerrorname_np(errno));
	close(fd);
}

static void print_counts(void)
{
	for (int c = 0; c < MAX_CPUS; c++)
		if (sh->samples[c] || sh->lost[c])
			printf("cpu%d samples %llu lost %llu\n", c, (unsigned long long)sh->samples[c],
			       (unsigned long long)sh->lost[c]);
	printf("violations %d\n", sh->violations);
	for (int i = 0; i < sh->violations && i < MAX_VIOLATIONS; i++)
		printf("  %s\n", sh->what[i]);
}

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		return 2;
	if (argc == 2 && !strcmp(argv[1], "drain")) {
		drain();
		print_counts();
		return sh->violations != 0;
	}
	if (argc != 3 && argc != 4) {
		fprintf(stderr, "usage: torture SEED SECS [ROLES] | torture drain\n");
		return 2;
	}
	uint64_t seed = strtoull(argv[1], NULL, 0);
	int secs = atoi(argv[2]);
	const char *letters = argc == 4 ? argv[3] : "rrrcmh";
	enum { MAX_ROLES = 16 };
	void (*roles[MAX_ROLES])(void);
	char names[MAX_ROLES][16];
	pid_t pids[MAX_ROLES];
	int NROLES = 0;
	for (const char *l = letters; *l && NROLES < MAX_ROLES; l++, NROLES++) {
		static const struct { char letter; void (*fn)(void); const char *name; } kinds[] = {
			{ 'r', reader, "reader" }, { 'c', control, "control" },
			{ 'm', rmmod_while_open, "rmmod" }, { 'h', hotplug, "hotplug" },
		};
		int k = 0;
		while (k < 4 && kinds[k].letter != *l)
			k++;
		if (k == 4) {
			fprintf(stderr, "torture: unknown role '%c' (r, c, m, h)\n", *l);
			return 2;
		}
		roles[NROLES] = kinds[k].fn;
		snprintf(names[NROLES], sizeof(names[NROLES]), "%s%d", kinds[k].name, NROLES);
	}
	/* The readers' SIGALRM handler before the fork, inherited: the loop
	 * below may signal a reader before it has run a line (the default
	 * action would kill it: "reader ended with status 0xe", seen once on
	 * the stock kernel). */
	set_alarm_handler(1);
	for (int i = 0; i < NROLES; i++) {
		pids[i] = fork();
		if (pids[i] == 0) {
			role = names[i];
			rng = seed * 1000003 + (uint64_t)i;
			roles[i]();
			_exit(0);
		}
	}
	/* Meanwhile, SIGALRM to random processes every 0.5-20 ms (with kill:
	 * the test kernels have no POSIX timers, so the readers' setitimer
	 * calls are ENOSYS there; on other kernels both send signals). */
	rng = seed * 1000003 + 999;
	double end = now_s() + secs;
	while (now_s() < end) {
		int i = below(NROLES);
		if (roles[i] == reader && pids[i] > 0)
			kill(pids[i], SIGALRM);
		nap_us(500 + below(19500));
	}
	sh->stop = 1;
	/* Readers blocked with SA_RESTART wake when data comes: record, flush. */
	write_file(DBG "tracing_on", "1", 1);
	double t0 = now_s(), last_flush = 0;
	int left = NROLES;
	while (left > 0 && now_s() - t0 < 20) {
		if (now_s() - last_flush > 0.2) { /* (control may have turned it off again) */
			write_file(DBG "tracing_on", "1", 1);
			write_file(DBG "flush", "1", 1);
			last_flush = now_s();
		}
		for (int i = 0; i < NROLES; i++) {
			int st;
			if (pids[i] > 0 && waitpid(pids[i], &st, WNOHANG) == pids[i]) {
				if (!WIFEXITED(st) || WEXITSTATUS(st))
					violation("%s ended with status %#x", names[i], st);
				pids[i] = 0;
				left--;
			}
		}
		nap_us(20000);
	}
	for (int i = 0; i < NROLES; i++)
		if (pids[i] > 0) {
			char path[64], stack[2048] = "";
			snprintf(path, sizeof(path), "/proc/%d/stack", pids[i]);
			int fd = open(path, O_RDONLY);
			if (fd >= 0) {
				long n = read(fd, stack, sizeof(stack) - 1);
				stack[n > 0 ? n : 0] = 0;
				close(fd);
			}
			printf("%s (pid %d) did not stop; its kernel stack:\n%s", names[i], pids[i], stack);
			violation("%s did not stop within 20 s (hung)", names[i]);
			kill(pids[i], SIGKILL);
			waitpid(pids[i], NULL, 0);
		}
	printf("opens %llu (busy %llu) streams %llu reads %llu bytes %llu eagain %llu eintr %llu einval %llu polls %llu\n",
	       (unsigned long long)sh->opens, (unsigned long long)sh->busy, (unsigned long long)sh->streams,
	       (unsigned long long)sh->reads, (unsigned long long)sh->bytes, (unsigned long long)sh->eagain,
	       (unsigned long long)sh->eintr, (unsigned long long)sh->einval, (unsigned long long)sh->polls);
	printf("control ops %llu (refused %llu) rmmod refused %llu hotplug cycles %llu\n",
	       (unsigned long long)sh->ctl_writes, (unsigned long long)sh->ctl_refused,
	       (unsigned long long)sh->rmmod_refused, (unsigned long long)sh->hotplugs);
	/* Everything recorded, into the event buffer, then read. */
	if (write_file(DBG "tracing_on", "0", 1))
		violation("final tracing_on <- 0 failed");
	if (write_file(DBG "flush", "1", 1))
		violation("final flush failed");
	drain();
	print_counts();
	return sh->violations != 0;
}
