// SPDX-License-Identifier: GPL-2.0

//! KUnit test of the sample path in NMI context.
//!
//! There is no PMU on the test machines, so perf never delivers an overflow
//! as an NMI there. This test drives the same code from real NMIs instead: a
//! CPU-local NMI handler ([`super::nmi`]) calls [`CpuSampler::log_sample`]
//! (what its [`crate::shims::perf::OverflowHandler`] entry calls once it checked
//! the CPU: the test's task may run on any CPU between two NMIs) with the
//! NMI's registers and an event index and period, for every self-NMI IPI the
//! test sends while it spins on its CPU. Checked: every NMI is handled in NMI
//! context and counted as received; the records read back are a COMM of the
//! interrupted task, then kernel-mode SAMPLEs of it with the interrupted PC,
//! the event index and period given, and a kernel callchain from the NMI's
//! registers no deeper than the depth; with a buffer too small
//! on purpose, SAMPLE records + lost == received exactly, and the time of
//! the latest sample lost (the LOST record's) is that of one of the run's
//! NMIs, after every SAMPLE kept. Every third NMI
//! says perf throttled the counter after it: exactly those SAMPLEs carry
//! the THROTTLED flag, and `sample_throttled` counts them (lost ones too).
//! And a handler that
//! starts while a snapshot pauses recording, the pause ending before it
//! reserves its SAMPLE (it may: the pause waits only for the handlers that
//! started before it), writes nothing: the records after the snapshot's cut
//! start with a COMM (before the fix, a SAMPLE named only by a COMM that had
//! gone into the previous snapshot). As in the ring-buffer stress test,
//! results are collected first and asserted after teardown.

use core::ptr::null_mut;
use kernel::sync::atomic::{Acquire, Atomic, Full, Relaxed, Release};

use kernel::{cpu::CpuId, prelude::*};

use super::nmi;
use crate::{
    format::{self, Endian, Fields},
    path::{
        cgroup::InForce,
        sampler::{CpuSampler, SampleHook, BEFORE_SAMPLE, PAUSE_GEN},
    },
    ringbuf::{ReadError, RecordSwitch, Switches},
    shims::perf::Regs,
};

static GLOBAL_ON: RecordSwitch = RecordSwitch::new(true);
static SET_ON: RecordSwitch = RecordSwitch::new(true);
/// The test's own cgroup filter, never set: a filter set at the module's
/// load (`cgroup=`, which the suites run under) cannot refuse its samples.
static NO_FILTER: InForce = InForce::none();

/// The sampler the NMI handler feeds while a test runs (null otherwise).
static ACTIVE: Atomic<*mut CpuSampler> = Atomic::new(null_mut());
/// Set before each NMI IPI; the handler clears it.
static PENDING: Atomic<u32> = Atomic::new(0);
/// The event index and period the handler samples with.
const EVENT: u16 = 3;
const PERIOD: u64 = 777_777;
/// NMIs the handler took outside NMI context (must stay 0).
static WRONG_CONTEXT: Atomic<u64> = Atomic::new(0);
/// NMIs handled in this run: the handler says the counter was throttled
/// after every third ([`throttled_nmi`]).
static SEQ: Atomic<u64> = Atomic::new(0);

/// Whether the `seq`-th NMI of a run (from 0) is a throttling overflow.
fn throttled_nmi(seq: u64) -> bool {
    seq % 3 == 0
}

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
        let seq = SEQ.load(Relaxed);
        SEQ.store(seq + 1, Relaxed);
        s.log_sample(regs, EVENT, PERIOD, throttled_nmi(seq), false);
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
    /// SAMPLEs with the THROTTLED flag, and the counter.
    throttled_flags: u64,
    throttled_count: u64,
    /// SAMPLEs whose flag is not what their NMI said (meaningful only when
    /// none was lost: the i-th SAMPLE is then the i-th NMI's).
    throttled_mismatch: u64,
    /// The clock before the first NMI and after the last; the sampler's
    /// `last_lost_time`; the newest SAMPLE's time.
    started: u64,
    ended: u64,
    last_lost_time: u64,
    newest_sample: u64,
}

/// A sampler of `bytes` (overwrite mode or not) with callchains up to
/// `depth`, fed by the test's switches.
fn new_sampler(bytes: usize, depth: u32, overwrite: bool) -> Result<KBox<CpuSampler>> {
    let switches = Switches {
        global: &GLOBAL_ON,
        set: &SET_ON,
    };
    Ok(KBox::new(
        CpuSampler::new(0, bytes, depth, 8, switches, &NO_FILTER, overwrite)?,
        GFP_KERNEL,
    )?)
}

/// Sends one NMI to the running CPU and waits until the handler sampled it
/// into the active sampler; `false` if it did not come.
fn nmi_sample() -> bool {
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
    PENDING.load(Acquire) == 0
}

/// Sends `n` NMIs to the running CPU, each sampled into a fresh sampler of
/// `bytes` with callchains up to `depth`, then reads everything back.
fn run(bytes: usize, depth: u32, n: u32) -> Result<Outcome> {
    let sampler = new_sampler(bytes, depth, false)?;
    let reg = KBox::pin_init(nmi::Registration::<SampleNmi>::new(), GFP_KERNEL)?;
    WRONG_CONTEXT.store(0, Relaxed);
    SEQ.store(0, Relaxed);
    ACTIVE.store(core::ptr::from_ref(&*sampler).cast_mut(), Release);
    let mut out = Outcome {
        started: crate::shims::clock::now(),
        ..Outcome::default()
    };
    for _ in 0..n {
        if !nmi_sample() {
            out.timed_out = true;
            break;
        }
    }
    out.ended = crate::shims::clock::now();
    ACTIVE.store(null_mut(), Release);
    PENDING.store(0, Release);
    drop(reg);
    read_back(&sampler, depth, &mut out)?;
    Ok(out)
}

/// Fills `out` with `sampler`'s counters and what its ring holds.
fn read_back(sampler: &CpuSampler, depth: u32, out: &mut Outcome) -> Result {
    let c = &sampler.counters;
    out.wrong_context = WRONG_CONTEXT.load(Relaxed);
    out.received = c.sample_received.load(kernel::sync::atomic::Relaxed);
    out.lost = c.sample_lost_overflow.load(kernel::sync::atomic::Relaxed);
    out.invalid = c.sample_invalid_eip.load(kernel::sync::atomic::Relaxed);
    out.aborted = c.backtrace_aborted.load(kernel::sync::atomic::Relaxed);
    out.throttled_count = c.sample_throttled.load(Relaxed);
    out.last_lost_time = c.last_lost_time.load(Relaxed);
    let (me, _, _) = crate::shims::task::current_task();
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
                            if s.throttled != throttled_nmi(out.samples) {
                                out.throttled_mismatch += 1;
                            }
                            out.throttled_flags += u64::from(s.throttled);
                            out.samples += 1;
                            out.newest_sample = out.newest_sample.max(s.time);
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
    Ok(())
}

/// The sampler whose next SAMPLE ends the emulated snapshot pause in
/// [`before_sample`] (null: none).
static RESUME_AT: Atomic<*mut CpuSampler> = Atomic::new(null_mut());

/// [`before_sample`], as the sample path takes it.
static HOOK: SampleHook = SampleHook(before_sample);

/// A snapshot's pause (`snapshot.rs`) on the test's switch: started.
fn pause() {
    PAUSE_GEN.fetch_add(1, Full);
    SET_ON.set(false);
}

/// The end of the pause: the snapshot drained the ring, forgets which task
/// it named and turns recording back on (as `snapshot.rs`).
fn resume(s: &CpuSampler) {
    s.forget_comm();
    SET_ON.set(true);
    PAUSE_GEN.fetch_add(1, Full);
}

/// The sample path's hook ([`crate::path::sampler::BEFORE_SAMPLE`], called
/// after the sampler decided whether to name the task and before it reserves
/// the SAMPLE): if `s` is armed, the emulated snapshot's pause ends here, as
/// it may on another CPU while a handler that started during the pause runs.
fn before_sample(s: &CpuSampler) {
    let me = core::ptr::from_ref(s).cast_mut();
    if RESUME_AT.load(Acquire) == me && RESUME_AT.cmpxchg(me, null_mut(), Full).is_ok() {
        resume(s);
    }
}

/// A sample, a snapshot's pause during which a handler starts and which
/// ends before that handler reserves its SAMPLE, a sample after: what the
/// ring holds after the snapshot's cut, and the counters.
fn run_pause() -> Result<(Outcome, u64)> {
    let sampler = new_sampler(64 << 10, 8, true)?;
    let reg = KBox::pin_init(nmi::Registration::<SampleNmi>::new(), GFP_KERNEL)?;
    WRONG_CONTEXT.store(0, Relaxed);
    let me = core::ptr::from_ref(&*sampler).cast_mut();
    ACTIVE.store(me, Release);
    BEFORE_SAMPLE.store(core::ptr::from_ref(&HOOK).cast_mut(), Release);
    let mut out = Outcome::default();
    // Before the snapshot: the task is named, and the sample drained at the
    // cut (no handler is in flight: the NMI was taken).
    let mut ok = nmi_sample();
    pause();
    let mut buf = KVec::from_elem(0u8, format::MAX_RECORD, GFP_KERNEL)?;
    while sampler.buffer.consume(&mut buf).is_ok() {}
    // A handler that starts during the pause; the pause ends before it
    // reserves its SAMPLE (or, if it stopped before, after it).
    RESUME_AT.store(me, Release);
    ok &= nmi_sample();
    if RESUME_AT.cmpxchg(me, null_mut(), Full).is_ok() {
        resume(&sampler);
    }
    // After the snapshot.
    ok &= nmi_sample();
    out.timed_out = !ok;
    ACTIVE.store(null_mut(), Release);
    BEFORE_SAMPLE.store(null_mut(), Release);
    PENDING.store(0, Release);
    drop(reg);
    read_back(&sampler, 8, &mut out)?;
    let lost_snapshot = sampler.counters.sample_lost_snapshot.load(Relaxed);
    Ok((out, lost_snapshot))
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
            assert_eq!(r.last_lost_time, 0);
            assert_eq!(r.samples, 100);
            assert!(r.comms >= 1);
            assert_eq!(r.before_comm, 0);
            assert_eq!(r.other_records, 0);
            assert_eq!(r.bad_samples, 0);
            assert_eq!(r.bad_chains, 0);
            // The interrupted task is in the kernel (this test): every
            // sample has a callchain.
            assert_eq!(r.with_chain, 100);
            // NMIs 0, 3, ..., 99 throttled: 34, each flagged in its SAMPLE.
            assert_eq!((r.throttled_flags, r.throttled_count), (34, 34));
            assert_eq!(r.throttled_mismatch, 0);
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
            // 100 of the 300 throttled, counted whether recorded or lost;
            // the flags only on recorded ones.
            assert_eq!(r.throttled_count, 100);
            assert!(r.throttled_flags <= r.throttled_count && r.throttled_flags <= r.samples);
            // With no reader, the SAMPLEs that fit are the first NMIs'.
            assert_eq!(r.throttled_mismatch, 0);
            // The time of the latest sample lost (the LOST record's,
            // `sync.rs`): during the run, after every SAMPLE kept.
            assert!(r.started <= r.last_lost_time && r.last_lost_time <= r.ended);
            assert!(r.newest_sample < r.last_lost_time);
        }
    }

    #[test]
    fn handler_across_a_snapshot_pause_writes_no_nameless_sample() {
        let r = run_pause();
        assert!(r.is_ok());
        if let Ok((r, lost_snapshot)) = r {
            assert!(!r.timed_out);
            assert_eq!(r.wrong_context, 0);
            assert_eq!(r.received, 3);
            // The records after the cut start with the task's COMM.
            assert_eq!(r.before_comm, 0);
            assert!(r.comms >= 1);
            // One sample drained at the cut; the others recorded or lost,
            // and a loss is the pause's.
            assert_eq!(r.samples + r.lost + 1, r.received);
            assert_eq!(r.lost, lost_snapshot);
            assert_eq!(r.other_records, 0);
            assert_eq!(r.bad_samples, 0);
        }
    }
}
