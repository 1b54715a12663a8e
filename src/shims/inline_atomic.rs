// SPDX-License-Identifier: GPL-2.0

//! The sample path's accesses to the kernel's `Atomic<T>` (`u64`, `u32`,
//! `bool`) without a call: relaxed loads and stores (`READ_ONCE()`,
//! `WRITE_ONCE()`), acquire loads and release stores, an acquire exchange
//! and adds.
//!
//! Without `CONFIG_RUST_INLINE_HELPERS` (every GCC-built kernel: Debian's,
//! the test kernels) each `kernel::sync::atomic` operation is a call into a
//! C helper (`rust_helper_atomic64_read`, ...): about 20 per sample on the
//! overflow handler's path (its settings, the task it last named, its
//! counters). On x86-64 these functions are the ring buffer core's
//! single-instruction accesses (`ringbuf/atomics.rs`, `lkmm::x86`, whose
//! mapping `Documentation/ring-buffer.md` argues and the KUnit suite
//! `oprofile_rs_ringbuf_atomics` checks against the kernel's atomics);
//! elsewhere, and with `make OPROFILE_RS_KERNEL_ATOMICS=1`, the kernel's
//! atomics. The locations stay `Atomic<T>`s, read and written with the
//! kernel's methods everywhere else.

use kernel::sync::atomic::{Atomic, AtomicType};

#[cfg(all(target_arch = "x86_64", not(ringbuf_kernel_atomics)))]
use crate::ringbuf::atomics::x86;
#[cfg(not(all(target_arch = "x86_64", not(ringbuf_kernel_atomics))))]
use kernel::sync::atomic::{Acquire, Relaxed, Release};

/// The value types accessed here.
pub(crate) trait Plain: AtomicType {
    /// `READ_ONCE()`.
    fn load(a: &Atomic<Self>) -> Self;
    /// `smp_load_acquire()`.
    fn load_acquire(a: &Atomic<Self>) -> Self;
    /// `WRITE_ONCE()`.
    fn store(a: &Atomic<Self>, v: Self);
    /// `smp_store_release()`.
    fn store_release(a: &Atomic<Self>, v: Self);
    /// `xchg_acquire()` (on x86-64 `xchg`: fully ordered).
    fn swap_acquire(a: &Atomic<Self>, v: Self) -> Self;
}

/// `$x86` with the ring core's x86-64 instructions, `$kernel` (the kernel's
/// atomics) elsewhere and with `ringbuf_kernel_atomics`.
macro_rules! either {
    ($x86:expr, $kernel:expr) => {{
        #[cfg(all(target_arch = "x86_64", not(ringbuf_kernel_atomics)))]
        let r = $x86;
        #[cfg(not(all(target_arch = "x86_64", not(ringbuf_kernel_atomics))))]
        let r = $kernel;
        r
    }};
}

macro_rules! plain {
    ($($t:ty),*) => {$(
        impl Plain for $t {
            #[inline(always)]
            fn load(a: &Atomic<Self>) -> Self {
                either!(x86::load_once(a), a.load(Relaxed))
            }

            #[inline(always)]
            fn load_acquire(a: &Atomic<Self>) -> Self {
                either!(x86::load_acquire(a), a.load(Acquire))
            }

            #[inline(always)]
            fn store(a: &Atomic<Self>, v: Self) {
                either!(x86::store_once(a, v), a.store(v, Relaxed))
            }

            #[inline(always)]
            fn store_release(a: &Atomic<Self>, v: Self) {
                either!(x86::store_release(a, v), a.store(v, Release))
            }

            #[inline(always)]
            fn swap_acquire(a: &Atomic<Self>, v: Self) -> Self {
                either!(x86::xchg(a, v), a.xchg(v, Acquire))
            }
        }
    )*};
}

plain!(u64, u32, bool);

/// `a.load(Relaxed)`, without a call.
#[inline(always)]
pub(crate) fn load<T: Plain>(a: &Atomic<T>) -> T {
    T::load(a)
}

/// `a.load(Acquire)`, without a call.
#[inline(always)]
pub(crate) fn load_acquire<T: Plain>(a: &Atomic<T>) -> T {
    T::load_acquire(a)
}

/// `a.store(v, Relaxed)`, without a call.
#[inline(always)]
pub(crate) fn store<T: Plain>(a: &Atomic<T>, v: T) {
    T::store(a, v)
}

/// `a.store(v, Release)`, without a call.
#[inline(always)]
pub(crate) fn store_release<T: Plain>(a: &Atomic<T>, v: T) {
    T::store_release(a, v)
}

/// `a.xchg(v, Acquire)`, without a call: the value before.
#[inline(always)]
pub(crate) fn swap_acquire<T: Plain>(a: &Atomic<T>, v: T) -> T {
    T::swap_acquire(a, v)
}

/// `a.fetch_add(v, Relaxed)` (wrapping), without a call (on x86-64 a
/// `lock xadd`: fully ordered, more than asked): the value before.
#[inline(always)]
pub(crate) fn fetch_add(a: &Atomic<u64>, v: u64) -> u64 {
    either!(x86::fetch_add(a, v), a.fetch_add(v, Relaxed))
}

/// `a.add(v, Relaxed)` (wrapping), without a call.
#[inline(always)]
pub(crate) fn add(a: &Atomic<u64>, v: u64) {
    fetch_add(a, v);
}
