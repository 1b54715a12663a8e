// SPDX-License-Identifier: GPL-2.0

//! In-kernel writer-loop benchmark of the ring-buffer core, the counterpart of
//! the kernel's `ring_buffer_benchmark` module (`scripts/bench-ring` runs both
//! in one boot; see `Documentation/ring-buffer-kernel.md`).
//!
//! Same shape as ftrace's benchmark: a 1 MB buffer in overwrite mode, a
//! producer kthread writing records with an 8-byte payload (ftrace: a 10-byte
//! reservation, 16 bytes per event with its header, like ours) in batches of
//! 50 with a clock read per record (`trace_clock_local`, ftrace's own
//! trace clock) and a time check per batch, a consumer kthread reading record by
//! record. The producer is bound to CPU 0, the consumer to CPU 1, both at
//! nice 0. ns/entry = producer run time / records committed (ftrace's first
//! "ns per entry" figure).
//!
//! The payload is a sequence number: the consumer checks that it increases
//! (a torn or reordered record counts as `torn`), and at the end every
//! reservation must be accounted as committed or failed and every committed
//! record as read or overrun.

use core::ffi::{c_int, c_void};
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use kernel::{
    bindings,
    cpu::CpuId,
    prelude::*,
    time::{delay::fsleep, Delta},
};

use crate::kthread::{park, Thread};
use crate::nmi;
use crate::ringbuf::{CpuBuffer, Mode, ReadError, RecordSwitch, Switches};
use crate::sampler::mono_ns;

/// Buffer size: ftrace's benchmark allocates 1,000,000 bytes per CPU.
const BUFFER_WORDS: usize = (1 << 20) / 8;
/// Writes between two clock checks (ftrace's default `write_iteration`).
const BATCH: u64 = 50;
/// The consumer sleeps this long when the buffer is empty.
const CONSUMER_NAP_US: i64 = 200;

static GLOBAL_ON: RecordSwitch = RecordSwitch::new(true);
static SET_ON: RecordSwitch = RecordSwitch::new(true);

struct Bench {
    buf: CpuBuffer<'static, KVec<AtomicU64>>,
    run_ns: u64,
    consumer_started: AtomicBool,
    producer_done: AtomicBool,
    consumer_done: AtomicBool,
    /// Producer results.
    hit: AtomicU64,
    missed: AtomicU64,
    elapsed_ns: AtomicU64,
    /// Consumer results.
    read: AtomicU64,
    torn: AtomicU64,
}

fn clock() -> u64 {
    // SAFETY: no precondition.
    unsafe { bindings::trace_clock_local() }
}

impl Bench {
    fn producer(&self) {
        while !self.consumer_started.load(Ordering::Acquire) {
            fsleep(Delta::from_millis(1));
        }
        let (mut hit, mut missed, mut seq) = (0u64, 0u64, 0u64);
        let start = mono_ns();
        let mut end;
        loop {
            for _ in 0..BATCH {
                seq += 1;
                match self.buf.reserve(8, clock()) {
                    Ok(mut slot) => {
                        slot.write_word(0, seq);
                        slot.commit();
                        hit += 1;
                    }
                    Err(_) => missed += 1,
                }
            }
            end = mono_ns();
            if end.wrapping_sub(start) >= self.run_ns {
                break;
            }
        }
        self.hit.store(hit, Ordering::Relaxed);
        self.missed.store(missed, Ordering::Relaxed);
        self.elapsed_ns
            .store(end.wrapping_sub(start), Ordering::Relaxed);
        self.producer_done.store(true, Ordering::Release);
    }

    fn consumer(&self) {
        let mut out = [0u8; 8];
        let (mut read, mut torn, mut last) = (0u64, 0u64, 0u64);
        self.consumer_started.store(true, Ordering::Release);
        loop {
            let done = self.producer_done.load(Ordering::Acquire);
            match self.buf.consume(&mut out) {
                Ok(info) => {
                    let seq = u64::from_le_bytes(out);
                    if info.len != 8 || seq <= last {
                        torn += 1;
                    }
                    last = seq;
                    read += 1;
                }
                Err(ReadError::Contended) => {}
                Err(ReadError::Empty) if done => break,
                Err(ReadError::Empty) => fsleep(Delta::from_micros(CONSUMER_NAP_US)),
                Err(_) => {
                    torn += 1;
                    if done {
                        break;
                    }
                }
            }
        }
        self.read.store(read, Ordering::Relaxed);
        self.torn.store(torn, Ordering::Relaxed);
        self.consumer_done.store(true, Ordering::Release);
    }
}

/// Producer kthread.
///
/// # Safety
///
/// `data` must point to a `Bench` that outlives the thread.
unsafe extern "C" fn producer_thread(data: *mut c_void) -> c_int {
    // SAFETY: `data` is the `Bench` of `run`, which outlives this thread
    // (`Thread::start`'s contract).
    let b = unsafe { &*data.cast::<Bench>() };
    b.producer();
    park();
    0
}

/// Consumer kthread.
///
/// # Safety
///
/// `data` must point to a `Bench` that outlives the thread.
unsafe extern "C" fn consumer_thread(data: *mut c_void) -> c_int {
    // SAFETY: as for `producer_thread`.
    let b = unsafe { &*data.cast::<Bench>() };
    b.consumer();
    park();
    0
}

/// The `bench_ring_secs` module parameter: runs the benchmark during module
/// load (blocking `insmod` for that long). A failure is logged (`bench:
/// FAILED`) but does not fail the load.
pub(crate) fn run_at_load(secs: u64) {
    if let Err(e) = run(secs) {
        pr_err!("bench: FAILED ({e:?})\n");
    }
}

/// Runs the benchmark for `secs` seconds (0: does nothing) and prints
/// `oprofile_rs: bench: entries=… ns/entry=… torn=… lost=…`.
pub(crate) fn run(secs: u64) -> Result {
    if secs == 0 {
        return Ok(());
    }
    if secs > 60 {
        pr_err!("invalid bench_ring_secs={secs}: must be at most 60\n");
        return Err(EINVAL);
    }
    let (Some(p), Some(c)) = (CpuId::from_u32(0), CpuId::from_u32(1)) else {
        return Err(ENODEV);
    };
    if !nmi::cpu_online(p) || !nmi::cpu_online(c) {
        pr_err!("bench: needs CPUs 0 and 1 online\n");
        return Err(ENODEV);
    }
    let mut storage = KVec::with_capacity(BUFFER_WORDS, GFP_KERNEL)?;
    for _ in 0..BUFFER_WORDS {
        storage.push(AtomicU64::new(0), GFP_KERNEL)?;
    }
    let switches = Switches {
        global: &GLOBAL_ON,
        set: &SET_ON,
    };
    let bench = KBox::new(
        Bench {
            buf: CpuBuffer::new(storage, Mode::Overwrite, switches).map_err(|_| EINVAL)?,
            run_ns: secs.saturating_mul(1_000_000_000),
            consumer_started: AtomicBool::new(false),
            producer_done: AtomicBool::new(false),
            consumer_done: AtomicBool::new(false),
            hit: AtomicU64::new(0),
            missed: AtomicU64::new(0),
            elapsed_ns: AtomicU64::new(0),
            read: AtomicU64::new(0),
            torn: AtomicU64::new(0),
        },
        GFP_KERNEL,
    )?;
    let ptr = core::ptr::from_ref::<Bench>(&bench)
        .cast_mut()
        .cast::<c_void>();
    {
        // SAFETY: both functions end with `park`; `bench` outlives the threads
        // (they are stopped at the end of this block).
        let consumer = unsafe { Thread::start(consumer_thread, ptr, c) }?;
        // SAFETY: as above.
        let producer = unsafe { Thread::start(producer_thread, ptr, p) }?;
        while !(bench.producer_done.load(Ordering::Acquire)
            && bench.consumer_done.load(Ordering::Acquire))
        {
            fsleep(Delta::from_millis(10));
        }
        drop(producer);
        drop(consumer);
    }
    let st = bench.buf.stats();
    let hit = bench.hit.load(Ordering::Relaxed);
    let missed = bench.missed.load(Ordering::Relaxed);
    let read = bench.read.load(Ordering::Relaxed);
    let torn = bench.torn.load(Ordering::Relaxed);
    let elapsed = bench.elapsed_ns.load(Ordering::Relaxed);
    let accounted = st.committed == hit
        && st.read == read
        && st.entries == 0
        && st.committed == st.read + st.overrun
        && st.dropped_full + st.commit_overrun + st.dropped_disabled == missed;
    let ns_x100 = elapsed.saturating_mul(100) / hit.max(1);
    pr_info!(
        "bench: entries={} ns/entry={}.{:02} torn={} lost={} read={} overrun={} missed={} accounted={} time_us={}\n",
        hit,
        ns_x100 / 100,
        ns_x100 % 100,
        torn,
        st.overrun + missed,
        read,
        st.overrun,
        missed,
        if accounted { "yes" } else { "NO" },
        elapsed / 1000
    );
    if torn != 0 || !accounted {
        return Err(EIO);
    }
    Ok(())
}
