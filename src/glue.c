// SPDX-License-Identifier: GPL-2.0
/*
 * C glue for oprofile_rs: kernel macros, inline functions and callback
 * signatures Rust cannot reach through the kernel crate's bindings. Every
 * function here only forwards; all logic lives in the Rust files named in
 * the comments.
 */
#include <linux/hardirq.h>
#include <linux/perf_event.h>
#include <linux/ptrace.h>
#include <linux/sched.h>
#include <linux/sched/clock.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/workqueue.h>

#include "glue.h"

/* in_nmi() is a macro over preempt_count(). */
bool oprofile_rs_in_nmi(void)
{
	return in_nmi();
}

/* ---- perf counters (src/perf.rs) ---------------------------------------- */

/* Implemented in Rust (src/perf.rs); runs in NMI or hard-IRQ context. */
void oprofile_rs_perf_overflow(void *context, u64 pc, bool kernel_mode);

static void overflow_handler(struct perf_event *event, struct perf_sample_data *data,
			     struct pt_regs *regs)
{
	oprofile_rs_perf_overflow(event->overflow_handler_context, instruction_pointer(regs),
				  !user_mode(regs));
}

/*
 * struct perf_event_attr is opaque to Rust's bindings: build it here.
 * Returns the counter or an ERR_PTR.
 */
struct perf_event *oprofile_rs_perf_create(int cpu, u32 type, u64 config, u64 period,
					   bool exclude_user, bool exclude_kernel, void *context)
{
	struct perf_event_attr attr = {
		.type = type,
		.size = sizeof(attr),
		.config = config,
		.sample_period = period,
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

/* ---- the sync work (src/sync.rs) ------------------------------------------ */

/* Implemented in Rust (src/sync.rs): drains the CPU buffers. */
void oprofile_rs_sync_work(void *context);

struct oprofile_rs_sync {
	struct delayed_work work;
	void *context;
	unsigned long interval;
	bool stopping;
};

static void sync_fn(struct work_struct *work)
{
	struct oprofile_rs_sync *s = container_of(to_delayed_work(work), struct oprofile_rs_sync, work);

	oprofile_rs_sync_work(s->context);
	if (!READ_ONCE(s->stopping))
		schedule_delayed_work(&s->work, s->interval);
}

/*
 * INIT_DELAYED_WORK is a macro and the kernel crate's DelayedWork has no
 * cancel: this pair starts and synchronously stops a self-rearming work.
 */
struct oprofile_rs_sync *oprofile_rs_sync_start(void *context, unsigned long interval)
{
	struct oprofile_rs_sync *s = kzalloc(sizeof(*s), GFP_KERNEL);

	if (!s)
		return NULL;
	s->context = context;
	s->interval = interval;
	INIT_DELAYED_WORK(&s->work, sync_fn);
	schedule_delayed_work(&s->work, interval);
	return s;
}

void oprofile_rs_sync_stop(struct oprofile_rs_sync *s)
{
	WRITE_ONCE(s->stopping, true);
	cancel_delayed_work_sync(&s->work);
	kfree(s);
}

/* Runs the work now (e.g. for a flush) unless it is already running. */
void oprofile_rs_sync_kick(struct oprofile_rs_sync *s)
{
	mod_delayed_work(system_wq, &s->work, 0);
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

/* ---- NMI handlers and NMI IPIs (src/nmi.rs) ------------------------------- */

#include <linux/cpumask.h>
#include <asm/apic.h>
#include <asm/nmi.h>

static_assert(sizeof(struct nmiaction) <= OPROFILE_RS_NMIACTION_BYTES);
static_assert(__alignof__(struct nmiaction) <= 8);

/*
 * register_nmi_handler() is a macro that defines a static struct nmiaction;
 * this is its body for an nmiaction in caller (Rust) storage.
 */
int oprofile_rs_nmi_register_local(void *action, int (*handler)(unsigned int, struct pt_regs *),
				   const char *name)
{
	struct nmiaction *a = action;

	*a = (struct nmiaction) {
		.list = LIST_HEAD_INIT(a->list),
		.handler = handler,
		.name = name,
	};
	return __register_nmi_handler(NMI_LOCAL, a);
}

/* Not in the generated bindings (asm/nmi.h is not included there). */
void oprofile_rs_nmi_unregister_local(const char *name)
{
	unregister_nmi_handler(NMI_LOCAL, name);
}

/*
 * __apic_send_IPI_mask() is inline (a static call). The mask variant is the
 * one that delivers NMI_VECTOR as an NMI with every APIC driver, also to the
 * sending CPU itself (x2apic's send_IPI_self cannot send NMIs).
 */
void oprofile_rs_send_nmi(unsigned int cpu)
{
	__apic_send_IPI_mask(cpumask_of(cpu), NMI_VECTOR);
}

/* cpu_online() is a macro. */
bool oprofile_rs_cpu_online(unsigned int cpu)
{
	return cpu_online(cpu);
}
