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

use kernel::{
    bindings,
    cpu::CpuId,
    cpumask::Cpumask,
    prelude::*,
    sync::atomic::{Acquire, Atomic, Relaxed, Release},
    time::{delay::fsleep, Delta, Instant, Monotonic},
};

use crate::kthread::{park, Thread};
use crate::ringbuf::{atomics::AtomicU64, CpuBuffer, Mode, ReadError, RecordSwitch, Switches};

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
    consumer_started: Atomic<bool>,
    producer_done: Atomic<bool>,
    consumer_done: Atomic<bool>,
    /// Producer results.
    hit: Atomic<u64>,
    missed: Atomic<u64>,
    elapsed_ns: Atomic<u64>,
    /// Consumer results.
    read: Atomic<u64>,
    torn: Atomic<u64>,
}

fn clock() -> u64 {
    // SAFETY: no precondition.
    unsafe { bindings::trace_clock_local() }
}

/// Whether `cpu` is online.
fn cpu_online(cpu: CpuId) -> bool {
    // SAFETY: `__cpu_online_mask` is a valid cpumask for the kernel's
    // lifetime, only read here.
    let online = unsafe { Cpumask::from_raw(&raw const bindings::__cpu_online_mask) };
    online.test(cpu)
}

impl Bench {
    fn producer(&self) {
        while !self.consumer_started.load(Acquire) {
            fsleep(Delta::from_millis(1));
        }
        let (mut hit, mut missed, mut seq) = (0u64, 0u64, 0u64);
        let start = Instant::<Monotonic>::now();
        let mut elapsed;
        loop {
            for _ in 0..BATCH {
                seq += 1;
                match self.buf.reserve(8, clock()) {
                    Ok(mut slot) => {
                        slot.write_words(0, &[seq]);
                        slot.commit();
                        hit += 1;
                    }
                    Err(_) => missed += 1,
                }
            }
            elapsed = u64::try_from(start.elapsed().as_nanos()).unwrap_or(0);
            if elapsed >= self.run_ns {
                break;
            }
        }
        self.hit.store(hit, Relaxed);
        self.missed.store(missed, Relaxed);
        self.elapsed_ns.store(elapsed, Relaxed);
        self.producer_done.store(true, Release);
    }

    fn consumer(&self) {
        let mut out = [0u8; 8];
        let (mut read, mut torn, mut last) = (0u64, 0u64, 0u64);
        self.consumer_started.store(true, Release);
        loop {
            let done = self.producer_done.load(Acquire);
            match self.buf.consume(&mut out) {
                Ok(info) => {
                    let seq = u64::from_ne_bytes(out);
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
        self.read.store(read, Relaxed);
        self.torn.store(torn, Relaxed);
        self.consumer_done.store(true, Release);
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

/// Runs the benchmark for `secs` seconds (1..=60) and prints
/// `oprofile_rs_bench: bench: entries=… ns/entry=… torn=… lost=…`.
pub(crate) fn run(secs: u64) -> Result {
    if !(1..=60).contains(&secs) {
        pr_err!("invalid secs={secs}: must be between 1 and 60\n");
        return Err(EINVAL);
    }
    let (Some(p), Some(c)) = (CpuId::from_u32(0), CpuId::from_u32(1)) else {
        return Err(ENODEV);
    };
    if !cpu_online(p) || !cpu_online(c) {
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
            consumer_started: Atomic::new(false),
            producer_done: Atomic::new(false),
            consumer_done: Atomic::new(false),
            hit: Atomic::new(0),
            missed: Atomic::new(0),
            elapsed_ns: Atomic::new(0),
            read: Atomic::new(0),
            torn: Atomic::new(0),
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
        let producer = match unsafe { Thread::start(producer_thread, ptr, p) } {
            Ok(t) => t,
            Err(e) => {
                // The consumer reads until the producer is done: tell it, or
                // stopping it (dropping `consumer`) would wait forever.
                bench.producer_done.store(true, Release);
                pr_err!("bench: cannot start the producer kthread: {e:?}\n");
                return Err(e);
            }
        };
        while !(bench.producer_done.load(Acquire) && bench.consumer_done.load(Acquire)) {
            fsleep(Delta::from_millis(10));
        }
        drop(producer);
        drop(consumer);
    }
    let st = bench.buf.stats();
    let hit = bench.hit.load(Relaxed);
    let missed = bench.missed.load(Relaxed);
    let read = bench.read.load(Relaxed);
    let torn = bench.torn.load(Relaxed);
    let elapsed = bench.elapsed_ns.load(Relaxed);
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
