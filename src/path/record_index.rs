// SPDX-License-Identifier: GPL-2.0

//! The event buffer's side index: where its COMM, TRACING and CONFIG records
//! start, and where its appends end, so that a consume from the mapping
//! (`OPROFILE_RS_IOC_CONSUME`, `Documentation/mmap.md`) costs the number of
//! those records, not the number of all records.
//!
//! The writer (the sync, the markers, the snapshot; all under the event
//! buffer's lock) tells the index, at each append, the positions (bytes ever
//! appended, as the meta page counts) of the records the reader state notes
//! (`reader_state.rs`: the *noted* records) and the position where the
//! append ends (a record boundary). A consume then
//!
//! - notes the records the index lists below its new position, reading just
//!   them, instead of walking every record; and
//! - checks that its new position ends a whole record by walking only from
//!   the last append boundary at or below it (or the consumer position),
//!   at most one append's records (the producer position itself needs no
//!   walk).
//!
//! Memory is bounded: both lists are rings of fixed capacity, sized from the
//! event buffer's (one entry per KiB of ring for the noted records, one per
//! 2 KiB for the boundaries, 8 bytes each). When the noted list is full, the index stops listing and
//! remembers the position from which it is incomplete (`unindexed_from`):
//! a consume walks the records from there (the earlier cost) until the
//! reader catches up with the producer, when listing resumes. A full
//! boundary list drops every other boundary and from then on lists one
//! append in two (then four, ...; back down as the reader consumes), so that
//! it keeps spanning everything that waits, evenly: that only lengthens the
//! check's walk, to at most that many appends (any boundary is a sound
//! starting point, the consumer position is one).
//!
//! Every position listed is at or above the consumer position: a consume
//! drops the entries it passes (whether by `read` or the mapping).

use kernel::prelude::*;

/// Ascending positions in a ring of fixed capacity.
///
/// # Invariants
///
/// `start < buf.len()` (or `buf` is empty and `start == len == 0`),
/// `len <= buf.len()`; the `len` entries from `start` (wrapping) ascend.
struct PosRing {
    buf: KVVec<u64>,
    start: usize,
    len: usize,
}

impl PosRing {
    /// An empty ring of `cap` entries.
    fn new(cap: usize) -> Result<Self> {
        let buf = KVVec::from_elem(0, cap, GFP_KERNEL_ACCOUNT)?;
        // INVARIANT: empty.
        Ok(Self {
            buf,
            start: 0,
            len: 0,
        })
    }

    /// Entry `i` (below `len`).
    fn get(&self, i: usize) -> u64 {
        let cap = self.buf.len();
        let at = if self.start + i >= cap {
            self.start + i - cap
        } else {
            self.start + i
        };
        self.buf.get(at).copied().unwrap_or(u64::MAX)
    }

    /// Appends `pos` (above every entry); false if the ring is full.
    fn push(&mut self, pos: u64) -> bool {
        let cap = self.buf.len();
        if self.len == cap {
            return false;
        }
        let at = if self.start + self.len >= cap {
            self.start + self.len - cap
        } else {
            self.start + self.len
        };
        if let Some(slot) = self.buf.get_mut(at) {
            *slot = pos;
            // INVARIANT: callers append ascending positions.
            self.len += 1;
        }
        true
    }

    /// Drops the entries below `end`.
    fn drop_below(&mut self, end: u64) {
        // The number of entries below `end`: they are the first ones.
        let n = self.count_below(end);
        let cap = self.buf.len();
        if n == 0 || cap == 0 {
            return;
        }
        // INVARIANT: the first `n` entries are dropped.
        self.start = (self.start + n) % cap;
        self.len -= n;
        if self.len == 0 {
            self.start = 0;
        }
    }

    /// How many entries are below `end` (a binary search).
    fn count_below(&self, end: u64) -> usize {
        let (mut lo, mut hi) = (0, self.len);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.get(mid) < end {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// Keeps every other entry (the first of each pair, so the oldest
    /// stays): half the ring is free again.
    fn thin(&mut self) {
        let cap = self.buf.len();
        let mut kept = 0;
        let mut i = 0;
        while i < self.len {
            let v = self.get(i);
            // `kept <= i / 2 <= i`: a slot already read (or this one).
            let at = (self.start + kept) % cap;
            if let Some(slot) = self.buf.get_mut(at) {
                *slot = v;
            }
            kept += 1;
            i += 2;
        }
        // INVARIANT: a subsequence of ascending entries, from `start`.
        self.len = kept;
    }

    fn clear(&mut self) {
        // INVARIANT: empty.
        self.start = 0;
        self.len = 0;
    }
}

/// The side index of an event buffer (see the top of the file).
pub(crate) struct RecordIndex {
    /// Start positions of the noted records, ascending.
    noted: PosRing,
    /// Noted records from this position on may be missing from `noted`
    /// (it was full); `None`: `noted` lists every one waiting.
    unindexed_from: Option<u64>,
    /// End positions of appends (record boundaries), ascending: one in
    /// `stride`.
    bounds: PosRing,
    /// Appends per listed boundary (a power of two, doubled when `bounds`
    /// fills, halved when it empties to a quarter).
    stride: u64,
    /// Appends since the last boundary listed.
    unlisted: u64,
    /// Times the index stopped listing: its noted list was full, or an
    /// append did not say where its noted records are (stats).
    pub(crate) overflows: u64,
    /// Consumes that walked records to note them (stats).
    pub(crate) walks: u64,
}

impl RecordIndex {
    /// The index of an event buffer of `cap` bytes: one noted entry per KiB
    /// of ring (at least 16, at most 65,536), one boundary per 2 KiB (at
    /// least 64, at most 32,768): at most 1.2% of the ring's size.
    pub(crate) fn new(cap: usize) -> Result<Self> {
        Self::with_capacity(
            (cap >> 10).clamp(16, 64 << 10),
            (cap >> 11).clamp(64, 32 << 10),
        )
    }

    /// An index listing at most `noted` noted records and `bounds` append
    /// boundaries.
    pub(crate) fn with_capacity(noted: usize, bounds: usize) -> Result<Self> {
        Ok(Self {
            noted: PosRing::new(noted)?,
            unindexed_from: None,
            bounds: PosRing::new(bounds)?,
            stride: 1,
            unlisted: 0,
            overflows: 0,
            walks: 0,
        })
    }

    /// A noted record starts at `pos` (after every position told before).
    pub(crate) fn note(&mut self, pos: u64) {
        if self.unindexed_from.is_some() {
            return;
        }
        if !self.noted.push(pos) {
            self.overflows += 1;
            self.unindexed_from = Some(pos);
        }
    }

    /// The noted records from `pos` (a record's start) on are not told: a
    /// consume must walk from there.
    pub(crate) fn unknown_from(&mut self, pos: u64) {
        if self.unindexed_from.is_none() {
            self.overflows += 1;
            self.unindexed_from = Some(pos);
        }
    }

    /// An append ended at `pos`: a record boundary.
    pub(crate) fn boundary(&mut self, pos: u64) {
        // Only every `stride`-th boundary is listed, so that the listed
        // ones stay evenly spread over what waits.
        self.unlisted += 1;
        if self.unlisted < self.stride {
            return;
        }
        if self.bounds.len == self.bounds.buf.len() {
            // Full: every other boundary goes and the stride doubles (the
            // check walks from an earlier boundary, at most `stride`
            // appends back).
            self.bounds.thin();
            self.stride = self.stride.saturating_mul(2);
            if self.unlisted < self.stride {
                return;
            }
        }
        if self.bounds.push(pos) {
            self.unlisted = 0;
        }
    }

    /// Everything below `consumed` was consumed; `appended` bytes were
    /// ever appended.
    pub(crate) fn consumed(&mut self, consumed: u64, appended: u64) {
        self.noted.drop_below(consumed);
        self.bounds.drop_below(consumed.saturating_add(1));
        if self.stride > 1 && self.bounds.len <= self.bounds.buf.len() / 4 {
            self.stride /= 2;
        }
        if let Some(from) = self.unindexed_from {
            self.unindexed_from = if consumed >= appended {
                // Nothing waits: every later noted record can be listed.
                None
            } else {
                // `consumed` is a record boundary.
                Some(from.max(consumed))
            };
        }
    }

    /// The start positions of the noted records the index lists below
    /// `end`, in order.
    pub(crate) fn noted_below(&self, end: u64) -> impl Iterator<Item = u64> + '_ {
        (0..self.noted.count_below(end)).map(|i| self.noted.get(i))
    }

    /// The position from which noted records may be unlisted, if any.
    pub(crate) fn unindexed_from(&self) -> Option<u64> {
        self.unindexed_from
    }

    /// The greatest append boundary listed at or below `pos`.
    pub(crate) fn boundary_at_most(&self, pos: u64) -> Option<u64> {
        let n = self.bounds.count_below(pos.saturating_add(1));
        n.checked_sub(1).map(|i| self.bounds.get(i))
    }

    /// Forgets everything (the buffer's records are told again).
    pub(crate) fn clear(&mut self) {
        self.noted.clear();
        self.bounds.clear();
        self.unindexed_from = None;
        self.stride = 1;
        self.unlisted = 0;
    }
}

#[cfg(oprofile_rs_kunit)]
#[kunit_tests(oprofile_rs_record_index)]
mod tests {
    use super::*;

    #[test]
    fn lists_drops_and_overflows() {
        let Ok(mut ix) = RecordIndex::with_capacity(3, 2) else {
            return;
        };
        ix.note(8);
        ix.note(40);
        ix.boundary(64);
        ix.note(64);
        ix.boundary(96);
        // The boundary list is full: thinned to 64, and one append in two
        // listed from now on (not this one).
        ix.boundary(128);
        assert_eq!(ix.boundary_at_most(63), None);
        assert_eq!(ix.boundary_at_most(64), Some(64));
        assert_eq!(ix.boundary_at_most(128), Some(64));
        assert_eq!(ix.stride, 2);
        assert_eq!(ix.noted_below(41).count(), 2);
        assert_eq!(ix.unindexed_from(), None);
        // The noted list is full: from 100 on the index is incomplete.
        ix.note(100);
        ix.note(104);
        assert_eq!(ix.unindexed_from(), Some(100));
        assert_eq!(ix.overflows, 1);
        assert_eq!(ix.noted_below(u64::MAX).count(), 3);
        // Consuming drops what it passes; the gap starts where it stops.
        ix.consumed(64, 200);
        assert_eq!(ix.noted_below(u64::MAX).count(), 1);
        assert_eq!(ix.boundary_at_most(200), None);
        assert_eq!(ix.stride, 1);
        ix.consumed(120, 200);
        assert_eq!(ix.unindexed_from(), Some(120));
        assert_eq!(ix.noted_below(u64::MAX).count(), 0);
        // Room again, but still unlisted until the reader catches up.
        ix.note(150);
        assert_eq!(ix.noted_below(u64::MAX).count(), 0);
        ix.consumed(200, 200);
        assert_eq!(ix.unindexed_from(), None);
        // Listing resumes, wrapping around the ring.
        for p in [208, 216, 224] {
            ix.note(p);
        }
        assert_eq!(ix.unindexed_from(), None);
        assert_eq!(ix.noted_below(217).count(), 2);
        ix.consumed(216, 300);
        let left: KVec<u64> = {
            let mut v = KVec::new();
            for p in ix.noted_below(u64::MAX) {
                let _ = v.push(p, GFP_KERNEL);
            }
            v
        };
        assert_eq!(&left[..], &[216, 224]);
        ix.clear();
        assert_eq!(ix.noted_below(u64::MAX).count(), 0);
        assert_eq!(ix.boundary_at_most(u64::MAX), None);
    }

    #[test]
    fn a_full_boundary_list_keeps_spanning() {
        let Ok(mut ix) = RecordIndex::with_capacity(16, 16) else {
            return;
        };
        // 1000 appends of 8 bytes into 16 entries: thinned and strided, the
        // listed boundaries stay spread over all of them.
        for i in 1..=1000u64 {
            ix.boundary(8 * i);
        }
        // From any position, the last listed boundary at or below it is at
        // most 2 * 1000 / 16 appends back.
        let bound = 8 * 2 * 1000 / 16;
        let mut last = 0;
        for p in (8..=8000u64).step_by(8) {
            let b = ix.boundary_at_most(p).unwrap_or(0);
            assert!(p - b <= bound);
            assert!(b >= last && b <= p);
            last = b;
        }
        assert!(ix.stride > 1);
        // As the reader consumes, the stride comes back down.
        ix.consumed(7990, 8000);
        assert_eq!(ix.stride, 32);
        ix.consumed(8000, 8000);
        for _ in 0..8 {
            ix.consumed(8000, 8000);
        }
        assert_eq!(ix.stride, 1);
        ix.boundary(8008);
        assert_eq!(ix.boundary_at_most(8008), Some(8008));
    }
}
