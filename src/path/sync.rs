// SPDX-License-Identifier: GPL-2.0

//! The sync: moves records from the per-CPU ring buffers into the event
//! buffer, with a LOST record wherever a CPU dropped samples. [`Buffers`]
//! holds what it moves between (the CPUs' samplers, the event buffer and its
//! readers' wait queue) and nothing else.
//!
//! Each online CPU has a self-rearming delayed work (every second, and at
//! once when its sampler kicks it: half its ring written, or tables
//! missing; see `cpu_work.rs` and `profiler.rs`) that moves that CPU's
//! records; a CPU going offline moves
//! its last ones; `flush` and `tracing_on` writes move every CPU's, one CPU
//! after another. A CPU's moves are serialised by that CPU's [`CpuSync`]
//! mutex (never two of them held at once), so a CPU's work touches only
//! its own data. A move reads the CPU's ring into the CPU's staging area
//! (`sync_stage.rs`) without the event buffer's lock, then appends what it
//! staged under that lock in one copy (usually one hold per move): the
//! CPUs' syncs do not queue behind each other's ring reads.
//!
//! When the event buffer is full the sync stops: records wait in the CPU's
//! staging area and its buffer (which then drops and counts new samples), so
//! every loss is counted per CPU and shows in the stream; `tracing_on=0`
//! drops what still waits in both and counts it. The sync always keeps
//! [`Reserve`] bytes free: what `tracing_on=0` must be able to write
//! whatever the fill (a LOST record per CPU and the TRACING record), so that
//! the stream's promise holds (every sample taken before the switch is
//! before its record, see `Documentation/stream-format.md`).

use kernel::{
    new_mutex, new_poll_condvar,
    prelude::*,
    sync::{
        atomic::{Acquire, Atomic, Relaxed},
        poll::PollCondVar,
        Mutex,
    },
};

use crate::{
    format::{self, Endian},
    path::{
        event_buffer::EventBuffer,
        sampler::{CpuSampler, Storage},
        snapshot::{framing_bytes, SnapshotState, SnapshotStats, StagedCpu},
        sync_stage::Stage,
    },
    ringbuf::{ControlError, Mode, ReadError, RecordSwitch},
    shims::{
        clock::{now, store_max},
        cpu_work::CpuWorkHandler,
        ratelimit::pr_ratelimited,
    },
};

/// Upper bound of records moved by one sync of one CPU, so that a flood
/// cannot keep a work running forever.
const MAX_MOVE: usize = 1 << 20;

/// Bytes of the event buffer the sync leaves free for `tracing_on=0`.
#[derive(Clone, Copy)]
pub(crate) struct Reserve {
    nr_cpus: usize,
}

impl Reserve {
    pub(crate) fn new(nr_cpus: usize) -> Self {
        Self { nr_cpus }
    }

    /// Kept free by every ordinary move: one LOST per CPU and a TRACING.
    pub(crate) fn bytes(self) -> usize {
        format::LOST_LEN * self.nr_cpus + format::TRACING_LEN
    }
}

/// One CPU's sync state, behind its own mutex.
pub(crate) struct CpuSync {
    /// Records consumed from the CPU buffer (and LOST records), not yet in
    /// the event buffer.
    stage: Stage,
    /// Where the CPU buffer's reader copies each record
    /// ([`format::MAX_STACK_RECORD`] bytes: any record the module writes).
    scratch: KVVec<u8>,
    /// Lost samples already reported in LOST records (staged or moved).
    lost_reported: u64,
}

impl CpuSync {
    /// A pinned, locked-per-CPU sync state of a CPU without buffers: no
    /// staging area ([`Stage::unallocated`]: nothing syncs) and no scratch
    /// area, until [`Buffers::provision`] gives them.
    pub(crate) fn unprovisioned() -> impl PinInit<Mutex<CpuSync>> {
        new_mutex!(CpuSync {
            stage: Stage::unallocated(),
            scratch: KVVec::new(),
            lost_reported: 0,
        })
    }
}

/// A CPU's sync scratch area ([`format::MAX_STACK_RECORD`] bytes).
fn new_scratch() -> Result<KVVec<u8>> {
    Ok(KVVec::from_elem(
        0,
        format::MAX_STACK_RECORD,
        GFP_KERNEL_ACCOUNT,
    )?)
}

/// What a sync works on: one CPU's sampler and sync state, and the buffers
/// (the event buffer, the time of the latest record moved, a waiting
/// TRACING on record).
struct Target<'a> {
    cpu: &'a CpuSampler,
    state: &'a Mutex<CpuSync>,
    b: &'a Buffers,
}

/// What a sync did.
#[derive(Default, Clone, Copy)]
struct Moved {
    records: usize,
    /// The event buffer refused a record: it is full.
    full: bool,
    /// Readers must be woken: past the watershed, or (nearly) full.
    wake: bool,
}

/// A value of `pending_on` that is no time: nothing may move (while
/// `tracing_on=0` drops what waits, see [`Buffers::mark_off`]).
const BLOCKED: u64 = u64::MAX;

/// Writes a waiting TRACING on record if there is one and it fits; false if
/// it still waits or moves are [`BLOCKED`] (then no record may move).
fn write_pending_on(eb: &mut EventBuffer, pending_on: &Atomic<u64>, reserve: Reserve) -> bool {
    let t = pending_on.load(Relaxed);
    if t == 0 {
        return true;
    }
    if t == BLOCKED {
        return false;
    }
    let on = format::Tracing {
        cpu: 0,
        time: t,
        on: true,
    };
    if eb.push_keeping(&on.encoded(Endian::native()), reserve.bytes()) {
        pending_on.store(0, Relaxed);
        true
    } else {
        false
    }
}

/// A LOST record of `count` samples of `t.cpu`, the latest lost at `time`.
fn lost_record(t: &Target<'_>, count: u64, time: u64) -> [u8; format::LOST_LEN] {
    format::Lost {
        cpu: t.cpu.cpu as u16,
        time,
        count,
    }
    .encoded(Endian::native())
}

/// Stages what `t.cpu`'s buffer holds, after a LOST record if it dropped
/// samples since the last one, until the staging area is full (true: the
/// buffer may hold more) or the buffer is empty. Takes no lock but the CPU's
/// buffer's reader side.
fn stage_cpu(t: &Target<'_>, st: &mut CpuSync) -> bool {
    st.stage.compact();
    if !st.stage.has_room() {
        return true;
    }
    // The LOST record's time: that of the latest sample it counts (the
    // handler stores it before counting, `sampler.rs`), not when the sync
    // noticed: the losses of a module nobody read for a while are older
    // than a stream opened since, and `record` leaves them out so.
    let c = &t.cpu.counters;
    let lost = c.sample_lost_overflow.load(Acquire);
    if lost > st.lost_reported {
        let at = match c.last_lost_time.load(Relaxed) {
            0 => now(),
            at => at,
        };
        if st.stage.push(&lost_record(t, lost - st.lost_reported, at)) {
            st.lost_reported = lost;
        }
    }
    let (mut more, mut max_ts) = (false, None);
    let stage = &mut st.stage;
    let read = t
        .cpu
        .buffer
        .consume_batch(&mut st.scratch, |info, payload| {
            max_ts = max_ts.max(Some(info.ts));
            if !stage.push(payload) {
                // Cannot happen: room is checked before each record and the
                // module writes whole records. Counted all the same.
                let kind = format::Prefix::read(Endian::native(), payload).map(|p| p.kind);
                if kind == Some(format::SAMPLE) {
                    t.cpu.counters.lose(1, now());
                }
                pr_ratelimited!(
                    pr_warn,
                    "cpu{}: a record of {} bytes could not be staged: dropped\n",
                    t.cpu.cpu,
                    payload.len()
                );
            }
            more = !stage.has_room();
            !more
        });
    if let Some(ts) = max_ts {
        store_max(&t.b.last_ts, ts);
    }
    match read {
        Ok(_) | Err(ReadError::Empty | ReadError::Busy | ReadError::Contended) => {}
        // Cannot happen: every record the module writes fits.
        Err(e) => {
            pr_ratelimited!(
                pr_warn,
                "cpu{}: ring buffer read failed: {:?}\n",
                t.cpu.cpu,
                e
            );
        }
    }
    more
}

/// Moves what `t.cpu`'s buffer holds into the event buffer, keeping the
/// reserve free: stages a batch without the event buffer's lock, then
/// appends it under the lock, until the buffer is empty or the event buffer
/// full (what it refuses stays staged, first in line next time).
fn sync_cpu(t: &Target<'_>) -> Moved {
    let mut st = t.state.lock();
    let st = &mut *st;
    // What the CPU writes from now on counts toward its next kick
    // (`sampler.rs`): a flush's move as the CPU's own work's.
    t.cpu.since_sync.store(0, Relaxed);
    let reserve = t.b.reserve.bytes();
    let mut moved = Moved::default();
    // Overwrite mode (a work that found consume mode just before a
    // switch): nothing syncs.
    if !st.stage.is_allocated() {
        return moved;
    }
    loop {
        let more = stage_cpu(t, st);
        let mut eb = t.b.events.lock();
        if write_pending_on(&mut eb, &t.b.pending_on, t.b.reserve) {
            let (n, all) = st.stage.append_to(&mut eb, reserve);
            moved.records += n;
            moved.full = !all;
        } else {
            moved.full = true;
        }
        moved.wake = moved.full
            || t.b.nearly_full(&eb)
            || eb.len() >= t.b.watershed()
            || (moved.records > 0 && t.b.stopped());
        drop(eb);
        if moved.full || !more || moved.records >= MAX_MOVE {
            return moved;
        }
    }
}

/// After recording stopped (`tracing_on=0`, no handler runs): drops what
/// `t.cpu` still holds after a [`sync_cpu`] (the event buffer was full), in
/// its staging area and its buffer, counting its samples as lost, and
/// writes the CPU's LOST record into the reserve. The dropped records
/// include COMM records: the sampler names the next task it sees anew.
fn discard_cpu(t: &Target<'_>) {
    let mut st = t.state.lock();
    let st = &mut *st;
    // A CPU without buffers (no scratch area yet) holds nothing: its ring
    // is a placeholder, or it never was up.
    if st.scratch.is_empty() {
        return;
    }
    let d = st.stage.discard();
    // LOST records dropped: their counts are reported again below.
    st.lost_reported = st.lost_reported.saturating_sub(d.lost);
    let (mut dropped, mut any, mut retries) = (d.samples, d.records > 0, 0);
    loop {
        match t.cpu.buffer.consume(&mut st.scratch) {
            Ok(info) => {
                any = true;
                let rec = st.scratch.get(..info.len).unwrap_or(&[]);
                let kind = format::Prefix::read(Endian::native(), rec).map(|p| p.kind);
                if kind == Some(format::SAMPLE) {
                    dropped += 1;
                }
            }
            // No writer runs any more; a reader of this buffer would hold
            // this CPU's sync mutex. Bounded all the same.
            Err(ReadError::Busy | ReadError::Contended) if retries < 1000 => retries += 1,
            Err(_) => break,
        }
    }
    if any {
        t.cpu.forget_comm();
    }
    if dropped > 0 {
        // Dropped now: a LOST record that does not fit below is made
        // later, with this time or a later loss's.
        t.cpu.counters.lose(dropped, now());
    }
    let lost = t.cpu.counters.sample_lost_overflow.load(Relaxed);
    if lost > st.lost_reported {
        // Dropped now (or lost before and not reported yet): now.
        let rec = lost_record(t, lost - st.lost_reported, now());
        // Into the reserve, less the TRACING record's part.
        if t.b.events.lock().push_keeping(&rec, format::TRACING_LEN) {
            st.lost_reported = lost;
        }
    }
}

/// What the sync moves between: the CPUs' samplers and the event buffer,
/// with the state of the moves.
///
/// Locks, outermost first: a CPU's `cpu_sync` (one at a time, never two),
/// `events`.
#[pin_data]
pub(crate) struct Buffers {
    /// Per possible CPU (kvmalloc: large `nr_cpu_ids` need no high-order
    /// allocation): small bookkeeping, and the CPU's buffers once it has
    /// been online ([`Self::provision`]).
    pub(crate) cpus: KVVec<CpuSampler>,
    /// Per possible CPU: its sync state, behind its own mutex. In
    /// overwrite mode nothing syncs (the records stay in the CPU buffers
    /// for a snapshot, which has staging areas of its own) and the sync
    /// states have no staging area; neither has that of a CPU without
    /// buffers.
    cpu_sync: KVVec<Pin<KBox<Mutex<CpuSync>>>>,
    /// The `cpu_buffer_size` a CPU that comes online gets
    /// ([`Self::provision`]): that in force, or the one a configuration
    /// change tries (`config.rs`).
    cpu_bytes: Atomic<usize>,
    /// What the sync keeps free in the event buffer for `tracing_on=0`.
    reserve: Reserve,
    /// The latest time stamp of a record moved to the event buffer.
    pub(crate) last_ts: Atomic<u64>,
    /// The time of a TRACING on record that did not fit in the event buffer
    /// yet (0: none). The sync writes it before any other record.
    pending_on: Atomic<u64>,
    /// Recording is off (`tracing_on=0`, from [`Buffers::mark_off`] to
    /// [`Buffers::mark_on`]): no more records come to reach the watershed,
    /// so whatever arrives wakes the reader.
    stopped: Atomic<bool>,
    #[pin]
    pub(crate) events: Mutex<EventBuffer>,
    /// Woken when data arrives, at a flush, when the event buffer is full,
    /// and when the reader slot's busy flag clears.
    #[pin]
    pub(crate) readers: PollCondVar,
    /// The event buffer's size and the fill that wakes readers (both
    /// changed at runtime by `config.rs`, while recording is off).
    buffer_size: Atomic<usize>,
    watershed: Atomic<usize>,
    /// The smallest event buffer for this machine's CPUs in consume mode
    /// (overwrite mode adds a snapshot's framing).
    min_buffer_size: usize,
    /// Flight recorder (`mode=overwrite`): the CPU buffers keep the newest
    /// records; nothing moves them but a snapshot (`snapshot.rs`). Changed
    /// by [`Buffers::switch_mode`] only, while recording is off, no counter
    /// exists and no periodic sync runs.
    overwrite: Atomic<bool>,
    /// The snapshots' staging areas and counts (taken only by a snapshot).
    #[pin]
    pub(crate) snap: Mutex<SnapshotState>,
}

impl Buffers {
    /// The buffers of `cpus` (one per possible CPU, placeholders: see
    /// [`CpuSampler::placeholder`]) with an event buffer of `buffer_size`
    /// bytes that wakes readers at `watershed` bytes. Each CPU gets its
    /// buffers of `cpu_buffer_size` bytes (and the staging areas of the
    /// mode) when it comes online ([`Self::provision`]).
    pub(crate) fn new(
        cpus: KVVec<CpuSampler>,
        buffer_size: usize,
        watershed: usize,
        overwrite: bool,
        cpu_buffer_size: usize,
    ) -> Result<impl PinInit<Self, Error>> {
        let n = cpus.len();
        let reserve = Reserve::new(n);
        // Room for the reserve and a few of the largest records besides
        // (and in overwrite mode a snapshot's framing).
        let min_consume = 2 * reserve.bytes() + 4 * format::MAX_STACK_RECORD;
        let min = min_size(min_consume, n, overwrite);
        if buffer_size < min {
            pr_err!("buffer_size={buffer_size} is too small for {n} CPUs: at least {min} bytes\n");
            return Err(EINVAL);
        }
        let mut cpu_sync = KVVec::with_capacity(n, GFP_KERNEL)?;
        for _ in 0..n {
            cpu_sync.push(
                KBox::pin_init(CpuSync::unprovisioned(), GFP_KERNEL)?,
                GFP_KERNEL,
            )?;
        }
        Ok(try_pin_init!(Self {
            cpus,
            cpu_sync,
            cpu_bytes: Atomic::new(cpu_buffer_size),
            reserve,
            last_ts: Atomic::new(0),
            pending_on: Atomic::new(0),
            stopped: Atomic::new(false),
            events <- new_mutex!(EventBuffer::new(buffer_size)?),
            readers <- new_poll_condvar!(),
            buffer_size: Atomic::new(buffer_size),
            watershed: Atomic::new(watershed),
            min_buffer_size: min_consume,
            overwrite: Atomic::new(overwrite),
            snap <- SnapshotState::new_locked(n, 0)?,
        }? Error))
    }

    /// Whether the buffers record in overwrite mode (flight recorder).
    pub(crate) fn overwrite(&self) -> bool {
        self.overwrite.load(Relaxed)
    }

    /// What the sync keeps free in the event buffer for `tracing_on=0`.
    pub(crate) fn reserve_bytes(&self) -> usize {
        self.reserve.bytes()
    }

    /// Writes a waiting TRACING on record into `eb` if there is one; false
    /// if it still waits (see [`write_pending_on`]).
    pub(crate) fn write_pending_on(&self, eb: &mut EventBuffer) -> bool {
        write_pending_on(eb, &self.pending_on, self.reserve)
    }

    /// What a sync of CPU `cpu` works on.
    fn target(&self, cpu: usize) -> Option<Target<'_>> {
        Some(Target {
            cpu: self.cpus.get(cpu)?,
            state: self.cpu_sync.get(cpu)?,
            b: self,
        })
    }

    /// Moves CPU `cpu`'s records to the event buffer (its periodic work, and
    /// when it goes offline); wakes the reader past the watershed or when
    /// the event buffer is full.
    pub(crate) fn sync_one(&self, cpu: u32) {
        // What the CPU writes from now on counts toward its next kick
        // (`sampler.rs`); in overwrite mode too, where nothing moves: else
        // once half a ring was written, every sample would kick a run.
        if let Some(s) = self.cpus.get(cpu as usize) {
            s.since_sync.store(0, Relaxed);
            s.counters.sync_runs.add(1, Relaxed);
        }
        // Overwrite mode: the records stay for a snapshot.
        if self.overwrite() {
            return;
        }
        if let Some(t) = self.target(cpu as usize) {
            let start = now();
            let moved = sync_cpu(&t);
            let c = &t.cpu.counters;
            c.sync_ns.add(now().saturating_sub(start), Relaxed);
            c.sync_records.add(moved.records as u64, Relaxed);
            // Decided under the event buffer's lock, after the last append.
            if moved.wake {
                self.readers.notify_all();
            }
            // Samples found unwind tables missing: the reader loads them
            // when woken (whatever the watershed: they are wanted now).
            if t.cpu.tables_wanted.take() {
                self.wake_readers();
            }
        }
    }

    /// Whether the event buffer is (nearly) too full for the sync to move
    /// more: readers are woken then, whatever the watershed.
    pub(crate) fn nearly_full(&self, eb: &EventBuffer) -> bool {
        eb.free()
            < (self.buffer_size.load(Relaxed) / 8)
                .max(self.reserve.bytes() + format::MAX_STACK_RECORD)
    }

    /// The fill of the event buffer that wakes readers.
    pub(crate) fn watershed(&self) -> usize {
        self.watershed.load(Relaxed)
    }

    /// Whether recording is off (`tracing_on=0`): then any record that
    /// arrives wakes the reader, whatever the watershed (a LOST record a
    /// later sync writes, say; no more come to reach it).
    pub(crate) fn stopped(&self) -> bool {
        self.stopped.load(Relaxed)
    }

    /// Sets the fill of the event buffer that wakes readers.
    pub(crate) fn set_watershed(&self, bytes: usize) {
        self.watershed.store(bytes, Relaxed);
    }

    /// Moves every CPU's records, one CPU after another.
    pub(crate) fn sync_all(&self) {
        // Overwrite mode: the records stay for a snapshot.
        if self.overwrite() {
            return;
        }
        for cpu in 0..self.cpus.len() {
            if let Some(t) = self.target(cpu) {
                sync_cpu(&t);
            }
        }
    }

    /// Makes whatever the event buffer holds readable now, below the
    /// watershed too: wakes blocked readers and pollers.
    pub(crate) fn wake_readers(&self) {
        self.events.lock().flush_seq += 1;
        self.readers.notify_all();
    }

    /// Writes the TRACING on record of `tracing_on=1`, before recording
    /// resumes. A record that does not fit waits, and no record moves
    /// before it (see [`write_pending_on`]).
    pub(crate) fn mark_on(&self) {
        let t = self.marker_time();
        let rec = format::Tracing {
            cpu: 0,
            time: t,
            on: true,
        }
        .encoded(Endian::native());
        let mut eb = self.events.lock();
        if !eb.push_keeping(&rec, self.reserve.bytes()) {
            self.pending_on.store(t, Relaxed);
        }
        self.stopped.store(false, Relaxed);
    }

    /// Writes the TRACING off record of `tracing_on=0`, after recording
    /// stopped (no overflow handler runs): moves everything recorded before
    /// it, drops and counts what no longer fits, and hands it all to the
    /// reader. The off record always fits (the reserve); an on record that
    /// still waits is cancelled with it.
    pub(crate) fn mark_off(&self) {
        // Under the events lock, as the sync writes a waiting on record: it
        // is either written already, or cancelled here, and until the
        // discard below is done no record moves (`BLOCKED`).
        let cancelled = {
            let _eb = self.events.lock();
            self.stopped.store(true, Relaxed);
            self.pending_on.xchg(BLOCKED, Relaxed) != 0
        };
        if !cancelled {
            self.pending_on.store(0, Relaxed);
        }
        if !cancelled {
            self.sync_all();
        }
        // Overwrite mode: what the CPU buffers hold stays there (frozen) for
        // a snapshot.
        for cpu in 0..self.cpus.len() {
            if self.overwrite() {
                break;
            }
            if let Some(t) = self.target(cpu) {
                discard_cpu(&t);
            }
        }
        if cancelled {
            let _eb = self.events.lock();
            self.pending_on.store(0, Relaxed);
        } else {
            let rec = format::Tracing {
                cpu: 0,
                time: self.marker_time(),
                on: false,
            }
            .encoded(Endian::native());
            if !self.events.lock().push(&rec) {
                // Cannot happen: the reserve keeps room for it.
                pr_ratelimited!(pr_err, "event buffer full: tracing off record dropped\n");
            }
        }
        self.wake_readers();
    }

    /// A TRACING record's time: now, or the latest record's time if a CPU
    /// clock ahead of this one stamped it later, so that the record's time
    /// is not before that of a sample it follows in the stream.
    fn marker_time(&self) -> u64 {
        now().max(self.last_ts.load(Relaxed))
    }
}

/// The smallest event buffer for `nr_cpus` CPUs: `min_consume` bytes in
/// consume mode, and in overwrite mode a snapshot's framing besides.
fn min_size(min_consume: usize, nr_cpus: usize, overwrite: bool) -> usize {
    if overwrite {
        min_consume + framing_bytes(nr_cpus)
    } else {
        min_consume
    }
}

/// Why the event buffer `eb` cannot take a CONFIG record of `rec_len` bytes
/// now, keeping `reserve` bytes free, after replacing it with `new` if
/// given: `EBUSY` (logged) if `new` is given while `eb` is mapped or a
/// reader copies from it or if `new` cannot hold what waits, or if the
/// record does not fit.
fn swap_refusal(
    eb: &EventBuffer,
    new: Option<&EventBuffer>,
    rec_len: usize,
    reserve: usize,
) -> Result {
    let Some(nb) = new else {
        if rec_len + reserve > eb.free() {
            pr_ratelimited!(
                pr_info,
                "config: no room in the event buffer for the CONFIG record (EBUSY): read the stream first\n"
            );
            return Err(EBUSY);
        }
        return Ok(());
    };
    if eb.mappings > 0 || eb.copying {
        pr_ratelimited!(
            pr_info,
            "config: buffer_size cannot change while the event buffer is mapped or read (EBUSY)\n"
        );
        return Err(EBUSY);
    }
    if eb.len() + rec_len + reserve > nb.free() {
        pr_ratelimited!(
            pr_info,
            "config: {} bytes wait in the event buffer: more than the new buffer_size holds (EBUSY): read the stream first\n",
            eb.len()
        );
        return Err(EBUSY);
    }
    Ok(())
}

/// What a switch of mode ([`Buffers::switch_mode`]) installs, allocated
/// before anything changes.
pub(crate) enum ModeStorage {
    /// For consume mode: a sync staging area per CPU that has buffers
    /// (`None`: one without, given its area when it comes online).
    Consume(KVVec<Option<Stage>>),
    /// For overwrite mode: the snapshots' staging areas.
    Overwrite(KVVec<StagedCpu>),
}

/// Runtime configuration changes (`config.rs`), while recording is off.
impl Buffers {
    /// The smallest event buffer for this machine's CPUs in overwrite mode
    /// or consume mode.
    pub(crate) fn min_buffer_size(&self, overwrite: bool) -> usize {
        min_size(self.min_buffer_size, self.cpus.len(), overwrite)
    }

    /// Whether a CPU buffer holds records (overwrite mode: not snapshotted
    /// yet), or, in consume mode, a sync staging area.
    pub(crate) fn cpus_hold_records(&self) -> bool {
        self.cpus.iter().any(|s| s.buffer.stats().entries > 0)
            || self.cpu_sync.iter().any(|c| !c.lock().stage.is_empty())
    }

    /// Sets every sampler's callchain depths.
    pub(crate) fn set_depths(&self, depth: u32, user_depth: u32) {
        for s in self.cpus.iter() {
            s.set_depths(depth, user_depth);
        }
    }

    /// Sets the bytes of user stack every sampler copies per sample, and
    /// whether each copy stops after the first frame record
    /// (`user_stack_fit`).
    pub(crate) fn set_user_stack(&self, bytes: u32, fit: bool) {
        for s in self.cpus.iter() {
            s.set_user_stack(bytes, fit);
        }
    }

    /// Clears the per-event sample counts (a new event list).
    pub(crate) fn reset_event_counts(&self) {
        for s in self.cpus.iter() {
            for a in s.counters.event_samples.iter() {
                a.store(0, Relaxed);
            }
        }
    }

    /// Whether [`Self::swap_events`] would take a CONFIG record of
    /// `rec_len` bytes (and `new`) now: `EBUSY` (logged) if not. Nothing
    /// changes; a configuration change asks before it changes anything.
    /// While recording is off and the `control` lock is held, only the sync
    /// of what waited in a staging area adds to the event buffer (a LOST
    /// record), and a reader may map it or start a copy: the swap checks
    /// again.
    pub(crate) fn check_swap(&self, new: Option<&EventBuffer>, rec_len: usize) -> Result {
        swap_refusal(&self.events.lock(), new, rec_len, self.reserve.bytes())
    }

    /// Appends the CONFIG record `rec` to the event buffer, after replacing
    /// it with `new` (its waiting records carried over, positions kept) if
    /// given; returns the replaced buffer (to be freed by the caller,
    /// outside the lock). `EBUSY`, nothing changed, if `new` is given while
    /// the event buffer is mapped or a reader copies from it or if `new`
    /// cannot hold what waits, or if the record does not fit.
    pub(crate) fn swap_events(
        &self,
        new: Option<EventBuffer>,
        rec: &[u8],
    ) -> Result<Option<EventBuffer>> {
        let reserve = self.reserve.bytes();
        let mut eb = self.events.lock();
        swap_refusal(&eb, new.as_ref(), rec.len(), reserve)?;
        let Some(mut nb) = new else {
            if !eb.push_keeping(rec, reserve) {
                // Cannot happen: checked above.
                return Err(EBUSY);
            }
            return Ok(None);
        };
        nb.adopt(&eb);
        if !nb.push_keeping(rec, reserve) {
            // Cannot happen: checked above.
            return Err(EBUSY);
        }
        let size = nb.capacity();
        let old = core::mem::replace(&mut *eb, nb);
        self.buffer_size.store(size, Relaxed);
        Ok(Some(old))
    }

    /// Storage at `bytes` each for the buffer of every CPU that has
    /// buffers (`None` for the others), allocated before anything changes.
    pub(crate) fn cpu_storages(&self, bytes: usize) -> Result<KVVec<Option<Storage>>> {
        let mut v = KVVec::with_capacity(self.cpus.len(), GFP_KERNEL)?;
        for s in self.cpus.iter() {
            let st = if s.is_provisioned() {
                Some(crate::path::sampler::new_storage(bytes)?)
            } else {
                None
            };
            v.push(st, GFP_KERNEL)?;
        }
        Ok(v)
    }

    /// Adds to `storages` (from [`Self::cpu_storages`]) storage at `bytes`
    /// for every CPU that got its buffers since, at another size: with
    /// the CPU hotplug lock held ([`CpusReadLock`]), so that no CPU gets
    /// its buffers between this and the resize.
    pub(crate) fn top_up_storages(
        &self,
        storages: &mut KVVec<Option<Storage>>,
        bytes: usize,
        _cpus: &CpusReadLock,
    ) -> Result {
        for (s, slot) in self.cpus.iter().zip(storages.iter_mut()) {
            if slot.is_none() && s.is_provisioned() && s.buffer.capacity_words() * 8 != bytes {
                *slot = Some(crate::path::sampler::new_storage(bytes)?);
            }
        }
        Ok(())
    }

    /// Snapshot staging areas for CPU buffers of `bytes` each (for
    /// overwrite mode) for every CPU that has buffers (none for the
    /// others), allocated before anything changes.
    pub(crate) fn snapshot_staging(&self, bytes: usize) -> Result<KVVec<StagedCpu>> {
        let mut v = KVVec::with_capacity(self.cpus.len(), GFP_KERNEL)?;
        for s in self.cpus.iter() {
            let area = if s.is_provisioned() {
                StagedCpu::new(bytes)?
            } else {
                StagedCpu::none()
            };
            v.push(area, GFP_KERNEL)?;
        }
        Ok(v)
    }

    /// Adds to `staging` (from [`Self::snapshot_staging`]) an area for
    /// CPU buffers of `bytes` for every CPU that got its buffers since,
    /// with the CPU hotplug lock held (as [`Self::top_up_storages`]).
    pub(crate) fn top_up_staging(
        &self,
        staging: &mut KVVec<StagedCpu>,
        bytes: usize,
        _cpus: &CpusReadLock,
    ) -> Result {
        for (s, area) in self.cpus.iter().zip(staging.iter_mut()) {
            if !area.is_allocated() && s.is_provisioned() {
                *area = StagedCpu::new(bytes)?;
            }
        }
        Ok(())
    }

    /// The `cpu_buffer_size` of the CPUs that come online from now on
    /// (see `cpu_bytes`).
    pub(crate) fn set_cpu_bytes(&self, bytes: usize) {
        self.cpu_bytes.store(bytes, Relaxed);
    }

    /// CPUs that have their buffers.
    pub(crate) fn cpu_buffers(&self) -> usize {
        self.cpus.iter().filter(|s| s.is_provisioned()).count()
    }

    /// Gives CPU `cpu` what it lacks to record in the mode in force: its
    /// ring's storage of `cpu_bytes` bytes and its stack copy area (unless
    /// it was online at load: `Profiler::new` gave them), its sync's
    /// scratch area (once; all kept when the CPU goes offline, so that
    /// what it recorded is still read), and the staging area of the mode
    /// (a sync's in consume mode; a snapshot's in overwrite mode; a CPU
    /// that had buffers before a switch of mode gets that of the new one).
    /// Called by the hotplug callback `online` (`profiler.rs`) before the
    /// CPU's counters are made and its sampler is up: no overflow handler
    /// runs for it (they run only on the CPU, once `up` is set).
    ///
    /// Everything is allocated before anything is installed: `ENOMEM` (an
    /// allocation, or buffers past the cap of `buffer_memory.rs`) changes
    /// nothing. Process context (it sleeps); leaf locks only.
    pub(crate) fn provision(&self, cpu: u32) -> Result {
        let c = cpu as usize;
        let (Some(s), Some(sync)) = (self.cpus.get(c), self.cpu_sync.get(c)) else {
            return Err(EINVAL);
        };
        let overwrite = self.overwrite();
        let bytes = self.cpu_bytes.load(Relaxed);
        let ring = !s.is_provisioned();
        let (scratch, stage) = {
            let st = sync.lock();
            (
                st.scratch.is_empty(),
                !overwrite && !st.stage.is_allocated(),
            )
        };
        let staging = overwrite && !self.snap.lock().has_staging(c);
        if !(ring || scratch || stage || staging) {
            return Ok(());
        }
        if ring {
            crate::path::buffer_memory::check(
                self.cpu_buffers() + 1,
                bytes,
                self.buffer_size.load(Relaxed),
                overwrite,
            )?;
        }
        let own = if ring {
            Some((
                crate::path::sampler::new_storage(bytes)?,
                crate::path::sampler::new_stack_area()?,
            ))
        } else {
            None
        };
        let sync_scratch = if scratch { Some(new_scratch()?) } else { None };
        let new_stage = if stage { Some(Stage::new()?) } else { None };
        let new_staging = if staging {
            Some(StagedCpu::new(bytes)?)
        } else {
            None
        };
        // Installed: the ring first (its placeholder freed; nothing to
        // carry over), then the areas, then the mark.
        if let Some((storage, area)) = own {
            drop(self.resize_one(c, storage)?);
            s.provide(area)?;
        }
        if let Some(scratch) = sync_scratch {
            sync.lock().scratch = scratch;
        }
        if let Some(st) = new_stage {
            sync.lock().stage = st;
        }
        if let Some(area) = new_staging {
            self.snap.lock().set_staging(c, area);
        }
        Ok(())
    }

    /// What the buffers take now (debugfs `buffer_memory`).
    pub(crate) fn memory(&self) -> Memory {
        let mut m = Memory {
            cpu_buffers: self.cpu_buffers(),
            cpu_bytes: self.cpu_bytes.load(Relaxed),
            // Every possible CPU's sampler (its placeholder ring's storage
            // counted here only while it is one) and sync state.
            bookkeeping_bytes: self.cpus.len()
                * (core::mem::size_of::<CpuSampler>()
                    + core::mem::size_of::<Mutex<CpuSync>>()
                    + core::mem::size_of::<Pin<KBox<Mutex<CpuSync>>>>()),
            ..Memory::default()
        };
        for (s, sync) in self.cpus.iter().zip(self.cpu_sync.iter()) {
            m.ring_bytes += s.buffer_bytes();
            if !s.is_provisioned() {
                m.bookkeeping_bytes += crate::path::sampler::PLACEHOLDER_BYTES;
            }
            let sync = sync.lock();
            m.staging_bytes += sync.scratch.len();
            if sync.stage.is_allocated() {
                m.staging_bytes += crate::path::sync_stage::STAGE_BYTES;
            }
        }
        m.staging_bytes += self.snap.lock().staging_bytes();
        let size = self.events.lock().capacity();
        m.event_bytes = crate::path::buffer_memory::event_buffer_bytes(size);
        m
    }

    /// What a switch to overwrite mode (`overwrite`, for CPU buffers of
    /// `cpu_buffer_size` bytes) or to consume mode installs.
    pub(crate) fn mode_storage(
        &self,
        overwrite: bool,
        cpu_buffer_size: usize,
    ) -> Result<ModeStorage> {
        Ok(if overwrite {
            ModeStorage::Overwrite(self.snapshot_staging(cpu_buffer_size)?)
        } else {
            ModeStorage::Consume(self.sync_stages()?)
        })
    }

    /// A sync staging area per CPU that has buffers (for consume mode),
    /// allocated before anything changes.
    pub(crate) fn sync_stages(&self) -> Result<KVVec<Option<Stage>>> {
        let mut v = KVVec::with_capacity(self.cpus.len(), GFP_KERNEL)?;
        for s in self.cpus.iter() {
            let stage = if s.is_provisioned() {
                Some(Stage::new()?)
            } else {
                None
            };
            v.push(stage, GFP_KERNEL)?;
        }
        Ok(v)
    }

    /// The snapshots take `staging` (from [`Self::snapshot_staging`], for
    /// the CPU buffers' new size, once [`Self::resize_cpus`] succeeded); the
    /// previous areas are freed. The caller holds the `control` lock, which
    /// serialises snapshots.
    pub(crate) fn set_snapshot_staging(&self, staging: KVVec<StagedCpu>) {
        self.snap.lock().replace_staging(staging);
    }

    /// Runs `op` on CPU `cpu`'s sampler with its buffer's own switch off
    /// and its reader kept out (the CPU's sync lock: the sync is the only
    /// reader in consume mode; in overwrite mode a snapshot is, which the
    /// caller's `control` lock keeps out). Recording is off, so a writer
    /// in flight is one that is giving up: while `op` finds a writer or a
    /// reader in the buffer (`None`), it is tried again 1 ms later, 100
    /// times at most (then `EBUSY`). `EINVAL` for a CPU out of range.
    fn with_buffer_still<T>(
        &self,
        cpu: usize,
        mut op: impl FnMut(&CpuSampler) -> Option<Result<T>>,
    ) -> Result<T> {
        let (Some(s), Some(lock)) = (self.cpus.get(cpu), self.cpu_sync.get(cpu)) else {
            return Err(EINVAL);
        };
        for _ in 0..100 {
            {
                let _sync = lock.lock();
                let _ = s.buffer.set_enabled(false);
                let r = op(s);
                let _ = s.buffer.set_enabled(true);
                if let Some(r) = r {
                    return r;
                }
            }
            kernel::time::delay::fsleep(kernel::time::Delta::from_millis(1));
        }
        Err(EBUSY)
    }

    /// Gives CPU `cpu`'s buffer the storage `st` (its records carried
    /// over); returns the old storage. `EBUSY` (`st` freed) if a writer or
    /// reader stayed in the buffer through a few retries.
    fn resize_one(&self, cpu: usize, st: Storage) -> Result<Storage> {
        let mut st = Some(st);
        self.with_buffer_still(cpu, |s| {
            // Always there: a refusal below gives it back.
            let storage = st.take()?;
            match s.buffer.resize(storage) {
                Ok(old) => Some(Ok(old)),
                Err((back, ControlError::WritersActive | ControlError::ReaderBusy)) => {
                    st = Some(back);
                    None
                }
                Err(_) => Some(Err(EINVAL)),
            }
        })
    }

    /// Switches the CPU buffers to the mode `storage` is for (see
    /// [`ModeStorage`]) and installs it, freeing what the other mode used.
    /// What the stream has been told of each CPU's lost samples (LOST
    /// records) passes from the sync to the snapshots or back, so that
    /// nothing is reported twice or not at all; the snapshots start counting
    /// overwritten records from the ring's count now; every sampler names
    /// its next task anew and re-names its task only in overwrite mode.
    ///
    /// The caller holds the `control` lock (no snapshot runs); recording is
    /// off, and neither a counter nor a periodic sync exists (the hotplug
    /// registration is dropped); the CPU buffers hold no records
    /// ([`Self::cpus_hold_records`]). `EBUSY`, nothing changed, if a CPU
    /// buffer stayed busy through a few retries.
    pub(crate) fn switch_mode(&self, storage: ModeStorage) -> Result {
        let overwrite = matches!(storage, ModeStorage::Overwrite(_));
        let (to, from) = if overwrite {
            (Mode::Overwrite, Mode::ProducerConsumer)
        } else {
            (Mode::ProducerConsumer, Mode::Overwrite)
        };
        for cpu in 0..self.cpus.len() {
            if let Err(e) = self.set_cpu_mode(cpu, to) {
                for c in 0..cpu {
                    if self.set_cpu_mode(c, from).is_err() {
                        pr_ratelimited!(
                            pr_err,
                            "cpu{c}: the buffer cannot be put back to its old mode\n"
                        );
                    }
                }
                pr_ratelimited!(
                    pr_info,
                    "config: mode: a CPU buffer stayed busy (error {})\n",
                    e.to_errno()
                );
                return Err(e);
            }
        }
        let mut snap = self.snap.lock();
        match storage {
            ModeStorage::Overwrite(staging) => {
                for (c, (sync, s)) in self.cpu_sync.iter().zip(self.cpus.iter()).enumerate() {
                    let mut sync = sync.lock();
                    snap.take_over(c, sync.lost_reported, s.buffer.stats().overrun);
                    sync.stage = Stage::unallocated();
                }
                snap.replace_staging(staging);
            }
            ModeStorage::Consume(stages) => {
                for ((c, sync), stage) in self.cpu_sync.iter().enumerate().zip(stages) {
                    let mut sync = sync.lock();
                    sync.lost_reported = snap.lost_reported(c);
                    // A CPU without buffers gets its area when it comes
                    // online (`provision`).
                    sync.stage = stage.unwrap_or_else(Stage::unallocated);
                }
                snap.replace_staging(KVVec::new());
            }
        }
        drop(snap);
        for s in self.cpus.iter() {
            s.set_renames(overwrite);
            s.forget_comm();
        }
        self.overwrite.store(overwrite, Relaxed);
        Ok(())
    }

    /// Sets CPU `cpu`'s buffer to `mode`; `EBUSY` if a writer or reader
    /// stayed in it through a few retries.
    fn set_cpu_mode(&self, cpu: usize, mode: Mode) -> Result {
        self.with_buffer_still(cpu, |s| match s.buffer.set_mode(mode) {
            Ok(()) => Some(Ok(())),
            Err(ControlError::WritersActive | ControlError::ReaderBusy) => None,
            Err(_) => Some(Err(EINVAL)),
        })
    }

    /// Gives every CPU buffer its storage of `storages` (one per possible
    /// CPU; `None`: that CPU's buffer stays), all or none: a failure puts
    /// the old storage back where it was replaced already. Returns the
    /// replaced storages in their place (no allocation): given back to
    /// this, they undo the resize (a configuration change that fails
    /// later), the records they hold carried over as far as they fit.
    pub(crate) fn resize_cpus(
        &self,
        mut storages: KVVec<Option<Storage>>,
    ) -> Result<KVVec<Option<Storage>>> {
        for cpu in 0..storages.len() {
            let Some(Some(slot)) = storages.get_mut(cpu) else {
                continue;
            };
            match self.resize_one(cpu, core::mem::take(slot)) {
                Ok(old) => *slot = old,
                Err(e) => {
                    for c in 0..cpu {
                        let Some(Some(slot)) = storages.get_mut(c) else {
                            continue;
                        };
                        if self.resize_one(c, core::mem::take(slot)).is_err() {
                            pr_ratelimited!(
                                pr_err,
                                "cpu{c}: the buffer cannot be put back to its old size\n"
                            );
                        }
                    }
                    pr_ratelimited!(
                        pr_info,
                        "config: cpu_buffer_size: a CPU buffer stayed busy (error {})\n",
                        e.to_errno()
                    );
                    return Err(e);
                }
            }
        }
        Ok(storages)
    }
}

/// A CPU's periodic sync work.
impl Buffers {
    /// Takes a snapshot (`snapshot.rs`): `running` is the buffer set's
    /// switch, paused during the cut when `recording` (if `tracing_on` is off
    /// nothing is recorded and there is nothing to pause). The caller
    /// serialises snapshots and `tracing_on` changes.
    ///
    /// `EINVAL` in consume mode; `ENOSPC` if the event buffer cannot take
    /// the framing (nothing changes then).
    pub(crate) fn snapshot(
        &self,
        running: &RecordSwitch,
        recording: bool,
    ) -> Result<SnapshotStats> {
        if !self.overwrite() {
            return Err(EINVAL);
        }
        let mut st = self.snap.lock();
        {
            let mut eb = self.events.lock();
            let room = self.write_pending_on(&mut eb)
                && eb.free() >= self.reserve_bytes() + framing_bytes(self.cpus.len());
            if !room {
                drop(eb);
                // The reader has a full buffer to take.
                self.wake_readers();
                return Err(ENOSPC);
            }
        }
        let time = st.take(
            &self.cpus,
            running,
            recording,
            &self.events,
            self.reserve_bytes(),
        );
        store_max(&self.last_ts, time);
        self.wake_readers();
        Ok(st.stats)
    }

    /// The last snapshot's figures.
    pub(crate) fn snapshot_stats(&self) -> SnapshotStats {
        self.snap.lock().stats
    }
}

impl CpuWorkHandler for Buffers {
    fn run(&self, cpu: u32) {
        self.sync_one(cpu);
    }
}

/// What the buffers take (debugfs `buffer_memory`), in bytes.
#[derive(Default, Clone, Copy)]
pub(crate) struct Memory {
    /// CPUs that have their buffers (of the possible CPUs).
    pub(crate) cpu_buffers: usize,
    /// The `cpu_buffer_size` a CPU that comes online gets.
    pub(crate) cpu_bytes: usize,
    /// The CPUs' rings and stack copy areas.
    pub(crate) ring_bytes: usize,
    /// The syncs' scratch and staging areas, the snapshots' staging areas
    /// and their indexes.
    pub(crate) staging_bytes: usize,
    /// The event buffer, its meta page and its record index.
    pub(crate) event_bytes: usize,
    /// Every possible CPU's sampler and sync state (not in [`Self::total`]:
    /// fixed at load).
    pub(crate) bookkeeping_bytes: usize,
}

impl Memory {
    /// Everything.
    pub(crate) fn total(&self) -> usize {
        self.ring_bytes + self.staging_bytes + self.event_bytes
    }
}

/// The CPU hotplug lock, held for reading (`cpus_read_lock()`): no CPU
/// comes online or goes offline, so none gets its buffers
/// ([`Buffers::provision`]), until it is dropped. Process context; not
/// across a hotplug registration's creation or drop (which takes it).
pub(crate) struct CpusReadLock(());

impl CpusReadLock {
    pub(crate) fn lock() -> Self {
        // SAFETY: plain call in process context; released by `drop`.
        unsafe { kernel::bindings::cpus_read_lock() };
        Self(())
    }
}

impl Drop for CpusReadLock {
    fn drop(&mut self) {
        // SAFETY: taken by `lock`, released once here.
        unsafe { kernel::bindings::cpus_read_unlock() };
    }
}
