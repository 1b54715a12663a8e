// SPDX-License-Identifier: GPL-2.0

//! Clocks: the stream's time stamps, a monotonic clock for the test suites'
//! waits, and the "newest time" a counter keeps.

use kernel::sync::atomic::{Atomic, Relaxed};

/// The clock of the stream (`local_clock()`, ns).
pub(crate) fn now() -> u64 {
    // SAFETY: plain call; local_clock() is safe in any context.
    unsafe { crate::shims::glue::oprofile_rs_clock() }
}

/// The clocksource's monotonic time in ns: NMI safe, consistent across
/// CPUs, and it advances while interrupts are off, where `local_clock()` may
/// not (an unstable sched clock, as on the lockdep kernel under QEMU, moves at
/// most a tick past this CPU's last tick). For waits and durations in tests
/// (KUnit); the stream's time stamps are [`now`].
#[cfg(oprofile_rs_kunit)]
pub(crate) fn mono_ns() -> u64 {
    // SAFETY: plain call; ktime_get_mono_fast_ns() is safe in any context.
    unsafe { kernel::bindings::ktime_get_mono_fast_ns() }
}

/// Raises `a` to `v` if it is below (`fetch_max`, which the kernel's atomics
/// do not have).
pub(crate) fn store_max(a: &Atomic<u64>, v: u64) {
    let mut old = a.load(Relaxed);
    while old < v {
        match a.cmpxchg(old, v, Relaxed) {
            Ok(_) => return,
            Err(cur) => old = cur,
        }
    }
}
