// SPDX-License-Identifier: GPL-2.0
/*
 * probe: exact system calls for the guest tests, where a shell cannot say
 * precisely what it does (an empty write, one read of N bytes, ...).
 *
 *   probe write FILE DATA          one write(2) of DATA (may be empty)
 *   probe writen FILE N            one write(2) of N bytes of '1'
 *   probe read FILE SIZE [nonblock] one read(2) of at most SIZE bytes
 *   probe read2 FILE SIZE [nonblock] read(2) 64 bytes, then SIZE bytes
 *   probe open2 FILE               open twice; report the second open's result
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
#include <unistd.h>

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
	if (!strcmp(cmd, "writen") && argc == 4) {
		size_t n = strtoul(argv[3], NULL, 0);
		char *buf = malloc(n + 1);
		memset(buf, '1', n);
		int fd = open(path, O_WRONLY);
		if (fd < 0)
			return report(-1);
		return report(write(fd, buf, n));
	}
	if (!strcmp(cmd, "read") && argc >= 4) {
		size_t n = strtoul(argv[3], NULL, 0);
		int flags = O_RDONLY | (argc > 4 && !strcmp(argv[4], "nonblock") ? O_NONBLOCK : 0);
		char *buf = malloc(n + 1);
		int fd = open(path, flags);
		if (fd < 0)
			return report(-1);
		return report(read(fd, buf, n));
	}
	if (!strcmp(cmd, "read2") && argc >= 4) {
		size_t n = strtoul(argv[3], NULL, 0);
		int flags = O_RDONLY | (argc > 4 && !strcmp(argv[4], "nonblock") ? O_NONBLOCK : 0);
		char *buf = malloc(n + 64);
		int fd = open(path, flags);
		if (fd < 0)
			return report(-1);
		long r = read(fd, buf, 64);
		if (r < 0)
			return report(r);
		printf("ok %ld ", r);
		return report(read(fd, buf, n));
	}
	if (!strcmp(cmd, "open2")) {
		int fd1 = open(path, O_RDONLY);
		if (fd1 < 0)
			return report(-1);
		return report(open(path, O_RDONLY));
	}
usage:
	fprintf(stderr, "usage: see the comment in probe.c\n");
	return 2;
}
