// SPDX-License-Identifier: GPL-2.0
/*
 * C glue for oprofile_rs: kernel macros, inline functions and callback
 * signatures Rust cannot reach through the kernel crate's bindings. Every
 * function here only forwards; all logic lives in the Rust files named in
 * the comments.
 */
#include <linux/cpuhotplug.h>
#include <linux/hardirq.h>
#include <linux/moduleparam.h>
#include <linux/perf_event.h>
#include <linux/ptrace.h>
#include <linux/sched.h>
#include <linux/sched/clock.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/workqueue.h>
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

/* ---- the per-CPU sync works (src/sync.rs) ------------------------------ */

/* Implemented in Rust (src/profiler.rs): drains the buffer of one CPU. */
void oprofile_rs_sync_work(void *context, unsigned int cpu);

struct oprofile_rs_sync_cpu {
	struct delayed_work work;
	void *context;
	unsigned long interval;
	unsigned int cpu;
	bool stopping;
};

static void sync_fn(struct work_struct *work)
{
	struct oprofile_rs_sync_cpu *s =
		container_of(to_delayed_work(work), struct oprofile_rs_sync_cpu, work);

	oprofile_rs_sync_work(s->context, s->cpu);
	if (!READ_ONCE(s->stopping))
		schedule_delayed_work_on(s->cpu, &s->work, s->interval);
}

/*
 * INIT_DELAYED_WORK is a macro and the kernel crate's DelayedWork has no
 * cancel: one self-rearming delayed work per possible CPU, started when the
 * CPU comes online and synchronously stopped when it goes offline.
 */
struct oprofile_rs_sync_cpu *oprofile_rs_sync_alloc(void *context, unsigned long interval)
{
	struct oprofile_rs_sync_cpu *s = kcalloc(nr_cpu_ids, sizeof(*s), GFP_KERNEL);
	unsigned int cpu;

	if (!s)
		return NULL;
	for (cpu = 0; cpu < nr_cpu_ids; cpu++) {
		s[cpu].context = context;
		s[cpu].interval = interval;
		s[cpu].cpu = cpu;
		s[cpu].stopping = true;
		INIT_DELAYED_WORK(&s[cpu].work, sync_fn);
	}
	return s;
}

/*
 * Starts CPU cpu's work, staggered by a jiffy per CPU like oprofile's (modulo
 * the interval: the first sync of a high CPU number is not late).
 */
void oprofile_rs_sync_start_cpu(struct oprofile_rs_sync_cpu *s, unsigned int cpu)
{
	WRITE_ONCE(s[cpu].stopping, false);
	schedule_delayed_work_on(cpu, &s[cpu].work, s[cpu].interval + cpu % s[cpu].interval);
}

/* Stops CPU cpu's work; it is not running when this returns. */
void oprofile_rs_sync_stop_cpu(struct oprofile_rs_sync_cpu *s, unsigned int cpu)
{
	WRITE_ONCE(s[cpu].stopping, true);
	cancel_delayed_work_sync(&s[cpu].work);
}

/* Frees the works; every one must be stopped. */
void oprofile_rs_sync_free(struct oprofile_rs_sync_cpu *s)
{
	kfree(s);
}

/* ---- CPU hotplug (src/profiler.rs) ---------------------------------------- */

/* Implemented in Rust (src/profiler.rs); run on the CPU going on/offline. */
int oprofile_rs_cpu_up(void *context, unsigned int cpu);
int oprofile_rs_cpu_down(void *context, unsigned int cpu);

struct oprofile_rs_hotplug {
	struct hlist_node node;
	void *context;
	int state;
};

static int hp_online(unsigned int cpu, struct hlist_node *node)
{
	struct oprofile_rs_hotplug *h = hlist_entry(node, struct oprofile_rs_hotplug, node);

	return oprofile_rs_cpu_up(h->context, cpu);
}

static int hp_offline(unsigned int cpu, struct hlist_node *node)
{
	struct oprofile_rs_hotplug *h = hlist_entry(node, struct oprofile_rs_hotplug, node);

	return oprofile_rs_cpu_down(h->context, cpu);
}

/*
 * cpuhp callbacks carry no context pointer unless the state is
 * multi-instance: one dynamic multi-instance state with one instance.
 * Calls oprofile_rs_cpu_up() for every online CPU before returning (and
 * rolls back with oprofile_rs_cpu_down() if one fails). Returns NULL and
 * sets *err on failure.
 */
struct oprofile_rs_hotplug *oprofile_rs_hotplug_start(void *context, int *err)
{
	struct oprofile_rs_hotplug *h = kzalloc(sizeof(*h), GFP_KERNEL);
	int ret;

	if (!h) {
		*err = -ENOMEM;
		return NULL;
	}
	h->context = context;
	ret = cpuhp_setup_state_multi(CPUHP_AP_ONLINE_DYN, "oprofile_rs:online", hp_online,
				      hp_offline);
	if (ret < 0)
		goto free;
	h->state = ret;
	ret = cpuhp_state_add_instance(h->state, &h->node);
	if (ret < 0)
		goto remove;
	return h;
remove:
	cpuhp_remove_multi_state(h->state);
free:
	kfree(h);
	*err = ret;
	return NULL;
}

/* Calls oprofile_rs_cpu_down() for every online CPU, then unregisters. */
void oprofile_rs_hotplug_stop(struct oprofile_rs_hotplug *h)
{
	cpuhp_state_remove_instance(h->state, &h->node);
	cpuhp_remove_multi_state(h->state);
	kfree(h);
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
