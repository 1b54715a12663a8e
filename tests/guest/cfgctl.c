/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The device's configuration ioctls (tests/guest/control.sh), on a control
 * file (O_WRONLY: no reader slot) of /dev/oprofile/buffer:
 *
 *   cfgctl set TEXT      OPROFILE_RS_IOC_SET_CONFIG with TEXT; prints "ok"
 *                        or "err ENAME"
 *   cfgctl get LEN       OPROFILE_RS_IOC_GET_CONFIG into a LEN-byte buffer;
 *                        prints "len N" and the text, or "err ENAME"
 *   cfgctl hostile       bad pointers and lengths: prints one line per case,
 *                        "CASE ENAME" (or "CASE ok")
 *   cfgctl write FILE VALUE
 *                        one write(2) of VALUE (a literal "\\n" in it is a
 *                        newline) to FILE (a debugfs file); prints "ok" or
 *                        "err ENAME" (shells do not say which error)
 *   cfgctl drainset TEXT  reads the stream (a reader's open, O_NONBLOCK) until
 *                        EAGAIN, then at once SET_CONFIG with TEXT on that
 *                        file; prints "drained B ok" or "drained B err ENAME"
 *   cfgctl hammer SECS TEXT...
 *                        applies the TEXTs in turn for SECS seconds; prints
 *                        "hammer ok N ebusy N einval N eopnotsupp N other N"
 *                        (other: any other answer, which the scenario
 *                        refuses); past SECS it goes on (up to 60 s
 *                        more) while none was applied or none refused
 *                        EOPNOTSUPP: on the lockdep kernel the storm
 *                        around it once kept every try EBUSY for 8 s
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "oprofile_rs.h"

static const char *errname(int e)
{
	switch (e) {
	case EBUSY: return "EBUSY";
	case EINVAL: return "EINVAL";
	case EFAULT: return "EFAULT";
	case ERANGE: return "ERANGE";
	case ENOMEM: return "ENOMEM";
	case EOPNOTSUPP: return "EOPNOTSUPP";
	case ENOTTY: return "ENOTTY";
	case EACCES: return "EACCES";
	case EPERM: return "EPERM";
	case ENOENT: return "ENOENT";
	case ENOTDIR: return "ENOTDIR";
	case ESRCH: return "ESRCH";
	case E2BIG: return "E2BIG";
	default: return strerror(e);
	}
}

static int dev(void)
{
	int fd = open(OPROFILE_RS_DEVICE, O_WRONLY);
	if (fd < 0) { printf("open: %s\n", errname(errno)); exit(2); }
	return fd;
}

static int set(int fd, const void *text, size_t len)
{
	struct oprofile_rs_config_text t = { (uintptr_t)text, len };
	return ioctl(fd, OPROFILE_RS_IOC_SET_CONFIG, &t) ? errno : 0;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "set")) {
		int e = set(dev(), argv[2], strlen(argv[2]));
		if (e) printf("err %s\n", errname(e)); else printf("ok\n");
		return 0;
	}
	if (argc == 3 && !strcmp(argv[1], "drainset")) {
		int fd = open(OPROFILE_RS_DEVICE, O_RDONLY | O_NONBLOCK);
		if (fd < 0) { printf("open: %s\n", errname(errno)); return 0; }
		static char buf[1 << 20];
		long total = 0;
		ssize_t n;
		while ((n = read(fd, buf, sizeof(buf))) > 0)
			total += n;
		if (n < 0 && errno != EAGAIN) { printf("read: %s\n", errname(errno)); return 0; }
		int e = set(fd, argv[2], strlen(argv[2]));
		if (e) printf("drained %ld err %s\n", total, errname(e)); else printf("drained %ld ok\n", total);
		return 0;
	}
	if (argc == 3 && !strcmp(argv[1], "get")) {
		size_t len = atol(argv[2]);
		char *buf = calloc(1, len + 1);
		struct oprofile_rs_config_text t = { (uintptr_t)buf, len };
		int r = ioctl(dev(), OPROFILE_RS_IOC_GET_CONFIG, &t);
		if (r < 0) { printf("err %s\n", errname(errno)); return 0; }
		printf("len %d\n%s", r, buf);
		if (strlen(buf) != (size_t)r) printf("FAIL: NUL at %zu, length %d\n", strlen(buf), r);
		return 0;
	}
	if (argc == 4 && !strcmp(argv[1], "write")) {
		char buf[8192];
		size_t n = 0;
		for (const char *s = argv[3]; *s && n < sizeof(buf); s++) {
			if (s[0] == '\\' && s[1] == 'n') { buf[n++] = '\n'; s++; }
			else buf[n++] = *s;
		}
		int fd = open(argv[2], O_WRONLY);
		if (fd < 0) { printf("err %s\n", errname(errno)); return 0; }
		if (write(fd, buf, n) < 0) printf("err %s\n", errname(errno)); else printf("ok\n");
		return 0;
	}
	if (argc == 2 && !strcmp(argv[1], "hostile")) {
		int fd = dev();
		static char big[8192];
		memset(big, ' ', sizeof(big));
		memcpy(big, "backtrace_depth=1", 17);
		struct { const char *name; const void *p; size_t len; } cases[] = {
			{ "null-pointer", NULL, 10 },
			{ "kernel-pointer", (void *)0xffffffff81000000ul, 10 },
			{ "empty", "", 0 },
			{ "spaces", "   \n ", 5 },
			{ "too-long", big, 4097 },
			{ "longest", big, 4096 },
			{ "huge-len", big, (size_t)-1 },
			{ "nul-inside", "backtrace_depth=2\0x", 19 },
		};
		for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
			int e = set(fd, cases[i].p, cases[i].len);
			printf("%s %s\n", cases[i].name, e ? errname(e) : "ok");
		}
		struct oprofile_rs_config_text t = { 0, 4096 };
		printf("get-null %s\n", ioctl(fd, OPROFILE_RS_IOC_GET_CONFIG, &t) < 0 ? errname(errno) : "ok");
		printf("set-arg-null %s\n", ioctl(fd, OPROFILE_RS_IOC_SET_CONFIG, NULL) < 0 ? errname(errno) : "ok");
		return 0;
	}
	if (argc >= 4 && !strcmp(argv[1], "hammer")) {
		int fd = dev();
		double end = now() + atof(argv[2]);
		long ok = 0, busy = 0, inval = 0, nosup = 0, other = 0;
		for (int i = 0; now() < end || ((!ok || !nosup) && now() < end + 60); i++) {
			const char *t = argv[3 + i % (argc - 3)];
			int e = set(fd, t, strlen(t));
			if (!e) ok++;
			else if (e == EBUSY) busy++;
			else if (e == EINVAL) inval++;
			else if (e == EOPNOTSUPP) nosup++;
			else { other++; printf("other: %s for %s\n", errname(e), t); }
		}
		printf("hammer ok %ld ebusy %ld einval %ld eopnotsupp %ld other %ld\n", ok, busy, inval, nosup,
		       other);
		return 0;
	}
	fprintf(stderr, "usage: cfgctl set TEXT | get LEN | hostile | hammer SECS TEXT...\n");
	return 2;
}
