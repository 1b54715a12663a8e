// SPDX-License-Identifier: GPL-2.0

//! The character device `/dev/oprofile/buffer`.
//!
//! A misc device named `oprofile!buffer`: devtmpfs turns the `!` into a
//! directory and gives it mode 0600 (root only). One reader at a time (a
//! second `open` gets `EBUSY`). Each open starts a stream
//! (`Documentation/stream-format.md`): the header, then whole records. A
//! blocking read waits until the event buffer holds `buffer_watershed` bytes
//! or a flush (or `tracing_on=0`) happens, and is interrupted by signals; `O_NONBLOCK` gives
//! `EAGAIN` when nothing waits. A user buffer that cannot hold the next whole
//! record gets `EINVAL`. `poll`/`select`/`epoll` report the device readable
//! exactly when a blocking read would return at once.

use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use kernel::{
    fs::{File, Kiocb},
    iov::IovIterDest,
    prelude::*,
    sync::{poll::PollTable, Arc},
};

use crate::{
    poll_misc::{mask, PollMiscDevice, PollMiscRegistration},
    profiler::Profiler,
    records,
    sampler::now,
};

/// The name of the device; devtmpfs creates `/dev/oprofile/buffer`.
pub(crate) const DEVICE_NAME: &CStr = c"oprofile!buffer";

/// `O_NONBLOCK` from the UAPI headers.
const O_NONBLOCK: u32 = kernel::bindings::O_NONBLOCK;

/// One open file of the device.
pub(crate) struct BufferReader {
    profiler: Arc<Profiler>,
    header_sent: AtomicBool,
    /// The flush generation whose data this reader has drained.
    seen_flush: AtomicU64,
}

impl BufferReader {
    /// Whether a blocking read would return now (the condition `poll` reports).
    fn readable(&self, eb: &crate::event_buffer::EventBuffer) -> bool {
        let flushed = eb.flush_seq != self.seen_flush.load(Ordering::Relaxed);
        !self.header_sent.load(Ordering::Acquire)
            || eb.len() >= self.profiler.config.buffer_watershed
            || (flushed && eb.len() > 0)
    }
}

impl PollMiscDevice for BufferReader {
    fn open(_file: &File, misc: &PollMiscRegistration<Self>) -> Result<KBox<Self>> {
        let profiler = crate::OprofileModule::profiler_of(misc);
        if profiler.reader_open.swap(true, Ordering::AcqRel) {
            pr_info!("/dev/oprofile/buffer: refused a second reader (EBUSY)\n");
            return Err(EBUSY);
        }
        let seen = profiler.events.lock().flush_seq;
        let open = profiler.clone();
        KBox::new(
            BufferReader {
                profiler,
                header_sent: AtomicBool::new(false),
                seen_flush: AtomicU64::new(seen),
            },
            GFP_KERNEL,
        )
        .map_err(|e| {
            // Not opened after all.
            open.reader_open.store(false, Ordering::Release);
            e.into()
        })
    }

    fn release(me: KBox<Self>, _file: &File) {
        me.profiler.reader_open.store(false, Ordering::Release);
    }

    fn read_iter(kiocb: Kiocb<'_, KBox<Self>>, iov: &mut IovIterDest<'_>) -> Result<usize> {
        // SAFETY: the kiocb of a read in progress has a valid file.
        let nonblock = unsafe { (*(*kiocb.as_raw()).ki_filp).f_flags } & O_NONBLOCK != 0;
        let me = kiocb.file();
        let p = &*me.profiler;
        let room = iov.len();
        let mut copied = 0;
        if !me.header_sent.load(Ordering::Acquire) {
            if room < records::HEADER_LEN {
                pr_info!("/dev/oprofile/buffer: a {room}-byte read cannot hold the 64-byte header (EINVAL)\n");
                return Err(EINVAL);
            }
            let event = p.event();
            let header = records::header(&records::HeaderInfo {
                hardware: event.is_hardware(),
                nr_cpus: p.cpus.len() as u32,
                backtrace_depth: p.config.backtrace_depth,
                sample_period: p.config.sample_period,
                sample_freq: p.config.sample_freq,
                start_time: now(),
                event_name: event.name(),
            });
            if iov.copy_to_iter(&header) != header.len() {
                return Err(EFAULT);
            }
            me.header_sent.store(true, Ordering::Release);
            copied = header.len();
        }
        let mut eb = p.events.lock();
        loop {
            let flushed = eb.flush_seq != me.seen_flush.load(Ordering::Relaxed);
            if me.readable(&eb) || (nonblock && eb.len() > 0) || (copied > 0 && eb.len() > 0) {
                break;
            }
            if flushed && eb.len() == 0 {
                me.seen_flush.store(eb.flush_seq, Ordering::Relaxed);
            }
            if copied > 0 {
                return Ok(copied);
            }
            if nonblock {
                return Err(EAGAIN);
            }
            if p.readers.wait_interruptible(&mut eb) {
                return Err(ERESTARTSYS);
            }
        }
        let chunk = eb.whole_records(room - copied);
        if chunk.is_empty() {
            if copied > 0 {
                return Ok(copied);
            }
            let need = eb.first_len().unwrap_or(0);
            pr_info!("/dev/oprofile/buffer: a {room}-byte read cannot hold the next {need}-byte record (EINVAL)\n");
            return Err(EINVAL);
        }
        let n = iov.copy_to_iter(chunk);
        // Only whole records count; a fault part-way keeps the rest queued.
        let whole = eb.whole_records(n).len();
        eb.consume(whole);
        if eb.len() == 0 {
            me.seen_flush.store(eb.flush_seq, Ordering::Relaxed);
        }
        if whole == 0 && copied == 0 {
            return Err(EFAULT);
        }
        Ok(copied + whole)
    }

    fn poll(me: &Self, file: &File, table: PollTable<'_>) -> u32 {
        table.register_wait(file, &me.profiler.readers);
        if me.readable(&me.profiler.events.lock()) {
            mask::EPOLLIN | mask::EPOLLRDNORM
        } else {
            0
        }
    }
}

/// Registers the device; it is removed when the registration is dropped.
pub(crate) fn register() -> impl PinInit<PollMiscRegistration<BufferReader>, Error> {
    PollMiscRegistration::register(DEVICE_NAME)
}
