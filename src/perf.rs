// SPDX-License-Identifier: GPL-2.0

//! A small safe wrapper around in-kernel perf counters, which the kernel
//! crate does not offer: one sampling counter bound to one CPU, calling
//! [`OverflowHandler::overflow`] on every overflow (NMI context for hardware
//! PMU events, hard-IRQ context for the software cpu-clock event).

use core::ffi::c_void;
use kernel::prelude::*;

mod ffi {
    use core::ffi::c_void;
    extern "C" {
        pub(super) fn oprofile_rs_perf_create(
            cpu: i32,
            type_: u32,
            config: u64,
            period: u64,
            exclude_user: bool,
            exclude_kernel: bool,
            context: *mut c_void,
        ) -> *mut c_void;
        pub(super) fn oprofile_rs_perf_release(event: *mut c_void);
        pub(super) fn oprofile_rs_ptr_err(ptr: *const c_void) -> i64;
    }
}

// Stable UAPI values from include/uapi/linux/perf_event.h (not in the
// kernel crate's bindings).
const PERF_TYPE_HARDWARE: u32 = 0;
const PERF_TYPE_SOFTWARE: u32 = 1;
const PERF_COUNT_HW_CPU_CYCLES: u64 = 0;
const PERF_COUNT_SW_CPU_CLOCK: u64 = 0;

/// What to count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Event {
    /// Hardware CPU cycles (PMU; overflows arrive as NMIs).
    Cycles,
    /// The software cpu-clock event (hrtimer; hard-IRQ context), period in ns.
    CpuClock,
}

impl Event {
    /// (perf type, config) of the event.
    fn raw(self) -> (u32, u64) {
        match self {
            Event::Cycles => (PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES),
            Event::CpuClock => (PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK),
        }
    }

    /// The name used in the stream header and debugfs.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Event::Cycles => "cycles",
            Event::CpuClock => "cpu-clock",
        }
    }
}

/// Receives the overflows of a [`Counter`].
pub(crate) trait OverflowHandler: Sync {
    /// Called in NMI or hard-IRQ context on the counter's CPU: must not sleep,
    /// allocate or take a lock that other contexts can hold.
    fn overflow(&self, pc: u64, kernel_mode: bool);
}

/// A sampling perf counter on one CPU; released when dropped.
///
/// # Invariants
///
/// `event` is a live counter created by `perf_event_create_kernel_counter`
/// whose overflow context points to the `H` this counter was created with.
pub(crate) struct Counter {
    event: *mut c_void,
}

// SAFETY: the perf event may be released from any thread.
unsafe impl Send for Counter {}
// SAFETY: `Counter` has no `&self` methods that touch the event.
unsafe impl Sync for Counter {}

/// Called by the C overflow handler in `glue.c`.
///
/// # Safety
///
/// `context` is the `&H` given to [`Counter::new`] with `H`'s type erased
/// through [`trampoline`]: see there.
#[unsafe(no_mangle)]
unsafe extern "C" fn oprofile_rs_perf_overflow(context: *mut c_void, pc: u64, kernel_mode: bool) {
    // SAFETY: `Counter::new` stores a pointer to a `Trampoline`, valid until
    // the counter is released (the caller of `new` guarantees it).
    let t = unsafe { &*context.cast::<Trampoline>() };
    (t.call)(t.handler, pc, kernel_mode);
}

/// Type-erased handler: a data pointer and the monomorphised function for it.
pub(crate) struct Trampoline {
    handler: *const c_void,
    call: fn(*const c_void, u64, bool),
}

// SAFETY: the handler is `Sync` (required by `Trampoline::new`).
unsafe impl Sync for Trampoline {}
// SAFETY: as above; the pointer is only dereferenced as `&H`.
unsafe impl Send for Trampoline {}

impl Trampoline {
    /// A trampoline calling `handler.overflow`.
    pub(crate) fn new<H: OverflowHandler>(handler: &H) -> Self {
        fn call<H: OverflowHandler>(h: *const c_void, pc: u64, kernel_mode: bool) {
            // SAFETY: `h` was made from a `&H` in `Trampoline::new`, and the
            // owner keeps `H` alive while any counter using it exists.
            let h = unsafe { &*h.cast::<H>() };
            h.overflow(pc, kernel_mode);
        }
        Trampoline {
            handler: core::ptr::from_ref(handler).cast(),
            call: call::<H>,
        }
    }
}

impl Counter {
    /// Creates a sampling counter for `event` on `cpu`.
    ///
    /// # Safety
    ///
    /// `trampoline` and the handler it was made from must stay valid (not
    /// moved, not dropped) until the returned counter is dropped.
    pub(crate) unsafe fn new(
        cpu: u32,
        event: Event,
        period: u64,
        exclude_user: bool,
        exclude_kernel: bool,
        trampoline: &Trampoline,
    ) -> Result<Self> {
        let (type_, config) = event.raw();
        let cpu = i32::try_from(cpu).map_err(|_| EINVAL)?;
        // SAFETY: plain FFI call; the context pointer is valid as long as the
        // counter (guaranteed by the caller).
        let ev = unsafe {
            ffi::oprofile_rs_perf_create(
                cpu,
                type_,
                config,
                period,
                exclude_user,
                exclude_kernel,
                core::ptr::from_ref(trampoline).cast_mut().cast(),
            )
        };
        // SAFETY: `ev` is a pointer or an ERR_PTR; IS_ERR only looks at its value.
        let err = unsafe { ffi::oprofile_rs_ptr_err(ev) };
        if err != 0 {
            return Err(Error::from_errno(i32::try_from(err).unwrap_or(-22)));
        }
        // INVARIANT: `ev` is a live counter using `trampoline`.
        Ok(Counter { event: ev })
    }
}

impl Drop for Counter {
    fn drop(&mut self) {
        // SAFETY: by the invariant `event` is live; after this no overflow
        // handler runs for it (perf_event_release_kernel waits for them).
        unsafe { ffi::oprofile_rs_perf_release(self.event) };
    }
}
