// SPDX-License-Identifier: GPL-2.0
// cflags: -fomit-frame-pointer -fno-optimize-sibling-calls -fno-inline
/*
 * fakefp SECONDS: a program built without frame pointers that spins in
 * run() with rbp pointing at one of run()'s locals laid out as a frame
 * record: a saved frame pointer above it and a return address into
 * decoy(), then a second record (0, decoy() again). Code without frame
 * pointers may keep any stack address in rbp (workload.c's main() keeps
 * &now there); this one looks like a record. The frame-pointer chain names
 * decoy() as run()'s caller; a stack unwound from a copy (record
 * --call-graph hybrid, whose copy stops after such a record, or dwarf)
 * must name main() or end in [truncated], never decoy()
 * (tests/guest/ustack-dwarf.sh).
 */
#include <stdlib.h>
#include <time.h>

volatile unsigned long sink;

__attribute__((noinline)) void decoy(void)
{
	__asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void run(double secs)
{
	unsigned long fake[10] = { 0 };
	struct timespec start, now;

	fake[0] = (unsigned long)&fake[8];
	fake[1] = (unsigned long)decoy + 1;
	fake[9] = (unsigned long)decoy + 2;
	clock_gettime(CLOCK_MONOTONIC, &start);
	do {
		unsigned long n = 100000, acc = 0;

		/* rbp is clobbered: run() saves the caller's in its prologue. */
		__asm__ volatile("mov %2, %%rbp\n"
				 "1:\taddq $7, %1\n\t"
				 "dec %0\n\t"
				 "jnz 1b"
				 : "+r"(n), "+r"(acc)
				 : "r"(fake)
				 : "rbp", "memory", "cc");
		sink += acc;
		clock_gettime(CLOCK_MONOTONIC, &now);
	} while ((now.tv_sec - start.tv_sec) + (now.tv_nsec - start.tv_nsec) / 1e9 < secs);
}

int main(int argc, char **argv)
{
	run(argc > 1 ? atof(argv[1]) : 2);
	return 0;
}
