// SPDX-License-Identifier: GPL-2.0

//! KUnit test: turning recording off waits for the overflow handlers in
//! flight.
//!
//! `tracing_on=0` promises that when the write returns no CPU records
//! anything more and every record is in the CPU buffers, for the sync that
//! follows to move. An overflow handler that passed the switch check before
//! the switch went off may still be between its reserve and its commit:
//! [`stop_recording`] must wait for it. Here a writer on one CPU, in hard-IRQ
//! context (an IPI function call: the context of the cpu-clock event's
//! handler) or in NMI context (an NMI IPI: the hardware events' context),
//! reserves a record and holds it open until it sees the switch off and
//! [`HOLD_NS`] more, then commits. A kthread bound to another CPU starts the
//! writer, waits until it holds its record, and stops recording: when
//! `stop_recording` returns, the record must be committed, and it is read
//! back. Without the wait, `stop_recording` returns while the record is
//! still open.

use core::ffi::{c_int, c_void};
use core::ptr::null_mut;
use kernel::sync::atomic::{Acquire, Atomic, Full, Relaxed, Release};

use kernel::{
    bindings,
    cpu::{nr_cpu_ids, CpuId},
    prelude::*,
    time::{delay::fsleep, Delta},
};

use super::{
    kthread::{park, wait_until, Thread},
    nmi,
};
use crate::{
    control::profiler::stop_recording,
    path::{cgroup::InForce, sampler::CpuSampler},
    ringbuf::{RecordSwitch, Switches},
    shims::{
        clock::{mono_ns, now},
        cpu::cpu_online,
        perf::Regs,
    },
};

static GLOBAL: RecordSwitch = RecordSwitch::new(true);
static SET_ON: RecordSwitch = RecordSwitch::new(true);
/// The test's own cgroup filter, never set: a filter set at the module's
/// load (`cgroup=`, which the suites run under) cannot refuse its samples.
static NO_FILTER: InForce = InForce::none();

/// The sampler whose buffer the writer uses while a test runs (else null).
static ACTIVE: Atomic<*mut CpuSampler> = Atomic::new(null_mut());
/// The writer's CPU + 1 while a writer is expected there (0: none).
static TARGET: Atomic<u32> = Atomic::new(0);
/// Where the writer is: one of the `W_*` states.
static STATE: Atomic<u32> = Atomic::new(W_IDLE);

const W_IDLE: u32 = 0;
/// Reserved, not committed.
const W_HOLDING: u32 = 1;
const W_COMMITTED: u32 = 2;
/// The reserve failed (recording was already off).
const W_NO_RESERVE: u32 = 3;
/// Recording was not turned off within [`GIVE_UP_NS`]; committed anyway.
const W_GAVE_UP: u32 = 4;

/// How long the writer keeps its record open after it saw the switch off.
const HOLD_NS: u64 = 2_000_000;
const GIVE_UP_NS: u64 = 1_000_000_000;
/// The held record's payload.
const MAGIC: u64 = 0x6f70_726f_6669_6c65;

/// The writer, in hard-IRQ or NMI context on the target CPU.
fn write_held_record() {
    let p = ACTIVE.load(Acquire);
    if p.is_null() {
        return;
    }
    // SAFETY: `ACTIVE` is non-null only while the sampler lives: the test
    // clears it, then waits for the writer (see `run`), before freeing it.
    let s = unsafe { &*p };
    let Ok(mut slot) = s.buffer.reserve(8, now()) else {
        STATE.store(W_NO_RESERVE, Release);
        return;
    };
    STATE.store(W_HOLDING, Release);
    let start = mono_ns();
    let mut done = W_COMMITTED;
    while GLOBAL.is_on() {
        if mono_ns().wrapping_sub(start) > GIVE_UP_NS {
            done = W_GAVE_UP;
            break;
        }
        core::hint::spin_loop();
    }
    let off = mono_ns();
    while mono_ns().wrapping_sub(off) < HOLD_NS {
        core::hint::spin_loop();
    }
    slot.write_words(0, &[MAGIC]);
    slot.commit();
    STATE.store(done, Release);
}

/// Claims the writer's turn if this CPU is the target.
fn claim() -> bool {
    let me = CpuId::current().as_u32() + 1;
    TARGET.cmpxchg(me, 0, Full).is_ok()
}

/// The hard-IRQ writer: an IPI function call.
///
/// # Safety
///
/// Only called by `smp_call_function_single`.
unsafe extern "C" fn ipi_writer(_info: *mut c_void) {
    if claim() {
        write_held_record();
    }
}

/// An IPI function call that does nothing (see `run`).
///
/// # Safety
///
/// Only called by `smp_call_function_single`.
unsafe extern "C" fn ipi_nothing(_info: *mut c_void) {}

struct HeldNmi;

impl nmi::NmiHandler for HeldNmi {
    const NAME: &'static CStr = c"oprofile_rs_quiesce";

    fn handle(_regs: &Regs) -> bool {
        if !claim() {
            return false;
        }
        write_held_record();
        true
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Via {
    HardIrq,
    Nmi,
}
use Via::{HardIrq, Nmi};

/// The stopper kthread's task and what it saw.
struct Stopper {
    via: Via,
    writer_cpu: CpuId,
    /// The writer's state when `stop_recording` was called and returned.
    before: Atomic<u32>,
    after: Atomic<u32>,
    /// How long `stop_recording` took.
    waited_ns: Atomic<u64>,
    done: Atomic<bool>,
}

impl Stopper {
    fn run(&self) {
        let w = self.writer_cpu.as_u32();
        TARGET.store(w + 1, Release);
        match self.via {
            HardIrq => {
                // SAFETY: `ipi_writer` has the `smp_call_func_t` ABI and uses
                // no `info`; not waiting, so any context is fine.
                unsafe {
                    bindings::smp_call_function_single(
                        w as c_int,
                        Some(ipi_writer),
                        null_mut(),
                        false,
                    )
                };
            }
            Nmi => nmi::send_nmi(self.writer_cpu),
        }
        let start = mono_ns();
        while STATE.load(Acquire) == W_IDLE && mono_ns().wrapping_sub(start) < GIVE_UP_NS {
            fsleep(Delta::from_micros(100));
        }
        self.before.store(STATE.load(Acquire), Relaxed);
        let t0 = mono_ns();
        stop_recording(&GLOBAL);
        self.waited_ns.store(mono_ns().wrapping_sub(t0), Relaxed);
        self.after.store(STATE.load(Acquire), Relaxed);
        self.done.store(true, Release);
    }
}

/// The stopper kthread.
///
/// # Safety
///
/// `data` must point to a `Stopper` that outlives the thread.
unsafe extern "C" fn stopper_thread(data: *mut c_void) -> c_int {
    // SAFETY: per the function's safety contract.
    let s = unsafe { &*data.cast::<Stopper>() };
    s.run();
    park();
    0
}

/// What one run saw.
struct Outcome {
    before: u32,
    after: u32,
    waited_ns: u64,
    /// Whether the held record was read back from the buffer.
    read_back: bool,
}

/// How long the test waits for the stopper and the writer.
const TIMEOUT_MS: u32 = 5000;

fn run(via: Via) -> Result<Outcome> {
    let mut online = (0..nr_cpu_ids())
        .filter_map(CpuId::from_u32)
        .filter(|c| cpu_online(*c));
    let (Some(stopper_cpu), Some(writer_cpu)) = (online.next(), online.next()) else {
        pr_err!("quiesce test: needs two online CPUs\n");
        return Err(ENODEV);
    };
    GLOBAL.set(true);
    STATE.store(W_IDLE, Release);
    let switches = Switches {
        global: &GLOBAL,
        set: &SET_ON,
    };
    let sampler = KBox::new(
        CpuSampler::new(writer_cpu.as_u32(), 4096, 0, 0, switches, &NO_FILTER, false)?,
        GFP_KERNEL,
    )?;
    let reg = match via {
        Nmi => Some(KBox::pin_init(
            nmi::Registration::<HeldNmi>::new(),
            GFP_KERNEL,
        )?),
        HardIrq => None,
    };
    ACTIVE.store(core::ptr::from_ref(&*sampler).cast_mut(), Release);
    let stopper = KBox::new(
        Stopper {
            via,
            writer_cpu,
            before: Atomic::new(W_IDLE),
            after: Atomic::new(W_IDLE),
            waited_ns: Atomic::new(0),
            done: Atomic::new(false),
        },
        GFP_KERNEL,
    )?;
    let data = core::ptr::from_ref(&*stopper).cast_mut().cast::<c_void>();
    // SAFETY: `stopper_thread` ends with `park`; `stopper` outlives the
    // thread, which is stopped (dropped) below before it.
    let thread = unsafe { Thread::start(stopper_thread, data, stopper_cpu) };
    if thread.is_ok() {
        wait_until(TIMEOUT_MS, || stopper.done.load(Acquire));
    }
    // Whatever happened, no writer may run once the sampler is freed.
    TARGET.store(0, Release);
    wait_until(TIMEOUT_MS, || STATE.load(Acquire) != W_HOLDING);
    ACTIVE.store(null_mut(), Release);
    drop(thread);
    // A call still queued on the writer's CPU runs before this one returns.
    // SAFETY: `ipi_nothing` has the `smp_call_func_t` ABI; process context.
    unsafe {
        bindings::smp_call_function_single(
            writer_cpu.as_u32() as c_int,
            Some(ipi_nothing),
            null_mut(),
            true,
        )
    };
    // Unregistering waits for NMI handlers that are running.
    drop(reg);
    let mut buf = [0u8; 8];
    let read_back = match sampler.buffer.consume(&mut buf) {
        Ok(info) => info.len == 8 && u64::from_ne_bytes(buf) == MAGIC,
        Err(_) => false,
    };
    Ok(Outcome {
        before: stopper.before.load(Relaxed),
        after: stopper.after.load(Relaxed),
        waited_ns: stopper.waited_ns.load(Relaxed),
        read_back,
    })
}

/// Runs `via` again (up to [`ATTEMPTS`] runs in all) while the stopper came
/// late: it did not find the writer holding its record, or the writer gave
/// up waiting for it. That is the rig, not the module: the stopper's CPU can
/// wait for the writer's (a static key flipped by a work item there sends a
/// synchronous IPI, which the writer's CPU takes only once its handler
/// returns; seen on the lockdep kernel under one TCG thread). What is tested,
/// `stop_recording` returning only after the held record was committed, is
/// asserted on the last run whatever it met.
fn run_met(via: Via) -> Result<Outcome> {
    let mut r = run(via)?;
    for _ in 1..ATTEMPTS {
        if r.before == W_HOLDING && r.after != W_GAVE_UP {
            break;
        }
        pr_info!(
            "quiesce test: the stopper came late (writer state {} then {}), once more\n",
            r.before,
            r.after
        );
        r = run(via)?;
    }
    Ok(r)
}

/// Runs of [`run_met`] at most.
const ATTEMPTS: u32 = 3;

/// The checks of one run (in the test bodies: KUnit's `assert!` reports a
/// failure, core's in a helper would oops the kernel).
macro_rules! check {
    ($via:expr) => {
        let r = run_met($via);
        assert!(r.is_ok());
        if let Ok(r) = r {
            // The writer held its record open when recording was turned off...
            assert_eq!(r.before, W_HOLDING);
            // ...and had committed it when `stop_recording` returned.
            assert_eq!(r.after, W_COMMITTED);
            assert!(r.waited_ns >= HOLD_NS);
            assert!(r.read_back);
        }
    };
}

#[kunit_tests(oprofile_rs_quiesce)]
mod tests {
    use super::*;

    #[test]
    fn stop_waits_for_a_hard_irq_writer() {
        check!(HardIrq);
    }

    #[test]
    fn stop_waits_for_an_nmi_writer() {
        check!(Nmi);
    }
}
