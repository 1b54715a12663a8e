// SPDX-License-Identifier: GPL-2.0

//! The event buffer: whole stream records waiting for the reader of
//! `/dev/oprofile/buffer`, filled by the sync.
//!
//! A byte ring that never hands out part of a record: the sync appends whole
//! records at the tail (a record may wrap around the end of the storage),
//! the reader takes whole records from the head. Nothing is ever moved.
//!
//! The reader copies to user space *without* the lock that protects the
//! positions (a user copy can fault slowly: userfaultfd, FUSE, NFS; the
//! sync, `flush`, `tracing_on` and CPU hotplug must not wait for it): under
//! the lock it takes a [`Chunk`] (where its records lie), drops the lock,
//! copies, and retakes the lock to [`EventBuffer::consume`] what it copied.
//! Appends write only the free part of the ring, which never overlaps a
//! chunk: the chunk's bytes stay counted in [`EventBuffer::len`] until they
//! are consumed, and there is one reader at a time (see `device.rs`).

use kernel::prelude::*;

use crate::format::{self, Endian};

/// Ring storage: written under the event buffer's lock (appends, into free
/// space) and read without it (the reader's chunk, which appends never
/// touch).
///
/// # Invariants
///
/// `ptr` points to `cap` bytes owned by `_storage` (never resized or touched
/// after construction, so the allocation does not move); `cap` is a
/// non-zero multiple of 8.
struct Storage {
    _storage: KVVec<u8>,
    ptr: *mut u8,
    cap: usize,
}

// SAFETY: the bytes are plain memory; who may touch which byte is governed by
// the positions in `EventBuffer`, kept under its lock.
unsafe impl Send for Storage {}
// SAFETY: as above: shared access only reads bytes no writer touches.
unsafe impl Sync for Storage {}

/// Where a reader's records lie in the ring: one or two byte ranges (the
/// second when the records wrap around the end).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Chunk {
    start: usize,
    /// Total bytes, a sequence of whole records.
    pub(crate) len: usize,
}

/// Byte ring of whole records.
///
/// # Invariants
///
/// `head < storage.cap`, `len <= storage.cap`, and the `len` bytes from
/// `head` (wrapping) are a sequence of whole records.
pub(crate) struct EventBuffer {
    storage: Storage,
    head: usize,
    len: usize,
    /// Bumped by every flush; readers return data below the watershed once
    /// per flush.
    pub(crate) flush_seq: u64,
    /// Total bytes ever appended (stats).
    pub(crate) bytes_in: u64,
    /// Appends refused because the ring was full (stats). A reader that
    /// sleeps is woken when this happens, whatever the watershed.
    pub(crate) full: u64,
}

impl EventBuffer {
    /// A ring of `size` bytes (rounded down to a multiple of 8, at least 8).
    pub(crate) fn new(size: usize) -> Result<Self> {
        let cap = (size & !7).max(8);
        let mut data = KVVec::with_capacity(cap, GFP_KERNEL)?;
        data.resize(cap, 0, GFP_KERNEL)?;
        let ptr = data.as_mut_ptr();
        Ok(Self {
            // INVARIANT: `data` holds `cap` bytes and is not touched again.
            storage: Storage {
                _storage: data,
                ptr,
                cap,
            },
            head: 0,
            len: 0,
            flush_seq: 0,
            bytes_in: 0,
            full: 0,
        })
    }

    /// Bytes waiting.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Bytes free.
    pub(crate) fn free(&self) -> usize {
        self.storage.cap - self.len
    }

    /// `pos` (below twice the capacity) as a ring offset, without a
    /// division.
    fn wrap(&self, pos: usize) -> usize {
        if pos >= self.storage.cap {
            pos - self.storage.cap
        } else {
            pos
        }
    }

    /// Copies `out.len()` (at most `len`) waiting bytes starting at ring
    /// offset `at` (wrapping).
    fn read_at(&self, at: usize, out: &mut [u8]) {
        let cap = self.storage.cap;
        let at = self.wrap(at);
        let n = out.len().min(cap);
        let first = n.min(cap - at);
        let out = out.as_mut_ptr();
        // SAFETY: `at + first <= cap` and `n - first <= cap`; `out` has `n`
        // bytes; the bytes read are waiting bytes, which no append writes.
        unsafe {
            core::ptr::copy_nonoverlapping(self.storage.ptr.add(at), out, first);
            core::ptr::copy_nonoverlapping(self.storage.ptr, out.add(first), n - first);
        }
    }

    /// Size of the record at ring offset `at`. Records are 8-byte aligned
    /// and `cap` is a multiple of 8: a record's first 8 bytes never wrap.
    fn len_at(&self, at: usize) -> usize {
        let mut prefix = [0u8; 8];
        self.read_at(at, &mut prefix);
        format::record_len(Endian::native(), &prefix).unwrap_or(0)
    }

    /// Appends one whole record (at most `cap` bytes, a multiple of 8);
    /// false (nothing appended, `full` counted) if fewer than
    /// `record.len() + reserve` bytes are free. `reserve` keeps room for
    /// records that must always fit (see `sync.rs`).
    pub(crate) fn push_keeping(&mut self, record: &[u8], reserve: usize) -> bool {
        let cap = self.storage.cap;
        if record.len() + reserve > self.free() || record.is_empty() {
            self.full += 1;
            return false;
        }
        let tail = self.wrap(self.head + self.len);
        let first = record.len().min(cap - tail);
        let src = record.as_ptr();
        // SAFETY: `tail + first <= cap` and `record.len() - first <= free
        // <= cap`; the bytes written are free (not waiting), so no reader
        // chunk covers them (a chunk is waiting bytes until consumed).
        // `&mut self` (the lock) excludes other appends.
        unsafe {
            core::ptr::copy_nonoverlapping(src, self.storage.ptr.add(tail), first);
            core::ptr::copy_nonoverlapping(src.add(first), self.storage.ptr, record.len() - first);
        }
        // INVARIANT: a whole record was added after the waiting ones.
        self.len += record.len();
        self.bytes_in += record.len() as u64;
        true
    }

    /// Appends one whole record if it fits (no reserve).
    pub(crate) fn push(&mut self, record: &[u8]) -> bool {
        self.push_keeping(record, 0)
    }

    /// The longest run of whole waiting records from the head that fits in
    /// `max` bytes.
    pub(crate) fn chunk(&self, max: usize) -> Chunk {
        let mut n = 0;
        while n < self.len {
            let len = self.len_at(self.head + n);
            if len == 0 || n + len > max || n + len > self.len {
                break;
            }
            n += len;
        }
        Chunk {
            start: self.head,
            len: n,
        }
    }

    /// Size of the first waiting record, if any.
    pub(crate) fn first_len(&self) -> Option<usize> {
        (self.len > 0).then(|| self.len_at(self.head))
    }

    /// A pointer-sized handle to read a chunk without holding the lock: the
    /// storage does not move while the buffer lives.
    pub(crate) fn view(&self) -> RingView {
        RingView {
            ptr: self.storage.ptr,
            cap: self.storage.cap,
        }
    }

    /// Drops `n` bytes (whole records) from the front.
    pub(crate) fn consume(&mut self, n: usize) {
        let n = n.min(self.len);
        // INVARIANT: whole records are dropped from the front.
        self.head = self.wrap(self.head + n);
        self.len -= n;
    }
}

/// The storage of an event buffer, to read a [`Chunk`] without its lock.
#[derive(Clone, Copy)]
pub(crate) struct RingView {
    ptr: *mut u8,
    cap: usize,
}

impl RingView {
    /// The bytes of `chunk` as one or two slices.
    ///
    /// # Safety
    ///
    /// The event buffer this view came from is alive for `'a` (the caller
    /// holds a reference to its owner), `chunk` came from it and nothing
    /// was consumed since; the slices are dropped before anything is.
    pub(crate) unsafe fn bytes<'a>(self, chunk: Chunk) -> (&'a [u8], &'a [u8]) {
        let first = chunk.len.min(self.cap.saturating_sub(chunk.start));
        // SAFETY: both ranges lie in the storage (`start < cap`, `len <=
        // cap`) and hold waiting bytes that nothing writes until they are
        // consumed, which the caller does only after dropping the slices.
        unsafe {
            (
                core::slice::from_raw_parts(self.ptr.add(chunk.start), first),
                core::slice::from_raw_parts(self.ptr, chunk.len - first),
            )
        }
    }
}

#[cfg(oprofile_rs_kunit)]
#[kunit_tests(oprofile_rs_event_buffer)]
mod tests {
    use super::*;

    fn bytes(eb: &EventBuffer, c: Chunk) -> KVec<u8> {
        let mut v = KVec::new();
        // SAFETY: `c` is fresh and nothing is consumed while `a`, `b` live.
        let (a, b) = unsafe { eb.view().bytes(c) };
        let _ = v.extend_from_slice(a, GFP_KERNEL);
        let _ = v.extend_from_slice(b, GFP_KERNEL);
        v
    }

    #[test]
    fn whole_records_only_and_wrapping() {
        let Ok(mut eb) = EventBuffer::new(64) else {
            return;
        };
        let lost = |cpu, time, count| format::Lost { cpu, time, count }.encoded(Endian::native());
        let r = lost(1, 5, 9); // 24 bytes
        assert!(eb.push(&r));
        assert!(eb.push(&r));
        // A third record does not fit in 64 bytes.
        assert!(!eb.push(&r));
        assert_eq!(eb.full, 1);
        assert_eq!(eb.len(), 48);
        assert_eq!(eb.chunk(30).len, 24);
        assert_eq!(eb.chunk(23).len, 0);
        assert_eq!(eb.first_len(), Some(24));
        eb.consume(24);
        // 24 bytes wait at offset 24: the next record wraps (16 + 8 bytes).
        let r2 = lost(2, 6, 10);
        assert!(eb.push(&r2));
        assert_eq!(eb.len(), 48);
        let c = eb.chunk(1000);
        assert_eq!(c.len, 48);
        let got = bytes(&eb, c);
        assert_eq!(&got[..24], &r[..]);
        assert_eq!(&got[24..], &r2[..]);
        // A reserve keeps room: 16 bytes free, a 16-byte record with an
        // 8-byte reserve does not go in, without one it does.
        eb.consume(24);
        assert_eq!(eb.first_len(), Some(24));
        let t = format::Tracing {
            cpu: 0,
            time: 7,
            on: false,
        }
        .encoded(Endian::native());
        assert!(!eb.push_keeping(&t, 32));
        assert!(eb.push_keeping(&t, 24));
        eb.consume(eb.len());
        assert_eq!(eb.len(), 0);
        assert_eq!(eb.first_len(), None);
    }
}
