// SPDX-License-Identifier: GPL-2.0

//! Recording switches.
//!
//! A record is accepted only if all three switches are on: the global
//! [`RecordSwitch`] (the kernel binds it to `tracing_on`), the per-buffer-set
//! [`RecordSwitch`] and the per-CPU switch inside the
//! [`CpuBuffer`](super::CpuBuffer).
//!
//! Ordering argument: turning a switch off is a `SeqCst` store (an `xchg` on
//! x86, which also drains the store buffer before returning). `reserve` starts
//! with a `SeqCst` read-modify-write of its nesting counter and then loads the
//! switches with `SeqCst`. A reserve that starts after the switch call
//! returned is later in the single total order of `SeqCst` operations and
//! therefore reads "off". For the per-CPU switch, the same Dekker-style pair
//! (switch store, then nesting-counter load, against nesting-counter RMW, then
//! switch load) guarantees that after turning it off, either a writer sees
//! "off" or [`CpuBuffer::writers_active`](super::CpuBuffer::writers_active)
//! sees it in flight.

use super::atomics::{AtomicBool, Ordering};

/// A recording on/off switch that can be shared by many CPU buffers.
pub struct RecordSwitch {
    on: AtomicBool,
}

impl RecordSwitch {
    /// Creates a switch.
    #[cfg(not(loom))]
    pub const fn new(on: bool) -> Self {
        RecordSwitch {
            on: AtomicBool::new(on),
        }
    }

    /// Creates a switch.
    #[cfg(loom)]
    pub fn new(on: bool) -> Self {
        RecordSwitch {
            on: AtomicBool::new(on),
        }
    }

    /// Turns recording on or off. Returns the previous state.
    ///
    /// Off takes effect for every `reserve` that starts after this returns.
    pub fn set(&self, on: bool) -> bool {
        self.on.swap(on, Ordering::SeqCst)
    }

    /// Whether recording is on.
    #[inline(always)]
    pub fn is_on(&self) -> bool {
        self.on.load(Ordering::SeqCst)
    }
}

/// The shared switches a [`CpuBuffer`](super::CpuBuffer) obeys.
#[derive(Clone, Copy)]
pub struct Switches<'s> {
    /// Global switch (all buffer sets), e.g. `tracing_on`.
    pub global: &'s RecordSwitch,
    /// Switch of the buffer set this CPU buffer belongs to.
    pub set: &'s RecordSwitch,
}

impl Switches<'_> {
    /// Whether both shared switches are on.
    #[inline(always)]
    pub fn is_on(&self) -> bool {
        self.global.is_on() && self.set.is_on()
    }
}
