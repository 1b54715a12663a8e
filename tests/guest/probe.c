// SPDX-License-Identifier: GPL-2.0
/*
 * probe: exact system calls for the guest tests, where a shell cannot say
 * precisely what it does (an empty write, one read of N bytes, ...).
 *
 *   probe write FILE DATA          one write(2) of DATA (may be empty)
 *   probe writen FILE N            one write(2) of N bytes of '1'
 *   probe read FILE SIZE [nonblock] one read(2) of at most SIZE bytes
 *   probe read2 FILE SIZE [nonblock] read(2) the stream header, then SIZE bytes
 *   probe opens FILE N             N opens of FILE O_RDONLY|O_NONBLOCK, one at a
 *                                  time (each closed); prints "ok A ebusy B
 *                                  other C": how many opened, were refused
 *                                  with EBUSY, failed otherwise
 *   probe open2 FILE               open twice; report the second open's result
 *   probe wait FILE HOW MS [KICK]  open FILE O_NONBLOCK, read it empty (until
 *                                  EAGAIN), then wait up to MS ms for it to be
 *                                  readable with HOW = poll, select or epoll;
 *                                  if KICK is given, a child writes "1" to the
 *                                  file KICK after 300 ms. Prints "readable
 *                                  after N ms" and one read's
 *                                  result, or "timeout".
 *   probe drain FILE               open FILE O_NONBLOCK, read it with 1 MiB reads
 *                                  until EAGAIN; prints "drained B bytes in N ns"
 *   probe reads FILE FLAGS N...     open FILE (FLAGS: block or nonblock), then
 *                                  one read(2) of each size N in turn
 *   probe pread FILE               open FILE, one pread(2) of 64 bytes at offset 0
 *   probe ioctl FILE CMD [wronly]  open FILE (O_WRONLY with "wronly", else
 *                                  O_RDONLY|O_NONBLOCK), one ioctl: CMD is on,
 *                                  off, flush, get (prints the value too) or
 *                                  bogus (an unknown command)
 *   probe toggle FILE N            open FILE O_WRONLY, then N times the ioctls
 *                                  off and on; prints "ok A failed B" (ioctls)
 *   probe openw FILE               open FILE O_WRONLY, then O_RDONLY; reports
 *                                  the second open's result
 *   probe threads FILE MS          two threads share one O_RDONLY|O_NONBLOCK
 *                                  file and read it (4 KiB reads) for MS ms;
 *                                  prints "headers H" (reads that returned a
 *                                  stream header) and "errors E" (errno other
 *                                  than EAGAIN)
 *   probe readto FILE SIZE SECS    a read of the stream header, then one
 *                                  blocking read of SIZE bytes, interrupted by
 *                                  SIGALRM (no SA_RESTART) after SECS s (the
 *                                  read watchdog)
 *   probe readoff FILE SIZE SECS  open FILE blocking and read SIZE bytes at a
 *                                  time until a read waits SECS s (then a
 *                                  thread sends SIGALRM, no SA_RESTART);
 *                                  prints "read B bytes, then E" (E: the last
 *                                  read's errno, or "eof")
 *   probe readsig FILE SIZE MS  read what is there, then one blocking read of
 *                                  SIZE bytes interrupted by SIGALRM (no
 *                                  SA_RESTART, sent by a child) after MS ms
 *   probe writes F1 D1 F2 D2 N     N times: D1 written to F1, then D2 to F2,
 *                                  each on an fd of its own; prints
 *                                  "refused R of W" (EINVAL of all writes)
 *   probe open3 FILE               open FILE with access mode 3 (neither read
 *                                  nor write: ioctls only), then: a read, a
 *                                  CONSUME, GET_TRACING on it, and an
 *                                  O_RDONLY open (the reader slot); prints
 *                                  "read R consume C get G reader O"
 *   probe keepfd FILE UID          open FILE O_RDONLY|O_NONBLOCK, then drop to
 *                                  UID/GID (no capabilities left, as a process
 *                                  an fd was passed to); then: open FILE
 *                                  again, GET_TRACING, a read of the header,
 *                                  an mmap of the meta page, FLUSH on the
 *                                  kept fd; prints "reopen E get G read R
 *                                  mmap M flush F"
 *   probe -u UID ...               drop to UID/GID first (permission tests)
 *
 * Prints "ok N" (bytes) or "err ENAME" and exits 0 unless usage is wrong.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <time.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <grp.h>

#include "oprofile_rs.h"

/* Waits for fd to be readable with poll(2), select(2) or epoll(7): 1 if it
 * is, 0 on timeout, -1 on error. */
static int wait_readable(int fd, const char *how, int ms)
{
	if (!strcmp(how, "poll")) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int r = poll(&p, 1, ms);
		return r < 0 ? -1 : r > 0 && (p.revents & POLLIN);
	}
	if (!strcmp(how, "select")) {
		fd_set set;
		struct timeval tv = { .tv_sec = ms / 1000, .tv_usec = ms % 1000 * 1000 };
		FD_ZERO(&set);
		FD_SET(fd, &set);
		int r = select(fd + 1, &set, NULL, NULL, &tv);
		return r < 0 ? -1 : r > 0 && FD_ISSET(fd, &set);
	}
	int ep = epoll_create1(0);
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = fd }, out;
	if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev))
		return -1;
	int r = epoll_wait(ep, &out, 1, ms);
	close(ep);
	return r < 0 ? -1 : r > 0 && (out.events & EPOLLIN);
}

static int shared_fd, stop_threads, headers, errors;

static void *reader_thread(void *arg)
{
	static __thread char buf[4096];
	(void)arg;
	while (!__atomic_load_n(&stop_threads, __ATOMIC_RELAXED)) {
		long r = read(shared_fd, buf, sizeof(buf));
		if (r >= OPROFILE_RS_MAGIC_LEN && !memcmp(buf, OPROFILE_RS_MAGIC, OPROFILE_RS_MAGIC_LEN))
			__atomic_add_fetch(&headers, 1, __ATOMIC_RELAXED);
		if (r < 0 && errno != EAGAIN)
			__atomic_add_fetch(&errors, 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

static void on_alarm(int sig)
{
	(void)sig;
}

/* The read watchdog: the test kernels have no POSIX timers (alarm and
 * setitimer are ENOSYS there), so a thread sends the reading thread SIGALRM
 * (no SA_RESTART: its blocked read gets EINTR) once it made no progress for
 * watch_secs s. */
static pthread_t watched;
static long watch_secs, watch_last;

static long mono_secs(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec;
}

/* The watched thread made progress (a read returned). */
static void watch_progress(void)
{
	__atomic_store_n(&watch_last, mono_secs(), __ATOMIC_RELAXED);
}

static void *watchdog(void *arg)
{
	(void)arg;
	for (;;) {
		usleep(100000);
		if (mono_secs() - __atomic_load_n(&watch_last, __ATOMIC_RELAXED) >= watch_secs) {
			pthread_kill(watched, SIGALRM);
			watch_progress();
		}
	}
	return NULL;
}

/* Interrupts the calling thread's blocking calls after SECS s without
 * progress (watch_progress). */
static void watch_start(long secs)
{
	struct sigaction sa = { .sa_handler = on_alarm };
	pthread_t t;
	sigaction(SIGALRM, &sa, NULL);
	watched = pthread_self();
	watch_secs = secs;
	watch_progress();
	pthread_create(&t, NULL, watchdog, NULL);
}

/* "ok" if r >= 0, else errno's name. */
static const char *res(long r)
{
	return r < 0 ? strerrorname_np(errno) : "ok";
}

static int report(long r)
{
	if (r < 0)
		printf("err %s\n", strerrorname_np(errno));
	else
		printf("ok %ld\n", r);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc > 3 && !strcmp(argv[1], "-u")) {
		uid_t id = strtoul(argv[2], NULL, 0);
		if (setgid(id) || setuid(id)) {
			perror("setuid");
			return 2;
		}
		argc -= 2;
		argv += 2;
	}
	if (argc < 3)
		goto usage;
	const char *cmd = argv[1], *path = argv[2];
	if (!strcmp(cmd, "write") && argc == 4) {
		int fd = open(path, O_WRONLY);
		if (fd < 0)
			return report(-1);
		return report(write(fd, argv[3], strlen(argv[3])));
	}
	/* writes PATH DATA PATH2 DATA2 N: N times, a write of DATA to PATH
	 * then of DATA2 to PATH2, each on an fd of its own (as N pairs of
	 * `write` would, without 2N processes); prints how many the kernel
	 * refused with EINVAL, of how many. */
	if (!strcmp(cmd, "writes") && argc == 7) {
		long n = strtol(argv[6], NULL, 0), refused = 0, done = 0;
		for (long i = 0; i < n; i++) {
			for (int k = 0; k < 2; k++) {
				int fd = open(argv[2 + 2 * k], O_WRONLY);
				if (fd < 0)
					return report(-1);
				if (write(fd, argv[3 + 2 * k], strlen(argv[3 + 2 * k])) < 0 && errno == EINVAL)
					refused++;
				done++;
				close(fd);
			}
		}
		printf("refused %ld of %ld\n", refused, done);
		return 0;
	}
	if (!strcmp(cmd, "writen") && argc == 4) {
		size_t n = strtoul(argv[3], NULL, 0);
		char *buf = malloc(n + 1);
		memset(buf, '1', n);
		int fd = open(path, O_WRONLY);
		if (fd < 0)
			return report(-1);
		return report(write(fd, buf, n));
	}
	if ((!strcmp(cmd, "read") || !strcmp(cmd, "read2")) && argc >= 4) {
		size_t n = strtoul(argv[3], NULL, 0);
		int flags = O_RDONLY | (argc > 4 && !strcmp(argv[4], "nonblock") ? O_NONBLOCK : 0);
		char *buf = malloc(n + OPROFILE_RS_HEADER_LEN);
		int fd = open(path, flags);
		if (fd < 0)
			return report(-1);
		if (!strcmp(cmd, "read2")) { /* the header first, then N bytes */
			long r = read(fd, buf, OPROFILE_RS_HEADER_LEN);
			if (r < 0)
				return report(r);
			printf("ok %ld ", r);
		}
		return report(read(fd, buf, n));
	}
	if (!strcmp(cmd, "opens") && argc >= 4) {
		long n = strtol(argv[3], NULL, 0), ok = 0, busy = 0, other = 0;
		for (long i = 0; i < n; i++) {
			int fd = open(path, O_RDONLY | O_NONBLOCK);
			if (fd >= 0) {
				ok++;
				close(fd);
			} else if (errno == EBUSY) {
				busy++;
			} else {
				other++;
			}
		}
		printf("ok %ld ebusy %ld other %ld\n", ok, busy, other);
		return 0;
	}
	if (!strcmp(cmd, "open2")) {
		int fd1 = open(path, O_RDONLY);
		if (fd1 < 0)
			return report(-1);
		return report(open(path, O_RDONLY));
	}
	if (!strcmp(cmd, "wait") && argc >= 5) {
		static char buf[1 << 20];
		int fd = open(path, O_RDONLY | O_NONBLOCK);
		if (fd < 0)
			return report(-1);
		while (read(fd, buf, sizeof(buf)) > 0)
			;
		if (errno != EAGAIN)
			return report(-1);
		if (argc > 5 && fork() == 0) {
			usleep(300000);
			int k = open(argv[5], O_WRONLY);
			_exit(k < 0 || write(k, "1", 1) != 1);
		}
		struct timespec t0, t1;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		int r = wait_readable(fd, argv[3], atoi(argv[4]));
		clock_gettime(CLOCK_MONOTONIC, &t1);
		if (argc > 5)
			wait(NULL);
		if (r < 0)
			return report(-1);
		if (r == 0) {
			printf("timeout\n");
			return 0;
		}
		printf("readable after %ld ms ", (t1.tv_sec - t0.tv_sec) * 1000 +
							   (t1.tv_nsec - t0.tv_nsec) / 1000000);
		return report(read(fd, buf, sizeof(buf)));
	}
	if (!strcmp(cmd, "drain")) {
		static char buf[1 << 20];
		struct timespec t0, t1;
		long total = 0, r;
		int fd = open(path, O_RDONLY | O_NONBLOCK);
		if (fd < 0)
			return report(-1);
		clock_gettime(CLOCK_MONOTONIC, &t0);
		while ((r = read(fd, buf, sizeof(buf))) > 0)
			total += r;
		clock_gettime(CLOCK_MONOTONIC, &t1);
		if (errno != EAGAIN)
			return report(-1);
		printf("drained %ld bytes in %ld ns\n", total,
		       (t1.tv_sec - t0.tv_sec) * 1000000000L + (t1.tv_nsec - t0.tv_nsec));
		return 0;
	}
	if (!strcmp(cmd, "reads") && argc >= 5) {
		int fd = open(path, O_RDONLY | (!strcmp(argv[3], "nonblock") ? O_NONBLOCK : 0));
		if (fd < 0)
			return report(-1);
		for (int i = 4; i < argc; i++) {
			size_t n = strtoul(argv[i], NULL, 0);
			char *buf = malloc(n + 1);
			long r = read(fd, buf, n);
			free(buf);
			if (r < 0)
				return report(r);
			printf("ok %ld ", r);
		}
		printf("\n");
		return 0;
	}
	if (!strcmp(cmd, "pread")) {
		char buf[64];
		int fd = open(path, O_RDONLY | O_NONBLOCK);
		if (fd < 0)
			return report(-1);
		return report(pread(fd, buf, sizeof(buf), 0));
	}
	if (!strcmp(cmd, "ioctl") && argc >= 4) {
		int wronly = argc > 4 && !strcmp(argv[4], "wronly");
		int fd = open(path, wronly ? O_WRONLY : O_RDONLY | O_NONBLOCK);
		uint32_t v = 42;
		if (fd < 0)
			return report(-1);
		if (!strcmp(argv[3], "on"))
			return report(ioctl(fd, OPROFILE_RS_IOC_TRACING_ON));
		if (!strcmp(argv[3], "off"))
			return report(ioctl(fd, OPROFILE_RS_IOC_TRACING_OFF));
		if (!strcmp(argv[3], "flush"))
			return report(ioctl(fd, OPROFILE_RS_IOC_FLUSH));
		if (!strcmp(argv[3], "bogus"))
			return report(ioctl(fd, _IO(OPROFILE_RS_IOC_MAGIC, 99)));
		if (!strcmp(argv[3], "get")) {
			long r = ioctl(fd, OPROFILE_RS_IOC_GET_TRACING, &v);
			if (r >= 0)
				printf("value %u ", v);
			return report(r);
		}
		goto usage;
	}
	if (!strcmp(cmd, "toggle") && argc >= 4) {
		long n = strtol(argv[3], NULL, 0), ok = 0, failed = 0;
		int fd = open(path, O_WRONLY);
		if (fd < 0)
			return report(-1);
		for (long i = 0; i < n; i++) {
			if (ioctl(fd, OPROFILE_RS_IOC_TRACING_OFF) == 0)
				ok++;
			else
				failed++;
			if (ioctl(fd, OPROFILE_RS_IOC_TRACING_ON) == 0)
				ok++;
			else
				failed++;
		}
		printf("ok %ld failed %ld\n", ok, failed);
		return 0;
	}
	if (!strcmp(cmd, "openw")) {
		int fd1 = open(path, O_WRONLY);
		if (fd1 < 0)
			return report(-1);
		return report(open(path, O_RDONLY | O_NONBLOCK));
	}
	if (!strcmp(cmd, "open3")) {
		char buf[OPROFILE_RS_HEADER_LEN];
		struct oprofile_rs_consume c = { 0, 0 };
		uint32_t v;
		int fd = open(path, 3);
		if (fd < 0)
			return report(-1);
		printf("read %s ", res(read(fd, buf, sizeof(buf))));
		printf("consume %s ", res(ioctl(fd, OPROFILE_RS_IOC_CONSUME, &c)));
		printf("get %s ", res(ioctl(fd, OPROFILE_RS_IOC_GET_TRACING, &v)));
		printf("reader %s\n", res(open(path, O_RDONLY | O_NONBLOCK)));
		return 0;
	}
	if (!strcmp(cmd, "keepfd") && argc == 4) {
		char buf[OPROFILE_RS_HEADER_LEN];
		uid_t id = strtoul(argv[3], NULL, 0);
		uint32_t v;
		int fd = open(path, O_RDONLY | O_NONBLOCK);
		if (fd < 0)
			return report(-1);
		if (setgroups(0, NULL) || setgid(id) || setuid(id)) {
			perror("setuid");
			return 2;
		}
		printf("reopen %s ", res(open(path, O_WRONLY)));
		printf("get %s ", res(ioctl(fd, OPROFILE_RS_IOC_GET_TRACING, &v)));
		long r = read(fd, buf, sizeof(buf));
		if (r < 0)
			printf("read %s ", strerrorname_np(errno));
		else
			printf("read %ld ", r);
		void *m = mmap(NULL, sysconf(_SC_PAGESIZE), PROT_READ, MAP_SHARED, fd, 0);
		printf("mmap %s ", m == MAP_FAILED ? strerrorname_np(errno) : "ok");
		printf("flush %s\n", res(ioctl(fd, OPROFILE_RS_IOC_FLUSH)));
		return 0;
	}
	if (!strcmp(cmd, "threads") && argc >= 4) {
		pthread_t t[2];
		shared_fd = open(path, O_RDONLY | O_NONBLOCK);
		if (shared_fd < 0)
			return report(-1);
		for (int i = 0; i < 2; i++)
			pthread_create(&t[i], NULL, reader_thread, NULL);
		usleep(atoi(argv[3]) * 1000);
		__atomic_store_n(&stop_threads, 1, __ATOMIC_RELAXED);
		for (int i = 0; i < 2; i++)
			pthread_join(t[i], NULL);
		printf("headers %d errors %d\n", headers, errors);
		return 0;
	}
	if (!strcmp(cmd, "readsig") && argc >= 5) {
		/* Reads what is there (O_NONBLOCK), then one blocking read of
		 * SIZE bytes interrupted after MS ms by SIGALRM (no SA_RESTART). */
		size_t n = strtoul(argv[3], NULL, 0);
		long ms = atol(argv[4]);
		char *buf = malloc(n + OPROFILE_RS_HEADER_LEN);
		struct sigaction sa = { .sa_handler = on_alarm };
		int fd = open(path, O_RDONLY);
		if (fd < 0)
			return report(-1);
		fcntl(fd, F_SETFL, O_NONBLOCK); /* what is there already */
		while (read(fd, buf, n) > 0)
			;
		fcntl(fd, F_SETFL, 0);
		sigaction(SIGALRM, &sa, NULL);
		/* A child sends the signal: the test kernels have no POSIX timers
		 * (setitimer and alarm are ENOSYS there). */
		pid_t parent = getpid();
		if (fork() == 0) {
			usleep(ms * 1000);
			kill(parent, SIGALRM);
			_exit(0);
		}
		long r = read(fd, buf, n);
		wait(NULL);
		return report(r);
	}
	if (!strcmp(cmd, "readoff") && argc >= 5) {
		size_t n = strtoul(argv[3], NULL, 0);
		char *buf = malloc(n + 1);
		long total = 0, r;
		int fd = open(path, O_RDONLY);
		if (fd < 0 || !buf)
			return report(-1);
		watch_start(atol(argv[4]));
		for (;;) {
			r = read(fd, buf, n);
			watch_progress();
			if (r <= 0)
				break;
			total += r;
		}
		printf("read %ld bytes, then %s\n", total, r == 0 ? "eof" : strerrorname_np(errno));
		return 0;
	}
	if (!strcmp(cmd, "readto") && argc >= 5) {
		size_t n = strtoul(argv[3], NULL, 0);
		char *buf = malloc(n + 1);
		int fd = open(path, O_RDONLY);
		if (fd < 0)
			return report(-1);
		if (read(fd, buf, OPROFILE_RS_HEADER_LEN) != OPROFILE_RS_HEADER_LEN)
			return report(-1);
		watch_start(atol(argv[4]));
		return report(read(fd, buf, n));
	}
usage:
	fprintf(stderr, "usage: see the comment in probe.c\n");
	return 2;
}
