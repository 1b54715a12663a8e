//! Zero-copy reading of `/dev/oprofile/buffer` through its mapping
//! (`Documentation/mmap.md`): a read-only meta page with the producer and
//! consumer positions, then the event buffer's pages mapped twice back to
//! back (so a view that wraps around the end is one slice); the reader
//! processes the bytes between the positions in place and consumes them with
//! `OPROFILE_RS_IOC_CONSUME`. The stream's opening (header and restated
//! records) comes from `read()` first.

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileTypeExt;

use oprofile_stream::oprofile_format::{ioctl, meta};

/// The meta page's layout version this reader understands.
pub const META_VERSION: u32 = meta::VERSION;

/// `_IOW('O', 5, struct oprofile_rs_consume)`.
pub const IOC_CONSUME: u64 = ioctl::CONSUME as u64;

/// A window: the meta page then the data twice, as mapped (or, in tests, as
/// laid out in memory).
#[derive(Clone, Copy)]
struct Window {
    base: *const u8,
    meta_size: usize,
    data_size: u64,
}

impl Window {
    fn u64_at(&self, off: usize) -> u64 {
        // SAFETY: `off` is an aligned field of the meta page, which is
        // mapped for the window's life; the kernel writes it atomically.
        unsafe {
            (*(self.base.add(off) as *const std::sync::atomic::AtomicU64))
                .load(std::sync::atomic::Ordering::Acquire)
        }
    }

    /// The waiting bytes: the consumer position and the bytes from it to the
    /// producer position (whole records), one slice thanks to the double
    /// mapping.
    fn view(&self) -> (u64, &[u8]) {
        // The head with acquire before the bytes it covers.
        let head = self.u64_at(meta::HEAD_AT);
        let tail = self.u64_at(meta::TAIL_AT);
        let n = head.saturating_sub(tail).min(self.data_size);
        let start = (tail % self.data_size) as usize;
        // SAFETY: `start + n` is below twice the data size, within the
        // window; the bytes wait (unconsumed), so the kernel does not write
        // them until this reader consumes them.
        let s = unsafe {
            std::slice::from_raw_parts(self.base.add(self.meta_size + start), n as usize)
        };
        (tail, s)
    }
}

/// The device mapped for reading.
pub struct Mapped {
    win: Window,
    len: usize,
    fd: i32,
}

// SAFETY: the mapping is read-only shared memory, valid from any thread;
// the fd outlives it (the caller keeps the file).
unsafe impl Send for Mapped {}

impl Mapped {
    /// Maps `dev` if it is a character device whose driver offers the
    /// mapping (version [`META_VERSION`]); `Err` says why not (the caller
    /// falls back to `read()`).
    pub fn new(dev: &File) -> io::Result<Mapped> {
        let ft = dev.metadata()?.file_type();
        if !ft.is_char_device() {
            return Err(io::Error::other("not a character device"));
        }
        let page = page_size();
        let fd = dev.as_raw_fd();
        let meta = map(fd, page, 0)?;
        let field = |off: usize, n: usize| {
            let mut b = [0u8; 8];
            // SAFETY: within the mapped meta page.
            unsafe { std::ptr::copy_nonoverlapping(meta.add(off), b.as_mut_ptr(), n) };
            u64::from_ne_bytes(b)
        };
        let (version, meta_size) = (
            field(meta::VERSION_AT, 4) as u32,
            field(meta::META_SIZE_AT, 4) as usize,
        );
        let (data_offset, data_size) =
            (field(meta::DATA_OFFSET_AT, 8), field(meta::DATA_SIZE_AT, 8));
        // SAFETY: mapped above with this length.
        unsafe { libc::munmap(meta as *mut _, page) };
        if version != META_VERSION || meta_size != page || data_offset != page as u64 {
            return Err(io::Error::other(format!(
                "unknown meta page (version {version}, meta size {meta_size})"
            )));
        }
        if data_size == 0 || data_size % page as u64 != 0 || data_size > (1 << 40) {
            return Err(io::Error::other(format!("bad data size {data_size}")));
        }
        let len = page + 2 * data_size as usize;
        let base = map(fd, len, 0)?;
        Ok(Mapped {
            win: Window {
                base,
                meta_size: page,
                data_size,
            },
            len,
            fd,
        })
    }

    /// Bytes of the ring.
    pub fn data_size(&self) -> u64 {
        self.win.data_size
    }

    /// Reads the stream's opening (header, restated records) with `read()`,
    /// as the meta page asks, into `out`.
    pub fn read_opening(&self, dev: &mut File, out: &mut Vec<u8>) -> io::Result<()> {
        loop {
            let want = self.win.u64_at(meta::OPENING_AT) as usize;
            if want == 0 {
                return Ok(());
            }
            if want > 1 << 24 {
                return Err(io::Error::other(format!("opening of {want} bytes")));
            }
            let mut buf = vec![0u8; want];
            match dev.read(&mut buf) {
                Ok(n) if n == want => out.extend_from_slice(&buf),
                Ok(n) => {
                    return Err(io::Error::other(format!(
                        "opening: read {n} of {want} bytes"
                    )))
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Hands the waiting records to `sink` in place, then consumes them;
    /// the number of bytes (0: nothing waited).
    pub fn take(&self, sink: impl FnOnce(&[u8]) -> anyhow::Result<()>) -> anyhow::Result<usize> {
        let (tail, bytes) = self.win.view();
        if bytes.is_empty() {
            return Ok(0);
        }
        let n = bytes.len();
        sink(bytes)?;
        consume(self.fd, tail, tail + n as u64)?;
        Ok(n)
    }

    /// Appends the event buffer refused (back-pressure: the stream's LOST
    /// records count the samples this cost).
    pub fn full(&self) -> u64 {
        self.win.u64_at(meta::FULL_AT)
    }
}

impl Drop for Mapped {
    fn drop(&mut self) {
        // SAFETY: the window mapped in `new`, with its length.
        unsafe { libc::munmap(self.win.base as *mut _, self.len) };
    }
}

fn page_size() -> usize {
    // SAFETY: no preconditions.
    unsafe { libc::sysconf(libc::_SC_PAGESIZE) as usize }
}

fn map(fd: i32, len: usize, off: i64) -> io::Result<*const u8> {
    // SAFETY: a new shared read-only mapping; the kernel checks the rest.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            fd,
            off,
        )
    };
    if p == libc::MAP_FAILED {
        Err(io::Error::last_os_error())
    } else {
        Ok(p as *const u8)
    }
}

fn consume(fd: i32, tail: u64, new_tail: u64) -> io::Result<()> {
    let arg = [tail, new_tail];
    loop {
        // SAFETY: the command's argument is this 16-byte struct.
        let r = unsafe { libc::ioctl(fd, IOC_CONSUME as _, arg.as_ptr()) };
        if r == 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A window laid out in memory as the device maps it: a meta page, a
    /// 4096-byte ring twice.
    fn window(mem: &mut [u64], head: u64, tail: u64) -> Window {
        let words = mem.len();
        assert_eq!(words, (4096 + 2 * 4096) / 8);
        mem[meta::VERSION_AT / 8] = 1 | (4096 << 32);
        mem[meta::DATA_OFFSET_AT / 8] = 4096;
        mem[meta::DATA_SIZE_AT / 8] = 4096;
        mem[meta::HEAD_AT / 8] = head;
        mem[meta::TAIL_AT / 8] = tail;
        for i in 0..4096 / 8 {
            let v = i as u64;
            mem[512 + i] = v;
            mem[512 + 512 + i] = v;
        }
        Window {
            base: mem.as_ptr() as *const u8,
            meta_size: 4096,
            data_size: 4096,
        }
    }

    #[test]
    fn the_view_is_the_bytes_between_the_positions_across_the_wrap() {
        let mut mem = vec![0u64; (4096 + 2 * 4096) / 8];
        // 4096 * 3 + 4080: 16 bytes before the end, 32 bytes waiting.
        let tail = 3 * 4096 + 4080;
        let w = window(&mut mem, tail + 32, tail);
        let (t, v) = w.view();
        assert_eq!(t, tail);
        assert_eq!(v.len(), 32);
        let word = |i: usize| u64::from_ne_bytes(v[i * 8..i * 8 + 8].try_into().unwrap());
        // Ring words 510, 511, then 0, 1 (the second copy).
        assert_eq!([word(0), word(1), word(2), word(3)], [510, 511, 0, 1]);
        // Nothing waits.
        let w = window(&mut mem, 64, 64);
        assert!(w.view().1.is_empty());
        // A producer position behind the consumer one (garbage) or more
        // than the ring ahead: never past the window.
        let w = window(&mut mem, 8, 64);
        assert!(w.view().1.is_empty());
        let w = window(&mut mem, 1 << 20, 8);
        assert_eq!(w.view().1.len(), 4096);
    }

    #[test]
    fn a_regular_file_is_not_mapped() {
        let f = tempfile::tempfile().unwrap();
        let e = Mapped::new(&f).err().unwrap();
        assert!(e.to_string().contains("character device"), "{e}");
    }

    #[test]
    fn a_character_device_without_the_mapping_is_refused() {
        // /dev/null cannot be mapped shared read-only (ENODEV).
        let f = File::open("/dev/null").unwrap();
        assert!(Mapped::new(&f).is_err());
    }

    #[test]
    fn the_consume_command_number() {
        // _IOW('O', 5, 16 bytes), as the C macro computes it.
        assert_eq!(IOC_CONSUME, 0x4010_4f05);
    }
}
