// SPDX-License-Identifier: GPL-2.0

//! Flight-recorder snapshots (`mode=overwrite`).
//!
//! In overwrite mode the per-CPU ring buffers keep the newest records and
//! overwrite the oldest, and nothing drains them periodically. A snapshot
//! (debugfs `snapshot`, the device's `OPROFILE_RS_IOC_SNAPSHOT`) moves what
//! each CPU holds into the event buffer:
//!
//! 1. It checks that the event buffer can take the snapshot's framing (a LOST
//!    and a SNAPSHOT record per CPU and the END record, besides the reserve
//!    the sync keeps for `tracing_on=0`); if not, `ENOSPC` and nothing
//!    changes.
//! 2. A consistent cut: it pauses recording on every CPU at once (the buffer
//!    set's switch off, then an expedited RCU grace period, which waits for
//!    the overflow handlers in flight, as `tracing_on=0` does), moves each CPU's
//!    records into that CPU's staging area (a copy, no parsing), makes every
//!    sampler name its task anew, and resumes. Samples that arrive during the
//!    pause are counted as received and lost (`sample_lost_snapshot`, a part
//!    of `sample_lost_overflow`, reported in LOST records), never dropped
//!    silently; so is the sample of a handler that started during the pause
//!    and is still running after it (`CpuSampler::log_sample`). The pause
//!    costs a grace period plus one copy of the CPUs' records (`pause_ns` in
//!    the `snapshot` file). Each CPU's overrun count and lost samples are
//!    read at the cut too, right after its copy: a snapshot reports what was
//!    overwritten and lost before its records were taken, never what
//!    happened after it resumed recording (that belongs to the next one).
//! 3. Without the pause: it plans what to keep (`snapshot_plan.rs`: only
//!    records named by a COMM, and the newest that fit in the event buffer)
//!    and writes, under the event buffer's lock, each CPU's LOST record if it
//!    lost samples, one SNAPSHOT BEGIN per CPU that contributes records or
//!    had some overwritten, the records merged by time, and the SNAPSHOT END;
//!    then it wakes the reader.
//!
//! The staging areas (one CPU buffer's size per CPU, and an index) are
//! allocated at load, so that a snapshot needs no memory when it is taken.

use kernel::{
    new_mutex,
    prelude::*,
    sync::{
        atomic::{Full, Relaxed},
        Mutex,
    },
};

use crate::{
    format::{self, Endian},
    path::{
        event_buffer::EventBuffer,
        sampler::{CpuSampler, PAUSE_GEN},
        snapshot_plan::{self, CpuPlan, Staged},
    },
    ringbuf::{ReadError, RecordSwitch},
    shims::{clock::now, ratelimit::pr_ratelimited},
};

/// Where a staged record lies.
#[derive(Clone, Copy)]
struct Entry {
    off: u32,
    len: u16,
    comm: bool,
    time: u64,
}

/// One CPU's records, moved out of its ring buffer, oldest first.
pub(crate) struct StagedCpu {
    /// The records, back to back in `..used`; its length is its capacity.
    bytes: KVVec<u8>,
    used: usize,
    index: KVVec<Entry>,
}

impl Staged for StagedCpu {
    fn count(&self) -> usize {
        self.index.len()
    }
    fn bytes(&self, i: usize) -> usize {
        self.index.get(i).map_or(0, |e| usize::from(e.len))
    }
    fn time(&self, i: usize) -> u64 {
        self.index.get(i).map_or(0, |e| e.time)
    }
    fn is_comm(&self, i: usize) -> bool {
        self.index.get(i).is_some_and(|e| e.comm)
    }
}

impl StagedCpu {
    /// An empty staging area for a CPU buffer of `cpu_buffer_size` bytes
    /// (none if 0: a CPU without buffers, see `sync.rs`).
    pub(crate) fn new(cpu_buffer_size: usize) -> Result<Self> {
        // A record takes at least 40 bytes of a ring buffer (a header word
        // and a COMM or SAMPLE): the most records one can hold.
        let (max_records, staging_bytes) = if cpu_buffer_size == 0 {
            (0, 0)
        } else {
            (
                cpu_buffer_size / 40 + 1,
                cpu_buffer_size + format::MAX_STACK_RECORD,
            )
        };
        // The ring's records as stream records take fewer bytes than the
        // ring; the drain wants room for the largest record before each
        // copy. Charged to the asking process's memory cgroup
        // (`buffer_memory.rs`).
        let mut bytes = KVVec::with_capacity(staging_bytes, GFP_KERNEL_ACCOUNT)?;
        bytes.resize(staging_bytes, 0, GFP_KERNEL_ACCOUNT)?;
        Ok(Self {
            bytes,
            used: 0,
            index: KVVec::with_capacity(max_records, GFP_KERNEL_ACCOUNT)?,
        })
    }

    /// No staging area (a CPU without buffers); takes no memory.
    pub(crate) fn none() -> Self {
        Self {
            bytes: KVVec::new(),
            used: 0,
            index: KVVec::new(),
        }
    }

    /// Whether this is a staging area (not [`Self::none`]).
    pub(crate) fn is_allocated(&self) -> bool {
        !self.bytes.is_empty()
    }

    /// Bytes of the area and its index.
    fn allocated_bytes(&self) -> usize {
        self.bytes.len() + self.index.capacity() * core::mem::size_of::<Entry>()
    }

    /// The bytes of record `i`.
    fn record(&self, i: usize) -> &[u8] {
        self.index
            .get(i)
            .and_then(|e| {
                let off = e.off as usize;
                self.bytes.get(off..off + usize::from(e.len))
            })
            .unwrap_or(&[])
    }

    /// Moves `cpu`'s records (all of them, or as many as the staging area
    /// holds: the rest waits for the next snapshot). No allocation and no
    /// clearing: `bytes` has its full length from the start (this runs while
    /// recording is paused).
    fn drain(&mut self, cpu: &CpuSampler) {
        let mut retries = 0;
        while self.index.len() < self.index.capacity() {
            let off = self.used;
            let Some(room) = self.bytes.get_mut(off..) else {
                break;
            };
            if room.len() < format::MAX_STACK_RECORD {
                break;
            }
            match cpu.buffer.consume(room) {
                Ok(info) => {
                    let rec = room.get(..info.len).unwrap_or(&[]);
                    let kind = format::Prefix::read(Endian::native(), rec).map(|p| p.kind);
                    let entry = Entry {
                        off: off as u32,
                        len: info.len as u16,
                        comm: kind == Some(format::COMM),
                        time: info.ts,
                    };
                    // Within the capacity checked above: no allocation.
                    if self.index.push(entry, GFP_KERNEL).is_err() {
                        break;
                    }
                    self.used = off + info.len;
                }
                // Nothing else reads the buffer in overwrite mode and no
                // writer runs; bounded all the same.
                Err(ReadError::Busy | ReadError::Contended) if retries < 1000 => retries += 1,
                Err(ReadError::Empty) => break,
                Err(e) => {
                    pr_ratelimited!(
                        pr_warn,
                        "cpu{}: snapshot: ring buffer read failed: {:?}\n",
                        cpu.cpu,
                        e
                    );
                    break;
                }
            }
        }
    }

    fn clear(&mut self) {
        self.used = 0;
        self.index.clear();
    }
}

/// What the last snapshot did, and the pauses' cost (debugfs `snapshot`).
#[derive(Clone, Copy, Default)]
pub(crate) struct SnapshotStats {
    /// Snapshots taken since load (the last one's `seq`).
    pub(crate) seq: u32,
    /// The last snapshot's records and overwritten count (END's totals).
    pub(crate) records: u64,
    pub(crate) overwritten: u64,
    /// Of `overwritten`: dropped by the snapshot itself for lack of room in
    /// the event buffer or of a name (the rest was overwritten in the rings).
    pub(crate) dropped: u64,
    /// Recording paused, ns: the last snapshot's and the longest.
    pub(crate) pause_ns: u64,
    pub(crate) max_pause_ns: u64,
}

/// One CPU's counts at a snapshot's cut (read while recording is paused,
/// right after the CPU's records were moved out).
#[derive(Clone, Copy, Default)]
struct Cut {
    /// The ring buffer's overrun count: records overwritten by the writers,
    /// and records the copy skipped (their time was lost in an overwrite).
    overrun: u64,
    /// `sample_lost_overflow`.
    lost: u64,
}

/// The snapshot machinery's state, behind a mutex taken only by a snapshot
/// (under the profiler's `control` lock).
pub(crate) struct SnapshotState {
    staged: KVVec<StagedCpu>,
    plans: KVVec<CpuPlan>,
    /// Per CPU: its ring buffer's overrun count at the previous snapshot.
    overrun_seen: KVVec<u64>,
    /// Per CPU: its counts at this snapshot's cut.
    cut: KVVec<Cut>,
    /// Per CPU: lost samples already reported in LOST records.
    lost_reported: KVVec<u64>,
    pub(crate) stats: SnapshotStats,
}

impl SnapshotState {
    /// The state for `nr_cpus` CPUs, with staging areas for CPU buffers of
    /// `cpu_buffer_size` bytes (0: none, consume mode).
    pub(crate) fn new(nr_cpus: usize, cpu_buffer_size: usize) -> Result<Self> {
        let staged = Self::new_staging(nr_cpus, cpu_buffer_size)?;
        let mut plans = KVVec::with_capacity(nr_cpus, GFP_KERNEL)?;
        let mut overrun_seen = KVVec::with_capacity(nr_cpus, GFP_KERNEL)?;
        let mut cut = KVVec::with_capacity(nr_cpus, GFP_KERNEL)?;
        let mut lost_reported = KVVec::with_capacity(nr_cpus, GFP_KERNEL)?;
        for _ in 0..nr_cpus {
            plans.push(CpuPlan::default(), GFP_KERNEL)?;
            overrun_seen.push(0, GFP_KERNEL)?;
            cut.push(Cut::default(), GFP_KERNEL)?;
            lost_reported.push(0, GFP_KERNEL)?;
        }
        Ok(Self {
            staged,
            plans,
            overrun_seen,
            cut,
            lost_reported,
            stats: SnapshotStats::default(),
        })
    }

    /// Empty staging areas for `nr_cpus` CPU buffers of `cpu_buffer_size`
    /// bytes (none if 0).
    pub(crate) fn new_staging(nr_cpus: usize, cpu_buffer_size: usize) -> Result<KVVec<StagedCpu>> {
        let mut staged = KVVec::with_capacity(nr_cpus, GFP_KERNEL)?;
        for _ in 0..nr_cpus {
            staged.push(StagedCpu::new(cpu_buffer_size)?, GFP_KERNEL)?;
        }
        Ok(staged)
    }

    /// Whether CPU `cpu` has a staging area.
    pub(crate) fn has_staging(&self, cpu: usize) -> bool {
        self.staged.get(cpu).is_some_and(StagedCpu::is_allocated)
    }

    /// Gives CPU `cpu` the staging area `area` (a CPU that came online:
    /// [`crate::path::sync::Buffers::provision`]); between snapshots, which
    /// leave every area empty.
    pub(crate) fn set_staging(&mut self, cpu: usize, area: StagedCpu) {
        if let Some(s) = self.staged.get_mut(cpu) {
            *s = area;
        }
    }

    /// Bytes of the staging areas and their indexes.
    pub(crate) fn staging_bytes(&self) -> usize {
        self.staged.iter().map(StagedCpu::allocated_bytes).sum()
    }

    /// Puts in `staged` (empty, for resized CPU buffers: from
    /// [`Self::new_staging`]) in place of the previous staging areas, which
    /// hold nothing between snapshots (every snapshot clears them).
    pub(crate) fn replace_staging(&mut self, staged: KVVec<StagedCpu>) {
        self.staged = staged;
    }

    /// A switch to overwrite mode: CPU `cpu`'s LOST records have reported
    /// `lost_reported` samples so far, and its ring buffer has overwritten
    /// `overrun` records (none of them since the switch).
    pub(crate) fn take_over(&mut self, cpu: usize, lost_reported: u64, overrun: u64) {
        if let Some(r) = self.lost_reported.get_mut(cpu) {
            *r = lost_reported;
        }
        if let Some(o) = self.overrun_seen.get_mut(cpu) {
            *o = overrun;
        }
    }

    /// The lost samples of CPU `cpu` its LOST records have reported so far
    /// (for a switch to consume mode).
    pub(crate) fn lost_reported(&self, cpu: usize) -> u64 {
        self.lost_reported.get(cpu).copied().unwrap_or(0)
    }

    /// A mutex around a new state.
    pub(crate) fn new_locked(
        nr_cpus: usize,
        cpu_buffer_size: usize,
    ) -> Result<impl PinInit<Mutex<SnapshotState>>> {
        Ok(new_mutex!(Self::new(nr_cpus, cpu_buffer_size)?))
    }
}

/// Turns `running` off and waits until every overflow handler that may have
/// seen it on has returned, as `stop_recording` (`control/profiler.rs`)
/// does, but with an expedited grace period (same guarantee: it waits for every
/// hard-IRQ and NMI handler in flight; faster, at the cost of an IPI to each
/// CPU): the pause loses fewer samples. Process context only.
fn pause_recording(running: &RecordSwitch) {
    running.set(false);
    // SAFETY: plain call from process context (it sleeps).
    unsafe { kernel::bindings::synchronize_rcu_expedited() };
}

/// Bytes of the event buffer a snapshot needs besides its records and the
/// sync's reserve: a LOST and a SNAPSHOT BEGIN per CPU, and the END.
pub(crate) fn framing_bytes(nr_cpus: usize) -> usize {
    nr_cpus * (format::LOST_LEN + format::SNAPSHOT_LEN) + format::SNAPSHOT_LEN
}

/// Lets other tasks run (`cond_resched()`): the plan and the merge of a
/// snapshot take O(records × CPUs) steps (millions with large CPU buffers),
/// under the snapshot's and the event buffer's mutexes.
fn resched() {
    // SAFETY: called only from `snapshot` (`Profiler::snapshot`: an ioctl
    // or a debugfs write, process context), after recording is back on,
    // holding mutexes only (control, snapshot, event buffer).
    unsafe { crate::shims::glue::oprofile_rs_cond_resched() }
}

impl SnapshotState {
    /// Takes a snapshot (see the module's documentation) of `cpus` into
    /// `events`, keeping `keep` bytes free there (the sync's reserve):
    /// `running` is the buffer set's switch, paused during the cut when
    /// `recording` (if `tracing_on` is off nothing is recorded and there is
    /// nothing to pause). The caller (`Buffers::snapshot` in `sync.rs`)
    /// checked that `events` has room for the [`framing_bytes`], and
    /// serialises snapshots and `tracing_on` changes. Returns the snapshot's
    /// time; its figures are in `stats`.
    pub(crate) fn take(
        &mut self,
        cpus: &[CpuSampler],
        running: &RecordSwitch,
        recording: bool,
        events: &Mutex<EventBuffer>,
        keep: usize,
    ) -> u64 {
        let st = self;
        // The cut: its time is when recording has stopped (a handler that
        // read its clock before may still have committed its record).
        let start = now();
        if recording {
            PAUSE_GEN.fetch_add(1, Full);
            pause_recording(running);
        }
        let cut = now();
        for ((cpu, staged), at) in cpus.iter().zip(st.staged.iter_mut()).zip(st.cut.iter_mut()) {
            staged.drain(cpu);
            cpu.forget_comm();
            // After the copy, which counts the records it skips as overrun.
            *at = Cut {
                overrun: cpu.buffer.stats().overrun,
                lost: cpu.counters.sample_lost_overflow.load(Relaxed),
            };
        }
        if recording {
            running.set(true);
            PAUSE_GEN.fetch_add(1, Full);
        }
        let pause = now().saturating_sub(start);

        // What each CPU lost and had overwritten between the previous cut and
        // this one. The snapshot's time is not before any of its records'
        // (another CPU's clock may be ahead of this one).
        let newest = st
            .staged
            .iter()
            .flat_map(|s| s.index.iter().map(|e| e.time))
            .max()
            .unwrap_or(0);
        let time = cut.max(newest);
        let mut eb = events.lock();
        let (mut nr_lost, mut nr_begin) = (0, 0);
        for (c, at) in st.cut.iter().enumerate() {
            if st.lost_reported.get(c).is_some_and(|r| at.lost > *r) {
                nr_lost += 1;
            }
            let ring = at
                .overrun
                .saturating_sub(st.overrun_seen.get(c).copied().unwrap_or(0));
            if ring > 0 || st.staged.get(c).is_some_and(|s| s.count() > 0) {
                nr_begin += 1;
            }
        }
        let budget = eb
            .free()
            .saturating_sub(keep)
            .saturating_sub(nr_lost * format::LOST_LEN + (nr_begin + 1) * format::SNAPSHOT_LEN);
        snapshot_plan::plan(&st.staged, budget, &mut st.plans, &mut resched);

        let e = Endian::native();
        let push = |eb: &mut EventBuffer, rec: &[u8]| {
            if !eb.push_keeping(rec, keep) {
                // Cannot happen: the budget and the framing check leave room.
                pr_ratelimited!(pr_err, "snapshot: event buffer full: a record dropped\n");
            }
        };
        for (c, at) in st.cut.iter().enumerate() {
            let lost = at.lost;
            if let Some(r) = st.lost_reported.get_mut(c) {
                if lost > *r {
                    let rec = format::Lost {
                        cpu: c as u16,
                        time: now(),
                        count: lost - *r,
                    }
                    .encoded(e);
                    push(&mut eb, &rec);
                    *r = lost;
                }
            }
        }
        let (mut total_records, mut total_overwritten, mut total_dropped) = (0u64, 0u64, 0u64);
        let seq = st.stats.seq.wrapping_add(1);
        for (c, at) in st.cut.iter().enumerate() {
            let overrun = at.overrun;
            let Some(seen) = st.overrun_seen.get_mut(c) else {
                continue;
            };
            let ring = overrun.saturating_sub(*seen);
            *seen = overrun;
            let Some(p) = st.plans.get(c) else {
                continue;
            };
            if ring == 0 && p.count == 0 {
                continue;
            }
            let overwritten = ring + p.dropped() as u64;
            let records = p.records() as u64;
            total_records += records;
            total_overwritten += overwritten;
            total_dropped += p.dropped() as u64;
            let begin = format::Snapshot {
                cpu: c as u16,
                time,
                end: false,
                seq,
                overwritten,
                records,
            };
            push(&mut eb, &begin.encoded(e));
        }
        let mut until_resched = snapshot_plan::PAUSE_EVERY;
        while let Some((c, i)) = snapshot_plan::next_merged(&st.staged, &mut st.plans) {
            if let Some(s) = st.staged.get(c) {
                push(&mut eb, s.record(i));
            }
            until_resched = until_resched.saturating_sub(1);
            if until_resched == 0 {
                resched();
                until_resched = snapshot_plan::PAUSE_EVERY;
            }
        }
        let end = format::Snapshot {
            cpu: 0,
            time,
            end: true,
            seq,
            overwritten: total_overwritten,
            records: total_records,
        };
        push(&mut eb, &end.encoded(e));
        drop(eb);
        for s in st.staged.iter_mut() {
            s.clear();
        }
        st.stats = SnapshotStats {
            seq,
            records: total_records,
            overwritten: total_overwritten,
            dropped: total_dropped,
            pause_ns: pause,
            max_pause_ns: st.stats.max_pause_ns.max(pause),
        };
        time
    }
}
