/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The functions of glue.c, called from Rust, and the one Rust function glue.c
 * calls. src/shims/glue.rs declares each of them once for Rust, with these types.
 */
#ifndef OPROFILE_RS_GLUE_H
#define OPROFILE_RS_GLUE_H
#include <linux/types.h>

struct cgroup;
struct file;
struct mm_struct;
struct perf_event;
struct pt_regs;
struct task_struct;

/* src/shims/perf.rs */
struct perf_event *oprofile_rs_perf_create(int cpu, struct task_struct *task, u32 type,
					   u64 config, u64 period_or_freq, bool freq,
					   bool exclude_user, bool exclude_kernel, bool disabled,
					   void *context);
void oprofile_rs_perf_release(struct perf_event *event);
void oprofile_rs_perf_enable(struct perf_event *event, bool on);
/*
 * Implemented in Rust (src/shims/perf.rs); runs in NMI, hard-IRQ or task context, preemption off.
 * clock_period: the period of a fixed-period clock event (0 for any other); returns the next
 * interval for it (0: unchanged).
 */
u64 oprofile_rs_perf_overflow(void *context, struct pt_regs *regs, u64 period, bool throttled,
			      bool switch_out, u64 clock_period);
bool oprofile_rs_unwind_kernel(struct pt_regs *regs, bool (*frame)(void *ctx, unsigned long addr),
			       void *ctx);
unsigned long oprofile_rs_regs_ip(struct pt_regs *regs);
bool oprofile_rs_regs_user_mode(struct pt_regs *regs);
/* src/control/task_counters.rs */
int oprofile_rs_process_threads(u32 pid, struct task_struct **out, u32 max);
void oprofile_rs_task_put(struct task_struct *task);
/* src/path/user_stack.rs */
bool oprofile_rs_user_regs(struct pt_regs *regs, u64 *ip, u64 *sp, u64 *bp, u64 *limit);
bool oprofile_rs_read_user_words(u64 addr, u64 *out, unsigned int n);
/* src/path/sampler.rs */
u64 oprofile_rs_clock(void);
u64 oprofile_rs_totalram_bytes(void);
void oprofile_rs_cond_resched(void);
void oprofile_rs_current_task(u32 *pid, u32 *tgid, char comm[16]);
u8 oprofile_rs_current_switch(u32 *state, u64 *exec_runtime, u64 *run_delay, bool *has_run_delay);
/* src/oprofile.rs */
const char *oprofile_rs_event_param(void);
const char *oprofile_rs_mode_param(void);
const char *oprofile_rs_cgroup_param(void);
/* src/path/cgroup.rs */
struct cgroup *oprofile_rs_cgroup_get_path(const char *path);
struct cgroup *oprofile_rs_cgroup_get_id(u64 id);
void oprofile_rs_cgroup_put(struct cgroup *cgrp);
u64 oprofile_rs_cgroup_id(struct cgroup *cgrp);
bool oprofile_rs_cgroup_is_root(struct cgroup *cgrp);
int oprofile_rs_cgroup_path(struct cgroup *cgrp, char *buf, size_t len);
bool oprofile_rs_current_in_cgroup(struct cgroup *ancestor);
const char *oprofile_rs_sample_period_param(void);
const char *oprofile_rs_sample_freq_param(void);
/* src/shims/poll_misc.rs */
bool oprofile_rs_file_readable(const struct file *file);
/* src/shims/mm.rs */
struct mm_struct *oprofile_rs_mm_get(u32 pid, u64 start, u64 end, u64 ino);
void oprofile_rs_mm_drop(struct mm_struct *mm);
bool oprofile_rs_mm_alive(struct mm_struct *mm);
struct mm_struct *oprofile_rs_current_mm(void);
struct mm_struct *oprofile_rs_current_mm_get(void);

#endif
