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
//!
//! The storage is page-backed (vmalloc) and preceded by a *meta page*, so
//! that `/dev/oprofile/buffer` can map both into a reader's address space
//! read-only (`Documentation/mmap.md`): the meta page publishes the
//! producer position (`head`, bytes ever appended) and the consumer position
//! (`tail`, bytes ever consumed); the bytes between them are whole records
//! at ring offsets `tail % data_size` onwards. Appends store the data, then
//! `head` (release); consumes store `tail`. The storage lives as long as the
//! buffer, and the buffer as long as any open file of the device; a mapping
//! holds its file (and the pages it mapped hold page references).
use kernel::{
    bindings,
    page::{BorrowedPage, PAGE_SIZE},
    prelude::*,
    sync::atomic::{Atomic, Relaxed, Release},
};

use crate::{
    format::{self, meta, Endian},
    path::{
        reader_state::{is_noted, NOTED_MAX},
        record_index::RecordIndex,
    },
};

// The meta page's fields fit in its page.
const _: () = assert!(meta::LEN <= PAGE_SIZE);

/// Ring storage: written under the event buffer's lock (appends, into free
/// space) and read without it (the reader's chunk, which appends never
/// touch).
///
/// # Invariants
///
/// `base` points to `PAGE_SIZE + cap` bytes of vmalloc memory owned by
/// `_storage` (never resized or touched after construction, so the
/// allocation does not move), page aligned: the meta page, then the ring's
/// `cap` bytes at `ptr = base + PAGE_SIZE`; `cap` is a non-zero multiple of
/// `PAGE_SIZE`.
struct Storage {
    _storage: VVec<u8>,
    base: *mut u8,
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
    /// Total bytes ever consumed (`head` is its ring offset).
    consumed: u64,
    /// The live mappings of the buffer: the vmas of the device's reader
    /// (counted before its `mmap` takes a view, one more for each piece a
    /// split or a move makes, one less for each that goes and for a
    /// refused `mmap`). While any lives, the storage must not be replaced.
    pub(crate) mappings: usize,
    /// A reader copies a chunk without the lock (from taking its view to
    /// consuming it): the storage must not be replaced.
    pub(crate) copying: bool,
    /// Where the noted records and the append boundaries lie
    /// (`record_index.rs`), for the consume from a mapping.
    pub(crate) index: RecordIndex,
}

impl EventBuffer {
    /// A ring of `size` bytes rounded up to whole pages (at least one),
    /// behind a meta page.
    pub(crate) fn new(size: usize) -> Result<Self> {
        let cap = size
            .max(1)
            .checked_next_multiple_of(PAGE_SIZE)
            .ok_or(EINVAL)?;
        let total = cap.checked_add(PAGE_SIZE).ok_or(EINVAL)?;
        // Charged to the asking process's memory cgroup (`buffer_memory.rs`).
        let mut data = VVec::with_capacity(total, GFP_KERNEL_ACCOUNT)?;
        data.resize(total, 0, GFP_KERNEL_ACCOUNT)?;
        let base = data.as_mut_ptr();
        if base as usize % PAGE_SIZE != 0 {
            // vmalloc memory starts on a page; never seen otherwise.
            return Err(ENOMEM);
        }
        let eb = Self {
            // INVARIANT: `data` holds `PAGE_SIZE + cap` page-aligned bytes
            // of vmalloc memory and is not touched again.
            storage: Storage {
                _storage: data,
                base,
                // SAFETY: within the allocation of `total` bytes.
                ptr: unsafe { base.add(PAGE_SIZE) },
                cap,
            },
            head: 0,
            len: 0,
            flush_seq: 0,
            bytes_in: 0,
            full: 0,
            consumed: 0,
            mappings: 0,
            copying: false,
            index: RecordIndex::new(cap)?,
        };
        eb.meta_u32(meta::VERSION_AT).store(meta::VERSION, Relaxed);
        eb.meta_u32(meta::META_SIZE_AT)
            .store(PAGE_SIZE as u32, Relaxed);
        eb.meta_u64(meta::DATA_OFFSET_AT)
            .store(PAGE_SIZE as u64, Relaxed);
        eb.meta_u64(meta::DATA_SIZE_AT).store(cap as u64, Relaxed);
        Ok(eb)
    }

    /// The `u64` field of the meta page at byte `at` (a `meta::*_AT`).
    fn meta_u64(&self, at: usize) -> &Atomic<u64> {
        // SAFETY: `at` is one of the meta page's aligned field offsets,
        // within its first bytes; the page lives as long as `self`; the
        // kernel touches it only through these atomics, user space only
        // reads it.
        unsafe { Atomic::from_ptr(self.storage.base.add(at).cast::<u64>()) }
    }

    /// The `u32` field of the meta page at byte `at`.
    fn meta_u32(&self, at: usize) -> &Atomic<u32> {
        // SAFETY: as for `meta_u64`.
        unsafe { Atomic::from_ptr(self.storage.base.add(at).cast::<u32>()) }
    }

    /// Total bytes ever consumed: the consumer position of the meta page.
    pub(crate) fn consumed(&self) -> u64 {
        self.consumed
    }

    /// Publishes in the meta page how many bytes of the stream's opening
    /// `read` must deliver before records are consumed from a mapping.
    pub(crate) fn set_opening(&self, bytes: usize) {
        self.meta_u64(meta::OPENING_AT).store(bytes as u64, Relaxed);
    }

    /// Bytes waiting.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Bytes free.
    pub(crate) fn free(&self) -> usize {
        self.storage.cap - self.len
    }

    /// Bytes of ring storage.
    pub(crate) fn capacity(&self) -> usize {
        self.storage.cap
    }

    /// Writes `bytes` (at most `cap`) at ring offset `at` (below twice the
    /// capacity), wrapping.
    ///
    /// # Safety
    ///
    /// The bytes written are free (not waiting): no reader chunk covers
    /// them; `&mut self` excludes other writes.
    unsafe fn write_at(&mut self, at: usize, bytes: &[u8]) {
        let cap = self.storage.cap;
        let at = self.wrap(at);
        let n = bytes.len().min(cap);
        let first = n.min(cap - at);
        let src = bytes.as_ptr();
        // SAFETY: `at + first <= cap` and `n - first <= cap`: within the
        // storage; the caller guarantees nothing reads these bytes.
        unsafe {
            core::ptr::copy_nonoverlapping(src, self.storage.ptr.add(at), first);
            core::ptr::copy_nonoverlapping(src.add(first), self.storage.ptr, n - first);
        }
    }

    /// Takes over `old`'s waiting records and positions (a resize): this
    /// buffer must be fresh (nothing appended) and hold them (checked:
    /// false, nothing done, if not). The waiting bytes go where the
    /// consumer position says (`consumed` modulo the new capacity), so that
    /// the meta page describes them as a mapping would read them.
    pub(crate) fn adopt(&mut self, old: &EventBuffer) -> bool {
        if self.len != 0 || old.len > self.storage.cap {
            return false;
        }
        let cap = self.storage.cap;
        self.head = old.consumed.checked_rem(cap as u64).unwrap_or(0) as usize;
        let mut tmp = [0u8; 256];
        let mut done = 0;
        while done < old.len {
            let n = (old.len - done).min(tmp.len());
            let Some(part) = tmp.get_mut(..n) else { break };
            old.read_at(old.head + done, part);
            // SAFETY: the bytes from `head + done` are free here: nothing
            // waits in this fresh buffer beyond `done` bytes, and `old.len
            // <= cap`.
            unsafe { self.write_at(self.head + done, part) };
            done += n;
        }
        // INVARIANT: `old`'s waiting bytes are whole records, copied in
        // order from `head`.
        self.len = old.len;
        self.flush_seq = old.flush_seq;
        self.bytes_in = old.bytes_in;
        self.full = old.full;
        self.consumed = old.consumed;
        self.meta_u64(meta::FULL_AT).store(self.full, Relaxed);
        self.meta_u64(meta::TAIL_AT).store(self.consumed, Relaxed);
        self.meta_u64(meta::OPENING_AT)
            .store(old.meta_u64(meta::OPENING_AT).load(Relaxed), Relaxed);
        self.meta_u64(meta::HEAD_AT).store(self.bytes_in, Release);
        // The index, told anew: one walk of the waiting records.
        self.index.clear();
        self.index.overflows = old.index.overflows;
        self.index.walks = old.index.walks;
        let mut at = 0;
        while at < self.len {
            let mut prefix = [0u8; format::PREFIX_LEN];
            self.read_at(self.head + at, &mut prefix);
            let len = format::record_len(Endian::native(), &prefix).unwrap_or(0);
            if len == 0 {
                break;
            }
            if format::Prefix::read(Endian::native(), &prefix).is_some_and(|p| is_noted(p.kind)) {
                self.index.note(self.consumed + at as u64);
            }
            at += len;
        }
        self.index.boundary(self.bytes_in);
        true
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
    /// records that must always fit (see `sync.rs`). The index learns
    /// whether it is a noted record (a run of several records given here is
    /// taken as unknown: the consume walks it).
    pub(crate) fn push_keeping(&mut self, record: &[u8], reserve: usize) -> bool {
        let prefix = format::Prefix::read(Endian::native(), record);
        let noted: &[u16] = match prefix {
            Some(p) if usize::from(p.size) == record.len() => {
                if is_noted(p.kind) {
                    &[0]
                } else {
                    &[]
                }
            }
            _ => return self.push_run(record, reserve, None),
        };
        self.push_run(record, reserve, Some(noted))
    }

    /// Appends `record`, one or more whole records (at most `cap` bytes),
    /// as [`Self::push_keeping`]; `noted` gives the offsets in it of the
    /// noted records among them (ascending), or `None` if unknown (the
    /// index then stops listing from the run's start, and the consume walks
    /// from there).
    pub(crate) fn push_run(
        &mut self,
        record: &[u8],
        reserve: usize,
        noted: Option<&[u16]>,
    ) -> bool {
        let cap = self.storage.cap;
        if record.len() + reserve > self.free() || record.is_empty() {
            self.full += 1;
            self.meta_u64(meta::FULL_AT).store(self.full, Relaxed);
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
        // INVARIANT: whole records were added after the waiting ones.
        self.len += record.len();
        let start = self.bytes_in;
        self.bytes_in += record.len() as u64;
        match noted {
            Some(offsets) => {
                for &o in offsets {
                    self.index.note(start + u64::from(o));
                }
            }
            None => self.index.unknown_from(start),
        }
        self.index.boundary(self.bytes_in);
        // The bytes before the position that covers them (a mapped reader
        // loads `head` with acquire, then reads the bytes).
        self.meta_u64(meta::HEAD_AT).store(self.bytes_in, Release);
        true
    }

    /// Appends one whole record if it fits (no reserve).
    pub(crate) fn push(&mut self, record: &[u8]) -> bool {
        self.push_keeping(record, 0)
    }

    /// The longest run of whole waiting records from the head that fits in
    /// `max` bytes.
    pub(crate) fn chunk(&self, max: usize) -> Chunk {
        if max >= self.len {
            // Everything waiting: whole records by the invariant.
            return Chunk {
                start: self.head,
                len: self.len,
            };
        }
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
            base: self.storage.base,
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
        self.consumed += n as u64;
        self.index.consumed(self.consumed, self.bytes_in);
        self.meta_u64(meta::TAIL_AT).store(self.consumed, Release);
    }

    /// Ring offset of position `pos` (bytes ever appended).
    fn ring_offset(&self, pos: u64) -> usize {
        pos.checked_rem(self.storage.cap as u64).unwrap_or(0) as usize
    }

    /// Whether position `end` is the end of a whole waiting record (or the
    /// consumer position): between the consumer and producer positions and
    /// reached by whole records. Walks only from the last append boundary
    /// at or below `end` (at most one append's records; the producer
    /// position needs no walk).
    pub(crate) fn ends_record(&self, end: u64) -> bool {
        let (tail, head) = (self.consumed, self.bytes_in);
        if end < tail || end > head {
            return false;
        }
        if end == head || end == tail {
            return true;
        }
        let from = self
            .index
            .boundary_at_most(end)
            .map_or(tail, |b| b.max(tail));
        let mut at = from;
        let mut off = self.ring_offset(from);
        while at < end {
            let len = self.len_at(off);
            if len == 0 {
                return false;
            }
            at += len as u64;
            off = self.wrap(off + len);
        }
        at == end
    }

    /// Hands `note` each noted record (its first [`NOTED_MAX`] bytes) the
    /// index lists among the waiting records below `end`, in order.
    /// Returns the position from which the index may miss noted records,
    /// if below `end`: the caller walks the records from there (or from
    /// the consumer position, if later) to `end`.
    pub(crate) fn noted_below(&self, end: u64, mut note: impl FnMut(&[u8])) -> Option<u64> {
        let mut rec = [0u8; NOTED_MAX];
        for pos in self.index.noted_below(end) {
            let off = self.ring_offset(pos);
            let len = self.len_at(off).min(NOTED_MAX);
            let Some(r) = rec.get_mut(..len) else {
                continue;
            };
            self.read_at(off, r);
            note(r);
        }
        self.index
            .unindexed_from()
            .filter(|&from| from < end)
            .map(|from| from.max(self.consumed))
    }

    /// The waiting records from position `from` to `end` (record
    /// boundaries, `consumed <= from <= end <= consumed + len`).
    pub(crate) fn chunk_between(&self, from: u64, end: u64) -> Chunk {
        let skip = from.saturating_sub(self.consumed).min(self.len as u64) as usize;
        let len = end.saturating_sub(from).min((self.len - skip) as u64) as usize;
        Chunk {
            start: self.wrap(self.head + skip),
            len,
        }
    }
}

/// The storage of an event buffer, to read a [`Chunk`] without its lock.
#[derive(Clone, Copy)]
pub(crate) struct RingView {
    base: *mut u8,
    ptr: *mut u8,
    cap: usize,
}

impl RingView {
    /// Pages of the mapping window: the meta page, then the ring's pages
    /// twice (so that a record wrapping the end is contiguous in a
    /// mapping).
    pub(crate) fn map_pages(self) -> usize {
        1 + 2 * (self.cap / PAGE_SIZE)
    }

    /// Page `i` of the mapping window (see [`Self::map_pages`]).
    ///
    /// # Safety
    ///
    /// The event buffer this view came from is alive for `'a`.
    pub(crate) unsafe fn map_page<'a>(self, i: usize) -> Option<BorrowedPage<'a>> {
        let data_pages = self.cap / PAGE_SIZE;
        let page = match i {
            0 => 0,
            _ if i < self.map_pages() => 1 + (i - 1) % data_pages,
            _ => return None,
        };
        // SAFETY: `page` is below `1 + data_pages`, so the address lies in
        // the vmalloc storage (type invariant of `Storage`).
        let addr = unsafe { self.base.add(page * PAGE_SIZE) };
        // SAFETY: a vmalloc address of a live allocation.
        let raw = unsafe { bindings::vmalloc_to_page(addr.cast()) };
        let raw = core::ptr::NonNull::new(raw)?;
        // SAFETY: the page belongs to the storage, alive for `'a` (the
        // caller's promise).
        Some(unsafe { BorrowedPage::from_raw(raw) })
    }

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
        // Rounded up to a page.
        assert_eq!(eb.storage.cap, PAGE_SIZE);
        let lost = |cpu, time, count| format::Lost { cpu, time, count }.encoded(Endian::native());
        let r = lost(1, 5, 9); // 24 bytes
        let fit = PAGE_SIZE / 24;
        for _ in 0..fit {
            assert!(eb.push(&r));
        }
        // One more does not fit (PAGE_SIZE % 24 bytes free).
        assert!(!eb.push(&r));
        assert_eq!(eb.full, 1);
        assert_eq!(eb.len(), fit * 24);
        assert_eq!(eb.chunk(30).len, 24);
        assert_eq!(eb.chunk(23).len, 0);
        assert_eq!(eb.chunk(usize::MAX).len, fit * 24);
        assert_eq!(eb.first_len(), Some(24));
        eb.consume(24);
        assert_eq!(eb.consumed(), 24);
        // The next record wraps around the end of the storage.
        let r2 = lost(2, 6, 10);
        assert!(eb.push(&r2));
        assert_eq!(eb.len(), fit * 24);
        eb.consume((fit - 2) * 24);
        let c = eb.chunk(1000);
        assert_eq!(c.len, 48);
        let got = bytes(&eb, c);
        assert_eq!(&got[..24], &r[..]);
        assert_eq!(&got[24..], &r2[..]);
        // The meta page publishes the positions.
        assert_eq!(eb.meta_u64(meta::HEAD_AT).load(Relaxed), eb.bytes_in);
        assert_eq!(eb.meta_u64(meta::TAIL_AT).load(Relaxed), eb.consumed());
        assert_eq!(eb.bytes_in - eb.consumed(), 48);
        assert_eq!(
            eb.meta_u64(meta::DATA_SIZE_AT).load(Relaxed),
            PAGE_SIZE as u64
        );
        assert_eq!(eb.meta_u32(meta::VERSION_AT).load(Relaxed), meta::VERSION);
        // A reserve keeps room: with all but 16 bytes free, a 16-byte
        // record with a reserve of everything else does not go in.
        let t = format::Tracing {
            cpu: 0,
            time: 7,
            on: false,
        }
        .encoded(Endian::native());
        let free = eb.free();
        assert!(!eb.push_keeping(&t, free - 15));
        assert!(eb.push_keeping(&t, free - 16));
        eb.consume(eb.len());
        assert_eq!(eb.len(), 0);
        assert_eq!(eb.first_len(), None);
        // Every page of the mapping window exists; none past it.
        let v = eb.view();
        assert_eq!(v.map_pages(), 3);
        // SAFETY: `eb` lives for the borrows.
        unsafe {
            assert!(v.map_page(0).is_some());
            assert!(v.map_page(2).is_some());
            assert!(v.map_page(3).is_none());
        }
    }

    #[test]
    fn adopt_keeps_waiting_records_and_positions() {
        let (Ok(mut old), Ok(mut new)) =
            (EventBuffer::new(PAGE_SIZE), EventBuffer::new(3 * PAGE_SIZE))
        else {
            return;
        };
        let lost = |count| {
            format::Lost {
                cpu: 1,
                time: 5,
                count,
            }
            .encoded(Endian::native())
        };
        // Fill, consume most, append more: the waiting records wrap the end.
        let fit = PAGE_SIZE / 24;
        for i in 0..fit {
            assert!(old.push(&lost(i as u64)));
        }
        old.consume((fit - 3) * 24);
        for i in 0..5 {
            assert!(old.push(&lost(1000 + i)));
        }
        let want = bytes(&old, old.chunk(usize::MAX));
        assert_eq!(want.len(), 8 * 24);
        old.mappings = 2;
        old.copying = true;
        assert!(new.adopt(&old));
        assert_eq!(new.len(), old.len());
        assert_eq!(new.consumed(), old.consumed());
        assert_eq!(new.bytes_in, old.bytes_in);
        assert!(new.mappings == 0 && !new.copying);
        // The same records, where the consumer position says in the new ring.
        let c = new.chunk(usize::MAX);
        assert_eq!(bytes(&new, c), want);
        assert_eq!(c.start as u64, new.consumed() % (3 * PAGE_SIZE) as u64);
        assert_eq!(new.meta_u64(meta::TAIL_AT).load(Relaxed), new.consumed());
        assert_eq!(new.meta_u64(meta::HEAD_AT).load(Relaxed), new.bytes_in);
        // A buffer that cannot hold them, or one not fresh, refuses.
        let Ok(mut small) = EventBuffer::new(64) else {
            return;
        };
        assert!(small.push(&lost(1)));
        assert!(!small.adopt(&old));
    }

    /// The noted records `eb` lists below `end`, as (type, cpu), and where
    /// its index stops listing.
    fn noted(eb: &EventBuffer, end: u64) -> (KVec<(u16, u16)>, Option<u64>) {
        let mut v = KVec::new();
        let gap = eb.noted_below(end, |r| {
            if let Some(p) = format::Prefix::read(Endian::native(), r) {
                let _ = v.push((p.kind, p.cpu), GFP_KERNEL);
            }
        });
        (v, gap)
    }

    #[test]
    fn index_lists_noted_records_and_checks_consume_positions() {
        let Ok(mut eb) = EventBuffer::new(PAGE_SIZE) else {
            return;
        };
        let e = Endian::native();
        let lost = |cpu| {
            format::Lost {
                cpu,
                time: 5,
                count: 9,
            }
            .encoded(e)
        };
        let comm = |cpu| {
            format::Comm {
                cpu,
                time: 6,
                pid: 42,
                tgid: 42,
                comm: [b'x'; format::COMM_NAME_LEN],
            }
            .encoded(e)
        };
        let off = format::Tracing {
            cpu: 0,
            time: 7,
            on: false,
        }
        .encoded(e);
        // LOST(24) COMM(40) at 24, LOST at 64, TRACING(16) at 88: 104 bytes.
        assert!(eb.push(&lost(0)));
        assert!(eb.push(&comm(1)));
        assert!(eb.push(&lost(0)));
        assert!(eb.push(&off));
        // A run of three records in one append, the COMM at offset 24.
        let mut run = KVec::new();
        for r in [&lost(1)[..], &comm(0)[..], &lost(1)[..]] {
            let _ = run.extend_from_slice(r, GFP_KERNEL);
        }
        assert!(eb.push_run(&run, 0, Some(&[24])));
        let head = eb.bytes_in;
        assert_eq!(head, 104 + 88);
        let (got, gap) = noted(&eb, head);
        assert_eq!(
            &got[..],
            &[(format::COMM, 1), (format::TRACING, 0), (format::COMM, 0)]
        );
        assert_eq!(gap, None);
        assert_eq!(noted(&eb, 64).0.len(), 1);
        // Consume positions: record ends pass, the rest do not.
        for ok in [0, 24, 64, 88, 104, 128, 168, head] {
            assert!(eb.ends_record(ok));
        }
        for bad in [
            8,
            16,
            30,
            96,
            112,
            136,
            head - 8,
            head + 8,
            head + 24,
            u64::MAX,
        ] {
            assert!(!eb.ends_record(bad));
        }
        // Consuming drops what it passes; below the consumer position is
        // refused.
        eb.consume(64);
        assert!(!eb.ends_record(24));
        assert!(eb.ends_record(64) && eb.ends_record(88));
        let (got, _) = noted(&eb, head);
        assert_eq!(&got[..], &[(format::TRACING, 0), (format::COMM, 0)]);
        // A run the writer does not describe: the index stops listing there.
        let unknown_at = eb.bytes_in;
        assert!(eb.push_run(&run, 0, None));
        assert_eq!(noted(&eb, eb.bytes_in).1, Some(unknown_at));
        assert_eq!(noted(&eb, unknown_at).1, None);
        // Once everything is consumed, listing resumes.
        eb.consume(eb.len());
        assert!(eb.push(&comm(1)));
        assert_eq!(
            noted(&eb, eb.bytes_in),
            (
                {
                    let mut v = KVec::new();
                    let _ = v.push((format::COMM, 1), GFP_KERNEL);
                    v
                },
                None
            )
        );
        eb.consume(eb.len());

        // An index that overflows: two noted entries, two boundaries.
        let Ok(ix) = RecordIndex::with_capacity(2, 2) else {
            return;
        };
        eb.index = ix;
        // Near the end of the ring, so that the records below wrap.
        let cap = PAGE_SIZE as u64;
        while eb.bytes_in % cap < cap - 100 {
            assert!(eb.push(&lost(0)));
            eb.consume(eb.len());
        }
        let base = eb.bytes_in;
        for cpu in 0..5 {
            assert!(eb.push(&comm(cpu)));
            assert!(eb.push(&lost(cpu)));
        }
        // The records wrap.
        assert!(eb.consumed() % cap + eb.len() as u64 > cap);
        let (got, gap) = noted(&eb, eb.bytes_in);
        assert_eq!(&got[..], &[(format::COMM, 0), (format::COMM, 1)]);
        assert_eq!(gap, Some(base + 2 * 64));
        assert_eq!(eb.index.overflows, 1);
        // Positions past the listed boundaries are still checked (by a
        // longer walk from the last one).
        assert!(eb.ends_record(base + 4 * 64 + 40));
        assert!(!eb.ends_record(base + 4 * 64 + 48));
        // A consume inside the gap moves its start.
        eb.consume(3 * 64);
        assert_eq!(noted(&eb, eb.bytes_in).1, Some(base + 3 * 64));
        eb.consume(eb.len());
        assert_eq!(noted(&eb, eb.bytes_in).1, None);
    }
}
