// SPDX-License-Identifier: GPL-2.0

//! Reader side: consume, peek, iterate.
//!
//! One reader at a time (a try-lock inside the buffer; a second concurrent
//! reader gets [`ReadError::Busy`]). The reader copies a record out of the
//! buffer and then validates it: when consuming, by the compare-and-swap that
//! advances `tail`; when peeking/iterating, by re-reading `tail` after an
//! read fence. In overwrite mode a writer advances `tail` past a record
//! (and issues a write fence) before overwriting it, so a copy that may have
//! seen overwritten words always fails validation and is retried.

use core::ops::Deref;

use super::atomics::{bump, read_fence, AtomicBool, AtomicU64, Ordering};
use super::header::{self, parse_record, Record};
use super::{load_word, CpuBuffer};

/// Give up after this many failed validations (writer lapping the reader).
const MAX_RETRIES: u32 = 1000;

/// Metadata of a record returned by the reader.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordInfo {
    /// Absolute time stamp, exactly as passed to `reserve`.
    pub ts: u64,
    /// Payload length in bytes.
    pub len: usize,
    /// Records lost (dropped full, commit overrun, overrun) since the previous
    /// read, reported before this record.
    pub lost: u64,
}

/// Why a read failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadError {
    /// No committed record.
    Empty,
    /// Another reader (or a control operation) is using the buffer.
    Busy,
    /// The caller's buffer is too small; nothing was consumed.
    BufferTooSmall {
        /// Payload length of the next record.
        needed: usize,
    },
    /// The writer kept overwriting the record being read; try again.
    Contended,
    /// The buffer content is inconsistent (a bug or misuse, e.g. writers on
    /// several CPUs at once).
    Corrupt,
}

/// Holds the reader lock.
pub(crate) struct ReaderGuard<'a> {
    lock: &'a AtomicBool,
}

impl Drop for ReaderGuard<'_> {
    fn drop(&mut self) {
        self.lock.store(false, Ordering::Release);
    }
}

/// Where a [`CpuBuffer::consume_batch`] is.
struct Batch {
    /// Next position to read.
    pos: u64,
    /// `commit` as loaded when the batch started (or restarted).
    commit: u64,
    /// Time of the record before `pos`, if known.
    base: Option<u64>,
    /// Position and time of the last record with a known time.
    timed: Option<(u64, u64)>,
    /// Last value stored to `tail` (producer/consumer mode).
    published: u64,
    /// Records and payload bytes delivered.
    n: usize,
    bytes: u64,
    /// Restarts after a writer lapped the reader.
    retries: u32,
    /// Whether `lost` must be computed before the next delivered record.
    lost_due: bool,
    /// What to return if nothing is delivered.
    err: ReadError,
}

/// What a [`CpuBuffer::batch_step`] gives.
enum Step {
    /// A record to deliver (time, length): its payload is in `scratch`.
    Deliver(u64, usize),
    /// Nothing to deliver yet: go on.
    Next,
    /// End the batch (`Batch::err` says why if nothing was delivered).
    Stop,
}

/// Position and time base of a non-destructive read.
#[cfg(ringbuf_host)]
#[derive(Clone, Copy)]
struct Cursor {
    pos: u64,
    ts: Option<u64>,
}

/// Whether position `a` is before `b` (free-running positions, modular).
#[cfg(ringbuf_host)]
#[inline(always)]
fn before(a: u64, b: u64) -> bool {
    b.wrapping_sub(a).wrapping_sub(1) < (1 << 63)
}

/// Copies the payload of `rec` (at most `out.len()` bytes). Returns the count.
#[inline(always)]
fn copy_payload(words: &[AtomicU64], mask: u64, rec: &Record, out: &mut [u8]) -> usize {
    let len = usize::try_from(rec.header.len).unwrap_or(usize::MAX);
    let n = core::cmp::min(len, out.len());
    let Some(dst) = out.get_mut(..n) else {
        return 0;
    };
    copy_words(words, mask, rec.data_pos.wrapping_add(1), dst);
    n
}

/// Fills `dst` with the bytes of the words from position `pos` on.
#[inline(always)]
fn copy_words(words: &[AtomicU64], mask: u64, pos: u64, dst: &mut [u8]) {
    let mut pos = pos;
    // Word by word, each in memory order (see `Slot::write_bytes`).
    let mut chunks = dst.chunks_exact_mut(8);
    for chunk in &mut chunks {
        chunk.copy_from_slice(&load_word(words, mask, pos).unwrap_or(0).to_ne_bytes());
        pos = pos.wrapping_add(1);
    }
    let rest = chunks.into_remainder();
    if !rest.is_empty() {
        let v = load_word(words, mask, pos).unwrap_or(0);
        for (d, s) in rest.iter_mut().zip(v.to_ne_bytes()) {
            *d = s;
        }
    }
}

/// The fast path of [`CpuBuffer::consume_batch`]: reads the common record
/// at `pos` without the general parser, if it is one: a data record without
/// a time prefix (so its time is `base` plus its inline delta), that fits
/// in the `avail` committed words and in `out`. Returns its total words,
/// time and length, its payload copied into `out`; `None` for anything else
/// (nothing copied), which the general path then reads.
///
/// Only for producer/consumer mode, where nothing the reader has not
/// consumed is overwritten, so the copy needs no validation; the words are
/// below `commit`, whose acquire load made the writer's stores visible.
#[inline(always)]
fn read_plain(
    words: &[AtomicU64],
    mask: u64,
    pos: u64,
    avail: u64,
    base: u64,
    out: &mut [u8],
) -> Option<(u64, u64, usize)> {
    let (delta, len) = header::plain_data(load_word(words, mask, pos)?)?;
    let total = header::payload_words(len).wrapping_add(1);
    if total > avail {
        return None;
    }
    let n = usize::try_from(len).ok()?;
    copy_words(words, mask, pos.wrapping_add(1), out.get_mut(..n)?);
    Some((total, base.wrapping_add(delta), n))
}

/// What reading the record at the reader's position gave (before validation).
#[derive(Clone, Copy)]
enum Read {
    /// A record to deliver; its payload is copied.
    Deliver(Record),
    /// A record to skip: padding, or a record whose time is unknown.
    Skip(Record),
    /// A record to deliver that does not fit in the caller's buffer.
    TooSmall(usize),
    /// No valid record: overwritten meanwhile, or corrupt.
    Invalid,
}

/// Parses the record at `pos` (`avail` committed words from it on, `base`
/// the time of the record before it if known) and copies its payload into
/// `out` if it is to be delivered.
#[inline(always)]
fn read_record(
    words: &[AtomicU64],
    mask: u64,
    pos: u64,
    avail: u64,
    base: Option<u64>,
    out: &mut [u8],
) -> Read {
    let Some(rec) = parse_record(words, mask, pos, avail, base) else {
        return Read::Invalid;
    };
    if !rec.header.is_data || rec.ts.is_none() {
        return Read::Skip(rec);
    }
    let len = usize::try_from(rec.header.len).unwrap_or(usize::MAX);
    if out.len() < len {
        return Read::TooSmall(len);
    }
    copy_payload(words, mask, &rec, out);
    Read::Deliver(rec)
}

impl<'s, S: Deref<Target = [AtomicU64]>> CpuBuffer<'s, S> {
    pub(crate) fn lock_reader(&self) -> Option<ReaderGuard<'_>> {
        self.reader_lock
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .ok()
            .map(|_| ReaderGuard {
                lock: &self.reader_lock.0,
            })
    }

    /// Time of the record before `tail`, if the reader knows it.
    #[inline(always)]
    fn base_for(&self, tail: u64) -> Option<u64> {
        (self.read_pos.load(Ordering::Relaxed) == tail)
            .then(|| self.read_ts.load(Ordering::Relaxed))
    }

    /// Time of the record before `pos` in a batch that has read up to the
    /// record ending at `timed.0` (time `timed.1`) without storing it yet.
    #[inline(always)]
    fn batch_base(&self, pos: u64, timed: Option<(u64, u64)>) -> Option<u64> {
        match timed {
            Some((p, ts)) if p == pos => Some(ts),
            _ => self.base_for(pos),
        }
    }

    /// Lost records not yet reported (optionally marking them reported).
    fn take_lost(&self, mark: bool) -> u64 {
        let total = self.stats.lost_total();
        let lost = total.saturating_sub(self.stats.reader.lost_reported.load(Ordering::Relaxed));
        if mark {
            self.stats
                .reader
                .lost_reported
                .store(total, Ordering::Relaxed);
        }
        lost
    }

    /// Overwrite mode: validates what `read` copied from `pos` and claims
    /// the record, or returns `false` if a writer moved `tail` meanwhile
    /// (and so may have overwritten what we copied).
    ///
    /// A writer that overwrites moves `tail` past the record first, then
    /// issues a write fence, then stores: if our copy saw any of its stores,
    /// the fences synchronise and our compare-and-swap of `tail` fails.
    #[inline(always)]
    fn claim(&self, pos: u64, read: Read) -> bool {
        read_fence();
        match read {
            Read::Deliver(rec) | Read::Skip(rec) => self
                .tail
                .compare_exchange(
                    pos,
                    pos.wrapping_add(rec.total),
                    Ordering::AcqRel,
                    Ordering::Relaxed,
                )
                .is_ok(),
            // Nothing to claim: only whether the read can be trusted.
            Read::TooSmall(_) | Read::Invalid => self.tail.load(Ordering::Relaxed) == pos,
        }
    }

    /// Consumes the oldest record, copying its payload into `out`.
    ///
    /// Padding and records whose time cannot be reconstructed (after the
    /// writer lapped the reader, up to the next time-stamp sync record) are
    /// skipped; the latter count as overrun. This is a batch of one record
    /// (see [`CpuBuffer::consume_batch`]); `out` too small for the next
    /// record gives [`ReadError::BufferTooSmall`] and consumes nothing.
    pub fn consume(&self, out: &mut [u8]) -> Result<RecordInfo, ReadError> {
        let mut got = None;
        self.consume_batch(out, |info, _| {
            got = Some(info);
            false
        })?;
        got.ok_or(ReadError::Empty)
    }

    /// Consumes a batch of records in one pass: one reader lock, one `commit`
    /// load, one `tail` update (in overwrite mode one `tail` CAS per record,
    /// since writers advance `tail` too), one sum of the lost counters.
    ///
    /// Each record's payload is copied into `scratch` and handed to `f`
    /// with its [`RecordInfo`]; the record is consumed whatever `f` does with
    /// it (the bytes stay in `scratch` until the next copy, so a caller that
    /// cannot take a record can keep them there). `f` returns whether to go on.
    /// The batch covers the records committed when it starts; in
    /// producer/consumer mode `tail` is also published every quarter buffer,
    /// so that a long batch does not keep the writers full.
    ///
    /// `lost` is reported with the first record of the batch, and again with
    /// a later one only if a writer lapped the reader meanwhile (overwrite
    /// mode); other losses the writers count during the batch are reported
    /// by the next batch.
    ///
    /// Returns the number of records handed to `f`. Errors only when none
    /// was: [`ReadError::Empty`], [`ReadError::Busy`], [`ReadError::Contended`],
    /// [`ReadError::Corrupt`], or [`ReadError::BufferTooSmall`] if the first
    /// record does not fit in `scratch` (nothing consumed). A later record that
    /// does not fit, or is corrupt, ends the batch before it.
    pub fn consume_batch<F>(&self, scratch: &mut [u8], mut f: F) -> Result<usize, ReadError>
    where
        F: FnMut(RecordInfo, &[u8]) -> bool,
    {
        let _guard = self.lock_reader().ok_or(ReadError::Busy)?;
        // Stable while we hold the reader lock (control operations take it).
        let mask = self.geometry.mask.load(Ordering::Relaxed);
        let size = mask.wrapping_add(1);
        // The used prefix of the storage: every `pos & mask` indexes it, so
        // the compiler can drop the per-word bounds checks.
        let words = self.words();
        let words = usize::try_from(mask)
            .ok()
            .and_then(|m| words.get(..=m))
            .unwrap_or(words);
        let overwrite = self.overwrite.load(Ordering::Relaxed);
        let pos = self.tail.load(Ordering::Acquire);
        let mut b = Batch {
            pos,
            // Acquire: pairs with the release store of the outermost writer.
            commit: self.commit.load(Ordering::Acquire),
            base: self.base_for(pos),
            timed: None,
            published: pos,
            n: 0,
            bytes: 0,
            retries: 0,
            lost_due: true,
            err: ReadError::Empty,
        };
        // Producer/consumer mode: the published `tail` lags at most a
        // quarter buffer behind, so that a long batch does not keep the
        // writers full.
        let quarter = size >> 2;
        loop {
            let avail = b.commit.wrapping_sub(b.pos);
            if avail == 0 {
                break;
            }
            // The common record (producer/consumer mode, no time prefix,
            // time base known) takes the fast path: a few instructions per
            // record, nothing kept in memory but the payload copy.
            let plain = match b.base {
                Some(base) if !overwrite => read_plain(words, mask, b.pos, avail, base, scratch),
                _ => None,
            };
            let (ts, len) = match plain {
                Some((total, ts, len)) => {
                    b.pos = b.pos.wrapping_add(total);
                    b.base = Some(ts);
                    b.timed = Some((b.pos, ts));
                    (ts, len)
                }
                // Everything else: the general parser, out of line.
                // `b` goes by value, so that it can stay in registers on the
                // fast path (its address never escapes).
                None => {
                    let step;
                    (b, step) = self.batch_step(b, words, mask, size, overwrite, scratch);
                    match step {
                        Step::Deliver(ts, len) => (ts, len),
                        Step::Next => continue,
                        Step::Stop => break,
                    }
                }
            };
            let lost = if b.lost_due {
                b.lost_due = false;
                self.take_lost(true)
            } else {
                0
            };
            b.n = b.n.wrapping_add(1);
            b.bytes = b.bytes.wrapping_add(len as u64);
            if !f(
                RecordInfo { ts, len, lost },
                scratch.get(..len).unwrap_or(&[]),
            ) {
                break;
            }
            if !overwrite && b.pos.wrapping_sub(b.published) >= quarter {
                // Release: our copies are done before a writer reuses the space.
                self.tail.store(b.pos, Ordering::Release);
                b.published = b.pos;
            }
        }
        if !overwrite && b.pos != b.published {
            // Release: as above.
            self.tail.store(b.pos, Ordering::Release);
        }
        if let Some((p, ts)) = b.timed {
            self.read_pos.store(p, Ordering::Relaxed);
            self.read_ts.store(ts, Ordering::Relaxed);
        }
        if b.n == 0 {
            return Err(b.err);
        }
        bump(&self.stats.reader.read, b.n as u64);
        bump(&self.stats.reader.read_bytes, b.bytes);
        Ok(b.n)
    }

    /// One step of [`Self::consume_batch`] through the general parser: a
    /// record that is not the common one (time prefix, padding, unknown
    /// time base, overwrite mode, too large for `scratch`, corrupt), or a
    /// restart after a writer lapped the reader.
    #[inline(never)]
    fn batch_step(
        &self,
        b: Batch,
        words: &[AtomicU64],
        mask: u64,
        size: u64,
        overwrite: bool,
        scratch: &mut [u8],
    ) -> (Batch, Step) {
        let mut b = b;
        let step = self.batch_step_in(&mut b, words, mask, size, overwrite, scratch);
        (b, step)
    }

    /// The body of [`Self::batch_step`].
    #[inline(always)]
    fn batch_step_in(
        &self,
        b: &mut Batch,
        words: &[AtomicU64],
        mask: u64,
        size: u64,
        overwrite: bool,
        scratch: &mut [u8],
    ) -> Step {
        let pos = b.pos;
        let avail = b.commit.wrapping_sub(pos);
        // Producer/consumer mode: only the reader moves `tail`, so
        // nothing we copy can be overwritten. Overwrite mode: writers
        // move `tail` past our position (possibly past our `commit`:
        // `avail > size`), so each record is claimed before it counts.
        let read = (avail <= size)
            .then(|| read_record(words, mask, pos, avail, b.base, scratch))
            .filter(|read| !overwrite || self.claim(pos, *read));
        let Some(read) = read else {
            // Lapped: start again from the writers' `tail`.
            b.retries = b.retries.wrapping_add(1);
            if b.retries > MAX_RETRIES {
                b.err = ReadError::Contended;
                return Step::Stop;
            }
            b.pos = self.tail.load(Ordering::Acquire);
            b.commit = self.commit.load(Ordering::Acquire);
            b.base = self.batch_base(b.pos, b.timed);
            b.lost_due = true;
            return Step::Next;
        };
        let (rec, deliver) = match read {
            Read::Deliver(rec) => (rec, true),
            Read::Skip(rec) => (rec, false),
            Read::TooSmall(needed) => {
                b.err = ReadError::BufferTooSmall { needed };
                return Step::Stop;
            }
            Read::Invalid => {
                b.err = ReadError::Corrupt;
                return Step::Stop;
            }
        };
        b.pos = pos.wrapping_add(rec.total);
        if let Some(ts) = rec.ts {
            b.base = Some(ts);
            b.timed = Some((b.pos, ts));
        }
        if !deliver {
            // A record whose time is unknown: only before the first
            // record with a known time (when the batch starts or
            // restarts, `lost_due` is set then).
            if rec.header.is_data {
                bump(&self.stats.reader.skipped, 1);
                bump(&self.stats.reader.skipped_bytes, rec.header.len);
            }
            return Step::Next;
        }
        let len = usize::try_from(rec.header.len).unwrap_or(usize::MAX);
        Step::Deliver(rec.ts.unwrap_or(0), len)
    }

    /// Reads the next deliverable record at or after `cur`, below `limit`,
    /// without consuming. Copies at most `out.len()` payload bytes.
    #[cfg(ringbuf_host)]
    fn read_at(
        &self,
        cur: &mut Cursor,
        limit: u64,
        out: &mut [u8],
    ) -> Result<Option<RecordInfo>, ReadError> {
        let words = self.words();
        let mut retries = 0u32;
        loop {
            let mask = self.geometry.mask.load(Ordering::Relaxed);
            let tail = self.tail.load(Ordering::Acquire);
            if before(cur.pos, tail) {
                // The writer lapped the cursor: restart at tail.
                cur.pos = tail;
                cur.ts = self.base_for(tail);
            }
            let avail = limit.wrapping_sub(cur.pos);
            if avail == 0 || avail > mask.wrapping_add(1) {
                return Ok(None);
            }
            let parsed = parse_record(words, mask, cur.pos, avail, cur.ts);
            let copied = parsed.map(|rec| {
                let deliver = rec.header.is_data && rec.ts.is_some();
                if deliver {
                    copy_payload(words, mask, &rec, out);
                }
                (rec, deliver)
            });
            read_fence();
            let t2 = self.tail.load(Ordering::Relaxed);
            if before(cur.pos, t2) {
                // Overwritten while we read it.
                retries = retries.wrapping_add(1);
                if retries > MAX_RETRIES {
                    return Err(ReadError::Contended);
                }
                continue;
            }
            let Some((rec, deliver)) = copied else {
                return Err(ReadError::Corrupt);
            };
            cur.pos = cur.pos.wrapping_add(rec.total);
            if rec.ts.is_some() {
                cur.ts = rec.ts;
            }
            if deliver {
                return Ok(Some(RecordInfo {
                    ts: rec.ts.unwrap_or(0),
                    len: usize::try_from(rec.header.len).unwrap_or(usize::MAX),
                    lost: 0,
                }));
            }
        }
    }

    /// Looks at the oldest record without consuming it. Copies at most
    /// `out.len()` bytes of its payload (`len` is the full length). `lost` is
    /// what the next `consume` would report before it, as far as known now.
    #[cfg(ringbuf_host)]
    pub fn peek(&self, out: &mut [u8]) -> Result<RecordInfo, ReadError> {
        let _guard = self.lock_reader().ok_or(ReadError::Busy)?;
        let tail = self.tail.load(Ordering::Acquire);
        let mut cur = Cursor {
            pos: tail,
            ts: self.base_for(tail),
        };
        let limit = self.commit.load(Ordering::Acquire);
        match self.read_at(&mut cur, limit, out)? {
            Some(mut info) => {
                info.lost = self.take_lost(false);
                Ok(info)
            }
            None => Err(ReadError::Empty),
        }
    }

    /// Non-destructive iterator over the records committed now.
    ///
    /// Holds the reader lock until dropped.
    #[cfg(ringbuf_host)]
    pub fn iter(&self) -> Result<Iter<'_, 's, S>, ReadError> {
        let guard = self.lock_reader().ok_or(ReadError::Busy)?;
        let tail = self.tail.load(Ordering::Acquire);
        let cur = Cursor {
            pos: tail,
            ts: self.base_for(tail),
        };
        Ok(Iter {
            buf: self,
            _guard: guard,
            cur,
            limit: self.commit.load(Ordering::Acquire),
            lost_seen: self.stats.reader.lost_reported.load(Ordering::Relaxed),
        })
    }
}

/// Non-destructive iterator, see [`CpuBuffer::iter`].
///
/// As an [`Iterator`] it yields metadata only; use [`Iter::next_into`] to
/// also copy payloads.
#[cfg(ringbuf_host)]
pub struct Iter<'b, 's, S: Deref<Target = [AtomicU64]>> {
    buf: &'b CpuBuffer<'s, S>,
    _guard: ReaderGuard<'b>,
    cur: Cursor,
    limit: u64,
    lost_seen: u64,
}

#[cfg(ringbuf_host)]
impl<S: Deref<Target = [AtomicU64]>> Iter<'_, '_, S> {
    /// Next record, copying at most `out.len()` bytes of its payload. `lost`
    /// counts records lost since the previous one (or the last consume).
    pub fn next_into(&mut self, out: &mut [u8]) -> Option<RecordInfo> {
        let mut info = self.buf.read_at(&mut self.cur, self.limit, out).ok()??;
        let total = self.buf.stats.lost_total();
        info.lost = total.saturating_sub(self.lost_seen);
        self.lost_seen = total;
        Some(info)
    }
}

#[cfg(ringbuf_host)]
impl<S: Deref<Target = [AtomicU64]>> Iterator for Iter<'_, '_, S> {
    type Item = RecordInfo;

    fn next(&mut self) -> Option<RecordInfo> {
        self.next_into(&mut [])
    }
}
