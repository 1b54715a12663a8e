// SPDX-License-Identifier: GPL-2.0

//! Lock-free per-CPU ring buffer core for oprofile-rs.
//!
//! This file is both the root of the host crate `oprofile-ringbuf` and a
//! module of the kernel crate (`#[path = "ringbuf/mod.rs"] mod ringbuf;`). It
//! only uses `core`, has no panicking code paths and keeps all shared state in
//! atomics (see `Documentation/ring-buffer.md` for the protocol).
//!
//! # API summary
//!
//! * [`CpuBuffer::new`]`(storage, mode, switches)`: a buffer over caller storage
//!   (`S: Deref<Target = [AtomicU64]>`, size in 64-bit words, rounded down to a
//!   power of two, at least [`MIN_WORDS`]).
//! * Switches: [`RecordSwitch`] (global and per buffer set, bundled in
//!   [`Switches`]) and the per-CPU [`CpuBuffer::set_enabled`].
//! * Writers (any context on the buffer's CPU, nesting up to [`MAX_NESTING`]):
//!   [`CpuBuffer::reserve`] → [`Slot`] (`write_word`/`write_bytes`) →
//!   [`Slot::commit`] / [`Slot::discard`] (dropping a slot discards it).
//! * Reader (one at a time, any CPU): [`CpuBuffer::consume`],
//!   [`CpuBuffer::consume_batch`] (many records per lock and `tail` update),
//!   [`CpuBuffer::peek`], [`CpuBuffer::iter`], [`CpuBuffer::entries`],
//!   [`CpuBuffer::bytes`], [`CpuBuffer::stats`].
//! * Control (recording off for that CPU buffer): [`CpuBuffer::writers_active`],
//!   [`CpuBuffer::swap`], [`CpuBuffer::resize`], [`CpuBuffer::set_mode`],
//!   [`CpuBuffer::reset`].
//!
//! All writers of one `CpuBuffer` must run on one CPU and nest strictly (an
//! interrupting writer finishes before the interrupted one continues), or be
//! serialised by the caller (with a happens-before edge between them, e.g. a
//! lock). Breaking this is memory safe but can corrupt time stamps,
//! statistics and, since the writers' read-modify-writes of `head` and
//! `nest` are CPU-local (no `lock` prefix on x86_64, as ftrace's `local_t`),
//! records. The kernel keeps it: a CPU's writers are the overflow handlers
//! of that CPU's events (NMI, hard IRQ, or task context with preemption off),
//! and the KUnit stress writers are bound to their CPU. The host tests keep
//! it: one writer thread per buffer, nested writers in its signal handlers.

#![cfg_attr(ringbuf_host, no_std)]
#![deny(
    missing_docs,
    unsafe_op_in_unsafe_fn,
    clippy::undocumented_unsafe_blocks,
    clippy::missing_safety_doc,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::unreachable,
    clippy::todo,
    clippy::unimplemented,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects
)]

pub mod atomics;
// Control operations (enable, mode, reset, swap, resize): the module uses
// enable and resize (runtime `cpu_buffer_size` changes, `config.rs`); the
// host crate tests them all.
#[cfg_attr(not(ringbuf_host), allow(dead_code))]
mod control;
pub mod header;
mod reader;
mod stats;
mod switch;
mod writer;

use core::cell::UnsafeCell;
use core::ops::Deref;

use atomics::{AtomicBool, AtomicU32, AtomicU64, Ordering};

pub use control::ControlError;
pub use reader::ReadError;
#[cfg(ringbuf_host)]
pub use reader::{Iter, RecordInfo};
pub use stats::Stats;
pub use switch::{RecordSwitch, Switches};
pub use writer::ReserveError;
#[cfg(ringbuf_host)]
pub use writer::Slot;

/// Maximum writer nesting depth (task < softirq < irq < NMI). A deeper
/// `reserve` fails with [`ReserveError::Nested`].
pub const MAX_NESTING: usize = 4;
/// Minimum buffer size in 64-bit words.
pub const MIN_WORDS: usize = 4;
/// A time-stamp sync record is forced at least every this many words.
pub const MAX_SYNC_INTERVAL: u64 = 512;

/// What happens when the buffer is full.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// New records are dropped (counted in `dropped_full`). The default.
    ProducerConsumer,
    /// Oldest records are overwritten (counted in `overrun`): flight recorder.
    Overwrite,
}

/// Error of [`CpuBuffer::new`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InitError {
    /// The storage has fewer than [`MIN_WORDS`] words.
    TooSmall,
}

/// Per-CPU switch states.
pub(crate) const STATE_OFF: u32 = 0;
pub(crate) const STATE_ON: u32 = 1;
/// Off, and a control operation (swap/resize/...) owns the buffer.
pub(crate) const STATE_EXCLUSIVE: u32 = 2;

/// Keeps `T` on its own cache lines (128 bytes: adjacent-line prefetch on
/// x86), so that writer-hot and reader-hot fields do not false-share.
#[repr(align(128))]
pub(crate) struct Padded<T>(pub(crate) T);

impl<T> Deref for Padded<T> {
    type Target = T;

    #[inline(always)]
    fn deref(&self) -> &T {
        &self.0
    }
}

/// Time and end position of the last record reserved at one nesting level.
///
/// A writer's time is encoded relative to the record that ends where its own
/// starts, so it needs that record's time. Writers keep it per nesting level:
/// only one writer runs at a given level at a time, and it cannot be
/// interrupted by another writer of the same level (an interrupting writer
/// is counted deeper). A single pair shared by all levels would be torn by
/// an interrupted writer finishing its stores after a nested writer: the
/// pair would hold the outer writer's time with the nested writer's end
/// until the outer stored its end, and a writer interrupting in between
/// would encode its delta against the wrong time (see ring-buffer.md).
pub(crate) struct Stamp {
    /// Time of the record ending at `end`.
    pub(crate) ts: AtomicU64,
    /// End position of that record, `u64::MAX` if none (stored after `ts`).
    pub(crate) end: AtomicU64,
}

impl Stamp {
    fn new() -> Self {
        Stamp {
            ts: AtomicU64::new(0),
            end: AtomicU64::new(NO_STAMP),
        }
    }
}

/// The size of a buffer's storage in use, as the writers and the reader need
/// it on every call: written only by control operations (`new`, `resize`,
/// `swap`), one cache line for both.
pub(crate) struct Geometry {
    /// The storage index of position `p` is `p & mask` (`mask + 1` words in use).
    pub(crate) mask: AtomicU64,
    /// [`sync_interval`] of `mask + 1`, computed once here rather than by
    /// every reservation.
    pub(crate) sync_every: AtomicU64,
}

impl Geometry {
    fn new(size: u64) -> Self {
        Geometry {
            mask: AtomicU64::new(size.wrapping_sub(1)),
            sync_every: AtomicU64::new(sync_interval(size)),
        }
    }

    /// Sets a new size (`size` a power of two): only by exclusive control
    /// operations.
    pub(crate) fn set(&self, size: u64) {
        self.mask.store(size.wrapping_sub(1), Ordering::Relaxed);
        self.sync_every
            .store(sync_interval(size), Ordering::Relaxed);
    }
}

/// `Stamp::end` of a level that holds no time.
pub(crate) const NO_STAMP: u64 = u64::MAX;

/// One CPU's ring buffer.
///
/// Positions (`head`, `commit`, `tail`) are free-running 64-bit word counts;
/// the storage index of position `p` is `p & mask`.
pub struct CpuBuffer<'s, S> {
    // INVARIANT: `storage` is only replaced/mutated (through `&mut`) while
    // `state == STATE_EXCLUSIVE`, the nesting depth is 0 and the reader lock
    // is held by the same control operation. Everybody else only takes `&S`
    // while being a counted writer (depth > 0, after seeing `STATE_ON`) or
    // while holding the reader lock.
    // Read by the writers and the reader on every call, written only by
    // control operations: on its own cache lines, away from the writers'
    // positions (`head`, `nest`, ...), which a reader polling for records
    // would otherwise keep pulling from the writers' CPU.
    storage: Padded<UnsafeCell<S>>,
    // INVARIANT: `mask + 1` is a power of two, `MIN_WORDS <= mask + 1 <= storage.len()`;
    // `sync_every == sync_interval(mask + 1)`.
    geometry: Padded<Geometry>,
    // INVARIANT (modular): `tail <= commit <= head`, `head - tail <= mask + 1`,
    // every position in [tail, head) belongs to a record starting at or after
    // `tail` whose first word is at a record boundary.
    /// Reservation position (next free word).
    // INVARIANT: read-modify-written only by the writers of this buffer's
    // CPU (`atomics::local_compare_exchange`, CPU-local: no `lock` on
    // x86_64) and stored only by exclusive control operations (no writer in
    // flight): see "CPU-local read-modify-writes" in ring-buffer.md.
    head: AtomicU64,
    /// Everything before it is committed and visible to the reader.
    commit: Padded<AtomicU64>,
    /// Oldest unread word (advanced by the reader and, in overwrite mode, by writers).
    tail: Padded<AtomicU64>,
    /// Nesting depth: writers in flight on this CPU (see `end_commit`).
    // INVARIANT: written only by the writers of this buffer's CPU
    // (`atomics::local_fetch_add` in, a plain store out); other CPUs only
    // load it (`writers_active`, after `atomics::writers_barrier`).
    nest: AtomicU64,
    /// A value `tail` had (it only moves forward outside control
    /// operations), kept by the writers so that they need not load `tail`,
    /// which the reader writes, while there is room (see `make_room`).
    tail_seen: AtomicU64,
    /// Per nesting level: time and end of the last record reserved at that
    /// level (see [`Stamp`]); `stamps[d - 1]` is written only by writers at
    /// depth `d`.
    stamps: [Stamp; MAX_NESTING],
    /// Start position of the last record with an absolute time stamp.
    last_sync: AtomicU64,
    /// Reader's time base: `read_ts` is the time of the record before `read_pos`.
    read_pos: Padded<AtomicU64>,
    read_ts: Padded<AtomicU64>,
    reader_lock: Padded<AtomicBool>,
    /// Per-CPU switch: `STATE_OFF`, `STATE_ON` or `STATE_EXCLUSIVE`.
    state: AtomicU32,
    /// Read by the reader on every call, written only by control operations
    /// (own cache lines, as `storage`).
    overwrite: Padded<AtomicBool>,
    switches: Switches<'s>,
    stats: stats::Counters,
}

// SAFETY: all fields but `storage` are atomics or shared references to
// `Sync` data. `storage` is an `UnsafeCell<S>`: shared `&S` accesses from
// several threads are fine because `S: Sync`; the only `&mut S` access (and
// moving an `S` to another buffer, hence `S: Send`) happens in the exclusive
// control operations, which exclude every other access (see the INVARIANT on
// `storage` and `control.rs`).
unsafe impl<S: Deref<Target = [AtomicU64]> + Send + Sync> Sync for CpuBuffer<'_, S> {}

impl<'s, S: Deref<Target = [AtomicU64]>> CpuBuffer<'s, S> {
    /// Creates a buffer over `storage` (recording on, empty).
    ///
    /// Only the largest power-of-two prefix of `storage` is used.
    pub fn new(storage: S, mode: Mode, switches: Switches<'s>) -> Result<Self, InitError> {
        let size = usable_words(storage.len()).ok_or(InitError::TooSmall)?;
        atomics::local_setup();
        Ok(CpuBuffer {
            storage: Padded(UnsafeCell::new(storage)),
            geometry: Padded(Geometry::new(size)),
            head: AtomicU64::new(0),
            commit: Padded(AtomicU64::new(0)),
            tail: Padded(AtomicU64::new(0)),
            nest: AtomicU64::new(0),
            tail_seen: AtomicU64::new(0),
            stamps: core::array::from_fn(|_| Stamp::new()),
            last_sync: AtomicU64::new(0),
            read_pos: Padded(AtomicU64::new(0)),
            read_ts: Padded(AtomicU64::new(0)),
            reader_lock: Padded(AtomicBool::new(false)),
            state: AtomicU32::new(STATE_ON),
            overwrite: Padded(AtomicBool::new(mode == Mode::Overwrite)),
            switches,
            stats: stats::Counters::new(),
        })
    }

    /// Usable size of the buffer in 64-bit words (a power of two). One
    /// relaxed load: safe in any context, NMI included.
    #[inline]
    pub fn capacity_words(&self) -> usize {
        usize::try_from(self.geometry.mask.load(Ordering::Relaxed))
            .unwrap_or(usize::MAX)
            .wrapping_add(1)
    }

    /// Largest payload (bytes) a single record can have in this buffer.
    #[cfg(ringbuf_host)]
    pub fn max_payload(&self) -> usize {
        self.capacity_words().saturating_sub(2).saturating_mul(8)
    }

    /// Current mode.
    #[cfg(ringbuf_host)]
    pub fn mode(&self) -> Mode {
        if self.overwrite.load(Ordering::Relaxed) {
            Mode::Overwrite
        } else {
            Mode::ProducerConsumer
        }
    }

    /// Snapshot of the statistics.
    pub fn stats(&self) -> Stats {
        self.stats.snapshot()
    }

    /// Records currently in the buffer (committed, not read, not overrun).
    #[cfg(ringbuf_host)]
    pub fn entries(&self) -> u64 {
        self.stats.snapshot().entries
    }

    /// Payload bytes currently in the buffer.
    #[cfg(ringbuf_host)]
    pub fn bytes(&self) -> u64 {
        self.stats.snapshot().bytes
    }

    /// Words currently used (reserved or committed, not yet freed).
    #[cfg(ringbuf_host)]
    pub fn used_words(&self) -> u64 {
        self.head
            .load(Ordering::Relaxed)
            .wrapping_sub(self.tail.load(Ordering::Relaxed))
    }

    /// The storage words.
    #[inline(always)]
    fn words(&self) -> &[AtomicU64] {
        // SAFETY: `storage` is only mutated by exclusive control operations,
        // which run only when no writer is in flight and the reader lock is
        // held. Callers of `words` are writers in flight (counted in `nest`
        // after having seen `STATE_ON`), the reader holding the reader lock,
        // or the exclusive control operation itself; so no `&mut S` exists
        // while the returned reference is alive (see INVARIANT on `storage`).
        unsafe { &*self.storage.get() }
    }
}

/// Largest power of two `<= len`, if at least [`MIN_WORDS`].
pub(crate) fn usable_words(len: usize) -> Option<u64> {
    if len < MIN_WORDS {
        return None;
    }
    let len = u64::try_from(len).ok()?;
    Some(1u64.wrapping_shl(63u32.wrapping_sub(len.leading_zeros())))
}

/// Words between forced time-stamp sync records for a buffer of `size` words.
#[inline(always)]
pub(crate) fn sync_interval(size: u64) -> u64 {
    (size >> 2).clamp(4, MAX_SYNC_INTERVAL)
}

/// Loads the word at position `pos`.
#[inline(always)]
pub(crate) fn load_word(words: &[AtomicU64], mask: u64, pos: u64) -> Option<u64> {
    let i = usize::try_from(pos & mask).ok()?;
    words.get(i).map(|w| w.load(Ordering::Relaxed))
}

/// Stores the word at position `pos`. Returns `false` if out of range.
#[inline(always)]
pub(crate) fn store_word(words: &[AtomicU64], mask: u64, pos: u64, v: u64) -> bool {
    match usize::try_from(pos & mask).ok().and_then(|i| words.get(i)) {
        Some(w) => {
            w.store(v, Ordering::Relaxed);
            true
        }
        None => false,
    }
}
