// SPDX-License-Identifier: GPL-2.0

//! Writer side: reserve, write, commit, discard.
//!
//! Any number of writers on the buffer's CPU may nest (task, softirq, irq,
//! NMI, each interrupting the previous at any instruction). Space is reserved
//! with a compare-and-swap on `head`; the commit position is advanced only by
//! the outermost writer (ftrace's `committing` scheme, see `end_commit`), so
//! records become visible in reservation order.

use core::marker::PhantomData;
use core::ops::Deref;

use super::atomics::{
    bump, local_compare_exchange, local_fetch_add, write_fence, AtomicU64, Ordering,
};
use super::header::{self, parse_record, Prefix, TYPE_DATA};
use super::{load_word, store_word, CpuBuffer, MAX_NESTING, NO_STAMP, STATE_EXCLUSIVE, STATE_ON};

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

/// Index of nesting depth `depth` (`1..=MAX_NESTING`) in per-level arrays.
#[inline(always)]
fn level_index(depth: u64) -> usize {
    usize::try_from(depth.wrapping_sub(1)).unwrap_or(usize::MAX)
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
    // it is finished, exactly once: `commit` and `discard` consume it
    // without running its drop, and the drop finishes the others.
    start: u64,
    data: u64,
    end: u64,
    mask: u64,
    len: u32,
    depth: u64,
    _not_send: PhantomData<*const ()>,
}

impl<'s, S: Deref<Target = [AtomicU64]>> CpuBuffer<'s, S> {
    /// Reserves a record of `len` payload bytes with time stamp `ts` (ns).
    ///
    /// Safe to call from any context on the buffer's CPU, including NMI,
    /// interrupting another `reserve`/`commit` at any point.
    ///
    /// Always inlined: the slot is then built in the caller's registers.
    #[inline(always)]
    pub fn reserve(&self, len: usize, ts: u64) -> Result<Slot<'_, 's, S>, ReserveError> {
        // Being counted in `nest` before checking the switches is what makes
        // `writers_active()` reliable (see switch.rs). CPU-local: only this
        // CPU's writers change `nest` (INVARIANT on `CpuBuffer::nest`). Where
        // it is an unlocked `xadd`, a later switch load may pass its store,
        // and the control side's `writers_barrier` (in `writers_active`)
        // is the full barrier of the Dekker pair; elsewhere it is a `SeqCst`
        // RMW, the writer's own full barrier.
        let depth = local_fetch_add(&self.nest, 1).wrapping_add(1);
        if let Some(slot) = self.reserve_fast(len, ts, depth) {
            return Ok(slot);
        }
        self.try_reserve(len, ts, depth)
    }

    /// The common reservation, on a path of its own: recording on, the
    /// record fits, the time of the record before it known and its delta
    /// inline (no time prefix, no sync record due), room (`make_room`, as
    /// in the general path: known from `tail_seen`, or made, lapping in
    /// overwrite mode),
    /// and `head` unchanged since it was loaded. Anything else returns
    /// `None` (still counted in `nest`; at most `tail` moved, as a lap of
    /// the general path's loop moves it) and the general
    /// [`Self::try_reserve`] starts over.
    ///
    /// It does what `try_reserve` does on that path, in the same order
    /// (`head` first, then the loads it validates by the compare-and-swap),
    /// with fewer values alive: no retry loop, no prefix, no lapping. Kept
    /// apart, the common path keeps its values in registers (the general
    /// one spilled a dozen to the stack per record) and runs fewer
    /// instructions; what that is worth, above all with a reader on another
    /// CPU taking the writer's cache lines, is in Documentation/benchmarks.md
    /// ("The writer's fast path").
    #[inline(always)]
    fn reserve_fast(&self, len: usize, ts: u64, depth: u64) -> Option<Slot<'_, 's, S>> {
        if depth > MAX_NESTING as u64
            || self.state.load(Ordering::SeqCst) != STATE_ON
            || !self.switches.is_on()
        {
            return None;
        }
        let len32 = u32::try_from(len).ok()?;
        let mask = self.geometry.mask.load(Ordering::Relaxed);
        let size = mask.wrapping_add(1);
        let total = header::payload_words(u64::from(len32)).wrapping_add(1);
        let head = self.head.load(Ordering::Acquire);
        let end = head.wrapping_add(total);
        if total.saturating_add(1) > size
            || head.wrapping_sub(self.last_sync.load(Ordering::Relaxed))
                >= self.geometry.sync_every.load(Ordering::Relaxed)
        {
            return None;
        }
        // The time planned as the general path plans it, inline only.
        let (Prefix::None, delta) = header::plan_time(Some(self.time_at(head)?), ts) else {
            return None;
        };
        // A failure (full, blocked) is left to the general path, which
        // finds it again and counts it.
        self.make_room(mask, size, end, depth).ok()?;
        local_compare_exchange(&self.head, head, end).ok()?;
        // As in `try_reserve`.
        write_fence();
        Some(self.open_slot(self.words(), mask, head, head, end, delta, len32, ts, depth))
    }

    /// The stores that make `[start, end)` a reservation once `head` is
    /// ours (and the time prefix, if any, is written): the data header at
    /// `data` (time delta `lo`, `len` bytes), then our level's pair (see
    /// `Stamp`): time first, then the end that makes it valid. Returns the
    /// slot that holds it.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn open_slot(
        &self,
        words: &[AtomicU64],
        mask: u64,
        start: u64,
        data: u64,
        end: u64,
        lo: u64,
        len: u32,
        ts: u64,
        depth: u64,
    ) -> Slot<'_, 's, S> {
        store_word(words, mask, data, header::encode_header(TYPE_DATA, lo, len));
        if let Some(st) = self.stamps.get(level_index(depth)) {
            st.ts.store(ts, Ordering::Release);
            st.end.store(end, Ordering::Release);
        }
        Slot {
            buf: self,
            start,
            data,
            end,
            mask,
            len,
            depth,
            _not_send: PhantomData,
        }
    }

    /// Counts a failed reserve and leaves it.
    #[cold]
    #[inline(never)]
    fn reserve_failed(&self, fail: Fail) -> ReserveError {
        let (counter, err) = match fail {
            Fail::Full => (&self.stats.drops.dropped_full, ReserveError::Full),
            Fail::TooLarge => (&self.stats.drops.dropped_full, ReserveError::TooLarge),
            Fail::Blocked => (&self.stats.drops.commit_overrun, ReserveError::Full),
            Fail::Nested => (&self.stats.drops.commit_overrun, ReserveError::Nested),
            Fail::Disabled => (&self.stats.drops.dropped_disabled, ReserveError::Disabled),
        };
        counter.fetch_add(1, Ordering::Relaxed);
        self.end_commit(false);
        err
    }

    /// The rest of `reserve`, counted in `nest` at `depth`, when
    /// [`Self::reserve_fast`] declined: every case (time prefixes, sync
    /// records, an interrupting writer moving `head`, no room known,
    /// lapping, failures). Out of line, so that it does not weigh on the
    /// fast path's registers. Failures go through the cold
    /// [`Self::reserve_failed`].
    #[inline(never)]
    fn try_reserve(
        &self,
        len: usize,
        ts: u64,
        depth: u64,
    ) -> Result<Slot<'_, 's, S>, ReserveError> {
        if depth > MAX_NESTING as u64 {
            return Err(self.reserve_failed(Fail::Nested));
        }
        if self.state.load(Ordering::SeqCst) != STATE_ON || !self.switches.is_on() {
            return Err(self.reserve_failed(Fail::Disabled));
        }
        let Ok(len32) = u32::try_from(len) else {
            return Err(self.reserve_failed(Fail::TooLarge));
        };
        let pw = header::payload_words(u64::from(len32));
        let mask = self.geometry.mask.load(Ordering::Relaxed);
        let size = mask.wrapping_add(1);
        if pw.saturating_add(2) > size {
            return Err(self.reserve_failed(Fail::TooLarge));
        }
        let interval = self.geometry.sync_every.load(Ordering::Relaxed);
        let words = self.words();
        loop {
            let head = self.head.load(Ordering::Acquire);
            let prev_ts = self.time_at(head);
            let sync = self.last_sync.load(Ordering::Relaxed);
            let known = head.wrapping_sub(sync) < interval;
            let (prefix, lo) = header::plan_time(prev_ts.filter(|_| known), ts);
            let data = head.wrapping_add(prefix.words());
            let end = data.wrapping_add(1).wrapping_add(pw);
            if let Err(fail) = self.make_room(mask, size, end, depth) {
                return Err(self.reserve_failed(fail));
            }
            // CPU-local: only this CPU's writers move `head` (INVARIANT on
            // `CpuBuffer::head`); a writer interrupting us between the load
            // and here moved it, and the compare fails. Other CPUs never
            // read `head` while a writer may be in flight (the reader reads
            // `commit`; control operations read `head` once no writer is in
            // flight), so this needs no ordering for them.
            if local_compare_exchange(&self.head, head, end).is_err() {
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
            return Ok(self.open_slot(words, mask, head, data, end, lo, len32, ts, depth));
        }
    }

    /// Time of the record that ends at `head`, if a nesting level holds it.
    ///
    /// Each level's pair is stored time first, then end; we load end, then
    /// time. A writer at our level or above that is interrupted by us has
    /// not stored its end yet, or stored it for a record that ended before
    /// `head` (it reserved before the last reservation): no match. The
    /// writer that made the last reservation stored its pair completely
    /// unless it is interrupted by us, and then its level's old end is
    /// before `head`. A writer that interrupts us after our load of `head`
    /// and changes a pair also moves `head` (no position is reserved twice
    /// unless a discard rolled `head` back, and the discarding writer clears
    /// its level's end first), so our CAS of `head` fails.
    #[inline(always)]
    fn time_at(&self, head: u64) -> Option<u64> {
        self.stamps
            .iter()
            .find(|st| st.end.load(Ordering::Acquire) == head)
            .map(|st| st.ts.load(Ordering::Acquire))
    }

    /// Makes sure the words up to `end` can be written.
    #[inline(always)]
    fn make_room(&self, mask: u64, size: u64, end: u64, depth: u64) -> Result<(), Fail> {
        // A `tail` that a writer of this CPU loaded before: `tail` has moved
        // at most forward since, so if there was room then there is now. The
        // reader's copies of what we overwrite happened before the load
        // (Acquire below) that found it, which came before us on this CPU.
        // The reader's cache line is touched only when this says full.
        if end.wrapping_sub(self.tail_seen.load(Ordering::Relaxed)) <= size {
            return Ok(());
        }
        self.make_room_slow(mask, size, end, depth)
    }

    /// The rest of [`Self::make_room`] (no room known from `tail_seen`):
    /// load `tail`, and in overwrite mode move it past the oldest records.
    /// Out of line, and loading what only it needs (the mode, the storage):
    /// the writers' fast path keeps fewer values alive, and a flight
    /// recorder that laps runs it at every record.
    #[inline(never)]
    fn make_room_slow(&self, mask: u64, size: u64, end: u64, depth: u64) -> Result<(), Fail> {
        let overwrite = self.overwrite.load(Ordering::Relaxed);
        let words = self.words();
        loop {
            // Acquire: the reader's copies of what we overwrite are done.
            let tail = self.tail.load(Ordering::Acquire);
            self.tail_seen.store(tail, Ordering::Relaxed);
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
    /// writer publishes everything reserved so far. `reserved` is false for a
    /// failed reserve (which may have nothing new to publish).
    ///
    /// `nest` is only changed by the writers of this CPU, and a writer that
    /// interrupts us restores it before we continue, so leaving is a plain
    /// load and store (no locked instruction; ftrace's `rb_end_commit` uses
    /// `local_dec`). The outermost writer publishes `head`, leaves, and then
    /// checks that `head` did not move: a writer that interrupted it between
    /// its load of `head` and its store to `nest` saw depth >= 2 and did not
    /// publish its record, so it publishes again. One that interrupted after
    /// the store was outermost itself and published.
    #[inline(always)]
    pub(crate) fn end_commit(&self, reserved: bool) {
        let depth = self.nest.load(Ordering::Relaxed);
        if depth != 1 {
            // Nested: the writer we interrupted publishes for us.
            self.nest.store(depth.wrapping_sub(1), Ordering::Release);
            return;
        }
        let mut reserved = reserved;
        loop {
            // We are the only writer in flight: everything up to head is
            // committed or discarded. Release publishes the records.
            let head = self.head.load(Ordering::Acquire);
            if reserved || self.commit.load(Ordering::Relaxed) != head {
                self.commit.store(head, Ordering::Release);
            }
            // Release: our stores to the storage happen before a control
            // operation that sees no writer in flight.
            self.nest.store(0, Ordering::Release);
            if self.head.load(Ordering::Relaxed) == head {
                return;
            }
            // Publish again, as a writer: counted in `nest` first, as in
            // `reserve`, and not if a control operation took the buffer
            // after we left (it published `head` itself, see `exclusive`).
            local_fetch_add(&self.nest, 1);
            if self.state.load(Ordering::SeqCst) == STATE_EXCLUSIVE {
                self.nest.store(0, Ordering::Release);
                return;
            }
            reserved = true;
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
            let b = match <[u8; 8]>::try_from(chunk) {
                // A whole word (`take` 8: `in_word` 0): its bytes as they
                // are, not one by one (a SAMPLE's head is six such words).
                Ok(whole) => whole,
                Err(_) => {
                    let mut b = load_word(words, self.mask, pos).unwrap_or(0).to_ne_bytes();
                    for (d, s) in b.iter_mut().skip(in_word).zip(chunk) {
                        *d = *s;
                    }
                    b
                }
            };
            store_word(words, self.mask, pos, u64::from_ne_bytes(b));
            src = rest;
            off = off.wrapping_add(take);
        }
        true
    }

    /// Publishes the record. It becomes visible to the reader once every
    /// writer interrupted on this CPU has finished too (reservation order).
    #[inline]
    pub fn commit(self) {
        // Not dropped: `finish` is all its drop would do, and without a drop
        // left the slot can live in registers.
        core::mem::ManuallyDrop::new(self).finish(true);
    }

    /// Withdraws the record: the reader never sees it.
    ///
    /// If it is the last reservation, the space is given back; otherwise it
    /// becomes padding.
    #[cfg(ringbuf_host)]
    pub fn discard(self) {
        core::mem::ManuallyDrop::new(self).finish(false);
    }

    /// Commits (`commit`) or withdraws the record and leaves the
    /// reservation. Called once per slot (INVARIANT on [`Slot`]): no flag
    /// to test, so that a slot committed on the fast path stays in registers.
    #[inline(always)]
    fn finish(&self, commit: bool) {
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
            // Our level's time first stops naming `end`: after a roll back
            // the next reservation may end there too (see `time_at`).
            if let Some(st) = buf.stamps.get(level_index(self.depth)) {
                st.end.store(NO_STAMP, Ordering::Release);
            }
            // CPU-local, as the reserving one.
            if local_compare_exchange(&buf.head, self.end, self.start).is_err() {
                let words = buf.words();
                if let Some(h) = load_word(words, self.mask, self.data) {
                    store_word(words, self.mask, self.data, header::to_padding(h));
                }
            }
            if let Some(l) = level {
                bump(&l.discarded, 1);
            }
        }
        buf.end_commit(commit);
    }
}

impl<S: Deref<Target = [AtomicU64]>> Drop for Slot<'_, '_, S> {
    /// A slot dropped without commit is discarded.
    fn drop(&mut self) {
        self.finish(false);
    }
}
