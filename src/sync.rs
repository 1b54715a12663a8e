// SPDX-License-Identifier: GPL-2.0

//! The sync: moves records from the per-CPU ring buffers into the event
//! buffer, with a LOST record wherever a CPU dropped samples.
//!
//! Each online CPU has a self-rearming delayed work (every `HZ/10`, see
//! `profiler.rs`) that moves that CPU's records; a CPU going offline moves
//! its last ones; `flush` and `tracing_on` writes move every CPU's, one CPU
//! after another. A CPU's moves are serialised by that CPU's [`CpuSync`]
//! mutex (never two of them held at once), so a CPU's work touches only
//! its own data; every move appends to the event buffer under its lock, in
//! short batches.
//!
//! When the event buffer is full the sync stops: records wait in the CPU
//! buffers (which then drop and count new samples), so every loss is counted
//! per CPU and shows in the stream. The sync always keeps [`Reserve`] bytes
//! free: what `tracing_on=0` must be able to write whatever the fill (a LOST
//! record per CPU and the TRACING record), so that the stream's promise holds
//! (every sample taken before the switch is before its record, see
//! `Documentation/stream-format.md`).

use core::sync::atomic::Ordering::Relaxed;
use kernel::{new_mutex, prelude::*, sync::Mutex};

use crate::{
    event_buffer::EventBuffer,
    format::{self, Endian},
    ringbuf::ReadError,
    sampler::{now, CpuSampler},
};

/// Records moved per hold of the event buffer's lock.
const BATCH: usize = 64;
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

/// A record consumed from a CPU buffer, not yet in the event buffer.
struct Staged {
    buf: [u8; format::MAX_RECORD],
    len: usize,
}

/// One CPU's sync state, behind its own mutex.
pub(crate) struct CpuSync {
    staged: Staged,
    /// Lost samples already reported in LOST records.
    lost_reported: u64,
}

impl CpuSync {
    /// A pinned, locked-per-CPU sync state.
    pub(crate) fn new() -> impl PinInit<Mutex<CpuSync>> {
        new_mutex!(CpuSync {
            staged: Staged {
                buf: [0; format::MAX_RECORD],
                len: 0,
            },
            lost_reported: 0,
        })
    }
}

/// What a sync works on: one CPU's sampler and sync state, the event
/// buffer, and the time of the latest record moved.
pub(crate) struct Target<'a> {
    pub(crate) cpu: &'a CpuSampler,
    pub(crate) state: &'a Mutex<CpuSync>,
    pub(crate) events: &'a Mutex<EventBuffer>,
    pub(crate) reserve: Reserve,
    pub(crate) last_ts: &'a core::sync::atomic::AtomicU64,
    /// Set while a TRACING on record waits for room (see `profiler.rs`): no
    /// record may move before it.
    pub(crate) pending_on: &'a core::sync::atomic::AtomicU64,
}

/// What a sync did.
#[derive(Default, Clone, Copy)]
pub(crate) struct Moved {
    pub(crate) records: usize,
    /// The event buffer refused a record: it is full.
    pub(crate) full: bool,
}

/// A value of `pending_on` that is no time: nothing may move (while
/// `tracing_on=0` drops what waits, see `profiler.rs`).
pub(crate) const BLOCKED: u64 = u64::MAX;

/// Writes a waiting TRACING on record if there is one and it fits; false if
/// it still waits or moves are [`BLOCKED`] (then no record may move).
pub(crate) fn write_pending_on(
    eb: &mut EventBuffer,
    pending_on: &core::sync::atomic::AtomicU64,
    reserve: Reserve,
) -> bool {
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

/// A LOST record of `count` samples of `t.cpu`, noticed now.
fn lost_record(t: &Target<'_>, count: u64) -> [u8; format::LOST_LEN] {
    format::Lost {
        cpu: t.cpu.cpu as u16,
        time: now(),
        count,
    }
    .encoded(Endian::native())
}

/// Moves what `t.cpu`'s buffer holds into the event buffer, keeping the
/// reserve free.
pub(crate) fn sync_cpu(t: &Target<'_>) -> Moved {
    let mut st = t.state.lock();
    let st = &mut *st;
    let reserve = t.reserve.bytes();
    let mut moved = Moved::default();
    let lost = t.cpu.counters.sample_lost_overflow.load(Relaxed);
    while moved.records < MAX_MOVE && !moved.full {
        let mut eb = t.events.lock();
        if !write_pending_on(&mut eb, t.pending_on, t.reserve) {
            moved.full = true;
            break;
        }
        if lost > st.lost_reported {
            let rec = lost_record(t, lost - st.lost_reported);
            if !eb.push_keeping(&rec, reserve) {
                moved.full = true;
                break;
            }
            st.lost_reported = lost;
        }
        let mut batch = 0;
        while batch < BATCH {
            if st.staged.len == 0 {
                match t.cpu.buffer.consume(&mut st.staged.buf) {
                    Ok(info) => {
                        st.staged.len = info.len;
                        t.last_ts.fetch_max(info.ts, Relaxed);
                    }
                    Err(ReadError::Empty | ReadError::Busy | ReadError::Contended) => break,
                    // Cannot happen: every record the module writes fits.
                    Err(e) => {
                        crate::ratelimit::pr_ratelimited!(
                            pr_warn,
                            "cpu{}: ring buffer read failed: {:?}\n",
                            t.cpu.cpu,
                            e
                        );
                        break;
                    }
                }
            }
            if !eb.push_keeping(st.staged.buf.get(..st.staged.len).unwrap_or(&[]), reserve) {
                moved.full = true;
                break;
            }
            st.staged.len = 0;
            batch += 1;
        }
        moved.records += batch;
        if batch < BATCH {
            break;
        }
    }
    moved
}

/// After recording stopped (`tracing_on=0`, no handler runs): drops what
/// `t.cpu` still holds after a [`sync_cpu`] (the event buffer was full),
/// counting its samples as lost, and writes the CPU's LOST record into the
/// reserve. The dropped records include COMM records: the sampler names the
/// next task it sees anew.
pub(crate) fn discard_cpu(t: &Target<'_>) {
    let mut st = t.state.lock();
    let st = &mut *st;
    let (mut dropped, mut any, mut retries) = (0u64, false, 0);
    loop {
        if st.staged.len != 0 {
            any = true;
            let kind = format::Prefix::read(Endian::native(), &st.staged.buf).map(|p| p.kind);
            if kind == Some(format::SAMPLE) {
                dropped += 1;
            }
        }
        st.staged.len = 0;
        match t.cpu.buffer.consume(&mut st.staged.buf) {
            Ok(info) => st.staged.len = info.len,
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
        t.cpu
            .counters
            .sample_lost_overflow
            .fetch_add(dropped, Relaxed);
    }
    let lost = t.cpu.counters.sample_lost_overflow.load(Relaxed);
    if lost > st.lost_reported {
        let rec = lost_record(t, lost - st.lost_reported);
        // Into the reserve, less the TRACING record's part.
        if t.events.lock().push_keeping(&rec, format::TRACING_LEN) {
            st.lost_reported = lost;
        }
    }
}
