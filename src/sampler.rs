// SPDX-License-Identifier: GPL-2.0

//! log_sample: the overflow handler's work, on the sampled CPU.
//!
//! Runs in NMI (hardware events) or hard-IRQ (cpu-clock) context: it only
//! reads the current task, reserves and commits records in this CPU's ring
//! buffer and bumps per-CPU atomic counters. No sleeping, no allocation, no
//! lock.

use core::sync::atomic::{AtomicU64, Ordering::Relaxed};
use kernel::prelude::*;

use crate::{
    perf::OverflowHandler,
    records,
    ringbuf::{CpuBuffer, Mode, ReserveError, Switches},
};

mod ffi {
    extern "C" {
        pub(super) fn oprofile_rs_clock() -> u64;
        pub(super) fn oprofile_rs_current_task(pid: *mut u32, tgid: *mut u32, comm: *mut u8);
    }
}

/// The clock of the stream (`local_clock()`, ns).
pub(crate) fn now() -> u64 {
    // SAFETY: plain call; local_clock() is safe in any context.
    unsafe { ffi::oprofile_rs_clock() }
}

/// Storage of a CPU ring buffer.
pub(crate) type Storage = KVVec<AtomicU64>;

/// Per-CPU counters, as in oprofile's cpu_buffer.c.
#[derive(Default)]
pub(crate) struct Counters {
    /// Samples delivered by the counter while recording was on.
    pub(crate) sample_received: AtomicU64,
    /// Samples lost because this CPU's buffer was full.
    pub(crate) sample_lost_overflow: AtomicU64,
    /// Samples with no usable PC.
    pub(crate) sample_invalid_eip: AtomicU64,
    /// Callchains cut short (none are recorded yet: always 0).
    pub(crate) backtrace_aborted: AtomicU64,
    /// Overflow handler cost: sum and maximum in ns.
    pub(crate) handler_ns_sum: AtomicU64,
    pub(crate) handler_ns_max: AtomicU64,
}

/// One CPU's sampling state.
pub(crate) struct CpuSampler {
    pub(crate) cpu: u32,
    pub(crate) buffer: CpuBuffer<'static, Storage>,
    /// pid of the task the last COMM record on this CPU named (u64::MAX: none).
    last_pid: AtomicU64,
    pub(crate) counters: Counters,
}

impl CpuSampler {
    pub(crate) fn new(cpu: u32, bytes: usize, switches: Switches<'static>) -> Result<Self> {
        let words = bytes / 8;
        let mut storage = Storage::with_capacity(words, GFP_KERNEL)?;
        for _ in 0..words {
            storage.push(AtomicU64::new(0), GFP_KERNEL)?;
        }
        let buffer =
            CpuBuffer::new(storage, Mode::ProducerConsumer, switches).map_err(|_| EINVAL)?;
        Ok(Self {
            cpu,
            buffer,
            last_pid: AtomicU64::new(u64::MAX),
            counters: Counters::default(),
        })
    }

    fn write(&self, record: &[u8], ts: u64) -> core::result::Result<(), ReserveError> {
        let mut slot = self.buffer.reserve(record.len(), ts)?;
        slot.write_bytes(0, record);
        slot.commit();
        Ok(())
    }

    /// Records one sample of the current task.
    pub(crate) fn log_sample(&self, pc: u64, kernel_mode: bool) {
        let ts = now();
        let (mut pid, mut tgid, mut comm) = (0u32, 0u32, [0u8; 16]);
        // SAFETY: the pointers are valid for the writes (comm: 16 bytes).
        unsafe { ffi::oprofile_rs_current_task(&mut pid, &mut tgid, comm.as_mut_ptr()) };
        let cpu = self.cpu as u16;
        let c = &self.counters;
        if self.last_pid.load(Relaxed) != u64::from(pid) {
            match self.write(&records::comm(cpu, ts, pid, tgid, &comm), ts) {
                Ok(()) => self.last_pid.store(u64::from(pid), Relaxed),
                Err(ReserveError::Disabled) => return,
                Err(_) => {
                    c.sample_received.fetch_add(1, Relaxed);
                    c.sample_lost_overflow.fetch_add(1, Relaxed);
                    return;
                }
            }
        }
        if pc == 0 {
            c.sample_received.fetch_add(1, Relaxed);
            c.sample_invalid_eip.fetch_add(1, Relaxed);
            return;
        }
        match self.write(&records::sample(cpu, kernel_mode, ts, pc, pid, tgid), ts) {
            Ok(()) => {
                c.sample_received.fetch_add(1, Relaxed);
            }
            Err(ReserveError::Disabled) => {}
            Err(_) => {
                c.sample_received.fetch_add(1, Relaxed);
                c.sample_lost_overflow.fetch_add(1, Relaxed);
            }
        }
    }
}

impl OverflowHandler for CpuSampler {
    fn overflow(&self, pc: u64, kernel_mode: bool) {
        let start = now();
        self.log_sample(pc, kernel_mode);
        let cost = now().wrapping_sub(start);
        self.counters.handler_ns_sum.fetch_add(cost, Relaxed);
        self.counters.handler_ns_max.fetch_max(cost, Relaxed);
    }
}
