// SPDX-License-Identifier: GPL-2.0
/*
 * jitloop SECONDS: spins in code it copied into an anonymous executable
 * mapping, as a JIT's code runs: code in no file, which no unwind table
 * covers. Every sample of it is an address the module's tables do not
 * hold, in a process that has tables (tests/guest/ustack-tables.sh: the
 * module asks record for tables once, not at every sample).
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

/* dec %rdi; jnz .-3; ret */
static const unsigned char code[] = { 0x48, 0xff, 0xcf, 0x75, 0xfb, 0xc3 };

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 1;
	struct timespec start, now;
	void (*spin)(unsigned long);
	void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return 1;
	memcpy(p, code, sizeof(code));
	if (mprotect(p, 4096, PROT_READ | PROT_EXEC))
		return 1;
	spin = (void (*)(unsigned long))p;
	clock_gettime(CLOCK_MONOTONIC, &start);
	do {
		spin(1000000);
		clock_gettime(CLOCK_MONOTONIC, &now);
	} while ((now.tv_sec - start.tv_sec) + (now.tv_nsec - start.tv_nsec) / 1e9 < secs);
	return 0;
}
