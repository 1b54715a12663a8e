// SPDX-License-Identifier: GPL-2.0

//! KUnit stress test of the ring-buffer core with real writer nesting.
//!
//! One [`CpuBuffer`] gets three kinds of writers, all on one CPU `W`:
//!
//! * task context: a kthread bound to `W` writing records in a loop;
//! * hard IRQ: a pinned hrtimer on `W` firing every [`TIMER_PERIOD_US`] µs;
//! * NMI: a CPU-local NMI handler ([`super::nmi`]) that writes one record per
//!   NMI IPI sent to `W`: by the reader from CPU `R` (lands at any instruction
//!   of the writers) and by the task and IRQ writers to themselves in the
//!   middle of an open record (forces nesting depth 2 and 3).
//!
//! A reader kthread bound to `R != W` consumes concurrently, one record
//! (`consume`) and a batch (`consume_batch`) in turn. Every record
//! carries (writer kind, per-kind sequence number, time stamp, filler,
//! checksum). Checked: no torn record (checksum, length), no reordering
//! (sequence numbers strictly increase per writer kind), the time stamp
//! returned by the reader is the one written, every reserve is accounted as
//! committed or failed, every committed record as read or overrun
//! ([`Stats`]), and NMI writers really ran in NMI context while records of
//! interrupted writers were open. Failures are collected while everything
//! runs and asserted only after teardown (a failed KUnit assertion ends the
//! test thread without running destructors).

use core::ffi::{c_int, c_void};
use core::pin::Pin;
use kernel::sync::atomic::{Acquire, Atomic, Full, Relaxed, Release};

use kernel::{
    cpu::CpuId,
    impl_has_hr_timer,
    prelude::*,
    time::{
        delay::fsleep,
        hrtimer::{
            HrTimer, HrTimerCallback, HrTimerCallbackContext, HrTimerRestart,
            RelativePinnedHardMode, ScopedHrTimerPointer,
        },
        Delta, Monotonic,
    },
};

use super::kthread::{park, wait_until, Thread};
use super::nmi;
use crate::ringbuf::{CpuBuffer, Mode, RecordSwitch, Stats, Switches};
use crate::shims::clock::mono_ns;
use crate::shims::cpu::cpu_online;

/// Period of the IRQ writer.
const TIMER_PERIOD_US: i64 = 50;
/// How long the task writer writes, per mode.
const RUN_NS: u64 = 60_000_000;
/// The writer runs on past `RUN_NS` until it wrote this many task records
/// (and was interrupted), at most `MAX_RUN_NS`.
const MIN_TASK_WRITES: u64 = 2000;
const MAX_RUN_NS: u64 = 1_000_000_000;
/// The reader sends an NMI to the writer CPU at most this often.
const NMI_INTERVAL_NS: u64 = 20_000;
/// Give up waiting for the threads after this long.
const TIMEOUT_MS: u32 = 3000;
/// Records per `consume_batch` of the reader at most.
const READ_BATCH: usize = 32;

/// Writer kinds (index into the per-kind counters, top byte of word 0).
const TASK: usize = 0;
const IRQ: usize = 1;
const NMI: usize = 2;
const KINDS: usize = 3;

/// Payload words: kind|seq, time stamp, 1..4 filler words, checksum.
const MIN_WORDS: usize = 3;
const MAX_WORDS: usize = 7;

static GLOBAL_ON: RecordSwitch = RecordSwitch::new(true);
static SET_ON: RecordSwitch = RecordSwitch::new(true);

/// The running test, for the NMI handler (which gets no context pointer).
static ACTIVE: Atomic<*mut Stress> = Atomic::new(core::ptr::null_mut());

fn checksum(words: &[u64]) -> u64 {
    words.iter().fold(0x9e37_79b9_7f4a_7c15u64, |c, &w| {
        (c ^ w).wrapping_mul(0x0000_0100_0000_01b3).rotate_left(17)
    })
}

fn filler(seq: u64, i: usize) -> u64 {
    seq.wrapping_mul(0x2545_f491_4f6c_dd1d) ^ (i as u64).wrapping_mul(0x9e37_79b9)
}

/// A zero counter (the kernel's atomics have no `Default`).
fn zero() -> Atomic<u64> {
    Atomic::new(0)
}

/// Counters of one writer kind (only that writer updates them).
struct Writer {
    /// Reserve attempts (= last sequence number used).
    seq: Atomic<u64>,
    committed: Atomic<u64>,
    failed: Atomic<u64>,
    /// Records written while an interrupted writer had a record open.
    nested: Atomic<u64>,
    /// Records written by this kind not in the expected context.
    wrong_context: Atomic<u64>,
}

impl Default for Writer {
    fn default() -> Self {
        Writer {
            seq: zero(),
            committed: zero(),
            failed: zero(),
            nested: zero(),
            wrong_context: zero(),
        }
    }
}

/// What the reader found.
struct Reader {
    read: [Atomic<u64>; KINDS],
    last_seq: [Atomic<u64>; KINDS],
    torn: Atomic<u64>,
    reordered: Atomic<u64>,
    bad_ts: Atomic<u64>,
    errors: Atomic<u64>,
    lost_reported: Atomic<u64>,
}

impl Default for Reader {
    fn default() -> Self {
        Reader {
            read: core::array::from_fn(|_| zero()),
            last_seq: core::array::from_fn(|_| zero()),
            torn: zero(),
            reordered: zero(),
            bad_ts: zero(),
            errors: zero(),
            lost_reported: zero(),
        }
    }
}

#[pin_data]
struct Stress {
    #[pin]
    timer: HrTimer<Stress>,
    buf: CpuBuffer<'static, KVec<crate::ringbuf::atomics::AtomicU64>>,
    writer_cpu: CpuId,
    writers: [Writer; KINDS],
    reader: Reader,
    /// Records currently open on the writer CPU (our own nesting depth).
    open: Atomic<u32>,
    max_depth: Atomic<u32>,
    /// NMIs sent and not yet handled (0 or 1: back-to-back NMIs can merge).
    nmi_pending: Atomic<u32>,
    nmi_sent: Atomic<u64>,
    reader_started: Atomic<bool>,
    writer_done: Atomic<bool>,
    reader_done: Atomic<bool>,
    /// Set when the run ends, in time or not: the reader leaves its loop
    /// (it does not wait for `kthread_stop`, so without this a reader still
    /// waiting for an NMI that never came, or for a buffer that stays
    /// contended, would hang the load in `kthread_stop`; the checks then
    /// report `timed_out` and what was left).
    abort: Atomic<bool>,
}

impl_has_hr_timer! {
    impl HasHrTimer<Self> for Stress {
        mode: RelativePinnedHardMode<Monotonic>, field: self.timer
    }
}

impl HrTimerCallback for Stress {
    type Pointer<'a> = Pin<&'a Stress>;

    fn run(this: Pin<&Stress>, mut ctx: HrTimerCallbackContext<'_, Self>) -> HrTimerRestart {
        if this.writer_done.load(Relaxed) {
            return HrTimerRestart::NoRestart;
        }
        let self_nmi = this.writers[IRQ].seq.load(Relaxed) % 2 == 0;
        this.write_one(IRQ, || {
            if self_nmi {
                this.try_send_nmi();
            }
        });
        ctx.forward_now(Delta::from_micros(TIMER_PERIOD_US));
        HrTimerRestart::Restart
    }
}

/// The NMI writer.
struct StressNmi;

impl nmi::NmiHandler for StressNmi {
    const NAME: &'static CStr = c"oprofile_rs_kunit";

    fn handle(_regs: &crate::shims::perf::Regs) -> bool {
        let p = ACTIVE.load(Acquire);
        if p.is_null() {
            return false;
        }
        // SAFETY: `ACTIVE` is non-null only while the `Stress` it points to is
        // alive; it is cleared before the NMI handler is unregistered (which
        // waits for running handlers) and before the `Stress` is freed.
        let s = unsafe { &*p };
        if CpuId::current() != s.writer_cpu || s.nmi_pending.load(Acquire) == 0 {
            return false;
        }
        if !nmi::in_nmi() {
            s.writers[NMI].wrong_context.fetch_add(1, Relaxed);
        }
        s.write_one(NMI, || {});
        s.nmi_pending.store(0, Release);
        true
    }
}

impl Stress {
    fn new(mode: Mode, words: usize, writer_cpu: CpuId) -> Result<Pin<KBox<Stress>>> {
        let mut storage = KVec::with_capacity(words, GFP_KERNEL)?;
        for _ in 0..words {
            storage.push(crate::ringbuf::atomics::AtomicU64::new(0), GFP_KERNEL)?;
        }
        let switches = Switches {
            global: &GLOBAL_ON,
            set: &SET_ON,
        };
        let buf = CpuBuffer::new(storage, mode, switches).map_err(|_| EINVAL)?;
        KBox::pin_init(
            pin_init!(Stress {
                timer <- HrTimer::new(),
                buf,
                writer_cpu,
                writers: Default::default(),
                reader: Default::default(),
                open: Atomic::new(0),
                max_depth: Atomic::new(0),
                nmi_pending: Atomic::new(0),
                nmi_sent: Atomic::new(0),
                reader_started: Atomic::new(false),
                writer_done: Atomic::new(false),
                reader_done: Atomic::new(false),
                abort: Atomic::new(false),
            }),
            GFP_KERNEL,
        )
    }

    /// Sends an NMI to the writer CPU unless one is in flight.
    fn try_send_nmi(&self) {
        if self.nmi_pending.cmpxchg(0, 1, Full).is_ok() {
            self.nmi_sent.fetch_add(1, Relaxed);
            nmi::send_nmi(self.writer_cpu);
        }
    }

    /// Writes one record of writer `kind`, calling `mid` while it is open.
    fn write_one(&self, kind: usize, mid: impl FnOnce()) {
        let Some(w) = self.writers.get(kind) else {
            return;
        };
        let seq = w.seq.load(Relaxed).wrapping_add(1);
        w.seq.store(seq, Relaxed);
        let nwords = MIN_WORDS + (seq as usize % (MAX_WORDS - MIN_WORDS + 1));
        let ts = mono_ns();
        match self.buf.reserve(nwords * 8, ts) {
            Ok(mut slot) => {
                let depth = self.open.fetch_add(1, Relaxed) + 1;
                let mut old = self.max_depth.load(Relaxed);
                while old < depth {
                    match self.max_depth.cmpxchg(old, depth, Relaxed) {
                        Ok(_) => break,
                        Err(cur) => old = cur,
                    }
                }
                if depth > 1 {
                    w.nested.fetch_add(1, Relaxed);
                }
                let mut words = [0u64; MAX_WORDS];
                words[0] = ((kind as u64) << 56) | seq;
                words[1] = ts;
                for (i, v) in words.iter_mut().enumerate().take(nwords - 1).skip(2) {
                    *v = filler(seq, i);
                }
                let sum = checksum(&words[..nwords - 1]);
                words[nwords - 1] = sum;
                // Write the first half, let an interrupt in, then the rest.
                let half = nwords / 2;
                let mut ok = slot.write_words(0, &words[..half]);
                mid();
                ok &= slot.write_words(half, &words[half..nwords]);
                if !ok {
                    // Cannot happen: the slot has exactly `nwords` words.
                    w.wrong_context.fetch_add(1, Relaxed);
                }
                slot.commit();
                self.open.fetch_sub(1, Relaxed);
                w.committed.fetch_add(1, Relaxed);
            }
            Err(_) => {
                mid();
                w.failed.fetch_add(1, Relaxed);
            }
        }
    }

    /// Task-context writer body (on the writer CPU).
    fn writer(self: Pin<&Self>) {
        let this = self;
        // Start together with the reader (bounded: the reader may have failed to start).
        for _ in 0..TIMEOUT_MS {
            if this.reader_started.load(Acquire) {
                break;
            }
            fsleep(Delta::from_millis(1));
        }
        let start = mono_ns();
        let deadline = start.wrapping_add(RUN_NS);
        // A loaded host can deschedule this vCPU past the deadline, or the
        // timer can take most of it: run on until the task writer wrote
        // MIN_TASK_WRITES records and was interrupted at least once, and the
        // timer wrote at least once (a loaded host can starve QEMU's timers
        // for the whole window), within MAX_RUN_NS (the checks then say what
        // did not happen).
        let limit = start.wrapping_add(MAX_RUN_NS);
        let nested =
            || this.writers[IRQ].nested.load(Relaxed) + this.writers[NMI].nested.load(Relaxed);
        let timer_wrote = || this.writers[IRQ].seq.load(Relaxed) > 0;
        this.start_scoped(Delta::from_micros(TIMER_PERIOD_US), || {
            let mut i = 0u64;
            loop {
                let t = mono_ns();
                if t >= limit
                    || (t >= deadline && i >= MIN_TASK_WRITES && nested() > 0 && timer_wrote())
                {
                    break;
                }
                let self_nmi = i % 64 == 0;
                this.write_one(TASK, || {
                    if self_nmi {
                        this.try_send_nmi();
                    }
                });
                i = i.wrapping_add(1);
            }
            this.writer_done.store(true, Release);
        });
    }

    /// Reader body (on another CPU): consumes until the writers are done and
    /// the buffer is empty; sends NMIs to the writer CPU meanwhile.
    fn reader(&self) {
        let mut out = [0u8; MAX_WORDS * 8];
        let mut last_nmi = 0u64;
        let mut batched = false;
        self.reader_started.store(true, Release);
        loop {
            if self.abort.load(Acquire) {
                break;
            }
            let done = self.writer_done.load(Acquire) && self.nmi_pending.load(Acquire) == 0;
            if !self.writer_done.load(Relaxed) {
                let t = mono_ns();
                if t.wrapping_sub(last_nmi) >= NMI_INTERVAL_NS {
                    last_nmi = t;
                    self.try_send_nmi();
                }
            }
            // Every other read is a batch of up to `READ_BATCH` records
            // (`consume_batch`, the sync's path), the others one record.
            batched = !batched;
            let got = if batched {
                let mut n = 0;
                self.buf
                    .consume_batch(&mut out, |info, payload| {
                        self.check(payload, info.len, info.ts, info.lost);
                        n += 1;
                        n < READ_BATCH
                    })
                    .map(|_| ())
            } else {
                self.buf
                    .consume(&mut out)
                    .map(|info| self.check(&out, info.len, info.ts, info.lost))
            };
            match got {
                Ok(()) => {}
                Err(crate::ringbuf::ReadError::Empty) => {
                    if done {
                        break;
                    }
                }
                Err(crate::ringbuf::ReadError::Contended) => {}
                Err(_) => {
                    self.reader.errors.fetch_add(1, Relaxed);
                    if done {
                        break;
                    }
                }
            }
        }
        self.reader_done.store(true, Release);
    }

    fn check(&self, out: &[u8], len: usize, ts: u64, lost: u64) {
        let r = &self.reader;
        r.lost_reported.fetch_add(lost, Relaxed);
        let nwords = len / 8;
        if len % 8 != 0 || !(MIN_WORDS..=MAX_WORDS).contains(&nwords) {
            r.torn.fetch_add(1, Relaxed);
            return;
        }
        let mut words = [0u64; MAX_WORDS];
        for (w, c) in words.iter_mut().zip(out.chunks_exact(8)).take(nwords) {
            let mut b = [0u8; 8];
            b.copy_from_slice(c);
            *w = u64::from_ne_bytes(b);
        }
        let kind = (words[0] >> 56) as usize;
        let seq = words[0] & ((1 << 56) - 1);
        let expected_words = MIN_WORDS + (seq as usize % (MAX_WORDS - MIN_WORDS + 1));
        if kind >= KINDS
            || nwords != expected_words
            || checksum(&words[..nwords - 1]) != words[nwords - 1]
        {
            r.torn.fetch_add(1, Relaxed);
            return;
        }
        if words[1] != ts {
            r.bad_ts.fetch_add(1, Relaxed);
        }
        if seq <= r.last_seq[kind].load(Relaxed) {
            r.reordered.fetch_add(1, Relaxed);
        }
        r.last_seq[kind].store(seq, Relaxed);
        r.read[kind].fetch_add(1, Relaxed);
    }
}

/// Thread entry points.
///
/// # Safety
///
/// `data` must point to a pinned `Stress` that outlives the thread (the
/// test stops the thread with `kthread_stop` before freeing it).
unsafe extern "C" fn writer_thread(data: *mut c_void) -> c_int {
    // SAFETY: per the function's safety contract; it was pinned by the caller.
    let s = unsafe { Pin::new_unchecked(&*data.cast::<Stress>()) };
    s.writer();
    park();
    0
}

/// # Safety
///
/// As for [`writer_thread`].
unsafe extern "C" fn reader_thread(data: *mut c_void) -> c_int {
    // SAFETY: per the function's safety contract.
    let s = unsafe { &*data.cast::<Stress>() };
    s.reader();
    park();
    0
}

/// Everything measured by one run.
struct Report {
    stats: Stats,
    attempts: [u64; KINDS],
    committed: [u64; KINDS],
    failed: [u64; KINDS],
    read: [u64; KINDS],
    nested: [u64; KINDS],
    wrong_context: u64,
    max_depth: u32,
    nmi_sent: u64,
    nmi_pending: u32,
    torn: u64,
    reordered: u64,
    bad_ts: u64,
    errors: u64,
    lost_reported: u64,
    timed_out: bool,
}

fn load3(a: &[Atomic<u64>; KINDS]) -> [u64; KINDS] {
    [a[0].load(Relaxed), a[1].load(Relaxed), a[2].load(Relaxed)]
}

/// Runs one stress round, writer on CPU 0 and reader on CPU 1. `ENODEV`
/// (a failed test, not a skip: the kernel crate's KUnit has no skip, and a
/// test that returned early would pass untested) if either is offline;
/// the test VM always has both online when the module loads.
fn run(mode: Mode, words: usize) -> Result<Report> {
    let (Some(w), Some(r)) = (CpuId::from_u32(0), CpuId::from_u32(1)) else {
        pr_err!("ringbuf stress: needs CPUs 0 and 1 (fewer CPUs)\n");
        return Err(ENODEV);
    };
    if !cpu_online(w) || !cpu_online(r) {
        pr_err!("ringbuf stress: needs CPUs 0 and 1 online\n");
        return Err(ENODEV);
    }
    let stress = Stress::new(mode, words, w)?;
    let ptr = core::ptr::from_ref::<Stress>(&stress).cast_mut();
    let nmi_reg = KBox::pin_init(nmi::Registration::<StressNmi>::new(), GFP_KERNEL)?;
    ACTIVE.store(ptr, Release);
    let timed_out;
    {
        // SAFETY: `stress` is pinned and outlives both threads (dropped at
        // the end of this block, before `stress`).
        let reader = unsafe { Thread::start(reader_thread, ptr.cast(), r) };
        // SAFETY: as above.
        let writer = unsafe { Thread::start(writer_thread, ptr.cast(), w) };
        if reader.is_err() || writer.is_err() {
            stress.writer_done.store(true, Release);
            timed_out = true;
        } else {
            timed_out = !wait_until(TIMEOUT_MS, || {
                stress.writer_done.load(Acquire) && stress.reader_done.load(Acquire)
            });
        }
        // The reader leaves its loop if it has not (a timeout), the threads
        // stop here (the writer's timer is cancelled before it returns).
        stress.abort.store(true, Release);
        drop(writer);
        drop(reader);
    }
    ACTIVE.store(core::ptr::null_mut(), Release);
    // Unregistering waits for an NMI handler still running.
    drop(nmi_reg);
    let s = &*stress;
    let wr = |f: fn(&Writer) -> &Atomic<u64>| -> [u64; KINDS] {
        [f(&s.writers[0]), f(&s.writers[1]), f(&s.writers[2])].map(|a| a.load(Relaxed))
    };
    Ok(Report {
        stats: s.buf.stats(),
        attempts: wr(|w| &w.seq),
        committed: wr(|w| &w.committed),
        failed: wr(|w| &w.failed),
        nested: wr(|w| &w.nested),
        wrong_context: wr(|w| &w.wrong_context).iter().sum(),
        read: load3(&s.reader.read),
        max_depth: s.max_depth.load(Relaxed),
        nmi_sent: s.nmi_sent.load(Relaxed),
        nmi_pending: s.nmi_pending.load(Relaxed),
        torn: s.reader.torn.load(Relaxed),
        reordered: s.reader.reordered.load(Relaxed),
        bad_ts: s.reader.bad_ts.load(Relaxed),
        errors: s.reader.errors.load(Relaxed),
        lost_reported: s.reader.lost_reported.load(Relaxed),
        timed_out,
    })
}

fn print(name: &str, r: &Report) {
    pr_info!(
        "ringbuf stress {name}: attempts task/irq/nmi={}/{}/{} committed={}/{}/{} read={}/{}/{} \
         nested={}/{}/{} max_depth={} nmi_sent={} dropped_full={} overrun={} commit_overrun={} \
         torn={} reordered={} bad_ts={} errors={}\n",
        r.attempts[0],
        r.attempts[1],
        r.attempts[2],
        r.committed[0],
        r.committed[1],
        r.committed[2],
        r.read[0],
        r.read[1],
        r.read[2],
        r.nested[0],
        r.nested[1],
        r.nested[2],
        r.max_depth,
        r.nmi_sent,
        r.stats.dropped_full,
        r.stats.overrun,
        r.stats.commit_overrun,
        r.torn,
        r.reordered,
        r.bad_ts,
        r.errors
    );
}

#[kunit_tests(oprofile_rs_ringbuf_stress)]
mod tests {
    use super::*;

    /// The checks common to both modes: the first that fails, by its text.
    /// (A helper's `assert!` would be core's, which panics and oopses the
    /// kernel; only the test bodies get KUnit's.)
    fn check_common(r: &Report) -> Option<&'static str> {
        macro_rules! check {
            ($cond:expr) => {
                if !($cond) {
                    return Some(stringify!($cond));
                }
            };
        }
        check!(!r.timed_out);
        check!(r.nmi_pending == 0);
        check!(r.torn == 0);
        check!(r.reordered == 0);
        check!(r.bad_ts == 0);
        check!(r.errors == 0);
        check!(r.wrong_context == 0);
        // Every writer kind ran, the NMI one in NMI context (checked by
        // `wrong_context`), and writers really interrupted open records.
        for k in 0..KINDS {
            check!(r.attempts[k] > 0);
            check!(r.attempts[k] == r.committed[k] + r.failed[k]);
            check!(r.read[k] <= r.committed[k]);
        }
        check!(r.nested[IRQ] + r.nested[NMI] > 0);
        check!(r.max_depth >= 2);
        let st = &r.stats;
        let committed: u64 = r.committed.iter().sum();
        let failed: u64 = r.failed.iter().sum();
        let read: u64 = r.read.iter().sum();
        check!(st.committed == committed);
        check!(st.discarded == 0);
        check!(st.dropped_disabled == 0);
        check!(st.dropped_full + st.commit_overrun == failed);
        check!(st.read == read);
        check!(st.entries == 0);
        check!(st.committed == st.read + st.overrun);
        check!(r.lost_reported <= st.lost());
        None
    }

    #[test]
    fn producer_consumer_nested() {
        let r = run(Mode::ProducerConsumer, 1024);
        assert!(r.is_ok());
        if let Ok(r) = r {
            print("producer/consumer", &r);
            let failed = check_common(&r);
            if let Some(what) = failed {
                pr_err!("ringbuf stress: check failed: {what}\n");
            }
            assert!(failed.is_none());
            assert_eq!(r.stats.overrun, 0);
            // Nothing overwritten: every committed record was read.
            assert_eq!(r.read, r.committed);
        }
    }

    #[test]
    fn overwrite_nested() {
        let r = run(Mode::Overwrite, 256);
        assert!(r.is_ok());
        if let Ok(r) = r {
            print("overwrite", &r);
            let failed = check_common(&r);
            if let Some(what) = failed {
                pr_err!("ringbuf stress: check failed: {what}\n");
            }
            assert!(failed.is_none());
            assert_eq!(r.stats.dropped_full, 0);
        }
    }
}
