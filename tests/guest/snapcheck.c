/* SPDX-License-Identifier: GPL-2.0 */
/*
 * snapcheck FILE: checks the flight-recorder snapshots of a recorded
 * /dev/oprofile/buffer stream (mode=overwrite) and prints per-CPU totals,
 * independently of the oprofile-rs tool:
 *
 *  - a snapshot is BEGINs (one per CPU at most), then records, then one END
 *    with the same seq, whose totals are the BEGINs' sums; seqs increase by 1;
 *  - each CPU contributes exactly BEGIN.records records, and only CPUs with
 *    a BEGIN contribute (the first snapshot of a stream may have any seq:
 *    an earlier reader may have taken the earlier ones);
 *  - the records are merged by time (non-decreasing), are not after the
 *    snapshot's time, and each CPU's are newer than its records of the
 *    previous snapshot;
 *  - every SAMPLE is named: the latest COMM of its CPU before it in the same
 *    snapshot has its pid;
 *  - no SAMPLE outside a snapshot while the stream's latest CONFIG record
 *    says overwrite mode (or before any CONFIG), and no snapshot while it
 *    says consume mode (the mode changes at run time: records of both
 *    modes, each after its CONFIG).
 *
 * Prints "FAIL: ..." for each violation (exit 1), then
 *   snapshots N
 *   snap SEQ cpu C records R overwritten O samples S bytes B
 *   cpu C records R overwritten O samples S comms M lost L consumed K
 * (the last kind summed over all snapshots; lost from LOST records;
 * consumed: SAMPLEs recorded in consume mode, outside snapshots).
 *
 * snapcheck ioctl DEV [rdonly]: opens DEV (O_WRONLY, or O_RDONLY|O_NONBLOCK)
 * and asks for one snapshot with OPROFILE_RS_IOC_SNAPSHOT; prints "ok" or
 * "err ENAME".
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "oprofile_rs.h"

#define MAXCPU 64

static int failures;
#define FAIL(...) do { printf("FAIL: " __VA_ARGS__); printf("\n"); failures++; } while (0)

static uint16_t u16(const unsigned char *p) { uint16_t v; memcpy(&v, p, 2); return v; }
static uint32_t u32(const unsigned char *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static uint64_t u64(const unsigned char *p) { uint64_t v; memcpy(&v, p, 8); return v; }

struct cpu_total { uint64_t records, overwritten, samples, comms, lost, consumed; };
struct cpu_snap {
	int begun;
	uint64_t want, got, overwritten, samples, bytes;
	uint32_t comm_pid; int named;
	uint64_t last_time;
};

static const char *errname(int e)
{
	switch (e) {
	case EINVAL: return "EINVAL";
	case ENOSPC: return "ENOSPC";
	case EBUSY: return "EBUSY";
	case ENOTTY: return "ENOTTY";
	case EACCES: return "EACCES";
	case ENOENT: return "ENOENT";
	default: return "other";
	}
}

static int snapshot_ioctl(const char *dev, int rdonly)
{
	int fd = open(dev, rdonly ? O_RDONLY | O_NONBLOCK : O_WRONLY);
	if (fd < 0) { printf("err %s (open)\n", errname(errno)); return 1; }
	if (ioctl(fd, OPROFILE_RS_IOC_SNAPSHOT) < 0) { printf("err %s\n", errname(errno)); close(fd); return 1; }
	printf("ok\n");
	close(fd);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 3 && !strcmp(argv[1], "ioctl"))
		return snapshot_ioctl(argv[2], argc > 3 && !strcmp(argv[3], "rdonly"));
	if (argc != 2) { fprintf(stderr, "usage: snapcheck FILE\n"); return 2; }
	FILE *f = fopen(argv[1], "rb");
	if (!f) { perror(argv[1]); return 2; }
	static unsigned char buf[64 << 20];
	size_t n = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	if (n < OPROFILE_RS_MIN_HEADER_LEN || memcmp(buf, OPROFILE_RS_MAGIC, OPROFILE_RS_MAGIC_LEN) != 0) {
		FAIL("not a stream");
		return 1;
	}
	size_t pos = u16(buf + offsetof(struct oprofile_rs_header, header_size));
	struct cpu_total tot[MAXCPU] = { 0 };
	struct cpu_snap cs[MAXCPU];
	uint64_t prev_last[MAXCPU] = { 0 };
	int in_snap = 0, after_begins = 0;
	uint32_t seq = 0, last_seq = 0;
	uint64_t snap_time = 0, sum_rec = 0, sum_ow = 0, last_rec_time = 0;
	unsigned snapshots = 0;
	int consume = 0; /* the latest CONFIG says consume mode */

	while (pos + sizeof(struct oprofile_rs_prefix) <= n) {
		const unsigned char *r = buf + pos;
		struct oprofile_rs_prefix p;
		memcpy(&p, r, sizeof(p));
		uint16_t kind = p.type, size = p.size, cpu = p.cpu;
		if (size < sizeof(p) || size % OPROFILE_RS_RECORD_ALIGN || pos + size > n) { FAIL("bad record at %zu", pos); break; }
		if (cpu >= MAXCPU) { FAIL("cpu %u at %zu", cpu, pos); break; }
		/* Every record's time follows its prefix. */
		uint64_t t = size >= sizeof(p) + sizeof(uint64_t) ? u64(r + sizeof(p)) : 0;
		if (kind == OPROFILE_RS_CONFIG) { /* b7 is the mode */
			if (in_snap) FAIL("CONFIG inside snapshot %u", seq);
			consume = p.b7 == OPROFILE_RS_MODE_CONSUME;
		} else if (kind == OPROFILE_RS_SNAPSHOT) {
			uint32_t s = u32(r + offsetof(struct oprofile_rs_snapshot, seq));
			if (consume) FAIL("SNAPSHOT record at %zu in consume mode", pos);
			uint64_t ow = u64(r + offsetof(struct oprofile_rs_snapshot, overwritten));
			uint64_t rec = u64(r + offsetof(struct oprofile_rs_snapshot, records));
			if (p.b6 == 0) { /* BEGIN (b6 1: END) */
				if (!in_snap) {
					in_snap = 1; after_begins = 0; seq = s; snap_time = t;
					sum_rec = sum_ow = 0; last_rec_time = 0;
					memset(cs, 0, sizeof(cs));
					if (snapshots && s != last_seq + 1) FAIL("seq %u after %u", s, last_seq);
				}
				if (after_begins) FAIL("snapshot %u: BEGIN after its records", s);
				if (s != seq) FAIL("snapshot %u: BEGIN of seq %u", seq, s);
				if (cs[cpu].begun) FAIL("snapshot %u: two BEGINs of cpu %u", s, cpu);
				cs[cpu].begun = 1; cs[cpu].want = rec; cs[cpu].overwritten = ow;
				sum_rec += rec; sum_ow += ow;
			} else { /* END */
				if (!in_snap) { /* an empty snapshot has no BEGIN */
					seq = s; sum_rec = sum_ow = 0; memset(cs, 0, sizeof(cs));
					if (snapshots && s != last_seq + 1) FAIL("seq %u after %u", s, last_seq);
				}
				if (s != seq) FAIL("END seq %u in snapshot %u", s, seq);
				if (rec != sum_rec || ow != sum_ow)
					FAIL("snapshot %u: END %lu/%lu, BEGINs %lu/%lu", s, rec, ow, sum_rec, sum_ow);
				for (int c = 0; c < MAXCPU; c++) {
					if (!cs[c].begun) continue;
					if (cs[c].got != cs[c].want)
						FAIL("snapshot %u cpu %d: %lu records, BEGIN says %lu", s, c, cs[c].got, cs[c].want);
					printf("snap %u cpu %d records %lu overwritten %lu samples %lu bytes %lu\n", s, c,
					       cs[c].got, cs[c].overwritten, cs[c].samples, cs[c].bytes);
					tot[c].records += cs[c].got;
					tot[c].overwritten += cs[c].overwritten;
					if (cs[c].got) prev_last[c] = cs[c].last_time;
				}
				in_snap = 0; last_seq = s; snapshots++;
			}
		} else if (kind == OPROFILE_RS_SAMPLE || kind == OPROFILE_RS_COMM || kind == OPROFILE_RS_SWITCH) {
			/* A SWITCH (the context-switches event) is a record of its
			 * snapshot as the others, named as its SAMPLE after it. */
			uint32_t pid = u32(r + (kind == OPROFILE_RS_SAMPLE ? offsetof(struct oprofile_rs_sample, pid)
						: kind == OPROFILE_RS_SWITCH ? offsetof(struct oprofile_rs_switch, pid)
									     : offsetof(struct oprofile_rs_comm, pid)));
			if (kind == OPROFILE_RS_COMM) tot[cpu].comms += in_snap;
			if (!in_snap) {
				if (kind == OPROFILE_RS_SAMPLE && !consume) FAIL("SAMPLE outside a snapshot at %zu", pos);
				if (kind == OPROFILE_RS_SAMPLE) tot[cpu].consumed++;
			} else {
				struct cpu_snap *c = &cs[cpu];
				after_begins = 1;
				if (!c->begun) FAIL("snapshot %u: record of cpu %u without BEGIN", seq, cpu);
				if (t < last_rec_time) FAIL("snapshot %u: time %lu after %lu (not merged by time)", seq, t, last_rec_time);
				if (t > snap_time) FAIL("snapshot %u: record at %lu after the snapshot's time %lu", seq, t, snap_time);
				if (c->got == 0 && prev_last[cpu] && t <= prev_last[cpu])
					FAIL("snapshot %u cpu %u: record at %lu not newer than the previous snapshot's %lu", seq, cpu, t, prev_last[cpu]);
				last_rec_time = t;
				c->got++; c->bytes += size; c->last_time = t;
				if (kind == OPROFILE_RS_COMM) { c->comm_pid = pid; c->named = 1; }
				else if (kind == OPROFILE_RS_SWITCH) {
					if (!c->named || c->comm_pid != pid)
						FAIL("snapshot %u cpu %u: SWITCH of pid %u at %lu not named", seq, cpu, pid, t);
				} else {
					c->samples++; tot[cpu].samples++;
					if (!c->named || c->comm_pid != pid)
						FAIL("snapshot %u cpu %u: SAMPLE of pid %u at %lu not named (last COMM: %s %u)", seq, cpu, pid, t,
						     c->named ? "pid" : "none", c->comm_pid);
				}
			}
		} else if (kind == OPROFILE_RS_LOST) {
			tot[cpu].lost += u64(r + offsetof(struct oprofile_rs_lost, count));
		}
		pos += size;
	}
	if (in_snap) FAIL("snapshot %u has no END", seq);
	if (pos != n) FAIL("%zu trailing bytes", n - pos);
	printf("snapshots %u\n", snapshots);
	for (int c = 0; c < MAXCPU; c++)
		if (tot[c].records || tot[c].overwritten || tot[c].lost || tot[c].consumed)
			printf("cpu %d records %lu overwritten %lu samples %lu comms %lu lost %lu consumed %lu\n", c,
			       tot[c].records, tot[c].overwritten, tot[c].samples, tot[c].comms, tot[c].lost,
			       tot[c].consumed);
	return failures ? 1 : 0;
}
