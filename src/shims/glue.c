// SPDX-License-Identifier: GPL-2.0
/*
 * C glue for oprofile_rs: kernel macros, inline functions and declarations
 * Rust cannot reach through the kernel crate's bindings. Every function here
 * only forwards (the unwinder's loop included: what to record is decided by
 * the Rust caller); each says why Rust cannot do it. Rust declares them once,
 * in src/shims/glue.rs, with the types of glue.h.
 */
#include <linux/capability.h>
#include <linux/cgroup.h>
#include <linux/err.h>
#include <linux/fs.h>
#include <linux/hardirq.h>
#include <linux/mm.h>
#include <linux/mmap_lock.h>
#include <linux/moduleparam.h>
#include <linux/perf_event.h>
#include <linux/pid.h>
#include <linux/ptrace.h>
#include <linux/sched.h>
#include <linux/sched/clock.h>
#include <linux/sched/mm.h>
#include <linux/sched/signal.h>
#include <linux/sched/task.h>
#include <linux/string.h>
#include <linux/uaccess.h>
#include <asm/unwind.h>

#include "glue.h"

/* ---- perf counters (src/shims/perf.rs) ---------------------------------------- */

/*
 * The overflow handler: perf's callback type has struct perf_sample_data,
 * and event->overflow_handler_context is a field of struct perf_event, both
 * opaque to Rust's bindings. data->period is the count this sample stands
 * for (perf changes it in frequency mode).
 *
 * perf calls it with preemption off in every context (NMI, the hrtimer's
 * hard IRQ, and perf_sw_event()'s task context, which disables preemption
 * around the swevent hash walk); the explicit pair documents and enforces
 * what the sampler relies on: the per-CPU ring buffer and scratch space of
 * this CPU cannot change under it (a migration mid-record). It never
 * reschedules: the count is raised on entry, so the enable never brings it
 * to zero here.
 *
 * Throttling: perf counts the overflows of each event per tick and, past
 * kernel.perf_event_max_sample_rate / HZ, stops the event until its next
 * tick (perf_event_throttle(), which sets hw.interrupts to MAX_INTERRUPTS
 * before this handler runs for the overflow that crossed the limit;
 * perf_event_unthrottle() resets it). MAX_INTERRUPTS is private to
 * kernel/events/core.c, hence its copy below; perf's own ring buffer gets a
 * PERF_RECORD_THROTTLE at this point, a kernel counter has none, so the
 * sample carries the news (stream-format.md, SAMPLE flag 0x04).
 */
#define OPROFILE_RS_MAX_INTERRUPTS (~0ULL)

/*
 * The PMUs of perf's cpu-clock and task-clock events (indexed by their
 * PERF_COUNT_SW_ number), as the first counter of each made here found
 * them: perf_init_event() gives such an event the type of a PMU of its own,
 * not PERF_TYPE_SOFTWARE, so the PMU is what tells the overflow handler
 * that an event is a clock. They are static objects of the kernel.
 */
static struct pmu *clock_pmus[2];

static void overflow_handler(struct perf_event *event, struct perf_sample_data *data,
			     struct pt_regs *regs)
{
	/*
	 * The context-switches event overflows in perf_event_task_sched_out(),
	 * at a switch-out of the current task (src/path/sampler.rs writes a
	 * SWITCH record then); event->attr is not in the Rust bindings' layout.
	 */
	bool switch_out = event->attr.type == PERF_TYPE_SOFTWARE &&
			  event->attr.config == PERF_COUNT_SW_CONTEXT_SWITCHES;

	/*
	 * A clock event at a fixed period (cpu-clock, task-clock: perf's
	 * hrtimer, which perf_swevent_hrtimer() forwards by hw.sample_period
	 * after this returns) gets the interval Rust draws for it
	 * (src/shims/clock_jitter.rs); hw.last_period, the period each sample
	 * stands for, stays the one asked for. attr is not in the bindings,
	 * and perf rewrites a clock event's attr.type to its own PMU's (see
	 * clock_pmus).
	 */
	bool clock = !event->attr.freq && (event->pmu == READ_ONCE(clock_pmus[0]) ||
					   event->pmu == READ_ONCE(clock_pmus[1]));
	u64 next;

	preempt_disable_notrace();
	next = oprofile_rs_perf_overflow(event->overflow_handler_context, regs, data->period,
					 event->hw.interrupts == OPROFILE_RS_MAX_INTERRUPTS, switch_out,
					 clock ? event->attr.sample_period : 0);
	if (next)
		WRITE_ONCE(event->hw.sample_period, next);
	preempt_enable_notrace();
}

/*
 * The kernel callchain of a sample (src/shims/perf.rs, Regs::kernel_backtrace):
 * struct unwind_state is not in the bindings, and unwind_start(),
 * unwind_done() and unwind_error() are inline. The walk perf's
 * perf_callchain_kernel() does, safe in NMI context (the ORC unwinder reads
 * only the stacks and its tables): calls frame(ctx, addr) for each return
 * address, innermost first, until the walk ends or frame() returns false.
 * Returns whether the unwinder failed before the outermost frame.
 *
 * Registers saved by an interrupt or exception entry (X86_EFLAGS_FIXED set,
 * perf's perf_hw_regs()) are an interrupted frame: the walk starts there,
 * with the interrupted address itself. The software events perf fires from
 * the scheduler (context-switches, cpu-migrations) pass registers made by
 * perf_fetch_caller_regs() instead: a caller's address and a frame address,
 * flags 0, no frame the unwinder can start from (every such walk failed at
 * once). As perf does, the walk then starts from the current stack and
 * reports the frames above that stack pointer.
 */
bool oprofile_rs_unwind_kernel(struct pt_regs *regs, bool (*frame)(void *ctx, unsigned long addr),
			       void *ctx)
{
	struct unwind_state state;
	unsigned long addr;

	if (regs->flags & X86_EFLAGS_FIXED)
		unwind_start(&state, current, regs, NULL);
	else
		unwind_start(&state, current, NULL, (unsigned long *)regs->sp);
	for (; !unwind_done(&state); unwind_next_frame(&state)) {
		addr = unwind_get_return_address(&state);
		if (!addr)
			break;
		if (!frame(ctx, addr))
			return false;
	}
	return unwind_error(&state);
}

/*
 * The user registers a user-space stack walk starts from (src/path/user_stack.rs):
 * task_pt_regs(), current, user_64bit_mode() and TASK_SIZE_MAX are macros or
 * inline functions, and the task's mm and flags are fields of struct
 * task_struct, whose layout bindgen gets wrong (see oprofile_rs_current_task).
 * For a user-mode sample, the interrupted registers; for a kernel-mode sample
 * of a user task (an mm, neither a kernel thread nor a user worker: perf's
 * is_user_task()), the registers it entered the kernel with, whose ip is the
 * user address it entered from (as perf's get_perf_callchain()). Returns
 * false when there is no user stack to walk: a kernel thread, or a 32-bit
 * (compat) context, which is not walked. *limit is the end of the user address
 * space. Safe in NMI context: it only reads registers and the current task.
 */
bool oprofile_rs_user_regs(struct pt_regs *regs, u64 *ip, u64 *sp, u64 *bp, u64 *limit)
{
	if (!user_mode(regs)) {
		if (!current->mm || (current->flags & (PF_KTHREAD | PF_USER_WORKER)))
			return false;
		regs = task_pt_regs(current);
	}
	if (!user_64bit_mode(regs))
		return false;
	*ip = regs->ip;
	*sp = regs->sp;
	*bp = regs->bp;
	*limit = TASK_SIZE_MAX;
	return true;
}

/*
 * Reads n (1 or 2) words at user address addr of the current task, in any
 * context (NMI included), without faulting pages in, for a caller that made
 * sure the current task's mm is the loaded one (src/path/user_stack.rs,
 * UserMemory: after a copy_from_user_nmi() that succeeded in the same
 * handler; nmi_uaccess_okay() is not exported to modules). With page
 * faults disabled, a fault ending the read through the exception table, as
 * perf's user callchain walk reads its frame records (copy_stack_frame()),
 * but inline: one user access window (user_read_access_begin(): the range
 * check and STAC) for both words, each read by unsafe_get_user() (a load
 * with its exception-table entry), where __get_user() called
 * __get_user_nocheck_8 per word (the table walk reads one or two words per
 * frame: 28 instructions a sample in those calls, scripts/icount-profile).
 * The macros are why this is C.
 */
bool oprofile_rs_read_user_words(u64 addr, u64 *out, unsigned int n)
{
	const u64 __user *p = (const u64 __user *)(unsigned long)addr;
	u64 a, b = 0;

	if (n < 1 || n > 2)
		return false;
	pagefault_disable();
	if (!user_read_access_begin(p, n * sizeof(u64)))
		goto refused;
	unsafe_get_user(a, p, fault);
	if (n == 2)
		unsafe_get_user(b, p + 1, fault);
	user_read_access_end();
	pagefault_enable();
	out[0] = a;
	if (n == 2)
		out[1] = b;
	return true;
fault:
	user_read_access_end();
refused:
	pagefault_enable();
	return false;
}

/* instruction_pointer() and user_mode() are inline (src/shims/perf.rs, Regs). */
unsigned long oprofile_rs_regs_ip(struct pt_regs *regs)
{
	return instruction_pointer(regs);
}

bool oprofile_rs_regs_user_mode(struct pt_regs *regs)
{
	return user_mode(regs);
}

/*
 * struct perf_event_attr is opaque to Rust's bindings, and
 * perf_event_create_kernel_counter() is not in them: build it here.
 * Returns the counter or an ERR_PTR.
 */
struct perf_event *oprofile_rs_perf_create(int cpu, struct task_struct *task, u32 type,
					   u64 config, u64 period_or_freq, bool freq,
					   bool exclude_user, bool exclude_kernel, bool disabled,
					   void *context)
{
	struct perf_event_attr attr = {
		.type = type,
		.size = sizeof(attr),
		.config = config,
		.sample_period = period_or_freq, /* a union with sample_freq */
		.freq = freq,
		.pinned = 1,
		.disabled = disabled,
		.exclude_user = exclude_user,
		.exclude_kernel = exclude_kernel,
		.exclude_hv = 1,
		/*
		 * A counter bound to a task (cpu -1) follows it onto every CPU
		 * and is copied into every task it creates from now on (perf's
		 * inherit, as perf record -- CMD): src/control/task_counters.rs.
		 */
		.inherit = task != NULL,
	};

	struct perf_event *event =
		perf_event_create_kernel_counter(&attr, cpu, task, overflow_handler, context);

	if (!IS_ERR(event) && type == PERF_TYPE_SOFTWARE &&
	    (config == PERF_COUNT_SW_CPU_CLOCK || config == PERF_COUNT_SW_TASK_CLOCK))
		WRITE_ONCE(clock_pmus[config], event->pmu);
	return event;
}

/*
 * The threads of the process with id pid in the caller's pid namespace
 * (src/control/task_counters.rs): find_vpid(), pid_task() and for_each_thread() need
 * RCU and struct task_struct's fields, whose layout bindgen gets wrong (see
 * oprofile_rs_current_task). Stores up to max threads in out, each with a
 * reference held (oprofile_rs_task_put() drops it), and returns how many;
 * -ESRCH if no process has that id (or it is exiting: no thread left),
 * -E2BIG if it has more than max threads (no reference held then).
 */
int oprofile_rs_process_threads(u32 pid, struct task_struct **out, u32 max)
{
	struct task_struct *p, *t;
	u32 n = 0;
	int ret;

	if (pid == 0 || pid > PID_MAX_LIMIT)
		return -ESRCH;
	rcu_read_lock();
	p = pid_task(find_vpid(pid), PIDTYPE_PID);
	if (!p) {
		rcu_read_unlock();
		return -ESRCH;
	}
	for_each_thread(p, t) {
		if (t->flags & PF_EXITING)
			continue;
		if (n == max) {
			ret = -E2BIG;
			goto undo;
		}
		get_task_struct(t);
		out[n++] = t;
	}
	rcu_read_unlock();
	return n ? n : -ESRCH;
undo:
	rcu_read_unlock();
	while (n)
		put_task_struct(out[--n]);
	return ret;
}

/* put_task_struct() is inline. */
void oprofile_rs_task_put(struct task_struct *task)
{
	put_task_struct(task);
}

/*
 * The current task's pid, tgid and comm (src/path/sampler.rs), safe in NMI
 * context. Not in Rust (kernel::current!() and Task::pid()): the kernel crate
 * reads struct task_struct with the layout bindgen (clang) computes, which on
 * the GCC-built test kernels is not the kernel's (measured on 7.3: pid at
 * offset 1064 for bindgen, 1112 for GCC; size 2304 against 2368), so
 * Task::pid() reads another field there.
 */
void oprofile_rs_current_task(u32 *pid, u32 *tgid, char comm[16])
{
	*pid = current->pid;
	*tgid = current->tgid;
	/* A racy copy of a fixed array is what perf does in NMI context too. */
	memcpy(comm, current->comm, 16);
}

/*
 * The current task's scheduler state at a switch-out (src/shims/task.rs,
 * current_switch), for the SWITCH record: called from the context-switches
 * overflow, in __schedule() -> context_switch() -> prepare_task_switch() ->
 * perf_event_task_sched_out(prev, next), where current is still prev, the
 * runqueue lock is held and interrupts are off. It only reads fields of
 * current (no lock, no wakeup). By then try_to_block_task() has dequeued a
 * task that blocks (or, with the fair class's delayed dequeue, marked it
 * se.sched_delayed), and update_curr() has brought se.sum_exec_runtime up to
 * this switch; sched_info_switch() ran just before (run_delay counts the
 * waits up to the task's last switch-in). A task still runnable was
 * preempted (or yielded), whatever its __state says (a preemption between
 * set_current_state() and schedule() leaves it set). A waker on another CPU
 * may already have set __state to TASK_WAKING: a sleep that ends at once.
 * Returns the reason code (format.rs, SwitchReason).
 */
u8 oprofile_rs_current_switch(u32 *state, u64 *exec_runtime, u64 *run_delay, bool *has_run_delay)
{
	struct task_struct *p = current;
	unsigned int s = READ_ONCE(p->__state);
	u8 reason;

	if (s & TASK_DEAD)
		reason = 3;
	else if (task_is_runnable(p))
		reason = 0;
	else if (s & (__TASK_STOPPED | __TASK_TRACED))
		reason = 4;
	else if ((s & TASK_IDLE) == TASK_IDLE)
		reason = 6;
	else if (s & (TASK_UNINTERRUPTIBLE | TASK_RTLOCK_WAIT))
		reason = 2;
	else if (s & (TASK_INTERRUPTIBLE | TASK_WAKING))
		reason = 1;
	else
		reason = 5;
	*state = s;
	*exec_runtime = READ_ONCE(p->se.sum_exec_runtime);
#ifdef CONFIG_SCHED_INFO
	*run_delay = READ_ONCE(p->sched_info.run_delay);
	*has_run_delay = true;
#else
	*run_delay = 0;
	*has_run_delay = false;
#endif
	return reason;
}

/*
 * ---- the event= parameter (src/oprofile.rs): module_param() is a macro, and
 * the module! macro of the kernel crate has no string parameters.
 */

static char *event = "default";
module_param(event, charp, 0444);
MODULE_PARM_DESC(event, "Events to sample, a comma list of 1..8: default (alone: cycles, else "
			"cpu-clock), cycles, instructions, cache-references, cache-misses, "
			"branch-instructions, branch-misses, cpu-clock, task-clock, page-faults, "
			"context-switches, cpu-migrations");

const char *oprofile_rs_event_param(void)
{
	return event ? event : "";
}

/*
 * ---- sample_period= and sample_freq= (src/oprofile.rs, src/control/params.rs): one
 * value or a comma list with one per event, strings as event=.
 */

static char *sample_period = "";
module_param(sample_period, charp, 0444);
MODULE_PARM_DESC(sample_period, "Sample period per event (one value for all, or a comma list; 0: "
				"not given): ns for the clocks (10000..1000000000), events for the "
				"others (1..1000000000)");

const char *oprofile_rs_sample_period_param(void)
{
	return sample_period ? sample_period : "";
}

static char *sample_freq = "";
module_param(sample_freq, charp, 0444);
MODULE_PARM_DESC(sample_freq, "Samples per second per CPU per event instead of a period (one value "
			      "or a comma list, 1..100000; 0: period mode)");

const char *oprofile_rs_sample_freq_param(void)
{
	return sample_freq ? sample_freq : "";
}

/*
 * ---- the mode= parameter (src/oprofile.rs, src/control/params.rs): a string, as event=.
 */

static char *mode = "consume";
module_param(mode, charp, 0444);
MODULE_PARM_DESC(mode, "Per-CPU buffers: consume (drained into the event buffer continuously) or "
		       "overwrite (flight recorder: keep the newest records, moved out by a snapshot)");

const char *oprofile_rs_mode_param(void)
{
	return mode ? mode : "";
}

/* perf_event_release_kernel() is not in the bindings (linux/perf_event.h is not included there). */
void oprofile_rs_perf_release(struct perf_event *event)
{
	perf_event_release_kernel(event);
}

/*
 * perf_event_enable() and perf_event_disable() are not in the bindings either:
 * a counter that stands still while recording is off (src/control/counter_table.rs).
 */
void oprofile_rs_perf_enable(struct perf_event *event, bool on)
{
	if (on)
		perf_event_enable(event);
	else
		perf_event_disable(event);
}

/*
 * local_clock() is an inline function without CONFIG_HAVE_UNSTABLE_SCHED_CLOCK
 * (include/linux/sched/clock.h) and not in the bindings.
 */
u64 oprofile_rs_clock(void)
{
	return local_clock();
}

/* The machine's RAM in bytes (src/path/buffer_memory.rs): totalram_pages() is inline. */
u64 oprofile_rs_totalram_bytes(void)
{
	return (u64)totalram_pages() << PAGE_SHIFT;
}

/* cond_resched() is a macro (src/path/snapshot.rs: the snapshot's plan and merge). */
void oprofile_rs_cond_resched(void)
{
	cond_resched();
}

/*
 * ---- the cgroup filter (src/path/cgroup.rs): struct cgroup is opaque to Rust's
 * bindings (linux/cgroup.h is not included there), and cgroup_put(),
 * cgroup_id(), cgroup_path(), cgroup_parent(), task_dfl_cgroup() and
 * cgroup_is_descendant() are inline. Without CONFIG_CGROUPS every task is
 * in the one root and nothing can be looked up (EOPNOTSUPP).
 */
#ifdef CONFIG_CGROUPS
struct cgroup *oprofile_rs_cgroup_get_path(const char *path)
{
	return cgroup_get_from_path(path);
}

struct cgroup *oprofile_rs_cgroup_get_id(u64 id)
{
	return cgroup_get_from_id(id);
}

void oprofile_rs_cgroup_put(struct cgroup *cgrp)
{
	cgroup_put(cgrp);
}

u64 oprofile_rs_cgroup_id(struct cgroup *cgrp)
{
	return cgroup_id(cgrp);
}

bool oprofile_rs_cgroup_is_root(struct cgroup *cgrp)
{
	return !cgroup_parent(cgrp);
}

int oprofile_rs_cgroup_path(struct cgroup *cgrp, char *buf, size_t len)
{
	return cgroup_path(cgrp, buf, len);
}

/*
 * Whether the current task is in @ancestor or below it on the default
 * (v2) hierarchy. Safe in NMI context: an RCU read-side section and two
 * pointer reads (perf's own cgroup events test the same in their NMI path).
 */
bool oprofile_rs_current_in_cgroup(struct cgroup *ancestor)
{
	bool in;

	rcu_read_lock();
	in = cgroup_is_descendant(task_dfl_cgroup(current), ancestor);
	rcu_read_unlock();
	return in;
}
#else
struct cgroup *oprofile_rs_cgroup_get_path(const char *path)
{
	return ERR_PTR(-EOPNOTSUPP);
}

struct cgroup *oprofile_rs_cgroup_get_id(u64 id)
{
	return ERR_PTR(-EOPNOTSUPP);
}

void oprofile_rs_cgroup_put(struct cgroup *cgrp)
{
}

u64 oprofile_rs_cgroup_id(struct cgroup *cgrp)
{
	return 0;
}

bool oprofile_rs_cgroup_is_root(struct cgroup *cgrp)
{
	return true;
}

int oprofile_rs_cgroup_path(struct cgroup *cgrp, char *buf, size_t len)
{
	return -EOPNOTSUPP;
}

bool oprofile_rs_current_in_cgroup(struct cgroup *ancestor)
{
	return true;
}
#endif

/* ---- the cgroup= parameter (src/oprofile.rs): a string, as event=. */

static char *cgroup = "";
module_param(cgroup, charp, 0444);
MODULE_PARM_DESC(cgroup, "Sample only the tasks of this cgroup (v2) and its descendants: its path "
			 "below the cgroup2 root (as in /proc/PID/cgroup) or its id; / (default): "
			 "every task");

const char *oprofile_rs_cgroup_param(void)
{
	return cgroup ? cgroup : "";
}

/* ---- the device's files (src/shims/poll_misc.rs): bindgen cannot evaluate
 * FMODE_READ (a __force cast), and the kernel crate's File has no f_mode. */

bool oprofile_rs_file_readable(const struct file *file)
{
	return file->f_mode & FMODE_READ;
}

/* ---- address spaces for the unwind tables (src/shims/mm.rs): mmgrab(),
 * mmdrop(), perfmon_capable(), the vma walk and `current->mm` are inline
 * or need the mm's lock and struct layout. */

/*
 * The address space of process pid (caller's pid namespace), counted with
 * mmgrab() (the struct stays, not the mappings), if it maps [start, end)
 * executable, as one mapping of the file with inode number ino (ino 0: of
 * no file, as the vDSO); else an
 * ERR_PTR: -EPERM (the caller may not read other users' processes'
 * memory, CAP_PERFMON), -ESRCH (no such process, or a kernel thread),
 * -ENOENT (no such mapping). Sleeps (the mm's lock).
 */
struct mm_struct *oprofile_rs_mm_get(u32 pid, u64 start, u64 end, u64 ino)
{
	struct task_struct *task;
	struct mm_struct *mm;
	struct vm_area_struct *vma;
	struct pid *p;
	bool found;

	if (!perfmon_capable())
		return ERR_PTR(-EPERM);
	if (pid == 0 || pid > PID_MAX_LIMIT || start >= end || end > TASK_SIZE_MAX)
		return ERR_PTR(-ESRCH);
	p = find_get_pid(pid);
	task = p ? get_pid_task(p, PIDTYPE_TGID) : NULL;
	put_pid(p);
	if (!task)
		return ERR_PTR(-ESRCH);
	mm = get_task_mm(task);
	put_task_struct(task);
	if (!mm)
		return ERR_PTR(-ESRCH);
	if (mmap_read_lock_killable(mm)) {
		mmput(mm);
		return ERR_PTR(-EINTR);
	}
	vma = vma_lookup(mm, start);
	found = vma && vma->vm_start == start && vma->vm_end == end && (vma->vm_flags & VM_EXEC) &&
		(ino ? vma->vm_file && file_inode(vma->vm_file)->i_ino == ino : !vma->vm_file);
	mmap_read_unlock(mm);
	if (found)
		mmgrab(mm);
	mmput(mm);
	return found ? mm : ERR_PTR(-ENOENT);
}

void oprofile_rs_mm_drop(struct mm_struct *mm)
{
	mmdrop(mm);
}

/* Whether the address space still has users (its process has not exited). */
bool oprofile_rs_mm_alive(struct mm_struct *mm)
{
	return atomic_read(&mm->mm_users) > 0;
}

/* The current task's address space, counted (mmgrab); NULL for a kernel thread. */
struct mm_struct *oprofile_rs_current_mm_get(void)
{
	struct mm_struct *mm = current->mm;

	if (mm)
		mmgrab(mm);
	return mm;
}

/* The current task's address space (NULL for a kernel thread): any context. */
struct mm_struct *oprofile_rs_current_mm(void)
{
	return current->mm;
}
