// SPDX-License-Identifier: GPL-2.0

//! Counters bound to one process (`pid=N`): a command profiled alone.
//!
//! With `pid=0` (the value at load) the profiler has one counter per
//! (online CPU, event) and samples every task. With `pid=N` it has none of
//! those: each thread of process N present at the change gets a counter per
//! event bound to it (`perf_event_create_kernel_counter()` with the task and
//! `cpu` -1, as `perf record -p`), which perf copies into every thread and
//! child process the task creates from then on (`attr.inherit`, as
//! `perf record -- CMD`). A counter bound to a task runs only while the task
//! runs: the clocks' hrtimers are started and stopped as perf switches it in
//! and out, so other tasks take no interrupt and no sample at all. The
//! overflows come on whichever CPU the task runs on, and [`Dispatch`] hands
//! each to that CPU's sampler: the per-CPU buffers, the sync and the stream
//! are the same in both cases.
//!
//! `tracing_on=0` does not stop these counters (it stops the per-CPU ones,
//! see `counter_table.rs`): perf's in-kernel `perf_event_disable()` stops a
//! counter but not the copies its tasks inherited, and a copy made while the
//! counter stands still is made stopped and stays so when the counter
//! starts again, so a stop would lose the samples of the tasks created while
//! off. They go on ticking while the profiled tasks run (no other task pays
//! anything), and the samplers refuse what they deliver while off (the
//! `sample_while_off` statistic counts it).
//!
//! A change binds to the threads of N at that time (a process that has
//! exited: `ESRCH`, nothing changed; more than `MAX_THREADS`
//! (`shims/task.rs`): `E2BIG`);
//! when N and every task it created have exited, nothing more is sampled
//! until `pid` changes.

use kernel::prelude::*;

use crate::{
    control::settings::Settings,
    path::sampler::CpuSampler,
    shims::{
        perf::{Counter, Overflow, OverflowHandler, Regs, Target, Trampoline},
        task::TaskRef,
    },
};

/// Hands each overflow of a task-bound counter to the sampler of the CPU it
/// comes on.
///
/// # Invariants
///
/// `cpus` points to the profiler's samplers, which outlive every counter
/// using this dispatcher.
pub(crate) struct Dispatch {
    cpus: *const [CpuSampler],
}

// SAFETY: the samplers are `Sync` (they are called from every context),
// and the pointer is only read.
unsafe impl Sync for Dispatch {}
// SAFETY: as above.
unsafe impl Send for Dispatch {}

impl OverflowHandler for Dispatch {
    fn overflow(&self, regs: &Regs, o: Overflow) {
        // Preemption is off in every overflow context: the CPU cannot
        // change until this returns (the sampler checks it again).
        let cpu = kernel::cpu::CpuId::current().as_u32() as usize;
        // SAFETY: the samplers outlive this dispatcher's counters
        // (invariant), and a counter only delivers while it lives.
        let cpus = unsafe { &*self.cpus };
        if let Some(s) = cpus.get(cpu) {
            s.overflow(regs, o);
        }
    }
}

/// The counters of `pid=N`: one per (thread of N at the change, event),
/// inherited by the tasks those create. Dropping it releases them (and the
/// copies perf made of them); no overflow runs after.
pub(crate) struct TaskCounters {
    /// Dropped first (field order): no overflow uses what follows after.
    counters: KVVec<Counter>,
    /// Each event's overflow context: [`Dispatch`], tagged with the event's
    /// index. Boxed: its heap address never changes.
    _trampolines: KVVec<Trampoline>,
    /// What the trampolines call; boxed for the same reason.
    _dispatch: KBox<Dispatch>,
}

impl TaskCounters {
    /// Binds the events of `settings` to each of `threads` (running), their
    /// overflows going to `cpus` by CPU. A thread that exits meanwhile is
    /// skipped (`ESRCH` from perf); `ESRCH` if every thread did. Any other
    /// error releases what was made and is returned.
    ///
    /// # Safety
    ///
    /// `cpus` must outlive the returned value.
    pub(crate) unsafe fn attach(
        threads: &[TaskRef],
        settings: &Settings,
        cpus: &[CpuSampler],
    ) -> Result<Self> {
        // INVARIANT: guaranteed by the caller.
        let dispatch = KBox::new(
            Dispatch {
                cpus: core::ptr::from_ref(cpus),
            },
            GFP_KERNEL,
        )?;
        let n_events = settings.events().len();
        let mut trampolines = KVVec::with_capacity(n_events, GFP_KERNEL)?;
        for i in 0..n_events {
            trampolines.push(Trampoline::new(&*dispatch, i as u16), GFP_KERNEL)?;
        }
        let mut counters = KVVec::with_capacity(
            threads.len().checked_mul(n_events).ok_or(E2BIG)?,
            GFP_KERNEL,
        )?;
        let mut bound = false;
        for t in threads {
            let mut made = KVVec::with_capacity(n_events, GFP_KERNEL)?;
            let mut gone = false;
            for (i, tr) in trampolines.iter().enumerate() {
                let attr = settings.attr(i).ok_or(EINVAL)?;
                // SAFETY: `tr` and the dispatcher it calls live in the
                // returned value, whose counters are dropped first; the
                // samplers outlive it (the caller's guarantee).
                match unsafe { Counter::new(Target::Task(t), &attr, tr, true) } {
                    Ok(c) => made.push(c, GFP_KERNEL)?,
                    // The thread exited since it was listed.
                    Err(e) if e == ESRCH => {
                        gone = true;
                        break;
                    }
                    Err(e) => return Err(e),
                }
            }
            if gone {
                // Its other counters go: a thread counts all events or none.
                drop(made);
                continue;
            }
            for c in made.drain_all() {
                counters.push(c, GFP_KERNEL)?;
            }
            bound = true;
        }
        if !bound {
            return Err(ESRCH);
        }
        Ok(TaskCounters {
            counters,
            _trampolines: trampolines,
            _dispatch: dispatch,
        })
    }

    /// How many counters it holds (threads times events).
    pub(crate) fn len(&self) -> usize {
        self.counters.len()
    }
}

impl Drop for TaskCounters {
    fn drop(&mut self) {
        // Explicitly first, whatever the field order becomes.
        self.counters.clear();
    }
}
