// SPDX-License-Identifier: GPL-2.0

//! A CPU's staging area for the sync (`sync.rs`): whole stream records taken
//! from that CPU's ring buffer (and the CPU's LOST records), in order,
//! waiting to go into the event buffer.
//!
//! The sync fills it *without* the event buffer's lock (the ring's read, its
//! checks and copies are the per-record work), then appends everything that
//! fits under the lock in one copy: the lock covers one `memcpy` per batch,
//! not a walk of the ring, so the CPUs' syncs hardly wait for each other.
//!
//! Staged records are consumed from the ring already: whatever of them the
//! event buffer refuses stays staged, first in line for the next append, and
//! when `tracing_on=0` drops what waits ([`Stage::discard`]) the SAMPLE
//! records staged are counted as lost like those left in the ring. The
//! storage is allocated with the CPU's sync state (at load), never by the
//! sync.

use kernel::prelude::*;

use crate::{
    format::{self, Endian},
    path::{event_buffer::EventBuffer, reader_state::is_noted},
};

/// Noted records (COMM, TRACING, CONFIG: `reader_state.rs`) whose offsets a
/// staging area keeps for the event buffer's index; past that many, the
/// append tells the index it does not know (the consume walks instead).
const STAGE_NOTED: usize = 128;

// The noted offsets are `u16`: every offset in the area must fit.
const _: () = assert!(STAGE_BYTES <= u16::MAX as usize + 1);

/// Bytes of a CPU's staging area: about 700 samples without callchains (the
/// records one CPU's periodic sync moves at several kHz), 30 with the
/// deepest callchains, 3 with the largest user stack copies. At least
/// twice [`format::MAX_STACK_RECORD`], so that a batch moves more than one
/// such record.
pub(crate) const STAGE_BYTES: usize = 32 << 10;

const _: () = assert!(STAGE_BYTES >= 2 * format::MAX_STACK_RECORD);

/// What [`Stage::discard`] dropped.
#[derive(Default, Debug, PartialEq, Eq)]
pub(crate) struct Dropped {
    /// Records dropped.
    pub(crate) records: usize,
    /// SAMPLE records among them (samples lost).
    pub(crate) samples: u64,
    /// The sum of the counts of the LOST records among them (losses that
    /// must be reported again).
    pub(crate) lost: u64,
    /// COMM records among them (the sampler must name its task anew).
    pub(crate) comms: usize,
}

/// Staged records, whole and in order.
///
/// # Invariants
///
/// `start <= end <= buf.len()`, `buf.len()` is [`STAGE_BYTES`] or 0 (not
/// allocated: overwrite mode, where nothing syncs); the bytes
/// `start..end` are `records` whole records, each of the length its prefix
/// says (a non-zero multiple of 8). `noted[..nr_noted]` are the offsets in
/// `buf`, ascending, of the noted records among them, all of them unless
/// `noted_lost`.
pub(crate) struct Stage {
    buf: KVVec<u8>,
    start: usize,
    end: usize,
    records: usize,
    noted: [u16; STAGE_NOTED],
    nr_noted: usize,
    noted_lost: bool,
}

impl Stage {
    /// An empty staging area of [`STAGE_BYTES`] bytes.
    pub(crate) fn new() -> Result<Self> {
        let buf = KVVec::from_elem(0, STAGE_BYTES, GFP_KERNEL_ACCOUNT)?;
        // INVARIANT: nothing staged, `STAGE_BYTES` of storage.
        Ok(Self {
            buf,
            ..Self::unallocated()
        })
    }

    /// A staging area without storage (overwrite mode): nothing fits.
    pub(crate) fn unallocated() -> Self {
        // INVARIANT: nothing staged, no storage.
        Self {
            buf: KVVec::new(),
            start: 0,
            end: 0,
            records: 0,
            noted: [0; STAGE_NOTED],
            nr_noted: 0,
            noted_lost: false,
        }
    }

    /// Whether it has its storage (see [`Self::unallocated`]).
    pub(crate) fn is_allocated(&self) -> bool {
        !self.buf.is_empty()
    }

    /// Whether nothing is staged.
    pub(crate) fn is_empty(&self) -> bool {
        self.start == self.end
    }

    /// Records staged (for the tests).
    #[cfg(oprofile_rs_kunit)]
    pub(crate) fn records(&self) -> usize {
        self.records
    }

    /// Bytes staged (for the tests).
    #[cfg(oprofile_rs_kunit)]
    pub(crate) fn len(&self) -> usize {
        self.end - self.start
    }

    /// Whether a record of any size fits (after [`Self::compact`]).
    pub(crate) fn has_room(&self) -> bool {
        self.buf.len() - self.end >= format::MAX_STACK_RECORD
    }

    /// Moves the staged records to the front of the area, so that its room
    /// is all at the end.
    pub(crate) fn compact(&mut self) {
        if self.start != 0 {
            self.buf.copy_within(self.start..self.end, 0);
            for o in self.noted.iter_mut().take(self.nr_noted) {
                // Every noted offset is at or after `start`.
                *o = o.saturating_sub(self.start as u16);
            }
            // INVARIANT: the same records, moved to the front.
            self.end -= self.start;
            self.start = 0;
        }
    }

    /// Stages `rec`, one whole record; false (nothing staged) if it does
    /// not fit, or if it is not a record whose prefix says its length (a
    /// non-zero multiple of 8 bytes).
    pub(crate) fn push(&mut self, rec: &[u8]) -> bool {
        let len = rec.len();
        if format::record_len(Endian::native(), rec) != Some(len)
            || len == 0
            || len % format::RECORD_ALIGN != 0
        {
            return false;
        }
        let Some(dst) = self.buf.get_mut(self.end..self.end + len) else {
            return false;
        };
        dst.copy_from_slice(rec);
        if format::Prefix::read(Endian::native(), rec).is_some_and(|p| is_noted(p.kind)) {
            // `end < STAGE_BYTES`, which fits in a `u16`.
            match self.noted.get_mut(self.nr_noted) {
                Some(slot) => {
                    *slot = self.end as u16;
                    self.nr_noted += 1;
                }
                None => self.noted_lost = true,
            }
        }
        // INVARIANT: a whole record, checked above, after the others.
        self.end += len;
        self.records += 1;
        true
    }

    /// Appends to `eb` the longest run of staged records, from the first,
    /// that leaves `reserve` bytes free (all of them in one copy when they
    /// fit). Returns how many went in and whether all did; when not, the
    /// first one refused is counted in `eb`'s refused appends (`full`) and
    /// it and the rest stay staged.
    pub(crate) fn append_to(&mut self, eb: &mut EventBuffer, reserve: usize) -> (usize, bool) {
        let room = eb.free().saturating_sub(reserve);
        let staged = self.buf.get(self.start..self.end).unwrap_or(&[]);
        if staged.is_empty() {
            return (0, true);
        }
        let (mut bytes, mut n) = (staged.len(), self.records);
        if bytes > room {
            // The event buffer is (nearly) full: the whole records that fit.
            (bytes, n) = (0, 0);
            while let Some(len) = staged
                .get(bytes..)
                .and_then(|r| format::record_len(Endian::native(), r))
            {
                if len == 0 || bytes + len > room {
                    break;
                }
                bytes += len;
                n += 1;
            }
        }
        // The noted records among those that go in, as offsets in the run.
        let mut offsets = [0u16; STAGE_NOTED];
        let mut nr = 0;
        for (o, slot) in self
            .noted
            .iter()
            .take(self.nr_noted)
            .zip(offsets.iter_mut())
        {
            let o = usize::from(*o).saturating_sub(self.start);
            if o >= bytes {
                break;
            }
            *slot = o as u16;
            nr += 1;
        }
        let noted = (!self.noted_lost).then(|| offsets.get(..nr).unwrap_or(&[]));
        if bytes > 0 && !eb.push_run(staged.get(..bytes).unwrap_or(&[]), reserve, noted) {
            // Cannot happen: `bytes` fit in `room`.
            return (0, false);
        }
        self.noted.copy_within(nr..self.nr_noted, 0);
        self.nr_noted -= nr;
        let all = n == self.records;
        if !all {
            // The first record that does not fit: refused, and counted so.
            let next = staged
                .get(bytes..)
                .and_then(|r| format::record_len(Endian::native(), r))
                .unwrap_or(0);
            let _ = eb.push_keeping(staged.get(bytes..bytes + next).unwrap_or(&[]), reserve);
        }
        // INVARIANT: `n` whole records left from the front.
        self.start += bytes;
        self.records -= n;
        if self.records == 0 {
            (self.start, self.end) = (0, 0);
            (self.nr_noted, self.noted_lost) = (0, false);
        }
        (n, all)
    }

    /// Drops everything staged; says what it was.
    pub(crate) fn discard(&mut self) -> Dropped {
        let mut d = Dropped::default();
        let mut rest = self.buf.get(self.start..self.end).unwrap_or(&[]);
        while let Some(p) = format::Prefix::read(Endian::native(), rest) {
            let len = usize::from(p.size);
            if len == 0 {
                break;
            }
            d.records += 1;
            match p.kind {
                format::SAMPLE => d.samples += 1,
                format::COMM => d.comms += 1,
                format::LOST => {
                    if let Some(l) = format::Lost::read(Endian::native(), rest) {
                        d.lost += l.count;
                    }
                }
                _ => {}
            }
            rest = rest.get(len..).unwrap_or(&[]);
        }
        // INVARIANT: nothing staged.
        (self.start, self.end, self.records) = (0, 0, 0);
        (self.nr_noted, self.noted_lost) = (0, false);
        d
    }
}

#[cfg(oprofile_rs_kunit)]
#[kunit_tests(oprofile_rs_sync_stage)]
mod tests {
    use super::*;

    fn lost(count: u64) -> [u8; format::LOST_LEN] {
        format::Lost {
            cpu: 1,
            time: 5,
            count,
        }
        .encoded(Endian::native())
    }

    fn sample(time: u64, depth: u8) -> KVec<u8> {
        let head = format::SampleHead {
            cpu: 1,
            kernel: true,
            depth,
            time,
            pc: 0x1000,
            pid: 7,
            tgid: 7,
            period: 100,
            event: 0,
            user_depth: 0,
            ext: true,
            throttled: false,
            user_stack: 0,
        };
        let mut v = KVec::new();
        let _ = v.extend_from_slice(&head.encoded(Endian::native()), GFP_KERNEL);
        for w in 0..u64::from(depth) {
            let _ = v.extend_from_slice(&Endian::native().u64_bytes(w), GFP_KERNEL);
        }
        v
    }

    /// Everything `eb` holds, consumed.
    fn take(eb: &mut EventBuffer) -> KVec<u8> {
        let c = eb.chunk(usize::MAX);
        let mut v = KVec::new();
        // SAFETY: `c` is fresh and nothing is consumed while `a`, `b` live.
        let (a, b) = unsafe { eb.view().bytes(c) };
        let _ = v.extend_from_slice(a, GFP_KERNEL);
        let _ = v.extend_from_slice(b, GFP_KERNEL);
        eb.consume(c.len);
        v
    }

    #[test]
    fn refuses_what_is_not_a_whole_record() {
        let Ok(mut st) = Stage::new() else { return };
        let s = sample(1, 2);
        assert!(!st.push(&[]));
        assert!(!st.push(s.get(..s.len() - 8).unwrap_or(&[])));
        assert!(st.push(&s));
        assert_eq!((st.records(), st.len()), (1, s.len()));
        // Until no record of the largest size fits.
        let big = sample(2, format::MAX_DEPTH as u8);
        let mut n = 1;
        while st.has_room() {
            assert!(st.push(&big));
            n += 1;
        }
        assert_eq!(st.records(), n);
        assert!(st.len() <= STAGE_BYTES);
    }

    #[test]
    fn appends_what_fits_and_keeps_the_rest_in_order() {
        let (Ok(mut st), Ok(mut eb)) = (Stage::new(), EventBuffer::new(4096)) else {
            return;
        };
        let reserve = 100;
        // 3000 bytes waiting: 1096 free, 996 of them above the reserve.
        let mut filler = KVec::new();
        for i in 0..125 {
            let _ = filler.extend_from_slice(&lost(i), GFP_KERNEL);
        }
        assert!(eb.push(&filler));
        assert_eq!(eb.free(), 4096 - 3000);
        // Staged: a LOST, then samples of 64 bytes (48 + 2 words): 24 + 20
        // * 64 = 1304 bytes.
        assert!(st.push(&lost(9)));
        let mut want = KVec::new();
        let _ = want.extend_from_slice(&lost(9), GFP_KERNEL);
        for t in 0..20 {
            let s = sample(t, 2);
            assert!(st.push(&s));
            let _ = want.extend_from_slice(&s, GFP_KERNEL);
        }
        let full_before = eb.full;
        // 24 + 15 * 64 = 984 <= 996 < 1048: 16 records go in, 5 stay.
        assert_eq!(st.append_to(&mut eb, reserve), (16, false));
        assert_eq!(eb.full, full_before + 1);
        assert_eq!((st.records(), st.len()), (5, 5 * 64));
        assert!(eb.free() >= reserve);
        let got = take(&mut eb);
        assert_eq!(got.get(3000..), want.get(..984));
        // Room again: the rest, in one append, in order; then nothing.
        assert_eq!(st.append_to(&mut eb, reserve), (5, true));
        assert_eq!(take(&mut eb).as_slice(), want.get(984..).unwrap_or(&[]));
        assert_eq!((st.records(), st.len()), (0, 0));
        assert_eq!(st.append_to(&mut eb, reserve), (0, true));
        assert_eq!(eb.full, full_before + 1);
    }

    #[test]
    fn compacting_keeps_the_records_and_makes_room() {
        let (Ok(mut st), Ok(mut eb)) = (Stage::new(), EventBuffer::new(4096)) else {
            return;
        };
        let big = sample(1, format::MAX_DEPTH as u8);
        while st.has_room() {
            assert!(st.push(&big));
        }
        let n = st.records();
        // The reserve leaves room for two records of 560 bytes.
        assert_eq!(st.append_to(&mut eb, 4096 - 2 * big.len()), (2, false));
        assert_eq!(st.records(), n - 2);
        st.compact();
        assert!(st.has_room());
        assert!(st.push(&sample(2, 1)));
        let _ = take(&mut eb);
        // Everything left comes out whole and in order.
        let mut total = 0;
        loop {
            let (k, all) = st.append_to(&mut eb, 0);
            total += k;
            let got = take(&mut eb);
            assert_eq!(got.len() % big.len(), if all { 56 } else { 0 });
            if all {
                break;
            }
            assert!(k > 0);
        }
        assert_eq!(total, n - 2 + 1);
    }

    #[test]
    fn discard_counts_samples_losses_and_names() {
        let Ok(mut st) = Stage::new() else { return };
        let comm = format::Comm {
            cpu: 1,
            time: 3,
            pid: 7,
            tgid: 7,
            comm: [0; format::COMM_NAME_LEN],
        }
        .encoded(Endian::native());
        assert!(st.push(&lost(4)));
        assert!(st.push(&comm));
        assert!(st.push(&sample(5, 0)));
        assert!(st.push(&lost(6)));
        assert!(st.push(&sample(6, 3)));
        let d = st.discard();
        assert_eq!(
            d,
            Dropped {
                records: 5,
                samples: 2,
                lost: 10,
                comms: 1,
            }
        );
        assert_eq!((st.records(), st.len()), (0, 0));
        assert_eq!(st.discard(), Dropped::default());
    }

    /// The times of the COMM records `eb`'s index lists, and where it
    /// stops listing.
    fn noted_times(eb: &EventBuffer) -> (KVec<u64>, Option<u64>) {
        let mut v = KVec::new();
        let gap = eb.noted_below(u64::MAX, |r| {
            if let Some(c) = format::Comm::read(Endian::native(), r) {
                let _ = v.push(c.time, GFP_KERNEL);
            }
        });
        (v, gap)
    }

    #[test]
    fn tells_the_event_buffer_where_its_comm_records_are() {
        let (Ok(mut st), Ok(mut eb)) = (Stage::new(), EventBuffer::new(4096)) else {
            return;
        };
        let comm = |time| {
            format::Comm {
                cpu: 1,
                time,
                pid: 7,
                tgid: 7,
                comm: [b'c'; format::COMM_NAME_LEN],
            }
            .encoded(Endian::native())
        };
        // 3000 bytes, one record at a time (a run of records pushed at
        // once would be one the index does not know).
        for i in 0..125 {
            assert!(eb.push(&lost(i)));
        }
        assert_eq!(eb.free(), 4096 - 3000);
        // LOST at 0, COMM at 24, SAMPLE (48) at 64, COMM at 112, then 20
        // samples of 64 bytes: more than the 1096 bytes free.
        assert!(st.push(&lost(1)));
        assert!(st.push(&comm(100)));
        assert!(st.push(&sample(1, 0)));
        assert!(st.push(&comm(200)));
        for t in 0..20 {
            assert!(st.push(&sample(t, 2)));
        }
        let (_, all) = st.append_to(&mut eb, 0);
        assert!(!all);
        let (times, gap) = noted_times(&eb);
        assert_eq!(&times[..], &[100, 200]);
        assert_eq!(gap, None);
        // What stays staged moves to the front; a COMM after it, once room
        // is made, is listed at its place.
        let _ = take(&mut eb);
        st.compact();
        assert!(st.push(&comm(300)));
        let before = eb.bytes_in;
        let (_, all) = st.append_to(&mut eb, 0);
        assert!(all);
        let (times, gap) = noted_times(&eb);
        assert_eq!(&times[..], &[300]);
        assert_eq!(gap, None);
        assert!(eb.ends_record(eb.bytes_in - format::COMM_LEN as u64));
        assert!(eb.bytes_in > before);
        let _ = take(&mut eb);
        // More noted records than the area keeps offsets of: the append
        // says it does not know, and the index stops listing there.
        let off = format::Tracing {
            cpu: 0,
            time: 1,
            on: false,
        }
        .encoded(Endian::native());
        for _ in 0..=STAGE_NOTED {
            assert!(st.push(&off));
        }
        let start = eb.bytes_in;
        let (_, all) = st.append_to(&mut eb, 0);
        assert!(all);
        assert_eq!(noted_times(&eb).1, Some(start));
        let _ = take(&mut eb);
        assert_eq!(noted_times(&eb).1, None);
    }
}
