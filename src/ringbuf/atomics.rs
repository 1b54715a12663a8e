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
    counter.store(
        counter.load(Ordering::Relaxed).wrapping_add(n),
        Ordering::Relaxed,
    );
}

/// Orders a preceding `SeqCst` read-modify-write before a following `SeqCst`
/// load of another location, for the model checker only.
///
/// In the C++20/Rust memory model (and on x86 and arm64), `SeqCst` operations
/// already form one total order, so the Dekker-style pattern in `reserve`
/// (nesting counter RMW, then switch load) needs no fence. `loom` treats
/// `SeqCst` accesses as `AcqRel` (a documented limitation) but models
/// `fence(SeqCst)`, so under `--cfg loom` this is a real fence; otherwise it
/// compiles to nothing.
#[inline(always)]
pub(crate) fn seqcst_rmw_load_order() {
    #[cfg(loom)]
    fence(Ordering::SeqCst);
}
