// SPDX-License-Identifier: GPL-2.0

//! One work item calling a handler in process context, queued from any
//! context (a CPU hotplug callback among them) and flushed by its owner,
//! which the kernel crate does not offer in this form: its `Work` is queued
//! through an `Arc` or a `KBox` of the item, which a callback holding only
//! `&self` does not have, and it cannot be flushed.
//!
//! The profiler uses it for what must not run under the CPU hotplug lock
//! (see `profiler.rs`): making and releasing the counters of perf's software
//! events other than the clocks.

use core::marker::PhantomPinned;
use kernel::{bindings, c_str, prelude::*, static_lock_class, types::Opaque};

/// What the work does.
pub(crate) trait WorkHandler: Sync {
    /// Called in process context on a worker of the unbound system
    /// workqueue, never concurrently with itself.
    fn run(&self);
}

/// A work item calling a `H`.
///
/// # Invariants
///
/// `work` is an initialised `struct work_struct` whose function is
/// [`run_work::<H>`]; `handler` is valid while the work can run (see
/// [`WorkItem::new`]).
#[pin_data(PinnedDrop)]
pub(crate) struct WorkItem<H: WorkHandler> {
    #[pin]
    work: Opaque<bindings::work_struct>,
    handler: *const H,
    #[pin]
    _pin: PhantomPinned,
}

// SAFETY: the work is only touched through the workqueue API, which any
// thread may call; `H` is `Sync` and only shared.
unsafe impl<H: WorkHandler> Send for WorkItem<H> {}
// SAFETY: as above.
unsafe impl<H: WorkHandler> Sync for WorkItem<H> {}

impl<H: WorkHandler> WorkItem<H> {
    /// A work item calling `handler`, not queued.
    ///
    /// # Safety
    ///
    /// `handler` must stay valid (not moved, not dropped) until the returned
    /// item is dropped.
    pub(crate) unsafe fn new(handler: *const H) -> impl PinInit<Self> {
        pin_init!(Self {
            work <- Opaque::ffi_init(|slot: *mut bindings::work_struct| {
                // What INIT_WORK (a macro) does, as the kernel crate's
                // `Work::new` does it.
                // SAFETY: `slot` is valid for writes; `run_work::<H>` takes
                // the `work_struct` of a `WorkItem<H>` (see there).
                unsafe {
                    bindings::init_work_with_key(
                        slot,
                        Some(run_work::<H>),
                        false,
                        c_str!("oprofile_rs_work").as_char_ptr(),
                        static_lock_class!().as_ptr(),
                    )
                };
            }),
            // INVARIANT: the caller keeps `handler` alive as long as the item.
            handler,
            _pin: PhantomPinned,
        })
    }

    /// Queues the work (a no-op if it is queued and has not started; if it
    /// is running, it runs once more after). Any context but NMI.
    pub(crate) fn queue(&self) {
        // SAFETY: `work` is initialised and pinned (invariant). `queue_work`
        // (an inline function) is this call with `WORK_CPU_UNBOUND`.
        unsafe {
            bindings::queue_work_on(
                bindings::wq_misc_consts_WORK_CPU_UNBOUND as i32,
                bindings::system_dfl_wq,
                self.work.get(),
            )
        };
    }

    /// Waits until the work, if queued or running, has run to its end.
    /// Process context (it sleeps); the caller must hold nothing the
    /// handler takes.
    pub(crate) fn flush(&self) {
        // SAFETY: `work` is initialised and pinned (invariant).
        unsafe { bindings::flush_work(self.work.get()) };
    }
}

#[pinned_drop]
impl<H: WorkHandler> PinnedDrop for WorkItem<H> {
    fn drop(self: Pin<&mut Self>) {
        // After this the work neither runs nor is queued: its memory and the
        // handler may go.
        // SAFETY: `work` is initialised and pinned (invariant).
        unsafe { bindings::cancel_work_sync(self.work.get()) };
    }
}

/// The workqueue's callback of every [`WorkItem<H>`].
///
/// # Safety
///
/// `work` is the `work_struct` of a live `WorkItem<H>`.
unsafe extern "C" fn run_work<H: WorkHandler>(work: *mut bindings::work_struct) {
    // CAST: `Opaque<T>` is `repr(transparent)` over `T`.
    let work = work.cast::<Opaque<bindings::work_struct>>();
    // SAFETY: that `work_struct` is the `work` field of a live `WorkItem<H>`.
    let item = unsafe { &*kernel::container_of!(work, WorkItem<H>, work) };
    // SAFETY: the handler outlives every run of the work (invariant).
    unsafe { &*item.handler }.run();
}
