// SPDX-License-Identifier: GPL-2.0
/*
 * A QEMU TCG plugin (QEMU 7.2's API, version 1) for scripts/icount-profile:
 * counts the guest instructions executed per translation block, by the
 * block's start address, between the first execution of the address
 * begin= and the first of end= (the marker program's two functions), and
 * writes "ADDRESS COUNT" lines (hex, decimal) to out= when QEMU exits.
 * Under -icount the guest's time is its instruction count, so these are
 * where the guest's time went: exact, and independent of the host's load.
 * A `rep movs` counts one instruction per iteration, as icount does.
 *
 * The API's declarations are repeated here (Debian ships no qemu-plugin.h).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef uint64_t qemu_plugin_id_t;
typedef struct qemu_info_t qemu_info_t;
struct qemu_plugin_tb;
enum qemu_plugin_op { QEMU_PLUGIN_INLINE_ADD_U64 };
enum qemu_plugin_cb_flags { QEMU_PLUGIN_CB_NO_REGS, QEMU_PLUGIN_CB_R_REGS, QEMU_PLUGIN_CB_RW_REGS };
typedef void (*qemu_plugin_vcpu_tb_trans_cb_t)(qemu_plugin_id_t id, struct qemu_plugin_tb *tb);
typedef void (*qemu_plugin_udata_cb_t)(qemu_plugin_id_t id, void *userdata);
typedef void (*qemu_plugin_vcpu_udata_cb_t)(unsigned int vcpu_index, void *userdata);
void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_tb_trans_cb_t cb);
void qemu_plugin_register_vcpu_tb_exec_inline(struct qemu_plugin_tb *tb, enum qemu_plugin_op op,
					      void *ptr, uint64_t imm);
void qemu_plugin_register_vcpu_tb_exec_cb(struct qemu_plugin_tb *tb, qemu_plugin_vcpu_udata_cb_t cb,
					  enum qemu_plugin_cb_flags flags, void *userdata);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
uint64_t qemu_plugin_tb_vaddr(const struct qemu_plugin_tb *tb);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, qemu_plugin_udata_cb_t cb, void *userdata);

__attribute__((visibility("default"))) int qemu_plugin_version = 1;

/* Counters by block address: an open-addressing table (blocks of every
 * process share a user address's counter). */
#define SLOTS (1u << 22)
struct slot {
	uint64_t pc;
	uint64_t n;	/* instructions executed from this address */
	uint64_t base;	/* n at the window's start */
};
static struct slot *table;
static uint64_t begin_pc, end_pc;
static int phase; /* 0: before the window, 1: in it, 2: after it */
static const char *out = "icount-profile.out";

static struct slot *slot_of(uint64_t pc)
{
	uint64_t h = (pc * 0x9E3779B97F4A7C15ull) >> 42;

	for (;; h++) {
		struct slot *s = &table[h & (SLOTS - 1)];

		if (s->pc == pc || !s->pc) {
			s->pc = pc;
			return s;
		}
	}
}

static void on_begin(unsigned int vcpu, void *u)
{
	if (phase != 0)
		return;
	for (uint32_t i = 0; i < SLOTS; i++)
		table[i].base = table[i].n;
	phase = 1;
}

static void on_end(unsigned int vcpu, void *u)
{
	if (phase != 1)
		return;
	for (uint32_t i = 0; i < SLOTS; i++)
		table[i].n -= table[i].base;
	phase = 2;
}

static void translated(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
	uint64_t pc = qemu_plugin_tb_vaddr(tb);
	struct slot *s = slot_of(pc);

	if (phase != 2)
		qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, &s->n,
							 qemu_plugin_tb_n_insns(tb));
	if (pc == begin_pc)
		qemu_plugin_register_vcpu_tb_exec_cb(tb, on_begin, QEMU_PLUGIN_CB_NO_REGS, NULL);
	if (pc == end_pc)
		qemu_plugin_register_vcpu_tb_exec_cb(tb, on_end, QEMU_PLUGIN_CB_NO_REGS, NULL);
}

static void at_exit(qemu_plugin_id_t id, void *u)
{
	FILE *f = fopen(out, "w");

	if (!f)
		return;
	/* A window never closed (the guest died first) is written as "open". */
	fprintf(f, "# window %s\n", phase == 2 ? "closed" : phase == 1 ? "open" : "never opened");
	for (uint32_t i = 0; i < SLOTS; i++) {
		uint64_t n = phase == 2 ? table[i].n : table[i].n - table[i].base;

		if (table[i].pc && n)
			fprintf(f, "%llx %llu\n", (unsigned long long)table[i].pc, (unsigned long long)n);
	}
	fclose(f);
}

__attribute__((visibility("default")))
int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc, char **argv)
{
	for (int i = 0; i < argc; i++) {
		if (!strncmp(argv[i], "begin=", 6))
			begin_pc = strtoull(argv[i] + 6, NULL, 16);
		else if (!strncmp(argv[i], "end=", 4))
			end_pc = strtoull(argv[i] + 4, NULL, 16);
		else if (!strncmp(argv[i], "out=", 4))
			out = argv[i] + 4;
	}
	table = calloc(SLOTS, sizeof(*table));
	if (!table || !begin_pc || !end_pc)
		return -1;
	qemu_plugin_register_vcpu_tb_trans_cb(id, translated);
	qemu_plugin_register_atexit_cb(id, at_exit, NULL);
	return 0;
}
