// SPDX-License-Identifier: GPL-2.0

//! The character device `/dev/oprofile/buffer`.
//!
//! A misc device named `oprofile!buffer`: devtmpfs turns the `!` into a
//! directory and gives it mode 0600. Opening it needs what perf needs to
//! sample the whole system (`CAP_PERFMON` or `CAP_SYS_ADMIN`): the stream holds kernel addresses and every user's pids,
//! names and PCs, so a `chmod 666` of the node changes nothing (`EACCES`).
//!
//! One reader at a time: an open with read access (`FMODE_READ`: `O_RDONLY`,
//! `O_RDWR`) takes the reader slot (a second one gets `EBUSY`); an open
//! without (`O_WRONLY`, or access mode 3, neither read nor write) is a
//! control file that takes no slot. Each reader's open starts a stream
//! (`Documentation/stream-format.md`): the header, then whole records. A
//! blocking read waits until the event buffer holds `buffer_watershed`
//! bytes, a flush (or `tracing_on=0`) happens, the event buffer is full, or
//! (recording off) anything waits, and is interrupted by signals;
//! `O_NONBLOCK` gives `EAGAIN` when nothing waits. A zero-length read
//! returns 0; a user buffer that cannot hold the next whole record gets
//! `EINVAL`. `poll`/`select`/`epoll` report the
//! device readable exactly when a blocking read would return at once. The
//! file is a stream: `lseek`/`pread` get `ESPIPE`. Threads sharing the file
//! read one at a time.
//!
//! The ioctls below control recording like the debugfs files (which
//! `lockdown=integrity` makes unwritable), on any open file of the device:
//! `OPROFILE_RS_IOC_TRACING_ON`/`_OFF` (as `echo 1`/`echo 0 > tracing_on`),
//! `OPROFILE_RS_IOC_FLUSH` (as `echo 1 > flush`), `OPROFILE_RS_IOC_GET_TRACING`
//! (writes 0 or 1 as a `__u32`), `OPROFILE_RS_IOC_SNAPSHOT` (as `echo 1 >
//! snapshot`: a flight-recorder snapshot, `EINVAL` in consume mode, `ENOSPC`
//! when the event buffer cannot take it), `OPROFILE_RS_IOC_SET_CONFIG` and
//! `OPROFILE_RS_IOC_GET_CONFIG` (runtime configuration, `config.rs`: the
//! text of `struct oprofile_rs_config_text { __u64 ptr; __u64 len; }`).
//! `OPROFILE_RS_IOC_UNWIND_TABLE`, `_UNWIND_MAP` and `_UNWIND_RESET` load
//! unwind tables for the sample path's user stack walk, owned by the file
//! (`unwind_loader.rs`). Other commands get `ENOTTY`.
//!
//!
//! Zero-copy reading (`Documentation/mmap.md`): a reader may `mmap` the
//! event buffer read-only (a meta page with the positions, then the ring's
//! pages twice back to back) and consume what it processed with
//! `OPROFILE_RS_IOC_CONSUME`, after `read` delivered the stream's opening.
//! `read` keeps working on the same file: both consume the one stream (the
//! consumer position is shared), one at a time (the busy flag). While any
//! piece of a mapping lives (counted by the mappings' `open` and `close`:
//! split, moved, held after `close`), `buffer_size` cannot change (`EBUSY`);
//! a refused or ended mapping does not count.
//!
//! Permissions are checked at `open` only, as perf checks them at
//! `perf_event_open`: an open file carries everything it was opened for to
//! whoever holds it (a process that dropped its privileges, or got the fd
//! passed), see `Documentation/user-guide.md` (Security).

use kernel::{
    bindings,
    fs::{File, Kiocb, LocalFile},
    iov::IovIterDest,
    mm::virt::VmaNew,
    prelude::*,
    sync::{
        atomic::{Acquire, Atomic, Full, Relaxed, Release},
        poll::PollTable,
        Arc,
    },
    uaccess::{UserPtr, UserSlice},
};

use crate::{
    control::{
        profiler::{Profiler, TRACING_ON},
        settings::Settings,
    },
    format::{self, Endian},
    path::event_buffer::EventBuffer,
    shims::{
        clock::now,
        perf::Event,
        poll_misc::{
            map_read_only, mask, opened_for_reading, PollMiscDevice, PollMiscRegistration,
        },
        ratelimit::pr_ratelimited,
    },
};

/// The name of the device; devtmpfs creates `/dev/oprofile/buffer`.
pub(crate) const DEVICE_NAME: &CStr = c"oprofile!buffer";

/// The ioctl commands: their one definition is `format.rs`'s (shared with
/// the host tools and `include/uapi/oprofile_rs.h`), checked here against
/// the kernel's own encoding of the same `_IO*` (a port to an architecture
/// whose `_IOC` differs fails this build rather than answer other numbers).
pub(crate) mod ioctl {
    pub(crate) use crate::format::ioctl::{
        CONSUME, FLUSH, GET_CONFIG, GET_TRACING, SET_CONFIG, SNAPSHOT, TRACING_OFF, TRACING_ON,
        UNWIND_MAP, UNWIND_RESET, UNWIND_TABLE,
    };
    use kernel::ioctl::{_IO, _IOR, _IOW, _IOWR};

    const _: () = {
        // (Inside the block: the stock kernel's build counted a constant
        // used only here as never used.)
        const MAGIC: u32 = crate::format::ioctl::MAGIC as u32;
        assert!(TRACING_ON == _IO(MAGIC, 1));
        assert!(TRACING_OFF == _IO(MAGIC, 2));
        assert!(FLUSH == _IO(MAGIC, 3));
        assert!(GET_TRACING == _IOR::<u32>(MAGIC, 4));
        assert!(CONSUME == _IOW::<[u64; 2]>(MAGIC, 5));
        assert!(SNAPSHOT == _IO(MAGIC, 32));
        assert!(SET_CONFIG == _IOW::<[u64; 2]>(MAGIC, 33));
        assert!(GET_CONFIG == _IOWR::<[u64; 2]>(MAGIC, 34));
        assert!(UNWIND_TABLE == _IOW::<[u64; 2]>(MAGIC, 35));
        assert!(UNWIND_MAP == _IOW::<[u64; 5]>(MAGIC, 36));
        assert!(UNWIND_RESET == _IO(MAGIC, 37));
    };
}

/// `O_NONBLOCK` from the UAPI headers.
const O_NONBLOCK: u32 = bindings::O_NONBLOCK;

/// One open file of the device.
pub(crate) struct BufferReader {
    profiler: Arc<Profiler>,
    /// This file holds the reader slot (opened with read access:
    /// `FMODE_READ`).
    reads: bool,
    header_sent: Atomic<bool>,
    /// The stream's opening records (after the header) are not all read.
    prefix_pending: Atomic<bool>,
    /// The flush generation whose data this reader has drained.
    seen_flush: Atomic<u64>,
}

/// Whether the caller may read the whole system's samples: what perf's
/// `perfmon_capable()` asks for a CPU-wide counter with kernel samples
/// whatever `perf_event_paranoid` says. (perf also calls the LSM's
/// `security_perf_event_open`, which is not exported to modules.)
fn may_profile_system() -> Result {
    // SAFETY: plain calls on the current task's credentials.
    let capable = unsafe {
        bindings::capable(bindings::CAP_PERFMON as i32)
            || bindings::capable(bindings::CAP_SYS_ADMIN as i32)
    };
    if capable {
        Ok(())
    } else {
        Err(EACCES)
    }
}

impl BufferReader {
    /// This open file's identity, which owns the unwind tables loaded
    /// through it (the box does not move while the file is open).
    fn owner(&self) -> usize {
        core::ptr::from_ref(self) as usize
    }

    /// Whether a blocking read would return now (the condition `poll` reports).
    fn readable(&self, eb: &EventBuffer) -> bool {
        let flushed = eb.flush_seq != self.seen_flush.load(Relaxed);
        !self.header_sent.load(Acquire)
            || self.prefix_pending.load(Acquire)
            || eb.len() >= self.profiler.buffers.watershed()
            || self.profiler.buffers.nearly_full(eb)
            || (flushed && eb.len() > 0)
            || (self.profiler.buffers.stopped() && eb.len() > 0)
    }
}

/// The reader slot's busy flag, held for one `read`: threads sharing the
/// file read one after another, and the reader state is theirs meanwhile.
struct Busy<'a>(&'a Profiler);

impl<'a> Busy<'a> {
    /// Waits (interruptibly) for the flag, or `EAGAIN` with `nonblock`.
    fn take(p: &'a Profiler, nonblock: bool) -> Result<Self> {
        let mut eb = p.buffers.events.lock();
        while p.read_busy.xchg(true, Acquire) {
            if nonblock {
                return Err(EAGAIN);
            }
            if p.buffers.readers.wait_interruptible(&mut eb) {
                return Err(ERESTARTSYS);
            }
        }
        Ok(Busy(p))
    }
}

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        // Under the lock the waiters check the flag with: no lost wake-up.
        let _eb = self.0.buffers.events.lock();
        self.0.read_busy.store(false, Release);
        self.0.buffers.readers.notify_all();
    }
}

impl BufferReader {
    /// Copies the header and the stream's opening records that fit in
    /// `room` bytes; returns the bytes copied.
    fn read_prefix(&self, iov: &mut IovIterDest<'_>, room: usize) -> Result<usize> {
        let p = &*self.profiler;
        let mut copied = 0;
        let mut st = p.reader.lock();
        if !self.header_sent.load(Acquire) {
            if room < format::HEADER_LEN {
                pr_ratelimited!(
                    pr_info,
                    "/dev/oprofile/buffer: a {room}-byte read cannot hold the {}-byte header (EINVAL)\n",
                    format::HEADER_LEN
                );
                return Err(EINVAL);
            }
            st.start_stream()?;
            let header = stream_header(&p.settings(), p.buffers.cpus.len() as u32, now());
            if iov.copy_to_iter(&header) != header.len() {
                return Err(EFAULT);
            }
            self.header_sent.store(true, Release);
            self.prefix_pending.store(st.prefix_pending(), Release);
            copied = header.len();
        }
        if st.prefix_pending() {
            let chunk = st.prefix_chunk(room - copied);
            if chunk.is_empty() && copied == 0 {
                pr_ratelimited!(
                    pr_info,
                    "/dev/oprofile/buffer: a {room}-byte read cannot hold the next record (EINVAL)\n"
                );
                return Err(EINVAL);
            }
            let n = iov.copy_to_iter(chunk);
            let whole = if n == chunk.len() { n } else { 0 };
            if whole == 0 && copied == 0 && !chunk.is_empty() {
                return Err(EFAULT);
            }
            st.prefix_consumed(whole);
            copied += whole;
            self.prefix_pending.store(st.prefix_pending(), Release);
        }
        if copied > 0 {
            // What a mapped reader must still read before it consumes.
            p.buffers.events.lock().set_opening(st.prefix_remaining());
        }
        Ok(copied)
    }
}

/// The header every stream starts with: `settings` in force on `nr_cpus`
/// possible CPUs, the stream opened at `start_time`. The header names the
/// first event and its period or frequency (what version-1 readers know);
/// the CONFIG record that follows lists them all.
pub(crate) fn stream_header(
    settings: &Settings,
    nr_cpus: u32,
    start_time: u64,
) -> [u8; format::HEADER_LEN] {
    let config = &settings.config;
    let first = settings.attr(0);
    let event = first.map_or(Event::CpuClock, |a| a.event);
    let mut header = [0u8; format::HEADER_LEN];
    format::Header {
        version: format::VERSION,
        header_size: format::HEADER_LEN as u16,
        word_size: format::WORD_SIZE,
        endian: Endian::native(),
        clock: format::CLOCK_LOCAL,
        sample_source: if event.is_hardware() {
            format::SOURCE_HARDWARE
        } else {
            format::SOURCE_SOFTWARE
        },
        nr_cpus,
        backtrace_depth: config.backtrace_depth,
        sample_period: first.map_or(0, |a| a.period),
        sample_freq: first.map_or(0, |a| a.freq),
        start_time,
        event_name: format::event_name_field(event.name().as_bytes()),
    }
    .encode(&mut header);
    header
}

/// Bytes of the whole records at the start of `a` then `b` within `n`.
fn whole_records(a: &[u8], b: &[u8], n: usize) -> usize {
    if n == a.len() + b.len() {
        // The whole chunk: whole records by construction.
        return n;
    }
    let byte = |i: usize| -> u8 {
        if i < a.len() {
            a.get(i).copied().unwrap_or(0)
        } else {
            b.get(i - a.len()).copied().unwrap_or(0)
        }
    };
    let mut at = 0;
    while at + 8 <= n {
        let len = usize::from(u16::from_ne_bytes([byte(at + 2), byte(at + 3)]));
        if len < 8 || at + len > n {
            break;
        }
        at += len;
    }
    at
}

impl PollMiscDevice for BufferReader {
    type RegistrationData = Arc<Profiler>;

    fn open(file: &File, misc: &PollMiscRegistration<Self>) -> Result<KBox<Self>> {
        may_profile_system()?;
        let profiler = misc.data().clone();
        let reads = opened_for_reading(file);
        if reads && profiler.reader_open.xchg(true, Full) {
            pr_ratelimited!(
                pr_info,
                "/dev/oprofile/buffer: refused a second reader (EBUSY)\n"
            );
            return Err(EBUSY);
        }
        let seen = {
            let eb = profiler.buffers.events.lock();
            if reads {
                // A new stream: its header comes first.
                eb.set_opening(format::HEADER_LEN);
            }
            eb.flush_seq
        };
        let open = profiler.clone();
        KBox::new(
            BufferReader {
                profiler,
                reads,
                header_sent: Atomic::new(false),
                prefix_pending: Atomic::new(false),
                seen_flush: Atomic::new(seen),
            },
            GFP_KERNEL,
        )
        .map_err(|e| {
            // Not opened after all.
            if reads {
                open.reader_open.store(false, Release);
            }
            e.into()
        })
    }

    fn release(me: KBox<Self>, _file: &File) {
        // The tables this file loaded go with it.
        me.profiler.unwind.lock().reset(me.owner());
        // No mapping outlives the file (each holds it): their `close`
        // already gave the event buffer back to `buffer_size` changes.
        if me.reads {
            me.profiler.reader_open.store(false, Release);
        }
    }

    fn read_iter(kiocb: Kiocb<'_, KBox<Self>>, iov: &mut IovIterDest<'_>) -> Result<usize> {
        // `fcntl(F_SETFL)` may change the flags meanwhile: the kernel
        // crate's accessor reads them once (`READ_ONCE`).
        // SAFETY: the kiocb of a read in progress has a valid file, held
        // for the call; the reference is used on this thread during it.
        // The file is a stream (`stream_open`): `fdget_pos` takes no
        // `f_pos_lock` for it, so another thread's read may be in such a
        // region too; what that rule protects is `f_pos`, which a stream
        // does not use and `flags()` does not touch.
        let nonblock = unsafe { LocalFile::from_raw_file((*kiocb.as_raw()).ki_filp) }.flags()
            & O_NONBLOCK
            != 0;
        let me = kiocb.file();
        let p = &*me.profiler;
        let room = iov.len();
        if room == 0 {
            return Ok(0);
        }
        let _busy = Busy::take(p, nonblock)?;
        let copied = me.read_prefix(iov, room)?;
        if me.prefix_pending.load(Acquire) {
            return Ok(copied);
        }
        let (chunk, view) = {
            let mut eb = p.buffers.events.lock();
            loop {
                let flushed = eb.flush_seq != me.seen_flush.load(Relaxed);
                if me.readable(&eb) || (nonblock && eb.len() > 0) || (copied > 0 && eb.len() > 0) {
                    break;
                }
                if flushed && eb.len() == 0 {
                    me.seen_flush.store(eb.flush_seq, Relaxed);
                }
                if copied > 0 {
                    return Ok(copied);
                }
                if nonblock {
                    return Err(EAGAIN);
                }
                if p.buffers.readers.wait_interruptible(&mut eb) {
                    return Err(ERESTARTSYS);
                }
            }
            let chunk = eb.chunk(room - copied);
            if chunk.len == 0 {
                if copied > 0 {
                    return Ok(copied);
                }
                let need = eb.first_len().unwrap_or(0);
                pr_ratelimited!(
                    pr_info,
                    "/dev/oprofile/buffer: a {room}-byte read cannot hold the next {need}-byte record (EINVAL)\n"
                );
                return Err(EINVAL);
            }
            // Until consumed below: the storage must stay (a `buffer_size`
            // change waits for the next read).
            eb.copying = true;
            (chunk, eb.view())
        };
        // The copy runs without the events lock: the sync goes on meanwhile.
        // SAFETY: `p` (which owns the event buffer) outlives this call; this
        // is the only reader (`_busy`), so nothing is consumed until the
        // slices are gone (below).
        let (a, b) = unsafe { view.bytes(chunk) };
        let mut n = iov.copy_to_iter(a);
        if n == a.len() {
            n += iov.copy_to_iter(b);
        }
        // Only whole records count; a fault part-way keeps the rest queued.
        let whole = whole_records(a, b, n);
        p.reader.lock().delivered(a, b, whole);
        let mut eb = p.buffers.events.lock();
        eb.consume(whole);
        eb.copying = false;
        if eb.len() == 0 {
            me.seen_flush.store(eb.flush_seq, Relaxed);
        }
        if whole == 0 && copied == 0 {
            return Err(EFAULT);
        }
        Ok(copied + whole)
    }

    fn ioctl(me: &Self, file: &File, cmd: u32, arg: usize) -> Result<isize> {
        let p = &*me.profiler;
        match cmd {
            ioctl::TRACING_ON => p.set_tracing(true),
            ioctl::TRACING_OFF => p.set_tracing(false),
            ioctl::FLUSH => p.flush(),
            ioctl::SNAPSHOT => {
                p.snapshot()?;
            }
            ioctl::CONSUME => {
                let mut r = UserSlice::new(UserPtr::from_addr(arg), 16).reader();
                let tail = r.read::<u64>()?;
                let new_tail = r.read::<u64>()?;
                me.consume_mapped(tail, new_tail, file.flags() & O_NONBLOCK != 0)?;
            }
            ioctl::SET_CONFIG => {
                let (ptr, len) = config_text(arg)?;
                if len > crate::control::config::MAX_TEXT {
                    pr_ratelimited!(
                        pr_info,
                        "SET_CONFIG: {len} bytes of text, more than {} (EINVAL)\n",
                        crate::control::config::MAX_TEXT
                    );
                    return Err(EINVAL);
                }
                let mut text = KVec::from_elem(0u8, len, GFP_KERNEL)?;
                UserSlice::new(UserPtr::from_addr(ptr), len)
                    .reader()
                    .read_slice(&mut text)?;
                p.configure(&text)?;
            }
            ioctl::GET_CONFIG => {
                let (ptr, len) = config_text(arg)?;
                let mut text = KVec::new();
                crate::control::settings::write_config_text(&p.settings(), &mut text)?;
                if text.len() + 1 > len {
                    return Err(ERANGE);
                }
                text.push(0, GFP_KERNEL)?;
                UserSlice::new(UserPtr::from_addr(ptr), text.len())
                    .writer()
                    .write_slice(&text)?;
                return Ok((text.len() - 1) as isize);
            }
            ioctl::UNWIND_TABLE => {
                let id = p.unwind.lock().load_table(me.owner(), arg)?;
                return Ok(id as isize);
            }
            ioctl::UNWIND_MAP => p.unwind.lock().map(me.owner(), arg)?,
            ioctl::UNWIND_RESET => p.unwind.lock().reset(me.owner()),
            ioctl::GET_TRACING => {
                let v = u32::from(TRACING_ON.is_on());
                UserSlice::new(UserPtr::from_addr(arg), core::mem::size_of::<u32>())
                    .writer()
                    .write(&v)?;
            }
            _ => return Err(ENOTTY),
        }
        Ok(0)
    }

    fn mmap(me: &Self, _file: &File, vma: &VmaNew) -> Result {
        // A control file has no reader slot (and, opened `O_WRONLY`, the
        // kernel refuses a readable mapping itself).
        if !me.reads {
            return Err(EACCES);
        }
        let view = {
            let mut eb = me.profiler.buffers.events.lock();
            // Before the view: the storage stays while the mapping lives
            // (counted down by its `close`, or below if it is refused).
            eb.mappings = eb.mappings.saturating_add(1);
            eb.view()
        };
        // SAFETY: `me` holds the profiler, which owns the event buffer, for
        // the whole call; the pages are used only during it (each mapped page
        // then holds its own reference).
        let res = map_read_only(vma, view.map_pages(), |i| unsafe { view.map_page(i) });
        if res.is_err() {
            // Refused: no mapping (the kernel calls no `close` for it).
            Self::mapping_closed(me);
        }
        res
    }

    fn mapping_opened(me: &Self) {
        let mut eb = me.profiler.buffers.events.lock();
        eb.mappings = eb.mappings.saturating_add(1);
    }

    fn mapping_closed(me: &Self) {
        let mut eb = me.profiler.buffers.events.lock();
        eb.mappings = eb.mappings.saturating_sub(1);
    }

    fn poll(me: &Self, file: &File, table: PollTable<'_>) -> u32 {
        if !me.reads {
            return 0;
        }
        table.register_wait(file, &me.profiler.buffers.readers);
        if me.readable(&me.profiler.buffers.events.lock()) {
            mask::EPOLLIN | mask::EPOLLRDNORM
        } else {
            0
        }
    }
}

impl BufferReader {
    /// `OPROFILE_RS_IOC_CONSUME`: the whole records from consumer position
    /// `tail` (the caller's view) to `new_tail` were processed through the
    /// mapping. `ESTALE` if the position is no longer `tail` (another
    /// consumer moved it: the caller's view of those bytes may be torn),
    /// `EINVAL` if `new_tail` is not the end of a whole record within the
    /// waiting bytes, or the stream's opening was not read yet, `EBADF` on a
    /// control file (no reader slot), `EAGAIN` with `O_NONBLOCK` while a
    /// `read` of the same file is in progress.
    ///
    /// The records are not walked: the event buffer's index
    /// (`record_index.rs`) says where the COMM, TRACING and CONFIG records
    /// to note lie and where the last append before `new_tail` ended (the
    /// check walks from there). Only when the index overflowed are the
    /// records from where it stopped listing walked, as `read` does, without
    /// the events lock.
    fn consume_mapped(&self, tail: u64, new_tail: u64, nonblock: bool) -> Result {
        if !self.reads {
            return Err(EBADF);
        }
        let p = &*self.profiler;
        let _busy = Busy::take(p, nonblock)?;
        if !self.header_sent.load(Acquire) || self.prefix_pending.load(Acquire) {
            return Err(EINVAL);
        }
        // The reader state before the events lock, as `read_prefix` takes
        // them. Neither is held across a user copy (there is none here).
        let mut st = p.reader.lock();
        let (walk, view) = {
            let mut eb = p.buffers.events.lock();
            if tail != eb.consumed() {
                return Err(ESTALE);
            }
            if !eb.ends_record(new_tail) {
                return Err(EINVAL);
            }
            let n = (new_tail - tail) as usize;
            match eb.noted_below(new_tail, |rec| st.note(rec)) {
                None => {
                    self.consumed(&mut eb, n);
                    return Ok(());
                }
                Some(from) => {
                    // The index overflowed: walk from where it stopped.
                    eb.index.walks += 1;
                    eb.copying = true;
                    (eb.chunk_between(from, new_tail), eb.view())
                }
            }
        };
        // SAFETY: `p` owns the event buffer; this is the only consumer
        // (`_busy`), so nothing is consumed until the slices are gone.
        let (a, b) = unsafe { view.bytes(walk) };
        st.delivered(a, b, walk.len);
        let mut eb = p.buffers.events.lock();
        eb.copying = false;
        self.consumed(&mut eb, (new_tail - tail) as usize);
        Ok(())
    }

    /// Consumes `n` bytes for this reader.
    fn consumed(&self, eb: &mut EventBuffer, n: usize) {
        eb.consume(n);
        if eb.len() == 0 {
            self.seen_flush.store(eb.flush_seq, Relaxed);
        }
    }
}

/// The user buffer of a `struct oprofile_rs_config_text` at `arg`.
fn config_text(arg: usize) -> Result<(usize, usize)> {
    let mut r = UserSlice::new(UserPtr::from_addr(arg), 16).reader();
    let ptr = usize::try_from(r.read::<u64>()?).map_err(|_| EFAULT)?;
    let len = usize::try_from(r.read::<u64>()?).map_err(|_| EINVAL)?;
    Ok((ptr, len))
}

/// Registers the device, whose files read `profiler`'s stream; it is removed
/// when the registration is dropped.
pub(crate) fn register(
    profiler: Arc<Profiler>,
) -> impl PinInit<PollMiscRegistration<BufferReader>, Error> {
    PollMiscRegistration::register(DEVICE_NAME, profiler)
}
