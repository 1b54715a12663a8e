// SPDX-License-Identifier: GPL-2.0

//! Writer side: reserve, write, commit, discard.
//!
//! Any number of writers on the buffer's CPU may nest (task, softirq, irq,
//! NMI, each interrupting the previous at any instruction). Space is reserved
//! with a compare-and-swap on `head`; the commit position is advanced only by
//! the outermost writer (ftrace's `committing`/`commits` scheme), so records
//! become visible in reservation order.

use core::marker::PhantomData;
use core::ops::Deref;

use super::atomics::{bump, seqcst_rmw_load_order, write_fence, AtomicU64, Ordering};
use super::header::{self, parse_record, Prefix, TYPE_DATA};
use super::{
    load_word, store_word, sync_interval, CpuBuffer, DEPTH_MASK, MAX_NESTING, NEST_ONE, STATE_ON,
};

/// Why a [`CpuBuffer::reserve`] failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReserveError {
    /// No space. Producer/consumer mode: counted in `dropped_full`. Overwrite
    /// mode: the space is held by records reserved but not yet committed by
    /// interrupted writers; counted in `commit_overrun`.
    Full,
    /// Recording is off (a switch, or a control operation in progress);
    /// counted in `dropped_disabled`.
    Disabled,
    /// The record can never fit in this buffer; counted in `dropped_full`.
    TooLarge,
    /// Writers nested deeper than [`MAX_NESTING`]; counted in `commit_overrun`.
    Nested,
}

/// Internal failure reasons (mapped to [`ReserveError`] and a counter).
#[derive(Clone, Copy)]
enum Fail {
    Full,
    Blocked,
    Disabled,
    TooLarge,
    Nested,
}

/// A reserved, not yet published record.
///
/// Committing publishes it, discarding or dropping it withdraws it. The slot
/// borrows the buffer, so it cannot outlive it, and it is neither `Send` nor
/// `Sync`: it must be finished on the CPU (context) that reserved it.
pub struct Slot<'b, 's, S: Deref<Target = [AtomicU64]>> {
    buf: &'b CpuBuffer<'s, S>,
    // INVARIANT: `[start, end)` was reserved by this slot and is not visible to
    // the reader until the slot is finished; `data` is the position of its
    // header word, `end = data + 1 + payload_words(len)`; `depth` is in
    // `1..=MAX_NESTING`; the slot holds one unit of the nesting depth until
    // `done` becomes true.
    start: u64,
    data: u64,
    end: u64,
    mask: u64,
    len: u32,
    depth: u64,
    done: bool,
    _not_send: PhantomData<*const ()>,
}

impl<'s, S: Deref<Target = [AtomicU64]>> CpuBuffer<'s, S> {
    /// Reserves a record of `len` payload bytes with time stamp `ts` (ns).
    ///
    /// Safe to call from any context on the buffer's CPU, including NMI,
    /// interrupting another `reserve`/`commit` at any point.
    #[inline]
    pub fn reserve(&self, len: usize, ts: u64) -> Result<Slot<'_, 's, S>, ReserveError> {
        // Being counted in `nest` before checking the switches is what makes
        // `writers_active()` reliable (see switch.rs).
        let prev = self.nest.fetch_add(NEST_ONE, Ordering::SeqCst);
        seqcst_rmw_load_order();
        let depth = (prev & DEPTH_MASK).wrapping_add(1);
        match self.try_reserve(len, ts, depth) {
            Ok(slot) => Ok(slot),
            Err(fail) => {
                let (counter, err) = match fail {
                    Fail::Full => (&self.stats.drops.dropped_full, ReserveError::Full),
                    Fail::TooLarge => (&self.stats.drops.dropped_full, ReserveError::TooLarge),
                    Fail::Blocked => (&self.stats.drops.commit_overrun, ReserveError::Full),
                    Fail::Nested => (&self.stats.drops.commit_overrun, ReserveError::Nested),
                    Fail::Disabled => (&self.stats.drops.dropped_disabled, ReserveError::Disabled),
                };
                counter.fetch_add(1, Ordering::Relaxed);
                self.end_commit();
                Err(err)
            }
        }
    }

    #[inline(always)]
    fn try_reserve(&self, len: usize, ts: u64, depth: u64) -> Result<Slot<'_, 's, S>, Fail> {
        if depth > MAX_NESTING as u64 {
            return Err(Fail::Nested);
        }
        if self.state.load(Ordering::SeqCst) != STATE_ON || !self.switches.is_on() {
            return Err(Fail::Disabled);
        }
        let len32 = u32::try_from(len).map_err(|_| Fail::TooLarge)?;
        let pw = header::payload_words(u64::from(len32));
        let mask = self.mask.load(Ordering::Relaxed);
        let size = mask.wrapping_add(1);
        if pw.saturating_add(2) > size {
            return Err(Fail::TooLarge);
        }
        let overwrite = self.overwrite.load(Ordering::Relaxed);
        let interval = sync_interval(size);
        let words = self.words();
        loop {
            let head = self.head.load(Ordering::Acquire);
            // `stamp` is the time of the record ending at `head` only if
            // `stamp_pos == head` (stores: stamp, then stamp_pos; loads in
            // the opposite order). A nested writer that changed them also
            // moved `head`, which makes our CAS below fail.
            let spos = self.stamp_pos.load(Ordering::Acquire);
            let prev_ts = self.stamp.load(Ordering::Acquire);
            let sync = self.last_sync.load(Ordering::Relaxed);
            let known = spos == head && head.wrapping_sub(sync) < interval;
            let (prefix, lo) = header::plan_time(known.then_some(prev_ts), ts);
            let data = head.wrapping_add(prefix.words());
            let end = data.wrapping_add(1).wrapping_add(pw);
            self.make_room(words, mask, size, end, overwrite, depth)?;
            if self
                .head
                .compare_exchange(head, end, Ordering::AcqRel, Ordering::Acquire)
                .is_err()
            {
                continue;
            }
            // Overwrite mode: our tail advance must be visible to a reader
            // that sees any of the stores below (seqlock-style validation).
            write_fence();
            if prefix != Prefix::None {
                store_word(words, mask, head, prefix.encode());
                if let Prefix::Stamp(_) = prefix {
                    self.last_sync.store(head, Ordering::Relaxed);
                }
            }
            store_word(
                words,
                mask,
                data,
                header::encode_header(TYPE_DATA, lo, len32),
            );
            self.stamp.store(ts, Ordering::Release);
            self.stamp_pos.store(end, Ordering::Release);
            return Ok(Slot {
                buf: self,
                start: head,
                data,
                end,
                mask,
                len: len32,
                depth,
                done: false,
                _not_send: PhantomData,
            });
        }
    }

    /// Makes sure the words up to `end` can be written.
    #[inline(always)]
    fn make_room(
        &self,
        words: &[AtomicU64],
        mask: u64,
        size: u64,
        end: u64,
        overwrite: bool,
        depth: u64,
    ) -> Result<(), Fail> {
        loop {
            // Acquire: the reader's copies of what we overwrite are done.
            let tail = self.tail.load(Ordering::Acquire);
            if end.wrapping_sub(tail) <= size {
                return Ok(());
            }
            if !overwrite {
                return Err(Fail::Full);
            }
            // Only committed records may be overwritten.
            let commit = self.commit.load(Ordering::Acquire);
            let avail = commit.wrapping_sub(tail);
            if avail == 0 || avail > size {
                return Err(Fail::Blocked);
            }
            let rec = parse_record(words, mask, tail, avail, None).ok_or(Fail::Blocked)?;
            if self
                .tail
                .compare_exchange(
                    tail,
                    tail.wrapping_add(rec.total),
                    Ordering::AcqRel,
                    Ordering::Relaxed,
                )
                .is_ok()
                && rec.header.is_data
            {
                if let Some(l) = self.stats.overrun_level(depth) {
                    bump(&l.overrun, 1);
                    bump(&l.overrun_bytes, rec.header.len);
                }
            }
        }
    }

    /// Leaves a reservation (commit, discard or failed reserve); the outermost
    /// writer publishes everything reserved so far.
    #[inline(always)]
    pub(crate) fn end_commit(&self) {
        loop {
            let cur = self.nest.load(Ordering::SeqCst);
            if cur & DEPTH_MASK == 1 {
                // We are the only writer in flight: everything up to head is
                // committed or discarded. Release publishes the records.
                let head = self.head.load(Ordering::Acquire);
                self.commit.store(head, Ordering::Release);
            }
            let prev = self.nest.fetch_sub(1, Ordering::SeqCst);
            // A writer that interrupted us after the load of `cur` reserved
            // (the count changed) and saw depth >= 2, so it did not publish.
            // If we were the last one, publish again.
            if (prev >> 16) != (cur >> 16) && prev & DEPTH_MASK == 1 {
                self.nest.fetch_add(1, Ordering::SeqCst);
                continue;
            }
            return;
        }
    }
}

impl<S: Deref<Target = [AtomicU64]>> Slot<'_, '_, S> {
    /// Payload length in bytes.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// Whether the payload is empty.
    #[cfg(ringbuf_host)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline(always)]
    fn payload_words(&self) -> u64 {
        header::payload_words(u64::from(self.len))
    }

    /// Writes payload word `index` (bytes `8*index..8*index+8`, in the
    /// machine's byte order: see [`Slot::write_bytes`]).
    ///
    /// Returns `false` (and writes nothing) if the word is outside the payload.
    #[cfg(ringbuf_host)]
    #[inline(always)]
    pub fn write_word(&mut self, index: usize, value: u64) -> bool {
        match u64::try_from(index) {
            Ok(i) if i < self.payload_words() => {
                let pos = self.data.wrapping_add(1).wrapping_add(i);
                store_word(self.buf.words(), self.mask, pos, value)
            }
            _ => false,
        }
    }

    /// Writes consecutive payload words starting at word `index`.
    ///
    /// Returns `false` (and writes nothing) if they do not all fit.
    #[inline(always)]
    pub fn write_words(&mut self, index: usize, values: &[u64]) -> bool {
        let fits = index
            .checked_add(values.len())
            .and_then(|e| u64::try_from(e).ok())
            .is_some_and(|e| e <= self.payload_words());
        if !fits {
            return false;
        }
        let words = self.buf.words();
        let mut pos = self.data.wrapping_add(1).wrapping_add(index as u64);
        for v in values {
            store_word(words, self.mask, pos, *v);
            pos = pos.wrapping_add(1);
        }
        true
    }

    /// Writes `bytes` at byte `offset` of the payload.
    ///
    /// A payload word holds its 8 bytes in memory order, so bytes read back
    /// as written, and a word written with [`Slot::write_word`] reads back as
    /// its bytes in the machine's byte order: the order of the module's
    /// stream (`format::Endian::native`).
    ///
    /// Returns `false` (and writes nothing) if they do not fit.
    pub fn write_bytes(&mut self, offset: usize, bytes: &[u8]) -> bool {
        match offset.checked_add(bytes.len()) {
            Some(e) if e <= self.len() => {}
            _ => return false,
        }
        let words = self.buf.words();
        let mut src = bytes;
        let mut off = offset;
        while !src.is_empty() {
            let in_word = off & 7;
            let take = core::cmp::min(8usize.wrapping_sub(in_word), src.len());
            let (Some(chunk), Some(rest)) = (src.get(..take), src.get(take..)) else {
                return false;
            };
            let pos = self.data.wrapping_add(1).wrapping_add((off >> 3) as u64);
            let mut b = if take == 8 {
                [0; 8]
            } else {
                load_word(words, self.mask, pos).unwrap_or(0).to_ne_bytes()
            };
            for (d, s) in b.iter_mut().skip(in_word).zip(chunk) {
                *d = *s;
            }
            store_word(words, self.mask, pos, u64::from_ne_bytes(b));
            src = rest;
            off = off.wrapping_add(take);
        }
        true
    }

    /// Publishes the record. It becomes visible to the reader once every
    /// writer interrupted on this CPU has finished too (reservation order).
    #[inline]
    pub fn commit(mut self) {
        self.finish(true);
    }

    /// Withdraws the record: the reader never sees it.
    ///
    /// If it is the last reservation, the space is given back; otherwise it
    /// becomes padding.
    #[cfg(ringbuf_host)]
    pub fn discard(mut self) {
        self.finish(false);
    }

    #[inline(always)]
    fn finish(&mut self, commit: bool) {
        if self.done {
            return;
        }
        self.done = true;
        let buf = self.buf;
        let level = buf.stats.level(self.depth);
        if commit {
            if let Some(l) = level {
                bump(&l.committed, 1);
                bump(&l.committed_bytes, u64::from(self.len));
            }
        } else {
            // Last reservation: roll head back (like ftrace). Otherwise keep
            // the time delta and length, change the type to padding.
            if buf
                .head
                .compare_exchange(self.end, self.start, Ordering::AcqRel, Ordering::Relaxed)
                .is_err()
            {
                let words = buf.words();
                if let Some(h) = load_word(words, self.mask, self.data) {
                    store_word(words, self.mask, self.data, header::to_padding(h));
                }
            }
            if let Some(l) = level {
                bump(&l.discarded, 1);
            }
        }
        buf.end_commit();
    }
}

impl<S: Deref<Target = [AtomicU64]>> Drop for Slot<'_, '_, S> {
    /// A slot dropped without commit is discarded.
    fn drop(&mut self) {
        self.finish(false);
    }
}
