// SPDX-License-Identifier: GPL-2.0

//! Per-CPU-buffer statistics.
//!
//! Hot-path counters (commits, discards, overruns by writers) are kept per
//! nesting level: on one CPU only one writer runs at a given level at any
//! time, so they are updated with plain loads and stores (no locked
//! instruction). Rare events (drops) use atomic read-modify-write. Reader
//! counters are only written by the (single, locked) reader.

use super::atomics::{AtomicU64, Ordering};
use super::{Padded, MAX_NESTING};

/// Counters of one nesting level (written by the writers at that level).
///
/// The overrun counters live in their own array (own cache lines) because
/// the reader sums them on every read, while the commit counters change on
/// every record.
pub(crate) struct Level {
    pub(crate) committed: AtomicU64,
    pub(crate) committed_bytes: AtomicU64,
    pub(crate) discarded: AtomicU64,
}

/// Overrun counters of one nesting level.
pub(crate) struct Overrun {
    pub(crate) overrun: AtomicU64,
    pub(crate) overrun_bytes: AtomicU64,
}

impl Level {
    fn new() -> Self {
        Level {
            committed: AtomicU64::new(0),
            committed_bytes: AtomicU64::new(0),
            discarded: AtomicU64::new(0),
        }
    }

    #[cfg(ringbuf_host)]
    fn fields(&self) -> [&AtomicU64; 3] {
        [&self.committed, &self.committed_bytes, &self.discarded]
    }
}

impl Overrun {
    fn new() -> Self {
        Overrun {
            overrun: AtomicU64::new(0),
            overrun_bytes: AtomicU64::new(0),
        }
    }

    #[cfg(ringbuf_host)]
    fn fields(&self) -> [&AtomicU64; 2] {
        [&self.overrun, &self.overrun_bytes]
    }
}

/// Drop counters (rare, atomic read-modify-write).
pub(crate) struct Drops {
    pub(crate) dropped_full: AtomicU64,
    pub(crate) dropped_disabled: AtomicU64,
    pub(crate) commit_overrun: AtomicU64,
}

/// Counters written only by the (locked) reader or a control operation.
pub(crate) struct ReaderCounters {
    /// Records consumed by the reader.
    pub(crate) read: AtomicU64,
    pub(crate) read_bytes: AtomicU64,
    /// Records skipped by the reader or dropped by a resize (counted as overrun).
    pub(crate) skipped: AtomicU64,
    pub(crate) skipped_bytes: AtomicU64,
    /// Lost records already reported to the reader.
    pub(crate) lost_reported: AtomicU64,
}

/// All counters of one CPU buffer.
pub(crate) struct Counters {
    /// Per nesting level (index = depth - 1).
    pub(crate) levels: Padded<[Level; MAX_NESTING]>,
    pub(crate) overruns: Padded<[Overrun; MAX_NESTING]>,
    pub(crate) drops: Padded<Drops>,
    pub(crate) reader: Padded<ReaderCounters>,
}

/// Snapshot of the statistics of one CPU buffer.
///
/// Accounting invariants (exact once writers and reader are quiescent):
///
/// * `committed == read + entries + overrun`
/// * every `reserve` attempt is exactly one of `committed`, `discarded`,
///   `dropped_full`, `dropped_disabled`, `commit_overrun`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Records currently in the buffer (committed, not yet read or overrun).
    pub entries: u64,
    /// Payload bytes currently in the buffer.
    pub bytes: u64,
    /// Records overwritten in overwrite mode (plus records the reader had to
    /// skip to resynchronise, and records dropped by a shrinking resize).
    pub overrun: u64,
    /// Reserves that failed because the buffer was full in producer/consumer
    /// mode, or because the record can never fit (`TooLarge`).
    pub dropped_full: u64,
    /// Reserves that failed because recording was off.
    pub dropped_disabled: u64,
    /// Reserves that failed because nesting was too deep, or because in
    /// overwrite mode the only space left was held by uncommitted records.
    pub commit_overrun: u64,
    /// Records consumed by the reader.
    pub read: u64,
    /// Payload bytes consumed by the reader.
    pub read_bytes: u64,
    /// Records committed.
    pub committed: u64,
    /// Reservations discarded (or dropped without commit).
    pub discarded: u64,
}

impl Stats {
    /// Records lost for the reader: `dropped_full + commit_overrun + overrun`.
    #[cfg(any(ringbuf_host, oprofile_rs_kunit))]
    pub fn lost(&self) -> u64 {
        self.dropped_full
            .wrapping_add(self.commit_overrun)
            .wrapping_add(self.overrun)
    }
}

impl Counters {
    pub(crate) fn new() -> Self {
        Counters {
            levels: Padded(core::array::from_fn(|_| Level::new())),
            overruns: Padded(core::array::from_fn(|_| Overrun::new())),
            drops: Padded(Drops {
                dropped_full: AtomicU64::new(0),
                dropped_disabled: AtomicU64::new(0),
                commit_overrun: AtomicU64::new(0),
            }),
            reader: Padded(ReaderCounters {
                read: AtomicU64::new(0),
                read_bytes: AtomicU64::new(0),
                skipped: AtomicU64::new(0),
                skipped_bytes: AtomicU64::new(0),
                lost_reported: AtomicU64::new(0),
            }),
        }
    }

    /// The counters of nesting level `depth` (1-based).
    #[inline(always)]
    pub(crate) fn level(&self, depth: u64) -> Option<&Level> {
        self.levels
            .get(usize::try_from(depth.wrapping_sub(1)).ok()?)
    }

    fn sum(&self, f: impl Fn(&Level) -> &AtomicU64) -> u64 {
        self.levels.iter().fold(0u64, |acc, l| {
            acc.wrapping_add(f(l).load(Ordering::Relaxed))
        })
    }

    /// The overrun counters of nesting level `depth` (1-based).
    #[inline(always)]
    pub(crate) fn overrun_level(&self, depth: u64) -> Option<&Overrun> {
        self.overruns
            .get(usize::try_from(depth.wrapping_sub(1)).ok()?)
    }

    fn sum_overrun(&self, f: impl Fn(&Overrun) -> &AtomicU64) -> u64 {
        self.overruns.iter().fold(0u64, |acc, l| {
            acc.wrapping_add(f(l).load(Ordering::Relaxed))
        })
    }

    /// Total overrun (writer overwrites plus reader skips).
    pub(crate) fn overrun(&self) -> u64 {
        self.sum_overrun(|l| &l.overrun)
            .wrapping_add(self.reader.skipped.load(Ordering::Relaxed))
    }

    /// Total number of records lost so far.
    pub(crate) fn lost_total(&self) -> u64 {
        self.drops
            .dropped_full
            .load(Ordering::Relaxed)
            .wrapping_add(self.drops.commit_overrun.load(Ordering::Relaxed))
            .wrapping_add(self.overrun())
    }

    pub(crate) fn snapshot(&self) -> Stats {
        let committed = self.sum(|l| &l.committed);
        let committed_bytes = self.sum(|l| &l.committed_bytes);
        let overrun = self.overrun();
        let overrun_bytes = self
            .sum_overrun(|l| &l.overrun_bytes)
            .wrapping_add(self.reader.skipped_bytes.load(Ordering::Relaxed));
        let read = self.reader.read.load(Ordering::Relaxed);
        let read_bytes = self.reader.read_bytes.load(Ordering::Relaxed);
        Stats {
            entries: committed.saturating_sub(read.saturating_add(overrun)),
            bytes: committed_bytes.saturating_sub(read_bytes.saturating_add(overrun_bytes)),
            overrun,
            dropped_full: self.drops.dropped_full.load(Ordering::Relaxed),
            dropped_disabled: self.drops.dropped_disabled.load(Ordering::Relaxed),
            commit_overrun: self.drops.commit_overrun.load(Ordering::Relaxed),
            read,
            read_bytes,
            committed,
            discarded: self.sum(|l| &l.discarded),
        }
    }

    #[cfg(ringbuf_host)]
    fn all(&self) -> impl Iterator<Item = &AtomicU64> {
        self.levels
            .iter()
            .flat_map(|l| l.fields())
            .chain(self.overruns.iter().flat_map(|l| l.fields()))
            .chain([
                &self.drops.dropped_full,
                &self.drops.dropped_disabled,
                &self.drops.commit_overrun,
                &self.reader.read,
                &self.reader.read_bytes,
                &self.reader.skipped,
                &self.reader.skipped_bytes,
                &self.reader.lost_reported,
            ])
    }

    /// Exchanges all counters. Only called with both buffers quiesced.
    #[cfg(ringbuf_host)]
    pub(crate) fn swap(&self, other: &Counters) {
        for (a, b) in self.all().zip(other.all()) {
            let va = a.load(Ordering::Relaxed);
            a.store(b.load(Ordering::Relaxed), Ordering::Relaxed);
            b.store(va, Ordering::Relaxed);
        }
    }

    /// Clears all counters. Only called with the buffer quiesced.
    #[cfg(ringbuf_host)]
    pub(crate) fn clear(&self) {
        for c in self.all() {
            c.store(0, Ordering::Relaxed);
        }
    }
}
