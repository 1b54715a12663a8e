// SPDX-License-Identifier: GPL-2.0
/*
 * unwindctl: the unwind-table ioctls (OPROFILE_RS_IOC_UNWIND_*), as a
 * careless or hostile tool would use them.
 *
 *   unwindctl hostile    one line per request: NAME ok|err ERRNO-NAME
 *   unwindctl cut SECS   loads, for its own text, a table with no rule and
 *                        spins SECS seconds in spin(): every user stack of
 *                        its samples is cut by the module's walk
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "oprofile_rs.h"

static const char *ename(int e)
{
	switch (e) {
	case EINVAL: return "EINVAL";
	case EFAULT: return "EFAULT";
	case ESRCH: return "ESRCH";
	case ENOENT: return "ENOENT";
	case EPERM: return "EPERM";
	case ENOSPC: return "ENOSPC";
	case ENOTTY: return "ENOTTY";
	case ENOMEM: return "ENOMEM";
	default: return "other";
	}
}

static int say(const char *name, long r)
{
	if (r < 0)
		printf("%s err %s\n", name, ename(errno));
	else
		printf("%s ok\n", name);
	return (int)r;
}

/* A table of n rows: CFA = sp + 8 from addr 0, then UNKNOWN at 0x1000..., or all UNKNOWN. */
static void *table(unsigned rows, int all_unknown, size_t *len)
{
	size_t l = sizeof(struct oprofile_rs_unwind_table_head) + rows * sizeof(struct oprofile_rs_unwind_row);
	unsigned char *b = calloc(1, l);
	struct oprofile_rs_unwind_table_head *h = (void *)b;
	struct oprofile_rs_unwind_row *r = (void *)(h + 1);

	h->magic = OPROFILE_RS_UNWIND_MAGIC;
	h->rows = rows;
	for (unsigned i = 0; i < rows; i++) {
		r[i].addr = i * (rows > 1000 ? 16 : 0x1000);
		r[i].rule = all_unknown || i == rows - 1 ? OPROFILE_RS_UNWIND_UNKNOWN : OPROFILE_RS_UNWIND_CFA_SP;
		r[i].cfa = 8;
	}
	*len = l;
	return b;
}

static long load(int fd, void *b, size_t len)
{
	struct oprofile_rs_unwind_table t = { (uintptr_t)b, len };

	return ioctl(fd, OPROFILE_RS_IOC_UNWIND_TABLE, &t);
}

/* This process's executable mapping of its own binary. */
static int own_text(uint64_t *start, uint64_t *end, uint64_t *off, uint64_t *ino)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512], perms[8], path[256];
	unsigned long long s, e, o, i;
	unsigned maj, min;

	while (f && fgets(line, sizeof line, f)) {
		path[0] = 0;
		if (sscanf(line, "%llx-%llx %7s %llx %x:%x %llu %255s", &s, &e, perms, &o, &maj, &min, &i, path) < 7)
			continue;
		if (strchr(perms, 'x') && i && path[0] == '/') {
			*start = s, *end = e, *off = o, *ino = i;
			fclose(f);
			return 0;
		}
	}
	if (f)
		fclose(f);
	return -1;
}

static long map(int fd, uint32_t pid, uint32_t table, uint64_t s, uint64_t e, uint64_t ino)
{
	struct oprofile_rs_unwind_map m = { pid, table, s, e, 0, ino };

	return ioctl(fd, OPROFILE_RS_IOC_UNWIND_MAP, &m);
}

static volatile uint64_t sink;

__attribute__((noinline)) static void spin(double secs)
{
	struct timespec a, b;

	clock_gettime(CLOCK_MONOTONIC, &a);
	do {
		for (int i = 0; i < 100000; i++)
			sink += i;
		clock_gettime(CLOCK_MONOTONIC, &b);
	} while ((b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9 < secs);
}

int main(int argc, char **argv)
{
	int fd = open(OPROFILE_RS_DEVICE, O_WRONLY);
	uint64_t s, e, o, ino;
	size_t len;
	void *b;
	long id;

	if (fd < 0 || argc < 2 || own_text(&s, &e, &o, &ino)) {
		perror("unwindctl");
		return 2;
	}
	if (!strcmp(argv[1], "cut") && argc == 3) {
		b = table(2, 1, &len);
		id = load(fd, b, len);
		if (id < 1 || map(fd, getpid(), id, s, e, ino) < 0) {
			perror("unwindctl: load");
			return 1;
		}
		spin(atof(argv[2]));
		return 0;
	}
	if (strcmp(argv[1], "hostile"))
		return 2;
	b = table(4, 0, &len);
	say("table-len-0", load(fd, b, 0));
	say("table-len-head-only", load(fd, b, sizeof(struct oprofile_rs_unwind_table_head)));
	say("table-len-huge", load(fd, b, (size_t)1 << 40));
	say("table-len-short", load(fd, b, len - 1));
	say("table-null", load(fd, NULL, len));
	((struct oprofile_rs_unwind_table_head *)b)->magic ^= 1;
	say("table-magic", load(fd, b, len));
	((struct oprofile_rs_unwind_table_head *)b)->magic ^= 1;
	((struct oprofile_rs_unwind_row *)((struct oprofile_rs_unwind_table_head *)b + 1))[1].addr = 0;
	say("table-unsorted", load(fd, b, len));
	((struct oprofile_rs_unwind_row *)((struct oprofile_rs_unwind_table_head *)b + 1))[1].addr = 0x1000;
	((struct oprofile_rs_unwind_row *)((struct oprofile_rs_unwind_table_head *)b + 1))[1].rule = 9;
	say("table-rule", load(fd, b, len));
	((struct oprofile_rs_unwind_row *)((struct oprofile_rs_unwind_table_head *)b + 1))[1].rule = 1;
	((struct oprofile_rs_unwind_row *)((struct oprofile_rs_unwind_table_head *)b + 1))[3].rule = 1;
	say("table-no-end", load(fd, b, len));
	((struct oprofile_rs_unwind_row *)((struct oprofile_rs_unwind_table_head *)b + 1))[3].rule = 3;
	id = say("table-good", load(fd, b, len));
	printf("table-id %ld\n", id);
	say("map-null", ioctl(fd, OPROFILE_RS_IOC_UNWIND_MAP, NULL));
	say("map-no-table", map(fd, getpid(), 999, s, e, ino));
	say("map-table-0", map(fd, getpid(), 0, s, e, ino));
	say("map-pid-0", map(fd, 0, id, s, e, ino));
	say("map-pid-none", map(fd, 99999999, id, s, e, ino));
	say("map-pid-kthread", map(fd, 2, id, s, e, ino));
	say("map-inode", map(fd, getpid(), id, s, e, ino + 1));
	say("map-range", map(fd, getpid(), id, s, e + 4096, ino));
	say("map-empty", map(fd, getpid(), id, e, s, ino));
	say("map-kernel", map(fd, getpid(), id, (uint64_t)-4096 * 2, (uint64_t)-4096, ino));
	say("map-good", map(fd, getpid(), id, s, e, ino));
	say("map-again", map(fd, getpid(), id, s, e, ino));
	/* Another file cannot use this file's table. */
	int fd2 = open(OPROFILE_RS_DEVICE, O_WRONLY);
	say("map-other-files-table", map(fd2, getpid(), id, s, e, ino));
	/* The cap: two tables of the most rows are more than all may hold. */
	void *big = table(OPROFILE_RS_UNWIND_MAX_ROWS, 0, &len);
	say("table-max-rows", load(fd, big, len));
	say("table-over-the-cap", load(fd, big, len));
	free(big);
	b = table(4, 0, &len);
	say("reset", ioctl(fd, OPROFILE_RS_IOC_UNWIND_RESET));
	big = table(OPROFILE_RS_UNWIND_MAX_ROWS, 0, &len);
	say("table-max-rows-after-reset", load(fd, big, len));
	free(big);
	b = table(4, 0, &len);
	say("map-after-reset", map(fd, getpid(), id, s, e, ino));
	say("reset-again", ioctl(fd, OPROFILE_RS_IOC_UNWIND_RESET));
	/* An fd passed to an unprivileged process: no mapping. */
	id = load(fd2, b, len);
	if (setgid(65534) || setuid(65534))
		perror("setuid");
	say("map-unprivileged", map(fd2, getpid(), id, s, e, ino));
	say("table-unprivileged", load(fd2, b, len));
	return 0;
}
