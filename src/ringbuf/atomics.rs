// SPDX-License-Identifier: GPL-2.0

//! Atomic primitives used by the ring buffer.
//!
//! Everything shared in the ring buffer goes through these re-exports so that
//! the very same source can be model-checked with `loom` (`--cfg loom`) on the
//! host and compiled against `core` in the kernel.

#[cfg(not(loom))]
#[allow(unused_imports)]
pub use core::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};

#[cfg(loom)]
#[allow(unused_imports)]
pub use loom::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};

/// Adds `n` to a counter that only one context can update at a time.
///
/// Used for the per-nesting-level statistics: on one CPU, only one writer
/// runs at a given nesting level at any time (interrupts nest strictly LIFO),
/// so a plain load/store pair cannot lose an update and is much cheaper than a
/// locked read-modify-write. Readers on other CPUs see a value that is atomic
/// but possibly slightly stale.
#[inline(always)]
pub(crate) fn bump(counter: &AtomicU64, n: u64) {
    counter.store(counter.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
}
