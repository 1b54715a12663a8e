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
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "oprofile_rs.h"

static int failures;
#define FAIL(...) do { printf("FAIL: " __VA_ARGS__); printf("\n"); failures++; } while (0)

static uint16_t u16(const unsigned char *p) { uint16_t v; memcpy(&v, p, 2); return v; }
static uint32_t u32(const unsigned char *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static uint64_t u64(const unsigned char *p) { uint64_t v; memcpy(&v, p, 8); return v; }

#define MAXEV OPROFILE_RS_MAX_EVENTS
#define MAXGEN 64
#define EXCLUDE (OPROFILE_RS_EVENT_FLAG_EXCLUDE_USER | OPROFILE_RS_EVENT_FLAG_EXCLUDE_KERNEL)
struct gen {
	uint32_t generation;
	int nr;
	char name[MAXEV][OPROFILE_RS_EVENT_DESC_NAME_LEN];
	uint64_t value[MAXEV];
	int freq[MAXEV];
	int exclude[MAXEV]; /* the CONFIG's event flags of EXCLUDE */
	uint64_t samples[MAXEV], mine[MAXEV], mine_period[MAXEV], kernel[MAXEV], user[MAXEV];
};
static struct gen gens[MAXGEN];

#define MAXTGID 64
static long tgids[MAXTGID];
static int ntgids;
static unsigned long maxstack = OPROFILE_RS_MAX_USER_STACK;
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
	if (n < OPROFILE_RS_HEADER_LEN || memcmp(buf, OPROFILE_RS_MAGIC, OPROFILE_RS_MAGIC_LEN)) {
		FAIL("no stream header");
		return 1;
	}
	size_t pos = u16(buf + offsetof(struct oprofile_rs_header, header_size));
	int ngen = 0, records = 0;
	struct gen *g = NULL;
	while (pos + sizeof(struct oprofile_rs_prefix) <= n) {
		const unsigned char *r = buf + pos;
		struct oprofile_rs_prefix p;
		memcpy(&p, r, sizeof(p));
		uint16_t kind = p.type, size = p.size;
		if (size < sizeof(p) || size % OPROFILE_RS_RECORD_ALIGN || pos + size > n) { FAIL("bad record at %zu", pos); break; }
		if (records == 0 && kind != OPROFILE_RS_CONFIG) FAIL("the first record is of type %u, not CONFIG", kind);
		if (kind == OPROFILE_RS_CONFIG) {
			if (ngen == MAXGEN) { FAIL("too many CONFIG records"); break; }
			struct gen *c = &gens[ngen];
			c->generation = u32(r + offsetof(struct oprofile_rs_config, generation));
			c->nr = p.b6;
			if (g && (int32_t)(c->generation - g->generation) < 0)
				FAIL("CONFIG generation %u after %u", c->generation, g->generation);
			/* The events end the record, or the extension follows them:
			 * the cgroup's id alone (the modules before `pid`), or whole. */
			int events_end = OPROFILE_RS_CONFIG_LEN + OPROFILE_RS_EVENT_DESC_LEN * c->nr;
			int cgroup_end = events_end + (int)offsetof(struct oprofile_rs_config_ext, pid);
			int ext_end = events_end + OPROFILE_RS_CONFIG_EXT_LEN;
			int ext = size == cgroup_end || size == ext_end;
			int pidext = size == ext_end;
			if (c->nr < 1 || c->nr > MAXEV || (size != events_end && !ext))
				FAIL("CONFIG of %d events is %u bytes", c->nr, size);
			printf("config %u %d ", c->generation, c->nr);
			for (int i = 0; i < c->nr && i < MAXEV; i++) {
				const unsigned char *d = r + OPROFILE_RS_CONFIG_LEN + OPROFILE_RS_EVENT_DESC_LEN * i;
				uint8_t flags = d[offsetof(struct oprofile_rs_event_desc, flags)];
				memcpy(c->name[i], d + offsetof(struct oprofile_rs_event_desc, name),
				       OPROFILE_RS_EVENT_DESC_NAME_LEN - 1);
				c->value[i] = u64(d + offsetof(struct oprofile_rs_event_desc, value));
				c->freq[i] = flags & OPROFILE_RS_EVENT_FLAG_FREQ;
				c->exclude[i] = flags & EXCLUDE;
				printf("%s%s:%llu%s%s", i ? "," : "", c->name[i],
				       (unsigned long long)c->value[i], c->freq[i] ? ":freq" : "",
				       c->exclude[i] == OPROFILE_RS_EVENT_FLAG_EXCLUDE_KERNEL ? ":u" :
				       c->exclude[i] == OPROFILE_RS_EVENT_FLAG_EXCLUDE_USER ? ":k" : "");
			}
			const unsigned char *x = r + events_end; /* the extension */
			printf(" pid %u cgroup %llu at record %d\n",
			       pidext ? u32(x + offsetof(struct oprofile_rs_config_ext, pid)) : 0,
			       ext ? (unsigned long long)u64(x + offsetof(struct oprofile_rs_config_ext, cgroup)) : 0ULL,
			       records);
			/* A restated CONFIG (a new stream) of the same generation: one entry. */
			if (g && g->generation == c->generation) {
				if (memcmp(g->name, c->name, sizeof(c->name)) || g->nr != c->nr)
					FAIL("two CONFIGs of generation %u differ", c->generation);
			} else {
				g = c;
				ngen++;
			}
		} else if (kind == OPROFILE_RS_SAMPLE) {
			uint32_t stgid = u32(r + offsetof(struct oprofile_rs_sample, tgid));
			int flags = p.b6;
			if (mine(stgid))
				mine_all++;
			if (mine(stgid) && !(flags & OPROFILE_RS_SAMPLE_FLAG_KERNEL) &&
			    !(flags & OPROFILE_RS_SAMPLE_FLAG_USER_STACK))
				mine_user_bare++;
			if (flags & OPROFILE_RS_SAMPLE_FLAG_USER_STACK) { /* the user stack part */
				unsigned area = u16(r + offsetof(struct oprofile_rs_sample, user_stack));
				/* After the fixed part and both chains. */
				unsigned user = r[offsetof(struct oprofile_rs_sample, user_depth)];
				size_t at = OPROFILE_RS_SAMPLE_EXT_LEN + sizeof(__u64) * ((size_t)p.b7 + user);
				if (!(flags & OPROFILE_RS_SAMPLE_FLAG_EXT))
					FAIL("SAMPLE at %zu: a user stack part in a version-1 SAMPLE", pos);
				else if (size != at + OPROFILE_RS_USER_STACK_REGS_LEN + area)
					FAIL("SAMPLE at %zu: %u bytes, its chains and user stack part say %zu",
					     pos, size, at + OPROFILE_RS_USER_STACK_REGS_LEN + area);
				else if (area == 0 || area % 8 || area > maxstack)
					FAIL("SAMPLE at %zu: user stack area of %u bytes", pos, area);
				else {
					struct oprofile_rs_user_stack us;
					memcpy(&us, r + at, sizeof(us));
					uint64_t copied = us.copied;
					size_t stack = at + OPROFILE_RS_USER_STACK_REGS_LEN;
					uint64_t pc = u64(r + offsetof(struct oprofile_rs_sample, pc));
					if (copied > area)
						FAIL("SAMPLE at %zu: %llu bytes copied in an area of %u", pos,
						     (unsigned long long)copied, area);
					else
						for (size_t i = stack + copied; i < stack + area; i++)
							if (r[i]) {
								FAIL("SAMPLE at %zu: byte %zu of the area past the copy is not 0",
								     pos, i - stack);
								break;
							}
					if (!(flags & OPROFILE_RS_SAMPLE_FLAG_KERNEL) && us.ip != pc)
						FAIL("SAMPLE at %zu: user-mode sample at %#llx, its stack part's ip %#llx",
						     pos, (unsigned long long)pc, (unsigned long long)us.ip);
					st_samples++;
					st_copied += copied;
					if (area > st_max_area)
						st_max_area = area;
					if (mine(stgid))
						st_mine++;
				}
			}
			if (!(flags & OPROFILE_RS_SAMPLE_FLAG_EXT)) FAIL("SAMPLE at %zu is not extended", pos);
			else if (!g) FAIL("SAMPLE at %zu before any CONFIG", pos);
			else {
				uint64_t period = u64(r + offsetof(struct oprofile_rs_sample, period));
				uint16_t ev = u16(r + offsetof(struct oprofile_rs_sample, event));
				if (ev >= g->nr) {
					FAIL("SAMPLE at %zu: event %u of %d", pos, ev, g->nr);
				} else {
					if (!g->freq[ev] && period != g->value[ev])
						FAIL("SAMPLE at %zu: %s period %llu, CONFIG says %llu", pos,
						     g->name[ev], (unsigned long long)period,
						     (unsigned long long)g->value[ev]);
					if (g->freq[ev] && period == 0)
						FAIL("SAMPLE at %zu: %s period 0", pos, g->name[ev]);
					int kernel = flags & OPROFILE_RS_SAMPLE_FLAG_KERNEL;
					if (kernel && (g->exclude[ev] & OPROFILE_RS_EVENT_FLAG_EXCLUDE_KERNEL))
						FAIL("SAMPLE at %zu: kernel mode, but %s excludes it", pos, g->name[ev]);
					if (!kernel && (g->exclude[ev] & OPROFILE_RS_EVENT_FLAG_EXCLUDE_USER))
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
