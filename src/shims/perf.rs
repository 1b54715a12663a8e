// SPDX-License-Identifier: GPL-2.0

//! A small safe wrapper around in-kernel perf counters, which the kernel
//! crate does not offer: one sampling counter bound to one CPU, calling
//! [`OverflowHandler::overflow`] on every overflow: NMI context for hardware
//! PMU events, hard-IRQ context for the clocks (hrtimers), and task context
//! (preemption off, under `rcu_read_lock()`, interrupts as the event site has
//! them) for the other software events, which perf counts where they happen
//! (`perf_sw_event()`: the page-fault handler, the scheduler).

use kernel::{
    bindings,
    error::from_err_ptr,
    ffi::{c_ulong, c_void},
    prelude::*,
};

use crate::shims::{clock_jitter::ClockJitter, glue};

// Stable UAPI values from include/uapi/linux/perf_event.h (not in the
// kernel crate's bindings).
const PERF_TYPE_HARDWARE: u32 = 0;
const PERF_TYPE_SOFTWARE: u32 = 1;
const PERF_COUNT_SW_CPU_CLOCK: u64 = 0;
const PERF_COUNT_SW_TASK_CLOCK: u64 = 1;
const PERF_COUNT_SW_PAGE_FAULTS: u64 = 2;
const PERF_COUNT_SW_CONTEXT_SWITCHES: u64 = 3;
const PERF_COUNT_SW_CPU_MIGRATIONS: u64 = 4;

/// What to count. Listed in [`Event::ALL`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Event {
    /// Hardware CPU cycles (PMU; overflows arrive as NMIs).
    Cycles,
    /// Retired instructions (PMU).
    Instructions,
    /// Last-level cache accesses (PMU).
    CacheReferences,
    /// Last-level cache misses (PMU).
    CacheMisses,
    /// Retired branch instructions (PMU).
    BranchInstructions,
    /// Mispredicted branches (PMU).
    BranchMisses,
    /// The software cpu-clock event (hrtimer; hard-IRQ context), period in ns.
    CpuClock,
    /// The software task-clock event (hrtimer of the running task; hard-IRQ
    /// context), period in ns.
    TaskClock,
    /// Page faults (software; task context, in the fault handler).
    PageFaults,
    /// Context switches (software; task context, in the scheduler).
    ContextSwitches,
    /// Task migrations to another CPU (software; task context, in the
    /// scheduler, counted on the CPU that moves the task).
    CpuMigrations,
}

/// The context an event's overflows run in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Context {
    /// Hardware PMU overflow interrupt.
    Nmi,
    /// hrtimer interrupt (the clocks).
    HardIrq,
    /// The event site itself (preemption off, interrupts maybe on).
    Task,
}

impl Context {
    /// Its name in debugfs.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Context::Nmi => "nmi",
            Context::HardIrq => "hardirq",
            Context::Task => "task",
        }
    }
}

impl Event {
    /// Every event, in the order `event=` documents them.
    pub(crate) const ALL: [Event; 11] = [
        Event::Cycles,
        Event::Instructions,
        Event::CacheReferences,
        Event::CacheMisses,
        Event::BranchInstructions,
        Event::BranchMisses,
        Event::CpuClock,
        Event::TaskClock,
        Event::PageFaults,
        Event::ContextSwitches,
        Event::CpuMigrations,
    ];

    /// (perf type, config) of the event.
    pub(crate) fn raw(self) -> (u32, u64) {
        match self {
            // PERF_COUNT_HW_* are 0..5 in this order.
            Event::Cycles => (PERF_TYPE_HARDWARE, 0),
            Event::Instructions => (PERF_TYPE_HARDWARE, 1),
            Event::CacheReferences => (PERF_TYPE_HARDWARE, 2),
            Event::CacheMisses => (PERF_TYPE_HARDWARE, 3),
            Event::BranchInstructions => (PERF_TYPE_HARDWARE, 4),
            Event::BranchMisses => (PERF_TYPE_HARDWARE, 5),
            Event::CpuClock => (PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK),
            Event::TaskClock => (PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK),
            Event::PageFaults => (PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS),
            Event::ContextSwitches => (PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CONTEXT_SWITCHES),
            Event::CpuMigrations => (PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_MIGRATIONS),
        }
    }

    /// Whether the period counts ns (the clocks) rather than events.
    pub(crate) fn is_clock(self) -> bool {
        matches!(self, Event::CpuClock | Event::TaskClock)
    }

    /// The context its overflows run in.
    pub(crate) fn context(self) -> Context {
        if self.is_hardware() {
            Context::Nmi
        } else if self.is_clock() {
            Context::HardIrq
        } else {
            Context::Task
        }
    }

    /// Whether a counter of it must be made and released outside the CPU
    /// hotplug lock: perf's task-context software events, for which perf
    /// switches a static key (`perf_swevent_init`, `sw_perf_event_destroy`),
    /// which takes `cpus_read_lock()` where the kernel has jump labels
    /// (see `profiler.rs`).
    pub(crate) fn made_outside_hotplug(self) -> bool {
        matches!(self.context(), Context::Task)
    }

    /// Whether the event is counted by the PMU (overflows are NMIs).
    pub(crate) fn is_hardware(self) -> bool {
        self.raw().0 == PERF_TYPE_HARDWARE
    }

    /// The name used by `event=`, the stream header and debugfs (perf's names).
    pub(crate) fn name(self) -> &'static str {
        match self {
            Event::Cycles => "cycles",
            Event::Instructions => "instructions",
            Event::CacheReferences => "cache-references",
            Event::CacheMisses => "cache-misses",
            Event::BranchInstructions => "branch-instructions",
            Event::BranchMisses => "branch-misses",
            Event::CpuClock => "cpu-clock",
            Event::TaskClock => "task-clock",
            Event::PageFaults => "page-faults",
            Event::ContextSwitches => "context-switches",
            Event::CpuMigrations => "cpu-migrations",
        }
    }

    /// The event called `name`.
    pub(crate) fn from_name(name: &[u8]) -> Option<Event> {
        Self::ALL.into_iter().find(|e| e.name().as_bytes() == name)
    }
}

/// How a counter samples.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Attr {
    pub(crate) event: Event,
    /// A sample every `period` events (ns for the clocks); 0 in frequency mode.
    pub(crate) period: u64,
    /// Samples per second (perf adjusts the period); 0 in period mode.
    pub(crate) freq: u64,
    pub(crate) exclude_user: bool,
    pub(crate) exclude_kernel: bool,
}

/// The registers of an overflow (or an NMI): the interrupted context.
///
/// # Invariants
///
/// `regs` points to the live `struct pt_regs` of the interrupt being handled.
#[derive(Clone, Copy)]
pub(crate) struct Regs {
    regs: *mut bindings::pt_regs,
}

impl Regs {
    /// Wraps the registers an interrupt handler was given.
    ///
    /// # Safety
    ///
    /// `regs` is the valid `struct pt_regs` of the interrupt being handled,
    /// and the result is only used inside that handler.
    pub(crate) unsafe fn from_raw(regs: *mut bindings::pt_regs) -> Self {
        // INVARIANT: guaranteed by the caller.
        Regs { regs }
    }

    /// The interrupted instruction address.
    pub(crate) fn ip(&self) -> u64 {
        // SAFETY: valid registers (invariant).
        unsafe { glue::oprofile_rs_regs_ip(self.regs) as u64 }
    }

    /// Whether the interrupted context was user mode.
    pub(crate) fn user_mode(&self) -> bool {
        // SAFETY: valid registers (invariant).
        unsafe { glue::oprofile_rs_regs_user_mode(self.regs) }
    }

    /// The raw registers, for the user stack walk (`user_stack.rs`); valid
    /// during the interrupt being handled only (invariant).
    pub(crate) fn as_raw(&self) -> *mut bindings::pt_regs {
        self.regs
    }

    /// The kernel callchain of the interrupted context, innermost caller
    /// first, without the interrupted address itself, written into `out`.
    /// Returns how many entries were written and whether the unwinder failed
    /// before reaching the outermost frame or filling `out` (it then returns
    /// what it found). Empty for user mode.
    pub(crate) fn kernel_backtrace(&self, out: &mut [u64]) -> (usize, bool) {
        /// The walk's state, and what to keep of each frame.
        struct Walk<'a> {
            out: &'a mut [u64],
            n: usize,
            ip: u64,
        }
        /// # Safety
        ///
        /// `ctx` is the `Walk` of the `kernel_backtrace` call in progress.
        unsafe extern "C" fn frame(ctx: *mut c_void, addr: c_ulong) -> bool {
            // SAFETY: see the function's safety section; nothing else
            // references the walk during the call.
            let w = unsafe { &mut *ctx.cast::<Walk<'_>>() };
            let addr = addr as u64;
            // The walk of an interrupted frame starts at the interrupted
            // address itself (a walk from perf_fetch_caller_regs()'s stack
            // pointer may too: glue.c).
            if w.n == 0 && addr == w.ip {
                return true;
            }
            match w.out.get_mut(w.n) {
                Some(slot) => {
                    *slot = addr;
                    w.n += 1;
                    true
                }
                // backtrace_depth reached: not an abort.
                None => false,
            }
        }
        if out.is_empty() || self.user_mode() {
            return (0, false);
        }
        let mut walk = Walk {
            ip: self.ip(),
            out,
            n: 0,
        };
        // SAFETY: `regs` are the live registers of the interrupt being
        // handled (invariant), of kernel mode; `frame` gets `walk` only
        // during this call.
        let aborted = unsafe {
            glue::oprofile_rs_unwind_kernel(self.regs, frame, core::ptr::from_mut(&mut walk).cast())
        };
        (walk.n, aborted)
    }
}

/// What perf says about one overflow besides the registers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Overflow {
    /// The tag the counter's [`Trampoline`] was made with (the sampler's
    /// event index).
    pub(crate) tag: u16,
    /// The events this sample stands for (`perf_sample_data.period`; in
    /// frequency mode perf changes it from sample to sample).
    pub(crate) period: u64,
    /// perf throttled the counter after this overflow: it delivers none
    /// until its next tick (see glue.c).
    pub(crate) throttled: bool,
    /// An overflow of the context-switches event: the current task is
    /// leaving its CPU (`perf_event_task_sched_out()`, runqueue lock held).
    pub(crate) switch_out: bool,
}

/// Receives the overflows of a [`Counter`].
pub(crate) trait OverflowHandler: Sync {
    /// Called on the counter's CPU (for a counter bound to a task, the CPU
    /// the task runs on) with preemption off, in NMI, hard-IRQ or
    /// task context (see [`Context`]) with the interrupted registers (for
    /// task-context events, perf's registers of the event site): must not
    /// sleep, allocate or take a lock that other contexts can hold.
    fn overflow(&self, regs: &Regs, o: Overflow);
}

/// A sampling perf counter on one CPU; released when dropped.
///
/// # Invariants
///
/// `event` is a live counter created by `perf_event_create_kernel_counter`
/// whose overflow context points to the `H` this counter was created with.
pub(crate) struct Counter {
    event: *mut bindings::perf_event,
    /// What it counts.
    kind: Event,
}

// SAFETY: the perf event may be released from any thread.
unsafe impl Send for Counter {}
// SAFETY: its only `&self` method that touches the event,
// `Counter::set_enabled`, calls perf functions that serialise themselves
// (the event context's mutex).
unsafe impl Sync for Counter {}

/// Called by the C overflow handler in `glue.c` (declared in `glue.h`).
///
/// # Safety
///
/// `context` is the `&H` given to [`Counter::new`] with `H`'s type erased
/// through [`trampoline`]: see there.
#[unsafe(no_mangle)]
unsafe extern "C" fn oprofile_rs_perf_overflow(
    context: *mut c_void,
    regs: *mut bindings::pt_regs,
    period: u64,
    throttled: bool,
    switch_out: bool,
    clock_period: u64,
) -> u64 {
    // SAFETY: `Counter::new` stores a pointer to a `Trampoline`, valid until
    // the counter is released (the caller of `new` guarantees it).
    let t = unsafe { &*context.cast::<Trampoline>() };
    // SAFETY: the perf core passes the overflow's live registers, used only
    // during this call.
    let regs = unsafe { Regs::from_raw(regs) };
    (t.call)(
        t.handler,
        &regs,
        Overflow {
            tag: t.tag,
            period,
            throttled,
            switch_out,
        },
    );
    // A clock event's next interval (0 for the others: unchanged).
    if clock_period == 0 {
        0
    } else {
        t.jitter.next(clock_period)
    }
}

/// Type-erased handler: a data pointer, the monomorphised function for it
/// and the tag it is called with; the intervals of its counters when they
/// are clock events.
pub(crate) struct Trampoline {
    handler: *const c_void,
    call: fn(*const c_void, &Regs, Overflow),
    tag: u16,
    jitter: ClockJitter,
}

// SAFETY: the handler is `Sync` (required by `Trampoline::new`).
unsafe impl Sync for Trampoline {}
// SAFETY: as above; the pointer is only dereferenced as `&H`.
unsafe impl Send for Trampoline {}

impl Trampoline {
    /// A trampoline calling `handler.overflow` with `tag`.
    pub(crate) fn new<H: OverflowHandler>(handler: &H, tag: u16) -> Self {
        fn call<H: OverflowHandler>(h: *const c_void, regs: &Regs, o: Overflow) {
            // SAFETY: `h` was made from a `&H` in `Trampoline::new`, and the
            // owner keeps `H` alive while any counter using it exists.
            let h = unsafe { &*h.cast::<H>() };
            h.overflow(regs, o);
        }
        let handler: *const c_void = core::ptr::from_ref(handler).cast();
        Trampoline {
            handler,
            call: call::<H>,
            tag,
            // Seeded by the handler, the event and the time: counters of
            // different CPUs, events and loads draw apart.
            jitter: ClockJitter::new(
                (handler as usize as u64) ^ (u64::from(tag) << 48) ^ crate::shims::clock::now(),
            ),
        }
    }
}

/// Where a counter counts.
#[derive(Clone, Copy)]
pub(crate) enum Target<'a> {
    /// Every task on one CPU.
    Cpu(u32),
    /// One task, on whichever CPU it runs, and every task it creates from
    /// now on (perf's inherit): its overflows come on the CPU of the moment.
    Task(&'a crate::shims::task::TaskRef),
}

impl Counter {
    /// Creates a sampling counter as `attr` says on `target`, running if
    /// `enabled`, else stopped (see [`Counter::set_enabled`]).
    ///
    /// # Safety
    ///
    /// `trampoline` and the handler it was made from must stay valid (not
    /// moved, not dropped) until the returned counter is dropped.
    pub(crate) unsafe fn new(
        target: Target<'_>,
        attr: &Attr,
        trampoline: &Trampoline,
        enabled: bool,
    ) -> Result<Self> {
        let (type_, config) = attr.event.raw();
        let freq = attr.freq != 0;
        let (cpu, task) = match target {
            Target::Cpu(cpu) => (
                i32::try_from(cpu).map_err(|_| EINVAL)?,
                core::ptr::null_mut(),
            ),
            Target::Task(t) => (-1, t.as_ptr()),
        };
        // SAFETY: plain FFI call; the context pointer is valid as long as the
        // counter (guaranteed by the caller); `task`, if not null, is held
        // by the `TaskRef` for the call (perf takes its own reference).
        let ev = from_err_ptr(unsafe {
            glue::oprofile_rs_perf_create(
                cpu,
                task,
                type_,
                config,
                if freq { attr.freq } else { attr.period },
                freq,
                attr.exclude_user,
                attr.exclude_kernel,
                !enabled,
                core::ptr::from_ref(trampoline).cast_mut().cast(),
            )
        })?;
        // INVARIANT: `ev` is a live counter using `trampoline`.
        Ok(Counter {
            event: ev,
            kind: attr.event,
        })
    }

    /// Whether it must be released outside the CPU hotplug lock (see
    /// [`Event::made_outside_hotplug`]).
    pub(crate) fn made_outside_hotplug(&self) -> bool {
        self.kind.made_outside_hotplug()
    }

    /// Starts (`on`) or stops the counter: stopped, it neither counts nor
    /// interrupts its CPU. Process context (it may sleep, and waits for the
    /// counter's CPU to act on it).
    pub(crate) fn set_enabled(&self, on: bool) {
        // SAFETY: by the invariant `event` is live; perf's enable and
        // disable may be called at any time on a live counter, from any
        // thread.
        unsafe { glue::oprofile_rs_perf_enable(self.event, on) };
    }
}

impl Drop for Counter {
    fn drop(&mut self) {
        // SAFETY: by the invariant `event` is live; after this no overflow
        // handler runs for it (perf_event_release_kernel waits for them).
        unsafe { glue::oprofile_rs_perf_release(self.event) };
    }
}
