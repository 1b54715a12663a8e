// SPDX-License-Identifier: GPL-2.0
/*
 * mmap: the zero-copy reading of /dev/oprofile/buffer (Documentation/mmap.md),
 * driven by tests/guest/mmap.sh and scripts/bench-pipeline.
 *
 *   mmap stream OUT SECS [compare]  one stream: the opening by read(), then
 *                    records through the mapping for SECS seconds (poll,
 *                    then consume by ioctl), tracing off, flush, the rest;
 *                    written to OUT. With "compare", every other view is
 *                    checked against read(): the bytes the mapping shows
 *                    must be those read() returns for the same length.
 *                    Prints "mapped B read R compares C records N".
 *   mmap hostile     every refused mapping and consume: prints one line per
 *                    case and "violations V"
 *   mmap slow OUT SECS   maps, reads the opening, and consumes nothing for
 *                    SECS s while the workload runs: the waiting bytes must
 *                    not change (the writer never laps the reader); then
 *                    drains to OUT. Prints "full F unchanged B".
 *   mmap threads OUT SECS   two threads share one mapping and race to
 *                    consume (copy the view, then consume; ESTALE means the
 *                    copy may be torn and is dropped); written to OUT in
 *                    consumption order. Prints "consumed C stale S".
 *   mmap lifetime    what keeps the event buffer (buffer_size changes get
 *                    EBUSY) is the live mappings, not the attempts: with
 *                    recording off, a buffer_size change succeeds after
 *                    refused mappings (writable, past the window) and
 *                    ended ones, and is refused while any piece of a
 *                    mapping lives: split by munmap or mprotect, moved by
 *                    mremap, held after close. A mapping is not inherited
 *                    by fork, also after madvise(MADV_DOFORK) (refused:
 *                    EINVAL; ENOSYS on a kernel without madvise). Prints
 *                    one line per case and "violations V"
 *   mmap hold SECS   maps, closes the fd, prints "held", sleeps SECS, checks
 *                    the meta page still reads, unmaps, prints "unmapped"
 *   mmap die         a child maps and consumes in a loop; SIGKILLed after
 *                    200 ms (another child is killed between munmap and
 *                    close); then the device opens again (the slot is free)
 *   mmap handoff NAMES SPIN_MS   the consume notes what it delivers: a
 *                    child renames itself NAMES times (spinning SPIN_MS per
 *                    name, the last name 100 ms) while a mapped reader waits
 *                    (after emptying the event buffer); after a flush the
 *                    reader consumes, in pieces, exactly up to the end of
 *                    the child's last COMM record in the first view that has
 *                    one (the views before are consumed whole; trying
 *                    positions inside records and past the head first:
 *                    EINVAL), and closes. A second reader's opening must
 *                    restate that COMM record byte for byte, and its stream
 *                    must hold samples of the child on that CPU. Prints
 *                    "handoff comms C records R restated 1 samples S" and
 *                    "violations V".
 *                    With many names and a small buffer_size the event
 *                    buffer's index of noted records overflows
 *                    (Documentation/mmap.md): the same must hold.
 *   mmap drain       (bench) the waiting records through the mapping, one
 *                    consume per view, to EAGAIN-empty; prints "drained B
 *                    bytes R records in N ns (walk W ns, consume C ns, V
 *                    views, K noted)": the reader's walk, the consume
 *                    ioctls, and the COMM/TRACING/CONFIG records among the
 *                    records (what the consume reads)
 *   mmap drain nowalk   (bench) the same without looking at the records
 *                    (consume each view whole, as a plain read() drain
 *                    copies without looking; the records are counted
 *                    outside the timing)
 *   mmap readdrain   (bench) the same through read() with 1 MiB reads, and
 *                    a walk of the records as the mapped drain does
 *   mmap ftrace BYTES   (bench) on CPU 0, fills ftrace's ring buffer with
 *                    BYTES of 32-byte entries (trace_marker_raw writes of a
 *                    4-byte id and 16 bytes), then drains
 *                    per_cpu/cpu0/trace_pipe_raw with 1 MiB non-blocking
 *                    reads; prints "ftrace wrote N entries, drained B bytes
 *                    in T ns"
 *
 * Exit status 0 when every check held, 1 otherwise, 2 for usage.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "oprofile_rs.h"

#define DEV OPROFILE_RS_DEVICE

static long page;
static int violations;

static void violation(const char *what, int err)
{
	printf("VIOLATION: %s: %s\n", what, err ? strerrorname_np(err) : "-");
	violations++;
}

static uint64_t now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000ull + t.tv_nsec;
}

struct map {
	int fd;
	volatile struct oprofile_rs_meta *m;
	const uint8_t *data; /* the ring's pages, twice back to back */
	uint64_t size;
	size_t len;
};

/* Maps the whole window of `fd`: the meta page, then the data twice. */
static int map_all(int fd, struct map *mp)
{
	struct oprofile_rs_meta *m = mmap(NULL, page, PROT_READ, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED)
		return -1;
	mp->fd = fd;
	mp->size = m->data_size;
	mp->len = page + 2 * mp->size;
	if (m->version != OPROFILE_RS_META_VERSION || m->meta_size != page ||
	    m->data_offset != (uint64_t)page || !mp->size || mp->size % page) {
		violation("meta page fields", 0);
		return -1;
	}
	munmap(m, page);
	uint8_t *all = mmap(NULL, mp->len, PROT_READ, MAP_SHARED, fd, 0);
	if (all == MAP_FAILED)
		return -1;
	mp->m = (volatile struct oprofile_rs_meta *)all;
	mp->data = all + page;
	return 0;
}

static uint64_t head_of(struct map *mp)
{
	return __atomic_load_n(&mp->m->head, __ATOMIC_ACQUIRE);
}

static uint64_t tail_of(struct map *mp)
{
	return __atomic_load_n(&mp->m->tail, __ATOMIC_ACQUIRE);
}

/* COMM, TRACING and CONFIG records the last walk met (the consume notes them). */
static long walk_noted;

/* Whole well-formed records exactly filling `n` bytes; their count. */
static long walk(const uint8_t *p, uint64_t n)
{
	long recs = 0;
	uint64_t at = 0;
	while (at + sizeof(struct oprofile_rs_prefix) <= n) {
		struct oprofile_rs_prefix r;
		memcpy(&r, p + at, sizeof(r));
		uint16_t type = r.type, size = r.size;
		if (size < sizeof(r) || size % OPROFILE_RS_RECORD_ALIGN || at + size > n || type == 0)
			return -1;
		walk_noted += type == OPROFILE_RS_COMM || type == OPROFILE_RS_TRACING ||
			      type == OPROFILE_RS_CONFIG;
		at += size;
		recs++;
	}
	return at == n ? recs : -1;
}

/* Reads the stream's opening (header, restated records) into `out`. */
static int read_opening(struct map *mp, FILE *out, uint64_t *bytes)
{
	static uint8_t buf[1 << 16];
	uint64_t want;
	int first = 1;
	while ((want = mp->m->opening) > 0) {
		if (first && want != OPROFILE_RS_HEADER_LEN) {
			violation("opening before the header is not the header's size", 0);
			return -1;
		}
		first = 0;
		if (want > sizeof(buf))
			return -1;
		ssize_t r = read(mp->fd, buf, want);
		if (r != (ssize_t)want) {
			violation("read of the opening", r < 0 ? errno : 0);
			return -1;
		}
		if (out)
			fwrite(buf, 1, r, out);
		*bytes += r;
	}
	return 0;
}

static int consume(int fd, uint64_t tail, uint64_t new_tail)
{
	struct oprofile_rs_consume c = { tail, new_tail };
	return ioctl(fd, OPROFILE_RS_IOC_CONSUME, &c) ? errno : 0;
}

/* One stream: the opening by read(), then the mapping (see the top). */
static int cmd_stream(const char *path, int secs, int compare)
{
	struct map mp;
	FILE *out = fopen(path, "w");
	int fd = open(DEV, O_RDONLY | O_NONBLOCK);
	if (!out || fd < 0 || map_all(fd, &mp))
		return violation("open/map", errno), 1;
	uint64_t rbytes = 0, mbytes = 0, compares = 0, records = 0, round = 0;
	if (read_opening(&mp, out, &rbytes))
		return 1;
	uint8_t *snap = malloc(mp.size), *rbuf = malloc(mp.size);
	uint64_t end = now_ns() + secs * 1000000000ull;
	int stopping = 0;
	for (;;) {
		uint64_t tail = tail_of(&mp), head = head_of(&mp);
		if (head == tail) {
			if (stopping)
				break;
			if (now_ns() >= end) {
				/* Everything recorded, then the rest. */
				if (ioctl(fd, OPROFILE_RS_IOC_TRACING_OFF) || ioctl(fd, OPROFILE_RS_IOC_FLUSH))
					return violation("tracing off / flush", errno), 1;
				stopping = 1;
				continue;
			}
			struct pollfd p = { .fd = fd, .events = POLLIN };
			poll(&p, 1, 100);
			continue;
		}
		const uint8_t *view = mp.data + tail % mp.size;
		uint64_t n = head - tail;
		long recs = walk(view, n);
		if (recs < 0)
			return violation("records in the mapped view are not whole", 0), 1;
		records += recs;
		if (compare && round++ % 2) {
			/* The same bytes through read(). */
			memcpy(snap, view, n);
			ssize_t r = read(fd, rbuf, n);
			if (r != (ssize_t)n)
				return violation("read() of a mapped view's length", r < 0 ? errno : 0), 1;
			if (memcmp(snap, rbuf, n))
				return violation("mapping and read() differ", 0), 1;
			fwrite(rbuf, 1, n, out);
			compares++;
			rbytes += n;
		} else {
			mbytes += n;
			/* Written straight from the mapping (no copy into this process). */
			fwrite(view, 1, n, out);
			int e = consume(fd, tail, head);
			if (e)
				return violation("consume", e), 1;
		}
	}
	fclose(out);
	printf("mapped %llu read %llu compares %llu records %llu\n", (unsigned long long)mbytes,
	       (unsigned long long)rbytes, (unsigned long long)compares, (unsigned long long)records);
	return violations != 0;
}

/* expect: `what` returned `got` (0 or an errno); it must be `want`. */
static void expect(const char *what, int got, int want)
{
	printf("%s: %s\n", what, got ? strerrorname_np(got) : "ok");
	if (got != want) {
		char b[200];
		snprintf(b, sizeof(b), "%s: expected %s", what, want ? strerrorname_np(want) : "ok");
		violation(b, got);
	}
}

static int try_map(int fd, size_t len, int prot, int flags, off_t off)
{
	void *p = mmap(NULL, len, prot, flags, fd, off);
	if (p == MAP_FAILED)
		return errno;
	munmap(p, len);
	return 0;
}

static int cmd_hostile(void)
{
	int fd = open(DEV, O_RDONLY | O_NONBLOCK);
	struct map mp;
	if (fd < 0 || map_all(fd, &mp))
		return violation("open/map", errno), 1;
	size_t win = mp.len;
	expect("map the meta page alone", try_map(fd, page, PROT_READ, MAP_SHARED, 0), 0);
	expect("map the data alone, once", try_map(fd, mp.size, PROT_READ, MAP_SHARED, page), 0);
	expect("map the last data page", try_map(fd, page, PROT_READ, MAP_SHARED, win - page), 0);
	expect("map past the window", try_map(fd, page, PROT_READ, MAP_SHARED, win), EINVAL);
	expect("map one page too many", try_map(fd, win + page, PROT_READ, MAP_SHARED, 0), EINVAL);
	expect("map far past the window", try_map(fd, page, PROT_READ, MAP_SHARED, (off_t)1 << 40),
	       EINVAL);
	expect("map an unaligned offset", try_map(fd, page, PROT_READ, MAP_SHARED, 12), EINVAL);
	expect("map zero bytes", try_map(fd, 0, PROT_READ, MAP_SHARED, 0), EINVAL);
	expect("map writable (O_RDONLY file)", try_map(fd, page, PROT_READ | PROT_WRITE, MAP_SHARED, 0),
	       EACCES);
	expect("map private", try_map(fd, page, PROT_READ, MAP_PRIVATE, 0), EPERM);
	int e = try_map(fd, page, PROT_READ | PROT_EXEC, MAP_SHARED, 0);
	printf("map executable: %s\n", e ? strerrorname_np(e) : "ok");
	if (e != EPERM && e != EACCES)
		violation("map executable: expected EPERM (or EACCES, noexec /dev)", e);
	/* mprotect cannot make a mapping writable. */
	void *p = mmap(NULL, page, PROT_READ, MAP_SHARED, fd, 0);
	expect("mprotect PROT_WRITE", p == MAP_FAILED ? -1 : (mprotect(p, page, PROT_READ | PROT_WRITE) ? errno : 0),
	       EACCES);
	void *q = p == MAP_FAILED ? MAP_FAILED : mremap(p, page, 2 * page, MREMAP_MAYMOVE);
	printf("mremap to grow: %s\n", q == MAP_FAILED ? strerrorname_np(errno) : "ok");
	if (q != MAP_FAILED)
		violation("mremap grew the mapping", 0);
	munmap(p, page);
	/* The two copies of the data are the same pages. */
	if (memcmp(mp.data, mp.data + mp.size, mp.size))
		violation("the data's two mappings differ", 0);
	else
		printf("double mapping: same bytes\n");
	/* Consuming before the opening was read. */
	uint64_t t = tail_of(&mp), h = head_of(&mp);
	expect("consume before the opening", consume(fd, t, t), EINVAL);
	uint64_t rb = 0;
	if (read_opening(&mp, NULL, &rb))
		return 1;
	expect("consume nothing", consume(fd, t, t), 0);
	expect("consume from a stale tail",
	       consume(fd, t + OPROFILE_RS_RECORD_ALIGN, t + OPROFILE_RS_RECORD_ALIGN), ESTALE);
	expect("consume backwards", consume(fd, t, t - OPROFILE_RS_RECORD_ALIGN), EINVAL);
	h = head_of(&mp);
	expect("consume past the head", consume(fd, t, h + OPROFILE_RS_RECORD_ALIGN), EINVAL);
	expect("consume far past the head", consume(fd, t, ~0ull), EINVAL);
	if (h - t >= sizeof(struct oprofile_rs_prefix))
		expect("consume to the middle of a record", consume(fd, t, t + 4), EINVAL);
	expect("consume with a bad pointer",
	       ioctl(fd, OPROFILE_RS_IOC_CONSUME, (void *)8) ? errno : 0, EFAULT);
	/* A control file can neither map nor consume. */
	int w = open(DEV, O_WRONLY);
	if (w < 0)
		return violation("open O_WRONLY", errno), 1;
	expect("map a control file (O_WRONLY)", try_map(w, page, PROT_READ, MAP_SHARED, 0), EACCES);
	struct oprofile_rs_consume c = { t, t };
	expect("consume on a control file", ioctl(w, OPROFILE_RS_IOC_CONSUME, &c) ? errno : 0, EBADF);
	close(w);
	/* O_RDWR: the writable mapping reaches the driver, which refuses it. */
	close(fd);
	munmap((void *)mp.m, mp.len);
	int rw = open(DEV, O_RDWR | O_NONBLOCK);
	if (rw < 0)
		return violation("open O_RDWR", errno), 1;
	expect("map writable (O_RDWR file)", try_map(rw, page, PROT_READ | PROT_WRITE, MAP_SHARED, 0),
	       EPERM);
	expect("map read-only (O_RDWR file)", try_map(rw, page, PROT_READ, MAP_SHARED, 0), 0);
	close(rw);
	printf("violations %d\n", violations);
	return violations != 0;
}

/* Changes buffer_size to the other of 1 MiB and 2 MiB; 0 or an errno. */
static int resize(int fd)
{
	static int big;
	char text[40];
	snprintf(text, sizeof(text), "buffer_size=%d", big ? 1 << 20 : 2 << 20);
	struct oprofile_rs_config_text t = { (uintptr_t)text, strlen(text) };
	if (ioctl(fd, OPROFILE_RS_IOC_SET_CONFIG, &t))
		return errno;
	big = !big;
	return 0;
}

static void *map_at(int fd, void *at, size_t len, off_t off)
{
	return mmap(at, len, PROT_READ, MAP_SHARED | (at ? MAP_FIXED : 0), fd, off);
}

static int cmd_lifetime(void)
{
	int fd = open(DEV, O_RDWR | O_NONBLOCK);
	if (fd < 0)
		return violation("open O_RDWR", errno), 1;
	if (ioctl(fd, OPROFILE_RS_IOC_TRACING_OFF))
		return violation("tracing off", errno), 1;
	expect("buffer_size change, nothing mapped", resize(fd), 0);
	/* Refused mappings leave nothing behind. */
	expect("map writable (O_RDWR file)", try_map(fd, page, PROT_READ | PROT_WRITE, MAP_SHARED, 0),
	       EPERM);
	expect("buffer_size change after the refused writable mapping", resize(fd), 0);
	expect("map far past the window", try_map(fd, page, PROT_READ, MAP_SHARED, (off_t)1 << 40),
	       EINVAL);
	expect("buffer_size change after the refused mapping past the window", resize(fd), 0);
	/* A mapping that ended. */
	expect("map the meta page, unmap it", try_map(fd, page, PROT_READ, MAP_SHARED, 0), 0);
	expect("buffer_size change after the unmap", resize(fd), 0);
	/* A live mapping, and its pieces. */
	uint8_t *p = map_at(fd, NULL, 3 * page, 0);
	if (p == MAP_FAILED)
		return violation("map 3 pages", errno), 1;
	expect("buffer_size change while mapped", resize(fd), EBUSY);
	expect("unmap the middle page (split in two)", munmap(p + page, page) ? errno : 0, 0);
	expect("buffer_size change while two pieces live", resize(fd), EBUSY);
	munmap(p, page);
	expect("buffer_size change while the last piece lives", resize(fd), EBUSY);
	munmap(p + 2 * page, page);
	expect("buffer_size change after the last piece went", resize(fd), 0);
	/* Split without an unmap (mprotect), then moved (mremap). */
	p = map_at(fd, NULL, 2 * page, 0);
	if (p == MAP_FAILED)
		return violation("map 2 pages", errno), 1;
	expect("mprotect the first page PROT_NONE (split)", mprotect(p, page, PROT_NONE) ? errno : 0, 0);
	uint8_t *to = mmap(NULL, page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uint8_t *q = mremap(p + page, page, page, MREMAP_MAYMOVE | MREMAP_FIXED, to);
	expect("mremap the second page elsewhere", q == MAP_FAILED ? errno : 0, 0);
	munmap(p, page);
	expect("buffer_size change while the moved page lives", resize(fd), EBUSY);
	munmap(to, page);
	expect("buffer_size change after the moved page went", resize(fd), 0);
	/* fork: not inherited, also after MADV_DOFORK. */
	p = map_at(fd, NULL, page, 0);
	if (p == MAP_FAILED)
		return violation("map a page", errno), 1;
	/* The test kernels have no madvise (CONFIG_ADVISE_SYSCALLS=n): ENOSYS,
	 * which mmap.sh reports as a skip. */
	int e = madvise(p, page, MADV_DOFORK) ? errno : 0;
	if (e == ENOSYS)
		printf("madvise(MADV_DOFORK): ENOSYS\n");
	else
		expect("madvise(MADV_DOFORK)", e, EINVAL);
	pid_t c = fork();
	if (c == 0) {
		/* mincore: ENOMEM where nothing is mapped. */
		unsigned char v;
		_exit(mincore(p, page, &v) == 0 ? 1 : errno == ENOMEM ? 0 : 2);
	}
	int st;
	waitpid(c, &st, 0);
	printf("the child after fork: %s\n", WIFEXITED(st) && WEXITSTATUS(st) == 0 ? "not mapped" : "mapped");
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		violation("a forked child inherited the mapping", 0);
	expect("buffer_size change while the parent's mapping lives", resize(fd), EBUSY);
	/* Held after close: a control file sees the mapping, until it goes. */
	close(fd);
	int w = open(DEV, O_WRONLY);
	if (w < 0)
		return violation("open O_WRONLY", errno), 1;
	expect("buffer_size change while a mapping outlives its file", resize(w), EBUSY);
	munmap(p, page);
	expect("buffer_size change after that mapping went", resize(w), 0);
	if (ioctl(w, OPROFILE_RS_IOC_TRACING_ON))
		violation("tracing on", errno);
	close(w);
	printf("violations %d\n", violations);
	return violations != 0;
}

static int cmd_slow(const char *path, int secs)
{
	struct map mp;
	FILE *out = fopen(path, "w");
	int fd = open(DEV, O_RDONLY | O_NONBLOCK);
	if (!out || fd < 0 || map_all(fd, &mp))
		return violation("open/map", errno), 1;
	uint64_t rb = 0;
	if (read_opening(&mp, out, &rb))
		return 1;
	/* Let records arrive, then snapshot what waits. */
	sleep(1);
	uint64_t t0 = tail_of(&mp), h0 = head_of(&mp), full0 = mp.m->full;
	uint8_t *snap = malloc(h0 - t0 + 1);
	memcpy(snap, mp.data + t0 % mp.size, h0 - t0);
	sleep(secs);
	uint64_t t1 = tail_of(&mp), h1 = head_of(&mp), full1 = mp.m->full;
	printf("waiting %llu bytes at first, %llu later; full %llu\n", (unsigned long long)(h0 - t0),
	       (unsigned long long)(h1 - t1), (unsigned long long)(full1 - full0));
	if (t1 != t0)
		violation("the consumer position moved without a consume", 0);
	if (h1 - t1 > mp.size)
		violation("more bytes wait than the ring holds", 0);
	if (memcmp(snap, mp.data + t0 % mp.size, h0 - t0))
		violation("waiting bytes changed: the writer lapped the reader", 0);
	else
		printf("unchanged %llu\n", (unsigned long long)(h0 - t0));
	if (ioctl(fd, OPROFILE_RS_IOC_TRACING_OFF) || ioctl(fd, OPROFILE_RS_IOC_FLUSH))
		return violation("tracing off / flush", errno), 1;
	for (;;) {
		uint64_t t = tail_of(&mp), h = head_of(&mp);
		if (h == t)
			break;
		if (walk(mp.data + t % mp.size, h - t) < 0)
			return violation("records not whole", 0), 1;
		fwrite(mp.data + t % mp.size, 1, h - t, out);
		int e = consume(fd, t, h);
		if (e)
			return violation("consume", e), 1;
	}
	fclose(out);
	printf("full %llu\n", (unsigned long long)(full1 - full0));
	return violations != 0;
}

struct shared_map {
	struct map mp;
	FILE *out;
	pthread_mutex_t lock;
	volatile int stop;
	uint64_t consumed, stale;
};

static void *racer(void *arg)
{
	struct shared_map *s = arg;
	uint8_t *copy = malloc(s->mp.size);
	while (!s->stop) {
		uint64_t t = tail_of(&s->mp), h = head_of(&s->mp);
		if (h == t) {
			struct pollfd p = { .fd = s->mp.fd, .events = POLLIN };
			poll(&p, 1, 10);
			continue;
		}
		memcpy(copy, s->mp.data + t % s->mp.size, h - t);
		pthread_mutex_lock(&s->lock);
		int e = consume(s->mp.fd, t, h);
		if (!e) {
			/* Never consumed meanwhile, so never overwritten: whole. */
			if (walk(copy, h - t) < 0)
				violation("a consumed copy is not whole records", 0);
			fwrite(copy, 1, h - t, s->out);
			s->consumed++;
		} else if (e == ESTALE) {
			s->stale++;
		} else {
			violation("consume", e);
		}
		pthread_mutex_unlock(&s->lock);
	}
	free(copy);
	return NULL;
}

static int cmd_threads(const char *path, int secs)
{
	static struct shared_map s;
	s.out = fopen(path, "w");
	int fd = open(DEV, O_RDONLY | O_NONBLOCK);
	if (!s.out || fd < 0 || map_all(fd, &s.mp))
		return violation("open/map", errno), 1;
	uint64_t rb = 0;
	if (read_opening(&s.mp, s.out, &rb))
		return 1;
	pthread_mutex_init(&s.lock, NULL);
	pthread_t a, b;
	pthread_create(&a, NULL, racer, &s);
	pthread_create(&b, NULL, racer, &s);
	sleep(secs);
	if (ioctl(fd, OPROFILE_RS_IOC_TRACING_OFF) || ioctl(fd, OPROFILE_RS_IOC_FLUSH))
		violation("tracing off / flush", errno);
	/* Let the racers drain what is left. */
	while (head_of(&s.mp) != tail_of(&s.mp))
		usleep(10000);
	s.stop = 1;
	pthread_join(a, NULL);
	pthread_join(b, NULL);
	fclose(s.out);
	printf("consumed %llu stale %llu\n", (unsigned long long)s.consumed,
	       (unsigned long long)s.stale);
	return violations != 0;
}

static int cmd_hold(int secs)
{
	int fd = open(DEV, O_RDONLY | O_NONBLOCK);
	struct map mp;
	if (fd < 0 || map_all(fd, &mp))
		return violation("open/map", errno), 1;
	close(fd);
	printf("held\n");
	fflush(stdout);
	sleep(secs);
	if (mp.m->version != OPROFILE_RS_META_VERSION)
		violation("the meta page after close", 0);
	/* Touch every page of the window. */
	volatile uint8_t sum = 0;
	for (size_t i = page; i < mp.len; i += page)
		sum += mp.data[i - page];
	munmap((void *)mp.m, mp.len);
	printf("unmapped\n");
	return violations != 0;
}

/* A reader that consumes forever (until killed). */
static void endless(int unmap_first)
{
	int fd = open(DEV, O_RDONLY | O_NONBLOCK);
	struct map mp;
	uint64_t rb = 0;
	if (fd < 0 || map_all(fd, &mp) || read_opening(&mp, NULL, &rb))
		_exit(3);
	if (unmap_first) {
		munmap((void *)mp.m, mp.len);
		pause();
	}
	for (;;) {
		uint64_t t = tail_of(&mp), h = head_of(&mp);
		if (h != t)
			consume(fd, t, h);
	}
}

static int cmd_die(void)
{
	for (int unmap_first = 0; unmap_first < 2; unmap_first++) {
		pid_t c = fork();
		if (!c)
			endless(unmap_first);
		usleep(200000);
		kill(c, SIGKILL);
		int st;
		waitpid(c, &st, 0);
		if (!WIFSIGNALED(st))
			violation("the reader did not run until killed", 0);
		int fd = open(DEV, O_RDONLY | O_NONBLOCK);
		if (fd < 0)
			violation("open after the killed reader", errno);
		else
			close(fd);
	}
	printf("violations %d\n", violations);
	return violations != 0;
}

/* Busy for `ms` milliseconds. */
static void spin_ms(int ms)
{
	uint64_t end = now_ns() + ms * 1000000ull;
	volatile uint64_t x = 0;
	while (now_ns() < end)
		x++;
}

static uint16_t u16_at(const uint8_t *p, size_t at)
{
	uint16_t v;
	memcpy(&v, p + at, 2);
	return v;
}

static uint32_t u32_at(const uint8_t *p, size_t at)
{
	uint32_t v;
	memcpy(&v, p + at, 4);
	return v;
}

static int cmd_handoff(int names, int spin)
{
	int fd = open(DEV, O_RDONLY | O_NONBLOCK);
	struct map mp;
	uint64_t rb = 0;
	if (fd < 0 || map_all(fd, &mp) || read_opening(&mp, NULL, &rb))
		return violation("open/map", errno), 1;
	/* An empty event buffer first: room for the child's records. */
	uint64_t t, h;
	do {
		if (ioctl(fd, OPROFILE_RS_IOC_FLUSH))
			return violation("flush", errno), 1;
		t = tail_of(&mp);
		h = head_of(&mp);
		if (h != t && consume(fd, t, h))
			return violation("consume before the child", errno), 1;
	} while (h != t);
	pid_t c = fork();
	if (c == 0) {
		char name[16];
		for (int i = 0; i < names; i++) {
			snprintf(name, sizeof(name), "hof%d", i);
			prctl(PR_SET_NAME, name);
			spin_ms(i == names - 1 ? 100 : spin);
		}
		_exit(0);
	}
	int st;
	waitpid(c, &st, 0);
	/* The first view with a COMM record of the child (the views before
	 * are consumed whole: with a full buffer, the child's records wait
	 * in the CPU buffers); the end of its last such record. */
	const uint8_t *v = NULL;
	uint64_t end = 0, at = 0;
	long comms = 0, recs = 0;
	uint8_t comm[OPROFILE_RS_COMM_LEN];
	for (int round = 0; !end && round < 1000; round++) {
		if (ioctl(fd, OPROFILE_RS_IOC_FLUSH))
			return violation("flush", errno), 1;
		t = tail_of(&mp);
		h = head_of(&mp);
		if (h == t)
			break;
		v = mp.data + t % mp.size;
		for (at = 0; at + sizeof(struct oprofile_rs_prefix) <= h - t;) {
			struct oprofile_rs_prefix r;
			memcpy(&r, v + at, sizeof(r));
			uint16_t type = r.type, size = r.size;
			if (size < sizeof(r) || at + size > h - t)
				return violation("a record in the view", 0), 1;
			if (type == OPROFILE_RS_COMM && size == OPROFILE_RS_COMM_LEN &&
			    u32_at(v, at + offsetof(struct oprofile_rs_comm, pid)) == (uint32_t)c) {
				comms++;
				end = at + size;
				memcpy(comm, v + at, OPROFILE_RS_COMM_LEN);
			}
			at += size;
			recs++;
		}
		if (!end && consume(fd, t, h))
			return violation("consume a view without the child", errno), 1;
	}
	if (!end)
		return violation("no COMM record of the child in the stream", 0), 1;
	/* Positions that do not end a record are refused, the view unchanged. */
	int bad = 0;
	at = 0;
	for (long i = 0; at < end && i < 300; i++) {
		uint16_t size = u16_at(v, at + offsetof(struct oprofile_rs_prefix, size));
		for (uint64_t in = OPROFILE_RS_RECORD_ALIGN; in < size; in += OPROFILE_RS_RECORD_ALIGN)
			if (consume(fd, t, t + at + in) != EINVAL)
				bad++;
		at += size;
	}
	if (bad)
		violation("a consume inside a record was not refused", 0);
	expect("consume past the head", consume(fd, t, h + OPROFILE_RS_RECORD_ALIGN), EINVAL);
	expect("consume far past the head", consume(fd, t, h + (1ull << 32)), EINVAL);
	/* In pieces: one record, then about a third, then up to the COMM's end. */
	uint64_t done = u16_at(v, offsetof(struct oprofile_rs_prefix, size));
	expect("consume one record", consume(fd, t, t + done), 0);
	uint64_t third = done;
	while (third < end / 3)
		third += u16_at(v, third + offsetof(struct oprofile_rs_prefix, size));
	if (third < end) {
		expect("consume a third", consume(fd, t + done, t + third), 0);
		done = third;
	}
	if (done < end)
		expect("consume to the end of the COMM record", consume(fd, t + done, t + end), 0);
	expect("consume from the old tail", consume(fd, t, t + end), ESTALE);
	munmap((void *)mp.m, mp.len);
	close(fd);

	/* The next reader: the COMM restated in its opening, samples after. */
	fd = open(DEV, O_RDONLY | O_NONBLOCK);
	char *obuf = NULL;
	size_t olen = 0;
	FILE *o = open_memstream(&obuf, &olen);
	uint64_t ob = 0;
	if (fd < 0 || !o || map_all(fd, &mp) || read_opening(&mp, o, &ob))
		return violation("second reader: open/map/opening", errno), 1;
	fclose(o);
	int restated = 0;
	for (size_t a = OPROFILE_RS_HEADER_LEN; a + sizeof(struct oprofile_rs_prefix) <= olen;) {
		uint16_t size = u16_at((uint8_t *)obuf, a + offsetof(struct oprofile_rs_prefix, size));
		if (size < sizeof(struct oprofile_rs_prefix))
			break;
		if (size == OPROFILE_RS_COMM_LEN && a + size <= olen &&
		    !memcmp(obuf + a, comm, OPROFILE_RS_COMM_LEN))
			restated = 1;
		a += size;
	}
	free(obuf);
	if (!restated)
		violation("the second reader's opening does not restate the child's last COMM", 0);
	/* Its stream to the end (what waited in the CPU buffers while the
	 * event buffer was full comes after a flush). */
	long samples = 0;
	uint16_t cpu = u16_at(comm, offsetof(struct oprofile_rs_prefix, cpu));
	for (int round = 0; round < 1000; round++) {
		t = tail_of(&mp);
		h = head_of(&mp);
		if (h == t) {
			if (ioctl(fd, OPROFILE_RS_IOC_FLUSH))
				return violation("flush", errno), 1;
			if (head_of(&mp) == t)
				break;
			continue;
		}
		v = mp.data + t % mp.size;
		for (at = 0; at + sizeof(struct oprofile_rs_prefix) <= h - t;) {
			struct oprofile_rs_prefix r;
			memcpy(&r, v + at, sizeof(r));
			uint16_t size = r.size;
			if (size < sizeof(r))
				break;
			if (r.type == OPROFILE_RS_SAMPLE && r.cpu == cpu &&
			    u32_at(v, at + offsetof(struct oprofile_rs_sample, pid)) == (uint32_t)c)
				samples++;
			at += size;
		}
		if (consume(fd, t, h))
			return violation("second reader: consume", errno), 1;
	}
	if (!samples)
		violation("the second reader got no sample of the child on the COMM's CPU", 0);
	printf("handoff comms %ld records %ld restated %d samples %ld\n", comms, recs, restated,
	       samples);
	printf("violations %d\n", violations);
	return violations != 0;
}

/* Bench: the waiting records through the mapping. */
static int cmd_drain(int walk_records)
{
	int fd = open(DEV, O_RDONLY | O_NONBLOCK);
	struct map mp;
	uint64_t rb = 0, bytes = 0, records = 0;
	if (fd < 0 || map_all(fd, &mp) || read_opening(&mp, NULL, &rb))
		return violation("open/map", errno), 1;
	uint64_t t0 = now_ns(), walk_ns = 0, consume_ns = 0, views = 0;
	for (;;) {
		uint64_t t = tail_of(&mp), h = head_of(&mp);
		if (h == t)
			break;
		uint64_t w0 = now_ns();
		long r = walk_records ? walk(mp.data + t % mp.size, h - t) : 0;
		uint64_t w1 = now_ns();
		if (r < 0 || consume(fd, t, h))
			return violation("drain", errno), 1;
		consume_ns += now_ns() - w1;
		walk_ns += w1 - w0;
		if (!walk_records) {
			/* The count only, after the timing: nothing appends
			 * (recording is off), so the consumed bytes are still
			 * there. */
			uint64_t u0 = now_ns();
			r = walk(mp.data + t % mp.size, h - t);
			t0 += now_ns() - u0;
		}
		views++;
		bytes += h - t;
		records += r;
	}
	uint64_t t1 = now_ns();
	printf("drained %llu bytes %llu records in %llu ns (walk %llu ns, consume %llu ns, %llu views, %ld noted)\n",
	       (unsigned long long)bytes, (unsigned long long)records, (unsigned long long)(t1 - t0),
	       (unsigned long long)walk_ns, (unsigned long long)consume_ns, (unsigned long long)views,
	       walk_noted);
	return 0;
}

static int cmd_readdrain(void)
{
	static uint8_t buf[1 << 20];
	int fd = open(DEV, O_RDONLY | O_NONBLOCK);
	uint64_t bytes = 0, records = 0;
	ssize_t r = fd < 0 ? -1 : read(fd, buf, OPROFILE_RS_HEADER_LEN);
	if (r != OPROFILE_RS_HEADER_LEN)
		return violation("open/header", errno), 1;
	/* The restated records (if any) are part of the drain: few bytes. */
	uint64_t t0 = now_ns(), walk_ns = 0;
	while ((r = read(fd, buf, sizeof(buf))) > 0) {
		uint64_t w0 = now_ns();
		long n = walk(buf, r);
		walk_ns += now_ns() - w0;
		if (n < 0)
			return violation("records not whole", 0), 1;
		bytes += r;
		records += n;
	}
	uint64_t t1 = now_ns();
	if (errno != EAGAIN)
		return violation("read", errno), 1;
	printf("drained %llu bytes %llu records in %llu ns (walk %llu ns)\n",
	       (unsigned long long)bytes, (unsigned long long)records, (unsigned long long)(t1 - t0),
	       (unsigned long long)walk_ns);
	return 0;
}

/* Bench: ftrace's buffer, the same volume in 32-byte entries. */
static int cmd_ftrace(long bytes)
{
	static uint8_t buf[1 << 20];
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(0, &set);
	if (sched_setaffinity(0, sizeof(set), &set))
		return violation("sched_setaffinity", errno), 1;
	int m = open("/sys/kernel/tracing/trace_marker_raw", O_WRONLY);
	int p = open("/sys/kernel/tracing/per_cpu/cpu0/trace_pipe_raw", O_RDONLY | O_NONBLOCK);
	if (m < 0 || p < 0)
		return violation("open tracefs files", errno), 1;
	/* Empty the buffer first. */
	while (read(p, buf, sizeof(buf)) > 0)
		;
	/* An entry: the ring's 4-byte event header, the 8-byte trace entry,
	 * the 4-byte id and 16 bytes of data: 32 bytes. */
	uint8_t rec[20] = { 1, 0, 0, 0 };
	long n = bytes / 32, written = 0;
	for (long i = 0; i < n; i++) {
		memcpy(rec + 4, &i, sizeof(i));
		if (write(m, rec, sizeof(rec)) == (ssize_t)sizeof(rec))
			written++;
	}
	uint64_t t0 = now_ns(), total = 0;
	ssize_t r;
	while ((r = read(p, buf, sizeof(buf))) > 0)
		total += r;
	uint64_t t1 = now_ns();
	if (r < 0 && errno != EAGAIN)
		return violation("read trace_pipe_raw", errno), 1;
	printf("ftrace wrote %ld entries, drained %llu bytes in %llu ns\n", written,
	       (unsigned long long)total, (unsigned long long)(t1 - t0));
	return 0;
}

int main(int argc, char **argv)
{
	page = sysconf(_SC_PAGESIZE);
	setvbuf(stdout, NULL, _IOLBF, 0);
	const char *cmd = argc > 1 ? argv[1] : "";
	if (!strcmp(cmd, "stream") && argc >= 4)
		return cmd_stream(argv[2], atoi(argv[3]), argc > 4 && !strcmp(argv[4], "compare"));
	if (!strcmp(cmd, "hostile"))
		return cmd_hostile();
	if (!strcmp(cmd, "slow") && argc == 4)
		return cmd_slow(argv[2], atoi(argv[3]));
	if (!strcmp(cmd, "threads") && argc == 4)
		return cmd_threads(argv[2], atoi(argv[3]));
	if (!strcmp(cmd, "lifetime"))
		return cmd_lifetime();
	if (!strcmp(cmd, "hold") && argc == 3)
		return cmd_hold(atoi(argv[2]));
	if (!strcmp(cmd, "die"))
		return cmd_die();
	if (!strcmp(cmd, "handoff") && argc == 4)
		return cmd_handoff(atoi(argv[2]), atoi(argv[3]));
	if (!strcmp(cmd, "drain"))
		return cmd_drain(argc < 3 || strcmp(argv[2], "nowalk"));
	if (!strcmp(cmd, "readdrain"))
		return cmd_readdrain();
	if (!strcmp(cmd, "ftrace") && argc == 3)
		return cmd_ftrace(atol(argv[2]));
	fprintf(stderr, "usage: see the top of tests/guest/mmap.c\n");
	return 2;
}
