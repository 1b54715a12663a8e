// SPDX-License-Identifier: GPL-2.0

//! A self-rearming delayed work per possible CPU, which the kernel crate
//! does not offer (its `DelayedWork` is queued on no particular CPU, cannot
//! be cancelled, and hands its item's ownership to the queue).
//!
//! [`CpuWorks::start`] arms CPU `cpu`'s work on that CPU: it calls
//! [`CpuWorkHandler::run`] every `interval` jiffies until
//! [`CpuWorks::stop`], after which it is not running and does not run
//! again. Dropping the works stops them all.
//!
//! [`Kick::kick`] runs a CPU's work now instead of at the end of its
//! interval, from any context, NMI included, on that CPU: an `irq_work`
//! (which the kernel crate has no wrapper for) raised there, whose
//! callback, in hard-IRQ context, moves the work's timer to now
//! (`mod_delayed_work_on`); the work's next run takes the request back.
//! Kicks between two runs make one.

use core::marker::PhantomPinned;
use kernel::{
    bindings, c_str,
    cpu::nr_cpu_ids,
    ffi::c_ulong,
    prelude::*,
    static_lock_class,
    sync::atomic::{Atomic, Relaxed},
    types::Opaque,
};

/// What a CPU's work does.
pub(crate) trait CpuWorkHandler: Sync {
    /// Called in process context on CPU `cpu` (unless it went offline
    /// meanwhile: the workqueue then runs it elsewhere), never concurrently
    /// for one CPU.
    fn run(&self, cpu: u32);
}

/// One CPU's work.
///
/// # Invariants
///
/// `dwork` is an initialised `struct delayed_work` whose function is
/// [`run_work::<H>`]; `handler` is valid while the work can run (see
/// [`CpuWorks::new`]).
#[pin_data]
struct Slot<H> {
    #[pin]
    dwork: Opaque<bindings::delayed_work>,
    handler: *const H,
    interval: c_ulong,
    cpu: u32,
    /// Set by [`CpuWorks::stop`]: the work does not re-arm itself.
    stopping: Atomic<bool>,
    #[pin]
    kick: Kick,
    #[pin]
    _pin: PhantomPinned,
}

/// A request to run a CPU's work now ([`Kick::kick`]).
///
/// # Invariants
///
/// `irq_work` is initialised with [`kick_work::<H>`] as its function, and
/// is the `kick` field of a live, pinned `Slot<H>`.
#[pin_data]
pub(crate) struct Kick {
    #[pin]
    irq_work: Opaque<bindings::irq_work>,
    /// A kick is pending: raised, its work not run yet.
    kicked: Atomic<bool>,
}

// SAFETY: the irq_work is only touched through its API, which any context
// may call; `kicked` is atomic.
unsafe impl Send for Kick {}
// SAFETY: as above.
unsafe impl Sync for Kick {}

impl Kick {
    fn new<H: CpuWorkHandler>() -> impl PinInit<Self> {
        pin_init!(Self {
            irq_work <- Opaque::ffi_init(|w: *mut bindings::irq_work| {
                // What init_irq_work (inline) does: IRQ_WORK_INIT(func),
                // every other field zero (no flags, no waiter).
                // SAFETY: `w` is valid for writes of one `irq_work`.
                unsafe {
                    core::ptr::write_bytes(w, 0, 1);
                    (*w).func = Some(kick_work::<H>);
                }
            }),
            kicked: Atomic::new(false),
        })
    }

    /// Runs the CPU's work as soon as it can (at most one request pending).
    /// Any context, NMI included, on the work's CPU: the hard-IRQ callback
    /// runs on the CPU that raised it.
    pub(crate) fn kick(&self) {
        if self.kicked.load(Relaxed) || self.kicked.xchg(true, Relaxed) {
            return;
        }
        // SAFETY: `irq_work` is initialised and pinned (invariant);
        // irq_work_queue() may be called from any context, and a work
        // already queued is left as it is.
        unsafe { bindings::irq_work_queue(self.irq_work.get()) };
    }
}

/// The `irq_work` callback of every [`Kick`] of a [`Slot<H>`]: hard-IRQ
/// context, on the CPU that raised it.
///
/// # Safety
///
/// `w` is the `irq_work` of the `kick` of a live `Slot<H>`.
unsafe extern "C" fn kick_work<H: CpuWorkHandler>(w: *mut bindings::irq_work) {
    // CAST: `Opaque<T>` is `repr(transparent)` over `T`.
    let w = w.cast::<Opaque<bindings::irq_work>>();
    // SAFETY: `w` is the `irq_work` field of a `Kick` (see above).
    let kick = unsafe { kernel::container_of!(w, Kick, irq_work) };
    // SAFETY: that `Kick` is the `kick` field of a live `Slot<H>`.
    let slot = unsafe { &*kernel::container_of!(kick, Slot<H>, kick) };
    // A stopped work stays stopped (`cancel` syncs with this callback
    // after it set `stopping`).
    if slot.stopping.load(Relaxed) {
        return;
    }
    // SAFETY: `dwork` is initialised and pinned (invariant of `Slot`); a
    // delayed work's timer may be modified from hard-IRQ context.
    unsafe {
        bindings::mod_delayed_work_on(
            slot.cpu as i32,
            bindings::system_percpu_wq,
            slot.dwork.get(),
            0,
        )
    };
}

impl<H: CpuWorkHandler> Slot<H> {
    fn new(handler: *const H, interval: c_ulong, cpu: u32) -> impl PinInit<Self> {
        pin_init!(Self {
            dwork <- Opaque::ffi_init(|slot: *mut bindings::delayed_work| {
                // What INIT_DELAYED_WORK (a macro) does, as the kernel
                // crate's `DelayedWork::new` does it.
                // SAFETY: `slot` is valid for writes; `run_work::<H>` takes
                // the `work_struct` of a `Slot<H>` (see there).
                unsafe {
                    bindings::init_work_with_key(
                        &raw mut (*slot).work,
                        Some(run_work::<H>),
                        false,
                        c_str!("oprofile_rs_sync").as_char_ptr(),
                        static_lock_class!().as_ptr(),
                    )
                };
                // SAFETY: the timer is embedded in a `delayed_work` and only
                // armed by the workqueue code, which wants it irqsafe.
                unsafe {
                    bindings::timer_init_key(
                        &raw mut (*slot).timer,
                        Some(bindings::delayed_work_timer_fn),
                        bindings::TIMER_IRQSAFE,
                        c_str!("oprofile_rs_sync.timer").as_char_ptr(),
                        static_lock_class!().as_ptr(),
                    )
                };
            }),
            handler,
            interval,
            cpu,
            stopping: Atomic::new(true),
            kick <- Kick::new::<H>(),
            _pin: PhantomPinned,
        })
    }

    /// Queues the work on its CPU after `delay` jiffies.
    fn queue(&self, delay: c_ulong) {
        // SAFETY: `dwork` is initialised and pinned (invariant); the work
        // may be queued from any context, and queueing a queued work is a
        // no-op. `system_percpu_wq` is what `schedule_delayed_work_on` (an
        // inline function) uses.
        unsafe {
            bindings::queue_delayed_work_on(
                self.cpu as i32,
                bindings::system_percpu_wq,
                self.dwork.get(),
                delay,
            )
        };
    }
}

impl<H> Slot<H> {
    /// Stops the work: it does not re-arm itself, is not running when this
    /// returns and is not queued. Process context (it sleeps).
    fn cancel(&self) {
        self.stopping.store(true, Relaxed);
        // A kick's callback running or pending sees `stopping` or has
        // queued the work: then cancelled below.
        // SAFETY: the irq_work is initialised and pinned (invariant of
        // `Kick`); this sleeps, in process context.
        unsafe { bindings::irq_work_sync(self.kick.irq_work.get()) };
        // SAFETY: `dwork` is initialised and pinned (invariant).
        // `cancel_delayed_work_sync` also waits for a run that re-armed the
        // work before it saw `stopping`, and cancels that.
        unsafe { bindings::cancel_delayed_work_sync(self.dwork.get()) };
    }
}

/// The workqueue's callback of every [`Slot<H>`].
///
/// # Safety
///
/// `work` is the `work_struct` of the `delayed_work` of a live `Slot<H>`.
unsafe extern "C" fn run_work<H: CpuWorkHandler>(work: *mut bindings::work_struct) {
    // SAFETY: `work` is the `work` field of a `delayed_work` (see above).
    let dwork = unsafe { kernel::container_of!(work, bindings::delayed_work, work) };
    // CAST: `Opaque<T>` is `repr(transparent)` over `T`.
    let dwork = dwork.cast::<Opaque<bindings::delayed_work>>();
    // SAFETY: that `delayed_work` is the `dwork` field of a live `Slot<H>`.
    let slot = unsafe { &*kernel::container_of!(dwork, Slot<H>, dwork) };
    // SAFETY: the handler outlives every run of the work (invariant).
    let handler = unsafe { &*slot.handler };
    // Kicks from now on ask for another run.
    slot.kick.kicked.store(false, Relaxed);
    handler.run(slot.cpu);
    if !slot.stopping.load(Relaxed) {
        slot.queue(slot.interval);
    }
}

/// A delayed work per possible CPU; every one is stopped when dropped.
pub(crate) struct CpuWorks<H> {
    slots: KVVec<Pin<KBox<Slot<H>>>>,
}

// SAFETY: the slots are only touched through the workqueue API, which any
// thread may call, and atomics; `H` is `Sync` and only shared.
unsafe impl<H: CpuWorkHandler> Send for CpuWorks<H> {}
// SAFETY: as above.
unsafe impl<H: CpuWorkHandler> Sync for CpuWorks<H> {}

impl<H: CpuWorkHandler> CpuWorks<H> {
    /// Stopped works calling `handler` every `interval` jiffies (at least 1)
    /// once started.
    ///
    /// # Safety
    ///
    /// `handler` must stay valid (not moved, not dropped) until the returned
    /// works are dropped.
    pub(crate) unsafe fn new(handler: &H, interval: c_ulong) -> Result<Self> {
        let n = nr_cpu_ids();
        let interval = interval.max(1);
        let mut slots = KVVec::with_capacity(n as usize, GFP_KERNEL)?;
        for cpu in 0..n {
            // INVARIANT: the caller keeps `handler` alive as long as the works.
            slots.push(
                KBox::pin_init(Slot::new(handler, interval, cpu), GFP_KERNEL)?,
                GFP_KERNEL,
            )?;
        }
        Ok(Self { slots })
    }

    /// Starts CPU `cpu`'s work (a no-op for no such CPU), staggered by a
    /// jiffy per CPU like oprofile's (modulo the interval: the first run of
    /// a high CPU number is not late).
    pub(crate) fn start(&self, cpu: u32) {
        if let Some(s) = self.slots.get(cpu as usize) {
            s.kick.kicked.store(false, Relaxed);
            s.stopping.store(false, Relaxed);
            s.queue(s.interval + cpu as c_ulong % s.interval);
        }
    }

    /// CPU `cpu`'s [`Kick`] (`None` for no such CPU); valid as long as the
    /// works.
    pub(crate) fn kick(&self, cpu: u32) -> Option<&Kick> {
        self.slots.get(cpu as usize).map(|s| &s.kick)
    }

    /// Stops CPU `cpu`'s work: it is not running when this returns and does
    /// not run again until started. Process context (it sleeps).
    pub(crate) fn stop(&self, cpu: u32) {
        if let Some(s) = self.slots.get(cpu as usize) {
            s.cancel();
        }
    }
}

impl<H> Drop for CpuWorks<H> {
    fn drop(&mut self) {
        // After this no slot's work runs: their memory may go.
        for s in self.slots.iter() {
            s.cancel();
        }
    }
}
