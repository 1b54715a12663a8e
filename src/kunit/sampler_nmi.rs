// SPDX-License-Identifier: GPL-2.0

//! KUnit test of the sample path in NMI context.
//!
//! There is no PMU on the test machines, so perf never delivers an overflow
//! as an NMI there. This test drives the same code from real NMIs instead: a
//! CPU-local NMI handler ([`super::nmi`]) calls [`CpuSampler::log_sample`]
//! (what its [`crate::perf::OverflowHandler`] entry calls once it checked
//! the CPU: the test's task may run on any CPU between two NMIs) with the
//! NMI's registers and an event index and period, for every self-NMI IPI the
//! test sends while it spins on its CPU. Checked: every NMI is handled in NMI
//! context and counted as received; the records read back are a COMM of the
//! interrupted task, then kernel-mode SAMPLEs of it with the interrupted PC,
//! the event index and period given, and a kernel callchain from the NMI's
//! registers no deeper than the depth; with a buffer too small
//! on purpose, SAMPLE records + lost == received exactly. As in the ring-buffer
//! stress test, results are collected first and asserted after teardown.

use core::ptr::null_mut;
use kernel::sync::atomic::{Acquire, Atomic, Relaxed, Release};

use kernel::{cpu::CpuId, prelude::*};

use super::nmi;
use crate::{
    format::{self, Endian, Fields},
    perf::Regs,
    ringbuf::{ReadError, RecordSwitch, Switches},
    sampler::{self, CpuSampler},
};

static GLOBAL_ON: RecordSwitch = RecordSwitch::new(true);
static SET_ON: RecordSwitch = RecordSwitch::new(true);

/// The sampler the NMI handler feeds while a test runs (null otherwise).
static ACTIVE: Atomic<*mut CpuSampler> = Atomic::new(null_mut());
/// Set before each NMI IPI; the handler clears it.
static PENDING: Atomic<u32> = Atomic::new(0);
/// The event index and period the handler samples with.
const EVENT: u16 = 3;
const PERIOD: u64 = 777_777;
/// NMIs the handler took outside NMI context (must stay 0).
static WRONG_CONTEXT: Atomic<u64> = Atomic::new(0);

struct SampleNmi;

impl nmi::NmiHandler for SampleNmi {
    const NAME: &'static CStr = c"oprofile_rs_sample";

    fn handle(regs: &Regs) -> bool {
        let p = ACTIVE.load(Acquire);
        if p.is_null() || PENDING.load(Acquire) == 0 {
            return false;
        }
        // SAFETY: `ACTIVE` is non-null only while the sampler it points to
        // lives; it is cleared before the handler is unregistered (which
        // waits for running handlers) and before the sampler is freed.
        let s = unsafe { &*p };
        if !nmi::in_nmi() {
            WRONG_CONTEXT.fetch_add(1, Relaxed);
        }
        s.log_sample(regs, EVENT, PERIOD);
        PENDING.store(0, Release);
        true
    }
}

/// What one run saw.
#[derive(Default)]
struct Outcome {
    timed_out: bool,
    wrong_context: u64,
    received: u64,
    lost: u64,
    invalid: u64,
    aborted: u64,
    samples: u64,
    comms: u64,
    other_records: u64,
    /// SAMPLEs not of the test task, not in kernel mode, or with PC 0.
    bad_samples: u64,
    /// SAMPLEs with a callchain deeper than asked or with a non-kernel
    /// address, or with a user callchain.
    bad_chains: u64,
    /// SAMPLEs with at least one callchain entry.
    with_chain: u64,
    /// Records read before the first COMM naming the test task.
    before_comm: u64,
}

/// Sends `n` NMIs to the running CPU, each sampled into a fresh sampler of
/// `bytes` with callchains up to `depth`, then reads everything back.
fn run(bytes: usize, depth: u32, n: u32) -> Result<Outcome> {
    let switches = Switches {
        global: &GLOBAL_ON,
        set: &SET_ON,
    };
    let sampler = KBox::new(
        CpuSampler::new(0, bytes, depth, 8, switches, false)?,
        GFP_KERNEL,
    )?;
    let reg = KBox::pin_init(nmi::Registration::<SampleNmi>::new(), GFP_KERNEL)?;
    WRONG_CONTEXT.store(0, Relaxed);
    ACTIVE.store(core::ptr::from_ref(&*sampler).cast_mut(), Release);
    let mut out = Outcome::default();
    for _ in 0..n {
        // Interrupts off (NMIs still arrive): this task cannot be preempted
        // or migrated, so the NMI interrupts it, on the CPU it was sent to.
        let irqs_off = kernel::interrupt::local_interrupt_disable();
        PENDING.store(1, Release);
        nmi::send_nmi(CpuId::current());
        let mut spins = 0u64;
        while PENDING.load(Acquire) != 0 && spins < 10_000_000 {
            core::hint::spin_loop();
            spins += 1;
        }
        drop(irqs_off);
        if PENDING.load(Acquire) != 0 {
            out.timed_out = true;
            break;
        }
    }
    ACTIVE.store(null_mut(), Release);
    PENDING.store(0, Release);
    drop(reg);

    let c = &sampler.counters;
    out.wrong_context = WRONG_CONTEXT.load(Relaxed);
    out.received = c.sample_received.load(kernel::sync::atomic::Relaxed);
    out.lost = c.sample_lost_overflow.load(kernel::sync::atomic::Relaxed);
    out.invalid = c.sample_invalid_eip.load(kernel::sync::atomic::Relaxed);
    out.aborted = c.backtrace_aborted.load(kernel::sync::atomic::Relaxed);
    let (me, _, _) = sampler::current_task();
    let mut named = false;
    let mut buf = KVec::from_elem(0u8, format::MAX_RECORD, GFP_KERNEL)?;
    loop {
        match sampler.buffer.consume(&mut buf) {
            Ok(info) => {
                let rec = buf.get(..info.len).unwrap_or(&[]);
                // Read with the format's own parser, as a user-space reader
                // would: a record whose size is not the ring entry's length
                // or that does not parse counts as "other".
                let parsed = format::parse(Endian::native(), rec).ok();
                match parsed.filter(|p| p.size() == info.len) {
                    Some(p) => match p.fields {
                        Some(Fields::Comm(c)) => {
                            out.comms += 1;
                            named |= c.pid == me;
                        }
                        Some(Fields::Sample(s)) => {
                            out.samples += 1;
                            if !named {
                                out.before_comm += 1;
                            }
                            if !s.kernel
                                || s.pc == 0
                                || s.pid != me
                                || (s.event, s.period) != (EVENT, PERIOD)
                            {
                                out.bad_samples += 1;
                            }
                            if s.depth > 0 {
                                out.with_chain += 1;
                            }
                            let bad_entry = p.callchain().any(|a| a < 0xffff_8000_0000_0000);
                            // A kernel thread has no user stack: its samples
                            // carry no user chain (the sampler walks user
                            // stacks to depth 8 here).
                            let user = s.user_depth != 0 || p.user_callchain().next().is_some();
                            if u32::from(s.depth) > depth || p.oversized() || bad_entry || user {
                                out.bad_chains += 1;
                            }
                        }
                        _ => out.other_records += 1,
                    },
                    None => out.other_records += 1,
                }
            }
            Err(ReadError::Empty) => break,
            Err(_) => {
                out.other_records += 1;
                break;
            }
        }
    }
    Ok(out)
}

#[kunit_tests(oprofile_rs_sampler_nmi)]
mod tests {
    use super::*;

    #[test]
    fn samples_taken_in_nmi_context() {
        let r = run(64 << 10, 8, 100);
        assert!(r.is_ok());
        if let Ok(r) = r {
            assert!(!r.timed_out);
            assert_eq!(r.wrong_context, 0);
            assert_eq!(r.received, 100);
            assert_eq!((r.lost, r.invalid, r.aborted), (0, 0, 0));
            assert_eq!(r.samples, 100);
            assert!(r.comms >= 1);
            assert_eq!(r.before_comm, 0);
            assert_eq!(r.other_records, 0);
            assert_eq!(r.bad_samples, 0);
            assert_eq!(r.bad_chains, 0);
            // The interrupted task is in the kernel (this test): every
            // sample has a callchain.
            assert_eq!(r.with_chain, 100);
        }
    }

    #[test]
    fn full_buffer_in_nmi_context_is_accounted() {
        // 4 KiB holds a few dozen of these ~100-byte records.
        let r = run(4096, 8, 300);
        assert!(r.is_ok());
        if let Ok(r) = r {
            assert!(!r.timed_out);
            assert_eq!(r.wrong_context, 0);
            assert_eq!(r.received, 300);
            assert!(r.lost > 0);
            assert_eq!(r.samples + r.lost, r.received);
            assert_eq!(r.bad_samples, 0);
            assert_eq!(r.bad_chains, 0);
        }
    }
}
