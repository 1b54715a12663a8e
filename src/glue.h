/* SPDX-License-Identifier: GPL-2.0 */
/* Functions of glue.c called from Rust (declared there as extern "C"). */
#ifndef OPROFILE_RS_GLUE_H
#define OPROFILE_RS_GLUE_H
#include <linux/types.h>

struct perf_event;
struct oprofile_rs_sync;

bool oprofile_rs_in_nmi(void);
struct perf_event *oprofile_rs_perf_create(int cpu, u32 type, u64 config, u64 period,
					   bool exclude_user, bool exclude_kernel, void *context);
void oprofile_rs_perf_release(struct perf_event *event);
long oprofile_rs_ptr_err(const void *ptr);
u64 oprofile_rs_clock(void);
void oprofile_rs_current_task(u32 *pid, u32 *tgid, char comm[16]);
struct oprofile_rs_sync *oprofile_rs_sync_start(void *context, unsigned long interval);
void oprofile_rs_sync_stop(struct oprofile_rs_sync *s);
void oprofile_rs_sync_kick(struct oprofile_rs_sync *s);

/* src/nmi.rs: bytes of caller storage for a struct nmiaction (checked in glue.c). */
#define OPROFILE_RS_NMIACTION_BYTES 64
struct pt_regs;
int oprofile_rs_nmi_register_local(void *action, int (*handler)(unsigned int, struct pt_regs *),
				   const char *name);
void oprofile_rs_nmi_unregister_local(const char *name);
void oprofile_rs_send_nmi(unsigned int cpu);
bool oprofile_rs_cpu_online(unsigned int cpu);

#endif
