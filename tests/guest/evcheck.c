/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Several events at once (tests/guest/events.sh, control.sh), checked
 * independently of the oprofile-rs tool.
 *
 * evcheck stream FILE [TGID[,TGID...] [MAXSTACK]]: reads a recorded /dev/oprofile/buffer
 * stream and checks that
 *  - a CONFIG record follows the header at once;
 *  - every SAMPLE is extended and its event index is below the event count
 *    of the latest CONFIG before it;
 *  - a SAMPLE of an event in period mode carries that period (in frequency
 *    mode perf varies it: it must be non-zero);
 *  - a SAMPLE is of a mode its event samples: not kernel mode where the
 *    CONFIG's event flags exclude it (0x04), not user mode where they
 *    exclude that (0x02);
 *  - CONFIG generations never go back (serial-number arithmetic: after
 *    4294967295 comes 0, see stream-format.md);
 *  - a CONFIG record is 48 + 48 x events bytes, or 8 more with the cgroup
 *    filter's id (the modules since that extension), or 16 more with the
 *    profiled process's id after it (`pid`, the modules since then);
 *  - a SAMPLE with a user stack copy (flag 0x08, user_stack_size) is extended,
 *    exactly as long as its callchains and its part say, the part's area a
 *    non-zero multiple of 8 and at most MAXSTACK (the third argument, else
 *    8192), its copied count at most the area, the area's bytes past it
 *    zero, and for a user-mode sample its ip is the sample's pc.
 * Prints "FAIL: ..." for each violation (exit 1), then
 *   config GEN EVENTS (NAME:VALUE[:freq][:u|:k],...) pid PID cgroup ID at record N
 *   samples GEN NAME TOTAL TGID_SAMPLES TGID_PERIOD_SUM KERNEL USER
 *   ustack STACK_SAMPLES TGID_SAMPLES TGID_STACK_SAMPLES COPIED_SUM MAX_AREA TGID_USER_WITHOUT
 * (TGID_USER_WITHOUT: user-mode samples of the tgids without a copy)
 * one samples line per event of every CONFIG seen (TGID_* for the tgids
 * given, else 0; `:u` user mode only, `:k` kernel mode only; KERNEL and
 * USER: its samples of each mode).
 *
 * evcheck faults PAGES: maps PAGES fresh anonymous pages without huge pages
 * or fault-around (MADV_NOHUGEPAGE; anonymous memory has no fault-around,
 * but Debian's kernels may fault in large folios unless told), touches one
 * byte of each and prints "faults PID PAGES LOOP TOTAL": the minor faults
 * the kernel counted for the touch loop and all faults of the process since
 * its fork (getrusage): the page-fault samples of this pid at period 1 must
 * be about TOTAL, and at least PAGES.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

static int failures;
#define FAIL(...) do { printf("FAIL: " __VA_ARGS__); printf("\n"); failures++; } while (0)

static uint16_t u16(const unsigned char *p) { uint16_t v; memcpy(&v, p, 2); return v; }
static uint32_t u32(const unsigned char *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static uint64_t u64(const unsigned char *p) { uint64_t v; memcpy(&v, p, 8); return v; }

#define MAXEV 8
#define MAXGEN 64
struct gen {
	uint32_t generation;
	int nr;
	char name[MAXEV][24];
	uint64_t value[MAXEV];
	int freq[MAXEV];
	int exclude[MAXEV]; /* CONFIG flags 0x02 (user) | 0x04 (kernel) */
	uint64_t samples[MAXEV], mine[MAXEV], mine_period[MAXEV], kernel[MAXEV], user[MAXEV];
};
static struct gen gens[MAXGEN];

#define MAXTGID 64
static long tgids[MAXTGID];
static int ntgids;
static unsigned long maxstack = 8192;
static unsigned long long st_samples, st_mine, mine_all, st_copied, st_max_area, mine_user_bare;

static int mine(uint32_t tgid)
{
	for (int i = 0; i < ntgids; i++)
		if (tgids[i] == (long)tgid)
			return 1;
	return 0;
}

static int stream(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f) { perror(path); return 2; }
	static unsigned char buf[64 << 20];
	size_t n = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	if (n < 96 || memcmp(buf, "OPRFRS\0\n", 8)) { FAIL("no stream header"); return 1; }
	size_t pos = u16(buf + 10);
	int ngen = 0, records = 0;
	struct gen *g = NULL;
	while (pos + 8 <= n) {
		const unsigned char *r = buf + pos;
		uint16_t kind = u16(r), size = u16(r + 2);
		if (size < 8 || size % 8 || pos + size > n) { FAIL("bad record at %zu", pos); break; }
		if (records == 0 && kind != 5) FAIL("the first record is of type %u, not CONFIG", kind);
		if (kind == 5) { /* CONFIG */
			if (ngen == MAXGEN) { FAIL("too many CONFIG records"); break; }
			struct gen *c = &gens[ngen];
			c->generation = u32(r + 16);
			c->nr = r[6];
			if (g && (int32_t)(c->generation - g->generation) < 0)
				FAIL("CONFIG generation %u after %u", c->generation, g->generation);
			int ext = size == 48 + 48 * c->nr + 8 || size == 48 + 48 * c->nr + 16;
			int pidext = size == 48 + 48 * c->nr + 16;
			if (c->nr < 1 || c->nr > MAXEV || (size != 48 + 48 * c->nr && !ext))
				FAIL("CONFIG of %d events is %u bytes", c->nr, size);
			printf("config %u %d ", c->generation, c->nr);
			for (int i = 0; i < c->nr && i < MAXEV; i++) {
				const unsigned char *d = r + 48 + 48 * i;
				memcpy(c->name[i], d + 24, 23);
				c->value[i] = u64(d + 16);
				c->freq[i] = d[4] & 1;
				c->exclude[i] = d[4] & 6;
				printf("%s%s:%llu%s%s", i ? "," : "", c->name[i],
				       (unsigned long long)c->value[i], c->freq[i] ? ":freq" : "",
				       c->exclude[i] == 4 ? ":u" : c->exclude[i] == 2 ? ":k" : "");
			}
			printf(" pid %u cgroup %llu at record %d\n",
			       pidext ? u32(r + 48 + 48 * c->nr + 8) : 0,
			       ext ? (unsigned long long)u64(r + 48 + 48 * c->nr) : 0ULL, records);
			/* A restated CONFIG (a new stream) of the same generation: one entry. */
			if (g && g->generation == c->generation) {
				if (memcmp(g->name, c->name, sizeof(c->name)) || g->nr != c->nr)
					FAIL("two CONFIGs of generation %u differ", c->generation);
			} else {
				g = c;
				ngen++;
			}
		} else if (kind == 1) { /* SAMPLE */
			uint32_t stgid = u32(r + 28);
			if (mine(stgid))
				mine_all++;
			if (mine(stgid) && !(r[6] & 1) && !(r[6] & 8))
				mine_user_bare++;
			if (r[6] & 8) { /* the user stack part */
				unsigned area = u16(r + 44);
				size_t at = 48 + 8 * ((size_t)r[7] + r[42]);
				if (!(r[6] & 2))
					FAIL("SAMPLE at %zu: a user stack part in a version-1 SAMPLE", pos);
				else if (size != at + 32 + area)
					FAIL("SAMPLE at %zu: %u bytes, its chains and user stack part say %zu",
					     pos, size, at + 32 + area);
				else if (area == 0 || area % 8 || area > maxstack)
					FAIL("SAMPLE at %zu: user stack area of %u bytes", pos, area);
				else {
					uint64_t copied = u64(r + at + 24);
					if (copied > area)
						FAIL("SAMPLE at %zu: %llu bytes copied in an area of %u", pos,
						     (unsigned long long)copied, area);
					else
						for (size_t i = at + 32 + copied; i < at + 32 + area; i++)
							if (r[i]) {
								FAIL("SAMPLE at %zu: byte %zu of the area past the copy is not 0",
								     pos, i - at - 32);
								break;
							}
					if (!(r[6] & 1) && u64(r + at) != u64(r + 16))
						FAIL("SAMPLE at %zu: user-mode sample at %#llx, its stack part's ip %#llx",
						     pos, (unsigned long long)u64(r + 16), (unsigned long long)u64(r + at));
					st_samples++;
					st_copied += copied;
					if (area > st_max_area)
						st_max_area = area;
					if (mine(stgid))
						st_mine++;
				}
			}
			if (!(r[6] & 2)) FAIL("SAMPLE at %zu is not extended", pos);
			else if (!g) FAIL("SAMPLE at %zu before any CONFIG", pos);
			else {
				uint64_t period = u64(r + 32);
				uint16_t ev = u16(r + 40);
				if (ev >= g->nr) {
					FAIL("SAMPLE at %zu: event %u of %d", pos, ev, g->nr);
				} else {
					if (!g->freq[ev] && period != g->value[ev])
						FAIL("SAMPLE at %zu: %s period %llu, CONFIG says %llu", pos,
						     g->name[ev], (unsigned long long)period,
						     (unsigned long long)g->value[ev]);
					if (g->freq[ev] && period == 0)
						FAIL("SAMPLE at %zu: %s period 0", pos, g->name[ev]);
					int kernel = r[6] & 1;
					if (kernel && (g->exclude[ev] & 4))
						FAIL("SAMPLE at %zu: kernel mode, but %s excludes it", pos, g->name[ev]);
					if (!kernel && (g->exclude[ev] & 2))
						FAIL("SAMPLE at %zu: user mode, but %s excludes it", pos, g->name[ev]);
					if (kernel)
						g->kernel[ev]++;
					else
						g->user[ev]++;
					g->samples[ev]++;
					if (mine(stgid)) {
						g->mine[ev]++;
						g->mine_period[ev] += period;
					}
				}
			}
		}
		records++;
		pos += size;
	}
	for (int i = 0; i < ngen; i++)
		for (int e = 0; e < gens[i].nr && e < MAXEV; e++)
			printf("samples %u %s %llu %llu %llu %llu %llu\n", gens[i].generation,
			       gens[i].name[e], (unsigned long long)gens[i].samples[e],
			       (unsigned long long)gens[i].mine[e],
			       (unsigned long long)gens[i].mine_period[e],
			       (unsigned long long)gens[i].kernel[e], (unsigned long long)gens[i].user[e]);
	printf("ustack %llu %llu %llu %llu %llu %llu\n", st_samples, mine_all, st_mine, st_copied,
	       st_max_area, mine_user_bare);
	return failures ? 1 : 0;
}

static int faults(long pages)
{
	long psz = sysconf(_SC_PAGESIZE);
	struct rusage a, b;
	char *p = mmap(NULL, pages * psz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) { perror("mmap"); return 2; }
	/* The test kernels have no madvise (ENOSYS) and no huge pages either. */
	if (madvise(p, pages * psz, MADV_NOHUGEPAGE) && errno != ENOSYS) perror("madvise");
	getrusage(RUSAGE_SELF, &a);
	for (long i = 0; i < pages; i++)
		p[i * psz] = 1;
	getrusage(RUSAGE_SELF, &b);
	/* Everything this process faulted since its fork, the exec included. */
	long total = b.ru_minflt + b.ru_majflt;
	printf("faults %d %ld %ld %ld\n", getpid(), pages, b.ru_minflt - a.ru_minflt, total);
	fflush(stdout);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 3 && !strcmp(argv[1], "stream")) {
		for (char *t = argc > 3 ? strtok(argv[3], ",") : NULL; t && ntgids < MAXTGID;
		     t = strtok(NULL, ","))
			tgids[ntgids++] = atol(t);
		if (argc > 4)
			maxstack = strtoul(argv[4], NULL, 0);
		return stream(argv[2]);
	}
	if (argc == 3 && !strcmp(argv[1], "faults"))
		return faults(atol(argv[2]));
	fprintf(stderr, "usage: evcheck stream FILE [TGID[,TGID...] [MAXSTACK]] | evcheck faults PAGES\n");
	return 2;
}
