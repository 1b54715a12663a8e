// SPDX-License-Identifier: GPL-2.0
/*
 * badfp MODE SECONDS: a hostile process for the user stack walk. It spins in
 * user mode for SECONDS with a garbage frame pointer (rbp) that MODE picks:
 *
 *   self       rbp -> a frame record whose caller frame pointer is itself (a loop)
 *   loop2      two records pointing at each other
 *   down       a record pointing to a lower address (the stack grows down: a
 *              caller's frame is never below its callee's)
 *   kernel     rbp = a kernel address
 *   kchain     a record whose caller frame pointer is a kernel address and
 *              whose return address is one too
 *   unmapped   rbp = an unmapped page above the stack
 *   notpresent rbp = a mapped page above the stack that was never touched
 *   misaligned rbp = a stack address + 4
 *   deep       rbp -> 1000 ascending records: only the depth is read
 *
 * and, for the user stack copy (user_stack_size, tests/guest/ustack-dwarf.sh),
 * a garbage stack pointer (rsp) instead, rbp left as it is:
 *
 *   sp-kernel      rsp = a kernel address
 *   sp-unmapped    rsp = an unmapped page above the stack
 *   sp-notpresent  rsp = a mapped page above the stack that was never touched
 *   sp-top         rsp = 24 bytes below the end of the user address space
 *   sp-misaligned  rsp = a stack address + 3
 *
 * The walk must stay bounded (at most the depth), record no more than the
 * records it can read (see tests/guest/ustack.sh), and never oops. Prints the
 * address rbp holds and the number of user frames a walk can find (-1: as
 * many as the depth allows), and the addresses of the rbp loop
 * ([start, end), zero-padded hex as `oprofile-rs script` prints a PC).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>


/* Where spin's loop starts and ends ([lo, hi)): spin sets them. */
static unsigned long loop_lo, loop_hi;

/*
 * Spins with rbp = fp until n reaches 0; rbp restored after. Not inlined:
 * ustack.sh tells the samples of the loop by its addresses (local labels:
 * a global one would name them instead of spin), which main prints. A
 * sample at spin's first instructions, before rbp is set, walks the
 * program's own frames (one in about a thousand in the guest: CI runs
 * counted such samples as the loop's).
 */
__attribute__((noinline)) void spin(unsigned long fp, unsigned long n)
{
	__asm__ volatile("lea 1f(%%rip), %%rax\n\t"
			 "mov %%rax, %1\n\t"
			 "lea 2f(%%rip), %%rax\n\t"
			 "mov %%rax, %2\n\t"
			 "mov %%rbp, %%r12\n\t"
			 "mov %3, %%rbp\n\t"
			 "1: dec %0\n\t"
			 "jnz 1b\n\t"
			 "2: mov %%r12, %%rbp"
			 : "+S"(n), "=m"(loop_lo), "=m"(loop_hi)
			 : "D"(fp)
			 : "rax", "r12", "cc", "memory");
}

/*
 * A return address: in the text, as are RET + 1 .. RET + 999 (their calls,
 * RET - 1 + i, too), so that the tool, which cuts a user stack at an address
 * in no executable mapping (issue 30), shows every frame the walk recorded.
 */
#define RET ((unsigned long)spin + 1)

/* Spins with rsp = sp until n reaches 0 (nothing may touch the stack meanwhile); rsp restored after. */
__attribute__((noinline)) void spin_sp(unsigned long sp, unsigned long n)
{
	__asm__ volatile("mov %%rsp, %%r12\n\t"
			 "mov %1, %%rsp\n\t"
			 "1: dec %0\n\t"
			 "jnz 1b\n\t"
			 "mov %%r12, %%rsp"
			 : "+S"(n)
			 : "D"(sp)
			 : "r12", "cc", "memory");
}

/*
 * A page above the stack, unmapped (touch = 0) or mapped and never touched.
 * Tried 1 MiB apart from the first MiB above this frame (those in the
 * stack's own mapping, or the vDSO's, are taken): with ASLR the stack can
 * lie within the top 64 MiB of the address space, where the former 64-MiB
 * steps found no candidate at all (a CI run, 2026-11-26).
 */
static unsigned long above_stack(int touch_never)
{
	unsigned long here = (unsigned long)&here, a;

	for (a = (here & ~0xfffffUL) + (1UL << 20); a < 0x7ffffffff000UL; a += 1UL << 20) {
		void *p = mmap((void *)a, 4096, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
		if (p == MAP_FAILED)
			continue;
		if (!touch_never)
			munmap(p, 4096);
		return a;
	}
	fprintf(stderr, "badfp: no free page above the stack\n");
	exit(2);
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "self";
	double secs = argc > 2 ? atof(argv[2]) : 1;
	unsigned long stack[8] __attribute__((aligned(16)));
	unsigned long fp, sp = 0;
	int frames;
	struct timespec start, now;

	memset(stack, 0, sizeof(stack));
	if (!strcmp(mode, "self")) {
		stack[0] = (unsigned long)&stack[0];
		stack[1] = RET;
		fp = (unsigned long)&stack[0], frames = 1;
	} else if (!strcmp(mode, "loop2")) {
		stack[0] = (unsigned long)&stack[2];
		stack[1] = RET;
		stack[2] = (unsigned long)&stack[0];
		stack[3] = RET + 1;
		fp = (unsigned long)&stack[0], frames = 2;
	} else if (!strcmp(mode, "down")) {
		stack[4] = (unsigned long)&stack[0];
		stack[5] = RET;
		stack[0] = 0;
		stack[1] = RET + 1;
		fp = (unsigned long)&stack[4], frames = 1;
	} else if (!strcmp(mode, "kernel")) {
		fp = 0xffffffff81000000UL, frames = 0;
	} else if (!strcmp(mode, "kchain")) {
		stack[0] = 0xffffffff81000000UL;
		stack[1] = 0xffffffff81000010UL;
		fp = (unsigned long)&stack[0], frames = 0;
	} else if (!strcmp(mode, "unmapped")) {
		fp = above_stack(0), frames = 0;
	} else if (!strcmp(mode, "notpresent")) {
		fp = above_stack(1), frames = 0;
	} else if (!strcmp(mode, "misaligned")) {
		fp = (unsigned long)&stack[0] + 4, frames = 0;
	} else if (!strcmp(mode, "deep")) {
		/* 1000 ascending records on the stack, above the spinning rsp. */
		unsigned long *chain = __builtin_alloca(2002 * sizeof(long));

		for (int i = 0; i < 1000; i++) {
			chain[2 * i] = (unsigned long)&chain[2 * i + 2];
			chain[2 * i + 1] = RET + i;
		}
		chain[2000] = 0;
		chain[2001] = 0;
		fp = (unsigned long)&chain[0], frames = -1;
	} else if (!strcmp(mode, "sp-kernel")) {
		sp = 0xffffffff81000000UL, fp = 0, frames = 0;
	} else if (!strcmp(mode, "sp-unmapped")) {
		sp = above_stack(0), fp = 0, frames = 0;
	} else if (!strcmp(mode, "sp-notpresent")) {
		sp = above_stack(1), fp = 0, frames = 0;
	} else if (!strcmp(mode, "sp-top")) {
		sp = 0x7ffffffff000UL - 24, fp = 0, frames = 0;
	} else if (!strcmp(mode, "sp-misaligned")) {
		sp = (unsigned long)&stack[0] + 3, fp = 0, frames = 0;
	} else {
		fprintf(stderr, "badfp: unknown mode %s\n", mode);
		return 2;
	}
	/* The loop with the garbage in rsp (the sp- modes) or in rbp. */
	void (*loop)(unsigned long, unsigned long) = sp ? spin_sp : spin;
	spin(0, 1); /* sets loop_lo and loop_hi */
	printf("badfp %s: %s=%#lx frames=%d loop=%016lx-%016lx\n", mode, sp ? "rsp" : "rbp",
	       sp ? sp : fp, frames, loop_lo, loop_hi);
	fflush(stdout);
	clock_gettime(CLOCK_MONOTONIC, &start);
	do {
		loop(sp ? sp : fp, 20000000);
		clock_gettime(CLOCK_MONOTONIC, &now);
	} while ((now.tv_sec - start.tv_sec) + (now.tv_nsec - start.tv_nsec) / 1e9 < secs);
	return 0;
}
