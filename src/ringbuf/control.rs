// SPDX-License-Identifier: GPL-2.0

//! Control operations: per-CPU switch, mode, swap, resize, reset.
//!
//! Operations that change the storage or the positions need the buffer
//! quiesced. They move the per-CPU state from `OFF` to `EXCLUSIVE` (so it
//! cannot be turned on meanwhile), check that no writer is in flight (the
//! Dekker argument in switch.rs makes this check reliable: a writer that did
//! not see `EXCLUSIVE` is visible in the nesting counter) and take the reader
//! lock. Writers that start meanwhile see "off" and never touch the storage.

use core::ops::Deref;

use super::atomics::{bump, fence, writers_barrier, AtomicU64, Ordering};
use super::header::parse_record;
use super::reader::ReaderGuard;
#[cfg(ringbuf_host)]
use super::NO_STAMP;
use super::{
    load_word, store_word, usable_words, CpuBuffer, Mode, STATE_EXCLUSIVE, STATE_OFF, STATE_ON,
};

/// Why a control operation failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ControlError {
    /// The per-CPU switch is on; turn it off first.
    Recording,
    /// A writer is still in flight (try again), or another control operation
    /// is running.
    WritersActive,
    /// A reader is using the buffer (try again).
    ReaderBusy,
    /// `swap` with itself.
    SameBuffer,
    /// The new storage is smaller than [`MIN_WORDS`](super::MIN_WORDS).
    TooSmall,
}

/// Exclusive ownership of a quiesced buffer; back to `OFF` on drop.
struct Exclusive<'a> {
    state: &'a super::atomics::AtomicU32,
    _reader: ReaderGuard<'a>,
}

impl Drop for Exclusive<'_> {
    fn drop(&mut self) {
        self.state.store(STATE_OFF, Ordering::SeqCst);
    }
}

#[cfg(ringbuf_host)]
fn swap_atomic(a: &AtomicU64, b: &AtomicU64) {
    let va = a.load(Ordering::Relaxed);
    a.store(b.load(Ordering::Relaxed), Ordering::Relaxed);
    b.store(va, Ordering::Relaxed);
}

impl<'s, S: Deref<Target = [AtomicU64]>> CpuBuffer<'s, S> {
    /// Turns this CPU buffer's recording switch on or off.
    ///
    /// Off takes effect for every `reserve` that starts after this returns;
    /// writers already past the check may still be in flight, see
    /// [`writers_active`](Self::writers_active). Turning on fails with
    /// [`ControlError::WritersActive`] while a control operation runs.
    pub fn set_enabled(&self, on: bool) -> Result<(), ControlError> {
        let (from, to) = if on {
            (STATE_OFF, STATE_ON)
        } else {
            (STATE_ON, STATE_OFF)
        };
        match self
            .state
            .compare_exchange(from, to, Ordering::SeqCst, Ordering::SeqCst)
        {
            Ok(_) => {
                // Pairs with the writers' nesting RMW (see switch.rs): a
                // later `writers_active()` sees any writer that saw "on".
                fence(Ordering::SeqCst);
                Ok(())
            }
            Err(cur) if cur == to => Ok(()),
            Err(STATE_EXCLUSIVE) if !on => Ok(()),
            Err(_) => Err(ControlError::WritersActive),
        }
    }

    /// Whether this CPU buffer's own switch is on.
    pub fn is_enabled(&self) -> bool {
        self.state.load(Ordering::SeqCst) == STATE_ON
    }

    /// Whether a `reserve` starting now would find recording on: this CPU
    /// buffer's switch and the shared ones (`SeqCst` loads, as in `reserve`).
    ///
    /// For a writer that reads, before it reserves, state that whoever turns
    /// recording off resets while it is off: checked first, "on" means that
    /// the writer started either before recording went off (and whoever
    /// turned it off waited for it, e.g. with a grace period) or after it
    /// came back on (and the reset, stored before that, is visible).
    #[inline(always)]
    pub fn is_recording(&self) -> bool {
        self.state.load(Ordering::SeqCst) == STATE_ON && self.switches.is_on()
    }

    /// Whether a writer is between `reserve` and `commit`/`discard` (or inside
    /// a failing `reserve`). After turning recording off, wait until this is
    /// `false` before swapping or resizing.
    ///
    /// Reliable once the switch is off: it first does the control side's
    /// barrier of the Dekker pair ([`writers_barrier`]: a grace period in the
    /// kernel, so process context only there; `membarrier` on the host), so
    /// that a writer that saw the switch on is counted here. `true` also if
    /// that barrier failed.
    pub fn writers_active(&self) -> bool {
        !writers_barrier() || self.nest.load(Ordering::SeqCst) != 0
    }

    fn exclusive(&self) -> Result<Exclusive<'_>, ControlError> {
        match self.state.compare_exchange(
            STATE_OFF,
            STATE_EXCLUSIVE,
            Ordering::SeqCst,
            Ordering::SeqCst,
        ) {
            Ok(_) => {}
            Err(STATE_ON) => return Err(ControlError::Recording),
            Err(_) => return Err(ControlError::WritersActive),
        }
        fence(Ordering::SeqCst);
        if self.writers_active() {
            self.state.store(STATE_OFF, Ordering::SeqCst);
            return Err(ControlError::WritersActive);
        }
        match self.lock_reader() {
            Some(r) => {
                // No writer in flight, so everything reserved is finished.
                // The last outermost writer may have left a record
                // unpublished if it was interrupted while leaving and we took
                // the buffer before it published again (`end_commit`).
                self.commit
                    .store(self.head.load(Ordering::Acquire), Ordering::Release);
                Ok(Exclusive {
                    state: &self.state,
                    _reader: r,
                })
            }
            None => {
                self.state.store(STATE_OFF, Ordering::SeqCst);
                Err(ControlError::ReaderBusy)
            }
        }
    }

    /// Changes the mode. Recording must be off for this CPU buffer.
    pub fn set_mode(&self, mode: Mode) -> Result<(), ControlError> {
        let _ex = self.exclusive()?;
        self.overwrite
            .store(mode == Mode::Overwrite, Ordering::Relaxed);
        Ok(())
    }

    /// Empties the buffer and clears its statistics. Recording must be off.
    #[cfg(ringbuf_host)]
    pub fn reset(&self) -> Result<(), ControlError> {
        let _ex = self.exclusive()?;
        for p in [
            &self.head,
            &self.commit.0,
            &self.tail.0,
            &self.last_sync,
            &self.read_pos.0,
            &self.tail_seen,
        ] {
            p.store(0, Ordering::Relaxed);
        }
        for st in &self.stamps {
            st.end.store(NO_STAMP, Ordering::Relaxed);
        }
        self.stats.clear();
        Ok(())
    }

    /// Exchanges storage, content, positions and statistics with `other`
    /// (oprofile's double buffer, ftrace's `ring_buffer_swap_cpu`). The mode
    /// and the switches stay with each buffer object.
    ///
    /// Both buffers must have recording off for their CPU and no writer in
    /// flight; O(1).
    #[cfg(ringbuf_host)]
    pub fn swap(&self, other: &Self) -> Result<(), ControlError> {
        if core::ptr::eq(self, other) {
            return Err(ControlError::SameBuffer);
        }
        let _a = self.exclusive()?;
        let _b = other.exclusive()?;
        for (a, b) in [
            (&self.geometry.mask, &other.geometry.mask),
            (&self.geometry.sync_every, &other.geometry.sync_every),
            (&self.head, &other.head),
            (&self.commit.0, &other.commit.0),
            (&self.tail.0, &other.tail.0),
            (&self.tail_seen, &other.tail_seen),
            (&self.last_sync, &other.last_sync),
            (&self.read_pos.0, &other.read_pos.0),
            (&self.read_ts.0, &other.read_ts.0),
        ] {
            swap_atomic(a, b);
        }
        for (a, b) in self.stamps.iter().zip(&other.stamps) {
            swap_atomic(&a.ts, &b.ts);
            swap_atomic(&a.end, &b.end);
        }
        self.stats.swap(&other.stats);
        // SAFETY: both buffers are exclusive (state EXCLUSIVE, no writer in
        // flight, reader lock held by us), so no reference to either storage
        // exists (INVARIANT on `storage`). They are distinct objects (checked
        // above), so the two cells do not overlap; both pointers are valid and
        // aligned since they come from live `UnsafeCell`s.
        unsafe { core::ptr::swap(self.storage.get(), other.storage.get()) };
        Ok(())
    }

    /// Replaces the storage with `new` (resize) and returns the old storage.
    ///
    /// Recording must be off for this CPU buffer and no writer in flight.
    /// Unread records are carried over; if they do not fit, the oldest ones
    /// are dropped (counted as overrun). On error `new` is given back.
    pub fn resize(&self, new: S) -> Result<S, (S, ControlError)> {
        let Some(new_size) = usable_words(new.len()) else {
            return Err((new, ControlError::TooSmall));
        };
        let _ex = match self.exclusive() {
            Ok(ex) => ex,
            Err(e) => return Err((new, e)),
        };
        let new_mask = new_size.wrapping_sub(1);
        {
            let words = self.words();
            let mask = self.geometry.mask.load(Ordering::Relaxed);
            // No writer in flight: head == commit.
            let head = self.commit.load(Ordering::Relaxed);
            self.head.store(head, Ordering::Relaxed);
            loop {
                let tail = self.tail.load(Ordering::Relaxed);
                let used = head.wrapping_sub(tail);
                if used <= new_size {
                    break;
                }
                let read_pos = self.read_pos.load(Ordering::Relaxed);
                let base = (read_pos == tail).then(|| self.read_ts.load(Ordering::Relaxed));
                let Some(rec) = parse_record(words, mask, tail, used, base) else {
                    // Inconsistent content: drop it all.
                    self.tail.store(head, Ordering::Relaxed);
                    break;
                };
                let next = tail.wrapping_add(rec.total);
                self.tail.store(next, Ordering::Relaxed);
                if let Some(ts) = rec.ts {
                    self.read_pos.store(next, Ordering::Relaxed);
                    self.read_ts.store(ts, Ordering::Relaxed);
                }
                if rec.header.is_data {
                    bump(&self.stats.reader.skipped, 1);
                    bump(&self.stats.reader.skipped_bytes, rec.header.len);
                }
            }
            let mut pos = self.tail.load(Ordering::Relaxed);
            while pos != head {
                if let Some(v) = load_word(words, mask, pos) {
                    store_word(&new, new_mask, pos, v);
                }
                pos = pos.wrapping_add(1);
            }
        }
        self.geometry.set(new_size);
        // SAFETY: the buffer is exclusive (state EXCLUSIVE, no writer in
        // flight, reader lock held by us) and the `words` borrow above has
        // ended, so no other reference to the storage exists (INVARIANT on
        // `storage`); the pointer is valid and aligned.
        let old = unsafe { core::mem::replace(&mut *self.storage.get(), new) };
        Ok(old)
    }
}
