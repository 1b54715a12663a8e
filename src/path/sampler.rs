// SPDX-License-Identifier: GPL-2.0

//! log_sample: the overflow handler's work, on the sampled CPU.
//!
//! Runs in NMI (hardware events), hard-IRQ (the clocks) or task context
//! (the other software events: page faults in the fault handler, context
//! switches and migrations in the scheduler), always with preemption off
//! (perf's, and the C trampoline's own, see `glue.c`): it only reads the
//! current task, reserves and commits records in this CPU's ring buffer and
//! bumps per-CPU atomic counters. No sleeping, no allocation, no lock.
//!
//! A task-context writer can be interrupted on its CPU by a hard-IRQ or NMI
//! writer (a cpu-clock or PMU overflow in the middle of a page-fault sample):
//! the ring buffer takes nested writers (`src/ringbuf/`, the nesting model),
//! the callchain scratch space is guarded by its busy flag (the nested
//! sample records no callchain, counted), and the COMM bookkeeping is
//! advisory (a race writes one COMM too many, never a wrong one). A sample
//! is written only into the buffer of the CPU it runs on: the handler checks
//! it (preemption is off, so the answer holds until it returns) and counts a
//! mismatch, which perf never produces, as `sample_wrong_cpu`.

use core::cell::UnsafeCell;
use kernel::{
    prelude::*,
    sync::atomic::{Acquire, Atomic, Relaxed, Release},
};

use crate::{
    format::{self, Endian, MAX_DEPTH, MAX_EVENTS, MAX_USER_DEPTH},
    path::{
        unwind_tables::{self, Current, Lookup, TablesWanted},
        user_stack::{self, UserRegs},
    },
    ringbuf::{CpuBuffer, Mode, ReserveError, Switches},
    shims::{
        cpu_work::Kick,
        inline_atomic as atomic,
        perf::{Overflow, OverflowHandler, Regs},
        {
            clock::{now, store_max},
            task::{current_switch, current_task},
        },
    },
};

/// Entries of a CPU's callchain scratch space: the kernel chain, then the
/// user chain.
const CHAIN_LEN: usize = MAX_DEPTH + MAX_USER_DEPTH;

/// A CPU's callchain scratch space, so that the NMI stack does not hold it,
/// and its user stack copy area (`user_stack_size`).
///
/// # Invariants
///
/// `chain`, `stack` and `lookups` are only accessed between a successful acquire of
/// `busy` and its release, so at most one `&mut` to each exists (an
/// overflow that interrupts another on the same CPU finds it busy and
/// records no callchain and no stack copy). `stack` holds
/// [`STACK_WORDS`] words, or none (a sampler not provisioned yet: see
/// [`CpuSampler::placeholder`]; a sample then copies no stack, as one whose
/// copy comes up short).
struct Scratch {
    busy: Atomic<bool>,
    chain: UnsafeCell<[u64; CHAIN_LEN]>,
    stack: UnsafeCell<KVVec<u64>>,
    /// The CPU's last unwind-table lookups (on the heap: 2 KiB would weigh
    /// on the stack frames that build samplers); none before the sampler
    /// is provisioned.
    lookups: UnsafeCell<Option<KBox<unwind_tables::LookupCache>>>,
}

// SAFETY: access to `chain`, `stack` and `lookups` is exclusive by the
// invariant.
unsafe impl Sync for Scratch {}

/// Words of a CPU's user stack copy area.
const STACK_WORDS: usize = format::MAX_USER_STACK / 8;

/// A CPU's user stack copy area (`STACK_WORDS` zeroed words).
pub(crate) fn new_stack_area() -> Result<KVVec<u64>> {
    Ok(KVVec::from_elem(0, STACK_WORDS, GFP_KERNEL_ACCOUNT)?)
}

/// Bytes of a placeholder ring: the fewest a ring buffer takes. A sampler
/// of a CPU that has not been online since the load (or the configuration
/// in force) has one ([`CpuSampler::placeholder`]); it never records.
pub(crate) const PLACEHOLDER_BYTES: usize = crate::ringbuf::MIN_WORDS * 8;

impl Scratch {
    fn new() -> Result<Self> {
        // INVARIANT: not busy; `stack` has its `STACK_WORDS` words.
        Ok(Self {
            busy: Atomic::new(false),
            chain: UnsafeCell::new([0; CHAIN_LEN]),
            stack: UnsafeCell::new(new_stack_area()?),
            lookups: UnsafeCell::new(Some(unwind_tables::LookupCache::new_boxed()?)),
        })
    }

    /// A scratch space without its stack copy area (see
    /// [`Self::set_stack`]).
    fn without_stack() -> Self {
        // INVARIANT: not busy; `stack` is empty.
        Self {
            busy: Atomic::new(false),
            chain: UnsafeCell::new([0; CHAIN_LEN]),
            stack: UnsafeCell::new(KVVec::new()),
            lookups: UnsafeCell::new(None),
        }
    }

    /// Installs `area` (from [`new_stack_area`]) as the stack copy area;
    /// `EBUSY` (nothing changed) if the scratch space is in use. Called
    /// before the CPU's sampler is up, when no overflow of it runs.
    fn set_stack(&self, area: KVVec<u64>) -> Result {
        let cache = unwind_tables::LookupCache::new_boxed()?;
        if self.busy.xchg(true, Acquire) {
            return Err(EBUSY);
        }
        // SAFETY: `busy` was clear and is now ours: no other reference to
        // `lookups` exists.
        let lookups = unsafe { &mut *self.lookups.get() };
        if lookups.is_none() {
            *lookups = Some(cache);
        }
        // SAFETY: `busy` was clear and is now ours: no other reference to
        // `stack` exists.
        let stack = unsafe { &mut *self.stack.get() };
        // INVARIANT: `area` has `STACK_WORDS` words.
        *stack = area;
        self.busy.store(false, Release);
        Ok(())
    }

    /// Runs `f` on the scratch space (the chain, the stack copy area, the
    /// lookup cache), or returns `None` if it is in use.
    fn with<R>(
        &self,
        f: impl FnOnce(&mut [u64; CHAIN_LEN], &mut [u64], Option<&mut unwind_tables::LookupCache>) -> R,
    ) -> Option<R> {
        // Without calls, as the rest of the sample path (`inline_atomic.rs`).
        if atomic::swap_acquire(&self.busy, true) {
            return None;
        }
        // SAFETY: `busy` was clear and is now ours: no other reference to
        // `chain` exists.
        let chain = unsafe { &mut *self.chain.get() };
        // SAFETY: as for `chain`: no other reference to `stack` exists.
        let stack = unsafe { &mut *self.stack.get() };
        // SAFETY: as for `chain`: no other reference to `lookups` exists.
        let lookups = unsafe { &mut *self.lookups.get() };
        let r = f(chain, stack.as_mut_slice(), lookups.as_deref_mut());
        atomic::store_release(&self.busy, false);
        Some(r)
    }
}

/// Odd while a flight-recorder snapshot pauses recording (`snapshot.rs`),
/// bumped at its start and at its end: a reserve refused as `Disabled` while
/// it changed or was odd was refused by the pause, and its sample is counted
/// as received and lost (never silently dropped).
pub(crate) static PAUSE_GEN: Atomic<u64> = Atomic::new(0);

/// A comm as two words, for a cheap comparison.
fn comm_words(comm: &[u8; 16]) -> [u64; 2] {
    let v = u128::from_ne_bytes(*comm);
    [v as u64, (v >> 64) as u64]
}

/// Storage of a CPU ring buffer.
pub(crate) type Storage = KVVec<crate::ringbuf::atomics::AtomicU64>;

/// Zeroed storage for a CPU ring buffer of `bytes` bytes.
pub(crate) fn new_storage(bytes: usize) -> Result<Storage> {
    let words = bytes / 8;
    // Charged to the memory cgroup of the process that asks
    // (`buffer_memory.rs`), as the other buffers.
    let mut storage = Storage::with_capacity(words, GFP_KERNEL_ACCOUNT)?;
    for _ in 0..words {
        storage.push(
            crate::ringbuf::atomics::AtomicU64::new(0),
            GFP_KERNEL_ACCOUNT,
        )?;
    }
    Ok(storage)
}

/// Per-CPU counters, as in oprofile's cpu_buffer.c.
pub(crate) struct Counters {
    /// Samples delivered by the counter while recording was on.
    pub(crate) sample_received: Atomic<u64>,
    /// Samples lost because this CPU's buffer was full, or dropped from it
    /// at `tracing_on=0` because the event buffer was full.
    pub(crate) sample_lost_overflow: Atomic<u64>,
    /// The time of the latest sample lost because this CPU's buffer was
    /// full (0: none yet): the time of the CPU's next LOST record. Stored
    /// before `sample_lost_overflow` counts it (release), read after
    /// (acquire).
    pub(crate) last_lost_time: Atomic<u64>,
    /// Samples with no usable PC.
    pub(crate) sample_invalid_eip: Atomic<u64>,
    /// Of `sample_received`: overflows after which perf throttled the
    /// counter (more in one tick than `kernel.perf_event_max_sample_rate`
    /// allows; it delivers nothing more until its next tick). Each such
    /// SAMPLE that reaches the stream carries the THROTTLED flag.
    pub(crate) sample_throttled: Atomic<u64>,
    /// Kernel callchains cut short: the unwinder failed before the outermost
    /// frame, or (an overflow nested in another on this CPU) no scratch space
    /// was free. Chains deeper than `backtrace_depth` are cut there silently.
    pub(crate) backtrace_aborted: Atomic<u64>,
    /// User callchains cut short by a fault (a frame record not mapped or
    /// not present) or a bad frame pointer (misaligned, not above the
    /// previous frame, outside user space; or a return address outside it),
    /// or not walked because the scratch space was busy (nested overflow).
    /// Code built without frame pointers ends its chains so, and so does
    /// the C library's start code above `main` in most programs.
    pub(crate) user_backtrace_aborted: Atomic<u64>,
    /// User callchains cut at `user_backtrace_depth` with a frame still to
    /// follow.
    pub(crate) user_backtrace_truncated: Atomic<u64>,
    /// Overflow handler cost: sum and maximum in ns, and the overflows
    /// timed, which the average divides by: one in [`TIMED_EVERY`] of the
    /// CPU's overflows (recorded or not: also those of other cgroups and
    /// those while recording is off); the others run without the two clock
    /// reads, which cost about a tenth of a sample.
    pub(crate) handler_ns_sum: Atomic<u64>,
    pub(crate) handler_calls: Atomic<u64>,
    pub(crate) handler_ns_max: Atomic<u64>,
    /// The CPU's overflows so far, for [`TIMED_EVERY`] (advisory: a
    /// nested overflow may count twice or be timed too).
    handler_seen: Atomic<u32>,
    /// Of `sample_lost_overflow`: samples that arrived while a snapshot
    /// paused recording.
    pub(crate) sample_lost_snapshot: Atomic<u64>,
    /// COMM records committed to the ring buffer (so that its record count
    /// splits into COMMs, SWITCHes and SAMPLEs).
    pub(crate) comm_records: Atomic<u64>,
    /// SWITCH records committed to the ring buffer (the context-switches
    /// event's switch-outs).
    pub(crate) switch_records: Atomic<u64>,
    /// Records moved by this CPU's periodic sync, and the ns it spent.
    pub(crate) sync_records: Atomic<u64>,
    pub(crate) sync_ns: Atomic<u64>,
    /// Runs of this CPU's sync work (each second, each kick, its last
    /// drain going offline; in overwrite mode too, where they move nothing).
    pub(crate) sync_runs: Atomic<u64>,
    /// Of `sample_received`: per event index of the configuration in force.
    pub(crate) event_samples: [Atomic<u64>; MAX_EVENTS],
    /// Overflows delivered on another CPU than this sampler's (dropped;
    /// perf binds each counter to its CPU, so this stays 0).
    pub(crate) sample_wrong_cpu: Atomic<u64>,
    /// Overflows while recording was on that interrupted a task outside the
    /// cgroup filter (`cgroup.rs`): not recorded, neither received nor lost
    /// (also not during a snapshot's pause, which refuses the others).
    pub(crate) sample_other_cgroup: Atomic<u64>,
    /// Samples whose user stack copy (`user_stack_size`) ended before the
    /// size asked for: the stack's top is nearer, or a page of it is not
    /// present (not faulted in from the handler).
    pub(crate) user_stack_short: Atomic<u64>,
    /// Overflows refused because recording was off (`tracing_on=0`, a
    /// snapshot's pause, a configuration change): it stands still once
    /// `tracing_on=0` returned, the counters being stopped then.
    pub(crate) sample_while_off: Atomic<u64>,
}

impl Counters {
    /// Counts `n` samples lost at `time` (the latest of them): the time
    /// first, so that a sync that sees the count sees this time or a later
    /// one (`sync.rs` stamps the CPU's LOST record with it).
    pub(crate) fn lose(&self, n: u64, time: u64) {
        atomic::store(&self.last_lost_time, time);
        self.sample_lost_overflow.fetch_add(n, Release);
    }

    fn new() -> Self {
        Self {
            sample_received: Atomic::new(0),
            sample_lost_overflow: Atomic::new(0),
            last_lost_time: Atomic::new(0),
            sample_invalid_eip: Atomic::new(0),
            sample_throttled: Atomic::new(0),
            backtrace_aborted: Atomic::new(0),
            user_backtrace_aborted: Atomic::new(0),
            user_backtrace_truncated: Atomic::new(0),
            handler_ns_sum: Atomic::new(0),
            handler_calls: Atomic::new(0),
            handler_ns_max: Atomic::new(0),
            handler_seen: Atomic::new(0),
            sample_lost_snapshot: Atomic::new(0),
            comm_records: Atomic::new(0),
            switch_records: Atomic::new(0),
            sync_records: Atomic::new(0),
            sync_runs: Atomic::new(0),
            sync_ns: Atomic::new(0),
            event_samples: core::array::from_fn(|_| Atomic::new(0)),
            sample_wrong_cpu: Atomic::new(0),
            sample_other_cgroup: Atomic::new(0),
            user_stack_short: Atomic::new(0),
            sample_while_off: Atomic::new(0),
        }
    }
}

/// KUnit builds only: a hook a suite sets, which [`CpuSampler::log_sample`]
/// calls after it decided whether to name the task and before it reserves
/// the SAMPLE (`kunit/sampler_nmi.rs` ends an emulated snapshot's pause
/// there, as a snapshot may on another CPU while a handler runs). The sample
/// path names no test code: the suite hands its function in.
#[cfg(oprofile_rs_kunit)]
pub(crate) struct SampleHook(pub(crate) fn(&CpuSampler));

/// The hook in force (null: none); only ever a `&'static SampleHook`.
#[cfg(oprofile_rs_kunit)]
pub(crate) static BEFORE_SAMPLE: Atomic<*mut SampleHook> = Atomic::new(core::ptr::null_mut());

/// Calls the hook in force, if any.
#[cfg(oprofile_rs_kunit)]
fn before_sample_hook(s: &CpuSampler) {
    let hook = BEFORE_SAMPLE.load(Acquire);
    if !hook.is_null() {
        // SAFETY: `BEFORE_SAMPLE` only ever holds a `&'static SampleHook`
        // (see its documentation), never freed and only read.
        let hook = unsafe { &*hook };
        (hook.0)(s);
    }
}

/// One CPU's sampling state.
pub(crate) struct CpuSampler {
    pub(crate) cpu: u32,
    pub(crate) buffer: CpuBuffer<'static, Storage>,
    /// The cgroup filter this CPU's samples are tested against.
    cgroup: &'static crate::path::cgroup::InForce,
    /// pid of the task the last COMM record on this CPU named (u64::MAX: none).
    last_pid: Atomic<u64>,
    /// The comm that COMM record gave, as two native-endian words: a task
    /// that `exec`s keeps its pid but changes its name.
    last_comm: [Atomic<u64>; 2],
    pub(crate) counters: Counters,
    /// Kernel callchain entries to record (0: none); changed at runtime while
    /// recording is off (`config.rs`), read once per sample.
    depth: Atomic<u32>,
    /// User callchain entries to record (0: none); as `depth`.
    user_depth: Atomic<u32>,
    /// Bytes of user stack copied per sample (0: none, else a multiple of
    /// 8 up to [`format::MAX_USER_STACK`]); as `depth`.
    user_stack: Atomic<u32>,
    /// Each copy stops after the first frame record when the frame
    /// pointer's record looks like one ([`user_stack::fit_len`]); as
    /// `depth`.
    user_stack_fit: Atomic<bool>,
    scratch: Scratch,
    /// Overwrite mode: the running task is named again (a new COMM record)
    /// after an eighth of the buffer's bytes of SAMPLE records, so that a
    /// COMM overwritten in the ring leaves at most that much nameless
    /// ([`Self::rename_bytes`]; never in consume mode).
    renames: Atomic<bool>,
    /// SAMPLE bytes written since the last COMM record.
    since_comm: Atomic<u64>,
    /// Unwind tables this CPU's samples found missing, for its sync to tell
    /// the reader.
    pub(crate) tables_wanted: TablesWanted,
    /// Bytes of records written since this CPU's last sync (approximate:
    /// an NMI between the load and the store of a hard-IRQ handler's
    /// update loses one); past half the ring, the sync is run now.
    pub(crate) since_sync: Atomic<u64>,
    /// This CPU's sync work's [`Kick`] (null until the profiler sets it;
    /// valid while the counters that call this sampler exist).
    kick: Atomic<*mut Kick>,
    /// Whether the CPU is between the profiler's hotplug callbacks `online`
    /// and `offline`: counters of perf's task-context software events are
    /// released only after `offline` (outside the CPU hotplug lock, see
    /// `profiler.rs`) and may still overflow until perf detaches them from
    /// the CPU going down; such overflows are ignored, not recorded after
    /// the CPU's last drain. Set and cleared on the CPU itself.
    pub(crate) up: Atomic<bool>,
    /// Whether the CPU has its buffers: its ring's storage of
    /// `cpu_buffer_size` bytes and its stack copy area (allocated when it
    /// first comes online, kept when it goes offline, see
    /// [`crate::path::sync::Buffers::provision`]); until then the ring is a
    /// placeholder of [`PLACEHOLDER_BYTES`]. Set (release) before `up` is
    /// first set, never cleared.
    provisioned: Atomic<bool>,
}

impl CpuSampler {
    pub(crate) fn new(
        cpu: u32,
        bytes: usize,
        depth: u32,
        user_depth: u32,
        switches: Switches<'static>,
        cgroup: &'static crate::path::cgroup::InForce,
        overwrite: bool,
    ) -> Result<Self> {
        let ring = (new_storage(bytes)?, Scratch::new()?);
        Self::build(
            cpu,
            ring,
            (depth, user_depth),
            switches,
            cgroup,
            overwrite,
            true,
        )
    }

    /// A sampler of CPU `cpu` without its buffers: a placeholder ring and
    /// no stack copy area, until [`Self::provide`] gives them when the CPU
    /// comes online (small bookkeeping per possible CPU, the buffers per
    /// CPU that has been online).
    pub(crate) fn placeholder(
        cpu: u32,
        depth: u32,
        user_depth: u32,
        switches: Switches<'static>,
        cgroup: &'static crate::path::cgroup::InForce,
        overwrite: bool,
    ) -> Result<Self> {
        let ring = (new_storage(PLACEHOLDER_BYTES)?, Scratch::without_stack());
        Self::build(
            cpu,
            ring,
            (depth, user_depth),
            switches,
            cgroup,
            overwrite,
            false,
        )
    }

    fn build(
        cpu: u32,
        (storage, scratch): (Storage, Scratch),
        (depth, user_depth): (u32, u32),
        switches: Switches<'static>,
        cgroup: &'static crate::path::cgroup::InForce,
        overwrite: bool,
        provisioned: bool,
    ) -> Result<Self> {
        let mode = if overwrite {
            Mode::Overwrite
        } else {
            Mode::ProducerConsumer
        };
        let buffer = CpuBuffer::new(storage, mode, switches).map_err(|_| EINVAL)?;
        Ok(Self {
            cpu,
            buffer,
            cgroup,
            last_pid: Atomic::new(u64::MAX),
            last_comm: [Atomic::new(0), Atomic::new(0)],
            counters: Counters::new(),
            depth: Atomic::new(depth.min(MAX_DEPTH as u32)),
            user_depth: Atomic::new(user_depth.min(MAX_USER_DEPTH as u32)),
            user_stack: Atomic::new(0),
            user_stack_fit: Atomic::new(false),
            scratch,
            renames: Atomic::new(overwrite),
            since_comm: Atomic::new(0),
            since_sync: Atomic::new(0),
            kick: Atomic::new(core::ptr::null_mut()),
            tables_wanted: TablesWanted::new(),
            up: Atomic::new(false),
            provisioned: Atomic::new(provisioned),
        })
    }

    /// Whether the CPU has its buffers (see `provisioned`).
    pub(crate) fn is_provisioned(&self) -> bool {
        self.provisioned.load(Acquire)
    }

    /// Installs the stack copy area `area` and marks the sampler
    /// provisioned; its ring's storage was installed before (a resize).
    /// Before the CPU's sampler is up (no overflow of it runs): `EBUSY`
    /// otherwise, nothing changed.
    pub(crate) fn provide(&self, area: KVVec<u64>) -> Result {
        self.scratch.set_stack(area)?;
        self.provisioned.store(true, Release);
        Ok(())
    }

    /// Bytes of this CPU's buffers: its ring's storage and its stack copy
    /// area (0 while it has none).
    pub(crate) fn buffer_bytes(&self) -> usize {
        if self.is_provisioned() {
            self.buffer.capacity_words() * 8 + format::MAX_USER_STACK
        } else {
            0
        }
    }

    /// Sets the callchain depths (kernel, user), capped at the format's:
    /// while recording is off (`config.rs`); the sample path reads each
    /// once per sample.
    pub(crate) fn set_depths(&self, depth: u32, user_depth: u32) {
        self.depth.store(depth.min(MAX_DEPTH as u32), Relaxed);
        self.user_depth
            .store(user_depth.min(MAX_USER_DEPTH as u32), Relaxed);
    }

    /// Sets the bytes of user stack copied per sample (0: none), while
    /// recording is off (`config.rs`); rounded down to whole words and
    /// capped at the format's [`format::MAX_USER_STACK`]; with `fit`, each
    /// copy stops after the first frame record where the frame pointer
    /// holds a plausible one ([`user_stack::fit_len`]).
    pub(crate) fn set_user_stack(&self, bytes: u32, fit: bool) {
        self.user_stack
            .store(bytes.min(format::MAX_USER_STACK as u32) / 8 * 8, Relaxed);
        self.user_stack_fit.store(fit, Relaxed);
    }

    /// Bytes of SAMPLE records after which the task is named again: an
    /// eighth of the buffer's bytes, i.e. its size in 8-byte words, which
    /// follows a resize (0: never, consume mode).
    fn rename_bytes(&self) -> u64 {
        if atomic::load(&self.renames) {
            self.buffer.capacity_words() as u64
        } else {
            0
        }
    }

    /// Whether the sampler re-names its task every eighth of its buffer
    /// (overwrite mode): set while recording is off.
    pub(crate) fn set_renames(&self, on: bool) {
        self.renames.store(on, Relaxed);
    }

    /// Forgets which task the last COMM record named, so that the next sample
    /// writes a COMM first: for COMM records that never reach the stream
    /// (dropped at `tracing_on=0`).
    pub(crate) fn forget_comm(&self) {
        self.last_pid.store(u64::MAX, Relaxed);
    }

    /// Writes one record of the bytes `rec` (a multiple of 8 long: a COMM,
    /// a SWITCH).
    fn write(&self, rec: &[u8], ts: u64) -> core::result::Result<(), ReserveError> {
        let mut slot = self.buffer.reserve(rec.len(), ts)?;
        slot.write_bytes(0, rec);
        slot.commit();
        self.written(rec.len() as u64);
        Ok(())
    }

    /// Writes one record made of the words of each of `parts`, in order (a
    /// SAMPLE: its head's words, [`format::SampleHead::native_words`], then
    /// its chains and stack part).
    fn write_words(&self, parts: &[&[u64]], ts: u64) -> core::result::Result<(), ReserveError> {
        let words: usize = parts.iter().map(|t| t.len()).sum();
        let mut slot = self.buffer.reserve(8 * words, ts)?;
        let mut at = 0;
        for t in parts {
            slot.write_words(at, t);
            at += t.len();
        }
        slot.commit();
        self.written(8 * words as u64);
        Ok(())
    }

    /// After a record of `bytes`: runs the sync now ([`Kick`]) once half
    /// the ring has been written since the last, or when the reader must
    /// load unwind tables, instead of at the end of its period (`sync.rs`).
    fn written(&self, bytes: u64) {
        let n = atomic::load(&self.since_sync).wrapping_add(bytes);
        atomic::store(&self.since_sync, n);
        if n >= 4 * self.buffer.capacity_words() as u64 || self.tables_wanted.is_pending() {
            let k = self.kick.load(Acquire);
            // SAFETY: `kick` is null or a `Kick` of the profiler's works,
            // which outlive every handler call (see `set_kick`).
            if let Some(k) = unsafe { k.as_ref() } {
                k.kick();
            }
        }
    }

    /// Gives the sampler its CPU's sync [`Kick`].
    ///
    /// # Safety
    ///
    /// `kick` must stay valid as long as a counter may call this sampler's
    /// overflow handler.
    pub(crate) unsafe fn set_kick(&self, kick: &Kick) {
        self.kick
            .store(core::ptr::from_ref(kick).cast_mut(), Release);
    }

    /// Counts a sample as received (and as throttled if perf throttled the
    /// counter after it).
    fn received(&self, throttled: bool) {
        let c = &self.counters;
        atomic::add(&c.sample_received, 1);
        if throttled {
            atomic::add(&c.sample_throttled, 1);
        }
    }

    /// Counts a sample taken at `ts` as received and lost (its buffer was
    /// full). The time goes first: a sync that sees the count sees this
    /// time or a later one, and stamps the CPU's LOST record with it
    /// (`sync.rs`), so that a reader can tell losses that all happened
    /// before it opened the stream (`record` leaves that backlog out).
    fn lost(&self, ts: u64, throttled: bool) {
        self.received(throttled);
        self.counters.lose(1, ts);
    }

    /// A reserve refused as `Disabled` with [`PAUSE_GEN`] at `gen` before it:
    /// if a snapshot's pause refused it, counts the sample as received and
    /// lost.
    fn refused(&self, gen: u64, throttled: bool) {
        let now_gen = PAUSE_GEN.load(Acquire);
        if now_gen != gen || now_gen & 1 == 1 {
            let c = &self.counters;
            self.received(throttled);
            c.sample_lost_overflow.add(1, Relaxed);
            c.sample_lost_snapshot.add(1, Relaxed);
        }
    }

    /// Records one sample of the current task, interrupted with `regs`, of
    /// the event at `event` in the configuration, standing for `period`
    /// events; `throttled`: perf throttled the counter after it;
    /// `switch_out`: an overflow of the context-switches event, at which a
    /// SWITCH record goes before the SAMPLE (same CPU, time and pid: the
    /// SAMPLE holds the stacks where the task leaves its CPU).
    pub(crate) fn log_sample(
        &self,
        regs: &Regs,
        event: u16,
        period: u64,
        throttled: bool,
        switch_out: bool,
    ) {
        // The kernel's atomics without calls (`inline_atomic.rs`): about 20
        // accesses per sample.
        let gen = atomic::load_acquire(&PAUSE_GEN);
        // A task outside the cgroup filter: never recorded, so neither
        // received nor lost, also while a snapshot's pause would refuse it;
        // counted as such while recording is on.
        if !self.cgroup.admits_current() {
            if self.buffer.is_recording() {
                self.counters.sample_other_cgroup.add(1, Relaxed);
            }
            return;
        }
        // Recording off when the handler starts: refused, even if recording
        // is back on by the time it would reserve. What follows reads
        // `last_pid`, which a snapshot resets while recording is paused
        // (`forget_comm`), after it drained the ring: a handler that started
        // during the pause is not waited for, and if the pause ended before
        // it reserved, it wrote a SAMPLE named only by a COMM that went into
        // the previous snapshot (nameless, so dropped in the next one, as if
        // overwritten). Seen on here, recording was on before the pause
        // (whose grace period waits for this handler) or is on after it
        // (and the reset, stored before, is visible: `is_recording`).
        if !self.buffer.is_recording() {
            self.counters.sample_while_off.add(1, Relaxed);
            return self.refused(gen, throttled);
        }
        // Read once: a runtime change (recording off) cannot tear a sample.
        let depth = (atomic::load(&self.depth) as usize).min(MAX_DEPTH);
        let user_depth = (atomic::load(&self.user_depth) as usize).min(MAX_USER_DEPTH);
        let stack_bytes = (atomic::load(&self.user_stack) as usize).min(format::MAX_USER_STACK);
        let fit = stack_bytes > 0 && atomic::load(&self.user_stack_fit);
        let pc = regs.ip();
        let kernel_mode = !regs.user_mode();
        let ts = now();
        let (pid, tgid, comm) = current_task();
        let cpu = self.cpu as u16;
        let c = &self.counters;
        let words = comm_words(&comm);
        let rename_bytes = self.rename_bytes();
        let named = atomic::load(&self.last_pid) == u64::from(pid)
            && atomic::load(&self.last_comm[0]) == words[0]
            && atomic::load(&self.last_comm[1]) == words[1]
            && (rename_bytes == 0 || atomic::load(&self.since_comm) < rename_bytes);
        if !named {
            let rec = format::Comm {
                cpu,
                time: ts,
                pid,
                tgid,
                comm,
            };
            match self.write(&rec.encoded(Endian::native()), ts) {
                Ok(()) => {
                    self.last_pid.store(u64::from(pid), Relaxed);
                    self.last_comm[0].store(words[0], Relaxed);
                    self.last_comm[1].store(words[1], Relaxed);
                    self.since_comm.store(0, Relaxed);
                    c.comm_records.add(1, Relaxed);
                }
                Err(ReserveError::Disabled) => return self.refused(gen, throttled),
                Err(_) => return self.lost(ts, throttled),
            }
        }
        // KUnit: a snapshot's pause may end here (`kunit/sampler_nmi.rs`).
        #[cfg(oprofile_rs_kunit)]
        before_sample_hook(self);
        if pc == 0 {
            self.received(throttled);
            c.sample_invalid_eip.add(1, Relaxed);
            return;
        }
        if switch_out {
            let (reason, state, exec_runtime, run_delay) = current_switch();
            let rec = format::Switch {
                cpu,
                time: ts,
                pid,
                tgid,
                reason,
                state,
                exec_runtime,
                run_delay,
            };
            // Accounted with its SAMPLE: a SWITCH the ring cannot take
            // loses the sample too (received and lost), and a SAMPLE lost
            // after it leaves it without stacks (the tool says so).
            match self.write(&rec.encoded(Endian::native()), ts) {
                Ok(()) => {
                    c.switch_records.add(1, Relaxed);
                    if rename_bytes != 0 {
                        self.since_comm.add(format::SWITCH_LEN as u64, Relaxed);
                    }
                }
                Err(ReserveError::Disabled) => return self.refused(gen, throttled),
                Err(_) => return self.lost(ts, throttled),
            }
        }
        // The SAMPLE record with `chain` after it: `kernel` kernel entries
        // (at most MAX_DEPTH), then the user entries (at most
        // MAX_USER_DEPTH); then, with `stack`, the user stack part: the
        // registers and bytes copied, then the copy (`format::UserStack`).
        let sample = |chain: &[u64], kernel: usize, stack: Option<(&[u64; 4], &[u64])>| {
            let area = stack.map_or(0, |(_, words)| 8 * words.len());
            let head = format::SampleHead {
                cpu,
                kernel: kernel_mode,
                depth: kernel as u8,
                time: ts,
                pc,
                pid,
                tgid,
                period,
                event,
                user_depth: chain.len().saturating_sub(kernel) as u8,
                ext: true,
                throttled,
                user_stack: area as u16,
            };
            // As words: no byte-by-byte encoding and copy.
            let head = head.native_words();
            let r = match stack {
                Some((regs, words)) => self.write_words(&[&head, chain, regs, words], ts),
                None => self.write_words(&[&head, chain], ts),
            };
            if r.is_ok() && rename_bytes != 0 {
                let bytes =
                    8 * head.len() + 8 * chain.len() + format::user_stack_part_len(area as u16);
                atomic::add(&self.since_comm, bytes as u64);
            }
            r
        };
        let want_kernel = kernel_mode && depth > 0;
        let user = if user_depth > 0 || stack_bytes > 0 {
            UserRegs::of(regs)
        } else {
            None
        };
        // Chains cut short (`CUT_*` bits), counted below only for a sample the
        // buffer took or lost: not for one refused because recording is off.
        let (result, cut) = if want_kernel || user.is_some() {
            self.scratch
                .with(|chain, stack, mut lookups| {
                    let mut cut = 0;
                    let mut k = 0;
                    if want_kernel {
                        let out = chain.get_mut(..depth).unwrap_or(&mut []);
                        let (n, aborted) = regs.kernel_backtrace(out);
                        if aborted {
                            cut |= CUT_KERNEL_ABORTED;
                        }
                        k = n;
                    }
                    let mut u = 0;
                    // The frame record at the frame pointer, as the walk
                    // read it (`fit`: it bounds the stack copy).
                    let mut first = None;
                    // This sample's reads of the task's user memory.
                    let mem = user_stack::UserMemory::new();
                    if let Some(start) = user.as_ref().filter(|_| user_depth > 0) {
                        let out = chain.get_mut(k..k + user_depth).unwrap_or(&mut []);
                        let (n, stop) = unwind_tables::IN_FORCE.with_current(|tables| {
                            match tables {
                                // The process's unwind tables, where the
                                // tool loaded them.
                                Current::Known(reg, mm) => {
                                    return unwind_tables::walk(
                                        start,
                                        out,
                                        |a| {
                                            let found = match lookups.as_deref_mut() {
                                                Some(c) => c.lookup(reg, mm, a),
                                                None => reg.lookup(mm, a),
                                            };
                                            // Code without its table yet (a
                                            // library just loaded).
                                            if found == Lookup::Unmapped {
                                                self.tables_wanted.ask(reg.generation(), ts);
                                            }
                                            found
                                        },
                                        |a| mem.word(a),
                                        |fp| mem.frame(fp),
                                    );
                                }
                                // A process without tables yet (a new one).
                                Current::Unknown(generation) => {
                                    self.tables_wanted.ask(generation, ts)
                                }
                                Current::NoTables => {}
                            }
                            // The frame pointers.
                            user_stack::walk(start, out, |fp| {
                                let r = mem.frame(fp);
                                if fp == start.bp && first.is_none() {
                                    first = r;
                                }
                                r
                            })
                        });
                        if stop.aborted() {
                            cut |= CUT_USER_ABORTED;
                        } else if stop == user_stack::Stop::Depth {
                            cut |= CUT_USER_TRUNCATED;
                        }
                        u = n;
                    }
                    let chain = chain.get(..k + u).unwrap_or(&[]);
                    match user.as_ref().filter(|_| stack_bytes > 0) {
                        Some(start) => {
                            let bytes = if fit {
                                // Without a walk (user_depth 0) the record
                                // is read here.
                                if user_depth == 0 {
                                    first = user_stack::first_frame(start, &mem);
                                }
                                user_stack::fit_len(start, first, stack_bytes)
                            } else {
                                stack_bytes
                            };
                            let area = stack.get_mut(..bytes / 8).unwrap_or(&mut []);
                            let copied = user_stack::copy_stack(start, area);
                            if copied < area.len() * 8 {
                                c.user_stack_short.add(1, Relaxed);
                            }
                            // The words `copy_stack` left nothing else in.
                            let words = user_stack::recorded_words(copied);
                            let regs = format::user_stack_words(
                                start.ip,
                                start.sp,
                                start.bp,
                                copied as u64,
                            );
                            // (The area holds `stack_bytes`, at least one
                            // word: `get` cannot fail, and if it did the
                            // sample would go without its part, whole.)
                            let part = area.get(..words).map(|a| (&regs, a));
                            (sample(chain, k, part), cut)
                        }
                        None => (sample(chain, k, None), cut),
                    }
                })
                .unwrap_or_else(|| {
                    let mut cut = 0;
                    if want_kernel {
                        cut |= CUT_KERNEL_ABORTED;
                    }
                    if user.is_some() && user_depth > 0 {
                        cut |= CUT_USER_ABORTED;
                    }
                    (sample(&[], 0, None), cut)
                })
        } else {
            (sample(&[], 0, None), 0)
        };
        if !matches!(result, Err(ReserveError::Disabled)) {
            if cut & CUT_KERNEL_ABORTED != 0 {
                c.backtrace_aborted.add(1, Relaxed);
            }
            if cut & CUT_USER_ABORTED != 0 {
                c.user_backtrace_aborted.add(1, Relaxed);
            }
            if cut & CUT_USER_TRUNCATED != 0 {
                c.user_backtrace_truncated.add(1, Relaxed);
            }
        }
        match result {
            Ok(()) => {
                self.received(throttled);
                if let Some(n) = c.event_samples.get(usize::from(event)) {
                    n.add(1, Relaxed);
                }
            }
            Err(ReserveError::Disabled) => self.refused(gen, throttled),
            Err(_) => self.lost(ts, throttled),
        }
    }
}

/// A kernel callchain cut short (see [`Counters::backtrace_aborted`]).
const CUT_KERNEL_ABORTED: u8 = 1;
/// A user callchain cut by a fault or a bad frame pointer.
const CUT_USER_ABORTED: u8 = 2;
/// A user callchain cut at the depth with more to follow.
const CUT_USER_TRUNCATED: u8 = 4;

impl OverflowHandler for CpuSampler {
    fn overflow(&self, regs: &Regs, o: Overflow) {
        // Preemption is off (perf and glue.c): the CPU cannot change until
        // this returns, so a match here means every record below goes to
        // this CPU's own buffer.
        if kernel::cpu::CpuId::current().as_u32() != self.cpu {
            self.counters.sample_wrong_cpu.add(1, Relaxed);
            return;
        }
        // The CPU is going or gone down (see `up`): nothing is recorded
        // after its last drain. `offline` clears `up` on this CPU, in task
        // context: a handler here (preemption off, or an interrupt of that
        // task) either finished before or sees it cleared.
        // Acquire: pairs with `provide` (before `up` was first set), so the
        // buffers this reaches are the CPU's own, not placeholders.
        if !atomic::load_acquire(&self.up) {
            return;
        }
        let c = &self.counters;
        let seen = atomic::load(&c.handler_seen);
        atomic::store(&c.handler_seen, seen.wrapping_add(1));
        if seen % TIMED_EVERY != 0 {
            return self.log_sample(regs, o.tag, o.period, o.throttled, o.switch_out);
        }
        let start = now();
        self.log_sample(regs, o.tag, o.period, o.throttled, o.switch_out);
        let cost = now().wrapping_sub(start);
        c.handler_ns_sum.add(cost, Relaxed);
        c.handler_calls.add(1, Relaxed);
        store_max(&c.handler_ns_max, cost);
    }
}

/// One overflow in this many is timed (`handler_avg_ns`, `handler_max_ns`):
/// the first of each CPU, then every eighth.
pub(crate) const TIMED_EVERY: u32 = 8;
