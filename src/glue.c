// SPDX-License-Identifier: GPL-2.0
/*
 * C glue for oprofile_rs: kernel macros, inline functions and callback
 * signatures Rust cannot reach through the kernel crate's bindings. Every
 * function here only forwards; all logic lives in the Rust files named in
 * the comments.
 */
#include <linux/hardirq.h>
#include <linux/moduleparam.h>
#include <linux/perf_event.h>
#include <linux/ptrace.h>
#include <linux/sched.h>
#include <linux/sched/clock.h>
#include <linux/string.h>
#include <asm/unwind.h>

#include "glue.h"

/* ---- perf counters (src/perf.rs) ---------------------------------------- */

/* Implemented in Rust (src/perf.rs); runs in NMI or hard-IRQ context. */
void oprofile_rs_perf_overflow(void *context, struct pt_regs *regs);

static void overflow_handler(struct perf_event *event, struct perf_sample_data *data,
			     struct pt_regs *regs)
{
	oprofile_rs_perf_overflow(event->overflow_handler_context, regs);
}

/*
 * The kernel callchain of a sample (src/perf.rs, Regs::kernel_backtrace):
 * unwind_start() and unwind_done() are inline. The same walk as perf's
 * perf_callchain_kernel(), safe in NMI context; the ORC unwinder reads only
 * the stacks and its tables. Returns the number of return addresses written
 * to out, innermost first, without the interrupted address itself; *aborted
 * says whether the unwinder failed before the outermost frame or max.
 */
u32 oprofile_rs_kernel_backtrace(struct pt_regs *regs, u64 *out, u32 max, bool *aborted)
{
	struct unwind_state state;
	unsigned long addr;
	u32 n = 0;

	*aborted = false;
	if (!max || !regs || user_mode(regs))
		return 0;
	for (unwind_start(&state, current, regs, NULL); !unwind_done(&state);
	     unwind_next_frame(&state)) {
		addr = unwind_get_return_address(&state);
		if (!addr)
			break;
		/* The walk starts at the interrupted address itself. */
		if (n == 0 && addr == instruction_pointer(regs))
			continue;
		if (n == max)
			return n; /* backtrace_depth reached: not an abort */
		out[n++] = addr;
	}
	if (unwind_error(&state))
		*aborted = true;
	return n;
}

/* instruction_pointer() and user_mode() are inline (src/perf.rs, Regs). */
u64 oprofile_rs_regs_ip(struct pt_regs *regs)
{
	return instruction_pointer(regs);
}

bool oprofile_rs_regs_user_mode(struct pt_regs *regs)
{
	return user_mode(regs);
}

/*
 * struct perf_event_attr is opaque to Rust's bindings: build it here.
 * Returns the counter or an ERR_PTR.
 */
struct perf_event *oprofile_rs_perf_create(int cpu, u32 type, u64 config, u64 period_or_freq,
					   bool freq, bool exclude_user, bool exclude_kernel,
					   void *context)
{
	struct perf_event_attr attr = {
		.type = type,
		.size = sizeof(attr),
		.config = config,
		.sample_period = period_or_freq, /* a union with sample_freq */
		.freq = freq,
		.pinned = 1,
		.disabled = 0,
		.exclude_user = exclude_user,
		.exclude_kernel = exclude_kernel,
		.exclude_hv = 1,
	};

	return perf_event_create_kernel_counter(&attr, cpu, NULL, overflow_handler, context);
}

long oprofile_rs_ptr_err(const void *ptr)
{
	return IS_ERR(ptr) ? PTR_ERR(ptr) : 0;
}

/* ---- the current task (src/sampler.rs), safe in NMI context -------------- */

void oprofile_rs_current_task(u32 *pid, u32 *tgid, char comm[16])
{
	*pid = current->pid;
	*tgid = current->tgid;
	/* A racy copy of a fixed array is what perf does in NMI context too. */
	memcpy(comm, current->comm, 16);
}

/* ---- the event= parameter (src/params.rs): the module! macro has no strings */

static char *event = "default";
module_param(event, charp, 0444);
MODULE_PARM_DESC(event, "Event to sample: default (cycles, else cpu-clock), cycles, instructions, "
			"cache-references, cache-misses, branch-instructions, branch-misses, cpu-clock");

const char *oprofile_rs_event_param(void)
{
	return event ? event : "";
}

/* perf_event_release_kernel is not in the generated bindings. */
void oprofile_rs_perf_release(struct perf_event *event)
{
	perf_event_release_kernel(event);
}

/* local_clock() may be an inline function (include/linux/sched/clock.h). */
u64 oprofile_rs_clock(void)
{
	return local_clock();
}
