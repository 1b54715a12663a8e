/* SPDX-License-Identifier: GPL-2.0 */
/* Functions of glue.c called from Rust (declared there as extern "C"). */
#ifndef OPROFILE_RS_GLUE_H
#define OPROFILE_RS_GLUE_H
#include <linux/types.h>

struct perf_event;

struct pt_regs;
struct perf_event *oprofile_rs_perf_create(int cpu, u32 type, u64 config, u64 period_or_freq,
					   bool freq, bool exclude_user, bool exclude_kernel,
					   void *context);
u32 oprofile_rs_kernel_backtrace(struct pt_regs *regs, u64 *out, u32 max, bool *aborted);
void oprofile_rs_perf_release(struct perf_event *event);
u64 oprofile_rs_regs_ip(struct pt_regs *regs);
bool oprofile_rs_regs_user_mode(struct pt_regs *regs);
long oprofile_rs_ptr_err(const void *ptr);
u64 oprofile_rs_clock(void);
void oprofile_rs_current_task(u32 *pid, u32 *tgid, char comm[16]);
const char *oprofile_rs_event_param(void);

#endif
