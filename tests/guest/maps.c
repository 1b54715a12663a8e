// SPDX-License-Identifier: GPL-2.0
/*
 * maps MODE: processes whose mappings change while they are profiled, for
 * tests/guest/maps.sh (each sample must be matched with the right binary).
 *   short     lives ~20 ms, spinning in short_lived_spin()
 *   plugin    copies its own executable to /tmp/plugin-a and /tmp/plugin-b
 *             and, 3 times over, maps plugin-a's code (as dlopen does: an
 *             executable file mapping), runs plugin_a_work() in that mapping
 *             for 150 ms, unmaps it (dlclose), then maps plugin-b's code at
 *             the same address and runs plugin_b_work() there. The guest
 *             programs are static; a mapped copy of one stands for a
 *             library (the kernel reports the same MMAP2 record).
 *   exec [S]  spins in before_exec_spin() for 300 ms, then execs
 *             /tmp/workload S (default 0.6: same pid, a different binary at
 *             the same addresses)
 *   vdso      calls clock_gettime() (the vDSO) for 400 ms
 */
#include <elf.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

volatile unsigned long sink;

__attribute__((noinline)) void short_lived_spin(double secs)
{
	double end = now() + secs;

	while (now() < end)
		for (int i = 0; i < 10000; i++)
			sink += i;
}

__attribute__((noinline)) void before_exec_spin(double secs)
{
	double end = now() + secs;

	while (now() < end)
		for (int i = 0; i < 10000; i++)
			sink += i;
}

/*
 * Run from a mapped copy of this binary: no calls, no global data (both
 * would be addressed relative to the copy), only registers.
 */
__attribute__((noinline)) unsigned long plugin_a_work(unsigned long n)
{
	unsigned long x = 0;

	for (unsigned long i = 0; i < n; i++) {
		x += i * 7;
		__asm__ volatile("" : "+r"(x));
	}
	return x;
}

__attribute__((noinline)) unsigned long plugin_b_work(unsigned long n)
{
	unsigned long x = 1;

	for (unsigned long i = 0; i < n; i++) {
		x ^= i * 13;
		__asm__ volatile("" : "+r"(x));
	}
	return x;
}

static void copy_self(const char *to)
{
	char buf[65536];
	int in = open("/proc/self/exe", O_RDONLY), out;
	ssize_t n;

	out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0755);
	if (in < 0 || out < 0) {
		perror(to);
		exit(1);
	}
	while ((n = read(in, buf, sizeof(buf))) > 0)
		if (write(out, buf, n) != n) {
			perror(to);
			exit(1);
		}
	close(in);
	close(out);
}

/* The executable PT_LOAD segment of this (static, non-PIE) binary. */
static const Elf64_Phdr *text_segment(void)
{
	const Elf64_Phdr *ph = (const Elf64_Phdr *)getauxval(AT_PHDR);
	unsigned long n = getauxval(AT_PHNUM);

	for (unsigned long i = 0; i < n; i++)
		if (ph[i].p_type == PT_LOAD && (ph[i].p_flags & PF_X))
			return &ph[i];
	fprintf(stderr, "no executable segment\n");
	exit(1);
}

typedef unsigned long (*work_fn)(unsigned long);

/*
 * Maps the text segment of PATH (a copy of this binary) at ADDR (anywhere
 * if NULL) and returns where it went; *fn_in_copy is FN's address there.
 */
static void *map_copy(const char *path, void *addr, void *fn, work_fn *fn_in_copy)
{
	const Elf64_Phdr *ph = text_segment();
	long page = sysconf(_SC_PAGESIZE);
	uint64_t off = ph->p_offset & ~(uint64_t)(page - 1);
	uint64_t vstart = ph->p_vaddr & ~(uint64_t)(page - 1);
	size_t len = ph->p_offset + ph->p_filesz - off;
	int fd = open(path, O_RDONLY);
	void *base;

	if (fd < 0) {
		perror(path);
		exit(1);
	}
	base = mmap(addr, len, PROT_READ | PROT_EXEC, MAP_PRIVATE | (addr ? MAP_FIXED : 0), fd, off);
	if (base == MAP_FAILED) {
		perror("mmap");
		exit(1);
	}
	close(fd);
	*fn_in_copy = (work_fn)((char *)base + ((uintptr_t)fn - vstart));
	return base;
}

static void run_for(work_fn f, double secs)
{
	double end = now() + secs;

	while (now() < end)
		sink += f(20000);
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";

	if (!strcmp(mode, "short")) {
		short_lived_spin(0.02);
	} else if (!strcmp(mode, "plugin")) {
		const Elf64_Phdr *ph = text_segment();
		size_t len = ph->p_offset + ph->p_filesz - (ph->p_offset & ~(uint64_t)(sysconf(_SC_PAGESIZE) - 1));
		void *at = NULL;
		work_fn f;

		copy_self("/tmp/plugin-a");
		copy_self("/tmp/plugin-b");
		for (int round = 0; round < 3; round++) {
			at = map_copy("/tmp/plugin-a", at, (void *)plugin_a_work, &f);
			run_for(f, 0.15);
			munmap(at, len);
			at = map_copy("/tmp/plugin-b", at, (void *)plugin_b_work, &f);
			run_for(f, 0.15);
			munmap(at, len);
		}
		printf("plugins mapped at %p\n", at);
	} else if (!strcmp(mode, "exec")) {
		before_exec_spin(0.3);
		execl("/tmp/workload", "workload", argc > 2 ? argv[2] : "0.6", (char *)NULL);
		perror("exec /tmp/workload");
		return 1;
	} else if (!strcmp(mode, "vdso")) {
		double end = now() + 0.4;

		while (now() < end)
			;
	} else {
		fprintf(stderr, "usage: maps short|plugin|exec|vdso\n");
		return 2;
	}
	return 0;
}
