// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The `/dev/oprofile/buffer` stream format, version 2: its one definition.
//!
//! `Documentation/stream-format.md` describes the format in prose; this file
//! is the format in code: record types, sizes and field offsets, the header
//! layout, flags and limits, encoders that write into a caller's buffer and
//! readers of every field. A format change is made here and nowhere else.
//!
//! It is both a module of the kernel crate (`mod format;` in
//! `src/oprofile.rs`: the sampler, the sync and the device write and read
//! records with it) and the root of the host crate `oprofile-format`
//! (`crates/format`), on which the decoder `oprofile-stream`
//! (`crates/stream`) is built, so that the decoder's tests and fuzzing run the
//! module's own encoders. It only uses `core`: no allocation, no panicking
//! code path (every read is bounds-checked and says `None` rather than
//! indexing out of range).
//!
//! # Byte order
//!
//! Every integer of the header and of the records is in the byte order of the
//! machine that wrote the stream, which the header announces (byte 13, see
//! [`Endian::code`]). The module writes [`Endian::native`]; readers take the
//! order as a parameter ([`Header::read`] finds it). It is also the order in
//! which the per-CPU ring buffers hand back the words a writer stored as
//! words (a callchain): a payload word holds its bytes in memory order (see
//! `src/ringbuf/writer.rs`, `Slot::write_bytes`), so the whole stream has
//! this one order.
//!
//! # Layout summary
//!
//! * Header ([`Header`], [`HEADER_LEN`] bytes, at least [`MIN_HEADER_LEN`]).
//! * Records, 8-byte aligned, each starting with a [`Prefix`] (type, size,
//!   cpu, two type-specific bytes): [`SampleHead`] + kernel and user
//!   callchains, [`Comm`], [`Lost`], [`Tracing`], [`Config`], [`Snapshot`],
//!   [`Switch`].
//!   [`parse`] checks and reads one record.
//!
//! # Versions
//!
//! Version 2 (this one) added the extended SAMPLE ([`SAMPLE_FLAG_EXT`]: the
//! sample's period and event, and a user-space callchain), the [`Config`]
//! record (the event list and settings in force) and the [`Snapshot`] record
//! (flight-recorder snapshots). Readers of this definition read version 1
//! streams too ([`MIN_VERSION`]): their SAMPLEs lack the flag.

#![cfg_attr(format_host, no_std)]
#![deny(
    missing_docs,
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::unreachable,
    clippy::todo,
    clippy::unimplemented
)]

// ---------------------------------------------------------------------------
// Byte order and field access
// ---------------------------------------------------------------------------

/// Byte order of a stream's integers, announced by its header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endian {
    /// Least significant byte first (header code `1`).
    Little,
    /// Most significant byte first (header code `2`).
    Big,
}

impl Endian {
    /// The order of the machine compiling this: the order the module writes.
    pub const fn native() -> Endian {
        if cfg!(target_endian = "big") {
            Endian::Big
        } else {
            Endian::Little
        }
    }

    /// The header's code for this order (byte 13).
    pub const fn code(self) -> u8 {
        match self {
            Endian::Little => 1,
            Endian::Big => 2,
        }
    }

    /// The order a header code announces, if it is one.
    pub const fn from_code(code: u8) -> Option<Endian> {
        match code {
            1 => Some(Endian::Little),
            2 => Some(Endian::Big),
            _ => None,
        }
    }

    /// The `u16` at `at` in `buf`, if `buf` holds it.
    #[inline]
    pub fn read_u16(self, buf: &[u8], at: usize) -> Option<u16> {
        let b = array(buf, at)?;
        Some(match self {
            Endian::Little => u16::from_le_bytes(b),
            Endian::Big => u16::from_be_bytes(b),
        })
    }

    /// The `u32` at `at` in `buf`, if `buf` holds it.
    #[inline]
    pub fn read_u32(self, buf: &[u8], at: usize) -> Option<u32> {
        let b = array(buf, at)?;
        Some(match self {
            Endian::Little => u32::from_le_bytes(b),
            Endian::Big => u32::from_be_bytes(b),
        })
    }

    /// The `u64` at `at` in `buf`, if `buf` holds it.
    #[inline]
    pub fn read_u64(self, buf: &[u8], at: usize) -> Option<u64> {
        let b = array(buf, at)?;
        Some(match self {
            Endian::Little => u64::from_le_bytes(b),
            Endian::Big => u64::from_be_bytes(b),
        })
    }

    /// `v` in this order.
    pub const fn u16_bytes(self, v: u16) -> [u8; 2] {
        match self {
            Endian::Little => v.to_le_bytes(),
            Endian::Big => v.to_be_bytes(),
        }
    }

    /// `v` in this order.
    pub const fn u32_bytes(self, v: u32) -> [u8; 4] {
        match self {
            Endian::Little => v.to_le_bytes(),
            Endian::Big => v.to_be_bytes(),
        }
    }

    /// `v` in this order.
    pub const fn u64_bytes(self, v: u64) -> [u8; 8] {
        match self {
            Endian::Little => v.to_le_bytes(),
            Endian::Big => v.to_be_bytes(),
        }
    }
}

/// The `N` bytes at `at` in `buf`, if `buf` holds them.
fn array<const N: usize>(buf: &[u8], at: usize) -> Option<[u8; N]> {
    buf.get(at..at.checked_add(N)?)?.first_chunk::<N>().copied()
}

/// The byte at `at` in `buf` (`0` past its end).
fn byte(buf: &[u8], at: usize) -> u8 {
    buf.get(at).copied().unwrap_or(0)
}

/// Copies `bytes` to `at` in `buf`; nothing if they would not fit (every
/// caller writes fields at constant offsets of a buffer of constant size).
fn put(buf: &mut [u8], at: usize, bytes: &[u8]) {
    let end = at.saturating_add(bytes.len());
    if let Some(dst) = buf.get_mut(at..end) {
        dst.copy_from_slice(bytes);
    }
}

// ---------------------------------------------------------------------------
// Stream header
// ---------------------------------------------------------------------------

/// The first 8 bytes of every stream.
pub const MAGIC: [u8; 8] = *b"OPRFRS\0\n";
/// The format version the module writes. Raised when a record changes its
/// layout (2: the extended SAMPLE), so that older readers refuse a stream
/// they would misread; new record types alone do not raise it (readers skip
/// types they do not know).
pub const VERSION: u16 = 2;
/// The oldest version readers of this definition accept.
pub const MIN_VERSION: u16 = 1;
/// Bytes of the header the module writes: 48 bytes of fields, then the event
/// name up to byte 96.
pub const HEADER_LEN: usize = 96;
/// The smallest valid header: the first modules wrote 64 bytes (a 16-byte
/// event name field).
pub const MIN_HEADER_LEN: usize = 64;
/// Where the event name field starts; it runs to `min(header_size, HEADER_LEN)`.
pub const EVENT_NAME_AT: usize = 48;
/// Bytes of the event name field of a [`HEADER_LEN`] header; names are at
/// most one byte shorter (always NUL-terminated).
pub const EVENT_NAME_LEN: usize = HEADER_LEN - EVENT_NAME_AT;
/// Bytes in a kernel pointer (the only word size of version 1).
pub const WORD_SIZE: u8 = 8;
/// Header `clock`: `local_clock()` nanoseconds since boot.
pub const CLOCK_LOCAL: u8 = 1;
/// Header `sample_source`: a hardware PMU event (NMI context).
pub const SOURCE_HARDWARE: u8 = 1;
/// Header `sample_source`: the software cpu-clock event (hard-IRQ context).
pub const SOURCE_SOFTWARE: u8 = 2;

/// Header field offsets.
mod hdr {
    pub(super) const VERSION: usize = 8;
    pub(super) const HEADER_SIZE: usize = 10;
    pub(super) const WORD_SIZE: usize = 12;
    pub(super) const ENDIAN: usize = 13;
    pub(super) const CLOCK: usize = 14;
    pub(super) const SOURCE: usize = 15;
    pub(super) const NR_CPUS: usize = 16;
    pub(super) const DEPTH: usize = 20;
    pub(super) const PERIOD: usize = 24;
    pub(super) const FREQ: usize = 32;
    pub(super) const START: usize = 40;
}

/// The stream header's fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// [`VERSION`] (or an older one, down to [`MIN_VERSION`], when read).
    pub version: u16,
    /// Bytes of the header (at least [`MIN_HEADER_LEN`]); records start there.
    pub header_size: u16,
    /// [`WORD_SIZE`].
    pub word_size: u8,
    /// Byte order of every integer of the stream.
    pub endian: Endian,
    /// [`CLOCK_LOCAL`].
    pub clock: u8,
    /// [`SOURCE_HARDWARE`] or [`SOURCE_SOFTWARE`].
    pub sample_source: u8,
    /// Possible CPUs (CPU numbers in records are below it).
    pub nr_cpus: u32,
    /// Deepest kernel callchain recorded (0 = none) when the stream started
    /// (version 2: the [`Config`] records say what is in force).
    pub backtrace_depth: u32,
    /// The first event's period (events, or ns for cpu-clock); 0 in
    /// frequency mode.
    pub sample_period: u64,
    /// The first event's samples per second per CPU in frequency mode; 0 in
    /// period mode.
    pub sample_freq: u64,
    /// Clock value when the stream was opened.
    pub start_time: u64,
    /// NUL-padded name of the first event (see [`event_name_field`]; the
    /// [`Config`] records list every event).
    pub event_name: [u8; EVENT_NAME_LEN],
}

/// Why a header cannot be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeaderError {
    /// The data does not start with [`MAGIC`].
    BadMagic,
    /// The data ends inside the header (`len` bytes).
    Truncated {
        /// Bytes of data.
        len: usize,
    },
    /// Byte 13 is no byte-order code.
    BadEndianness(u8),
    /// A version outside [`MIN_VERSION`]..=[`VERSION`].
    UnsupportedVersion(u16),
    /// A `header_size` below [`MIN_HEADER_LEN`].
    BadHeaderSize(u16),
    /// A word size other than [`WORD_SIZE`].
    UnsupportedWordSize(u8),
}

impl HeaderError {
    /// Offset of the offending field (0 for the magic and truncation).
    pub const fn offset(&self) -> usize {
        match self {
            HeaderError::BadMagic | HeaderError::Truncated { .. } => 0,
            HeaderError::BadEndianness(_) => hdr::ENDIAN,
            HeaderError::UnsupportedVersion(_) => hdr::VERSION,
            HeaderError::BadHeaderSize(_) => hdr::HEADER_SIZE,
            HeaderError::UnsupportedWordSize(_) => hdr::WORD_SIZE,
        }
    }
}

/// The event name field for `name`: its first `EVENT_NAME_LEN - 1` bytes,
/// NUL-padded (the one truncation rule of writers).
pub fn event_name_field(name: &[u8]) -> [u8; EVENT_NAME_LEN] {
    let mut field = [0u8; EVENT_NAME_LEN];
    let n = name.len().min(EVENT_NAME_LEN - 1);
    put(&mut field, 0, name.get(..n).unwrap_or(&[]));
    field
}

impl Default for Header {
    /// A version-1 header of this machine's order for a software `cpu-clock`
    /// stream of one CPU at a 1 ms period: what encoders of fixtures and
    /// tests start from (the module fills in every field).
    fn default() -> Self {
        Header {
            version: VERSION,
            // HEADER_LEN (96) fits a u16.
            header_size: HEADER_LEN as u16,
            word_size: WORD_SIZE,
            endian: Endian::native(),
            clock: CLOCK_LOCAL,
            sample_source: SOURCE_SOFTWARE,
            nr_cpus: 1,
            backtrace_depth: 0,
            sample_period: 1_000_000,
            sample_freq: 0,
            start_time: 0,
            event_name: event_name_field(b"cpu-clock"),
        }
    }
}

impl Header {
    /// The bytes [`Header::encode`] writes: `header_size`, at least
    /// [`MIN_HEADER_LEN`].
    pub fn encoded_len(&self) -> usize {
        usize::from(self.header_size).max(MIN_HEADER_LEN)
    }

    /// Writes the header into the first [`Header::encoded_len`] bytes of
    /// `out` (in `self.endian`), with that length as `header_size`; bytes
    /// past the event name field are zero, and a 64-byte header keeps the
    /// name's first 16 bytes. Returns the length, or `None` (nothing written)
    /// if `out` is shorter.
    pub fn encode(&self, out: &mut [u8]) -> Option<usize> {
        let len = self.encoded_len();
        let out = out.get_mut(..len)?;
        out.fill(0);
        let e = self.endian;
        // `len` came from a u16 (or is MIN_HEADER_LEN).
        let size = u16::try_from(len).unwrap_or(u16::MAX);
        put(out, 0, &MAGIC);
        put(out, hdr::VERSION, &e.u16_bytes(self.version));
        put(out, hdr::HEADER_SIZE, &e.u16_bytes(size));
        put(out, hdr::WORD_SIZE, &[self.word_size]);
        put(out, hdr::ENDIAN, &[e.code()]);
        put(out, hdr::CLOCK, &[self.clock]);
        put(out, hdr::SOURCE, &[self.sample_source]);
        put(out, hdr::NR_CPUS, &e.u32_bytes(self.nr_cpus));
        put(out, hdr::DEPTH, &e.u32_bytes(self.backtrace_depth));
        put(out, hdr::PERIOD, &e.u64_bytes(self.sample_period));
        put(out, hdr::FREQ, &e.u64_bytes(self.sample_freq));
        put(out, hdr::START, &e.u64_bytes(self.start_time));
        let name_len = len.min(HEADER_LEN) - EVENT_NAME_AT;
        put(
            out,
            EVENT_NAME_AT,
            self.event_name.get(..name_len).unwrap_or(&[]),
        );
        Some(len)
    }

    /// Reads and checks the header at the start of `data` (which must hold
    /// all `header_size` bytes). A header longer than [`HEADER_LEN`] is
    /// accepted: its extra bytes are for later versions.
    pub fn read(data: &[u8]) -> Result<Header, HeaderError> {
        let truncated = HeaderError::Truncated { len: data.len() };
        match data.first_chunk::<8>() {
            Some(m) if *m == MAGIC => {}
            Some(_) => return Err(HeaderError::BadMagic),
            None if MAGIC.starts_with(data) => return Err(truncated),
            None => return Err(HeaderError::BadMagic),
        }
        if data.len() <= hdr::ENDIAN {
            return Err(truncated);
        }
        let code = byte(data, hdr::ENDIAN);
        let endian = Endian::from_code(code).ok_or(HeaderError::BadEndianness(code))?;
        let version = endian.read_u16(data, hdr::VERSION).ok_or(truncated)?;
        if !(MIN_VERSION..=VERSION).contains(&version) {
            return Err(HeaderError::UnsupportedVersion(version));
        }
        let header_size = endian.read_u16(data, hdr::HEADER_SIZE).ok_or(truncated)?;
        if usize::from(header_size) < MIN_HEADER_LEN {
            return Err(HeaderError::BadHeaderSize(header_size));
        }
        if data.len() < usize::from(header_size) {
            return Err(truncated);
        }
        let word_size = byte(data, hdr::WORD_SIZE);
        if word_size != WORD_SIZE {
            return Err(HeaderError::UnsupportedWordSize(word_size));
        }
        let name_end = usize::from(header_size).min(HEADER_LEN);
        let mut event_name = [0u8; EVENT_NAME_LEN];
        put(
            &mut event_name,
            0,
            data.get(EVENT_NAME_AT..name_end).unwrap_or(&[]),
        );
        let u32_at = |at| endian.read_u32(data, at).unwrap_or(0);
        let u64_at = |at| endian.read_u64(data, at).unwrap_or(0);
        Ok(Header {
            version,
            header_size,
            word_size,
            endian,
            clock: byte(data, hdr::CLOCK),
            sample_source: byte(data, hdr::SOURCE),
            nr_cpus: u32_at(hdr::NR_CPUS),
            backtrace_depth: u32_at(hdr::DEPTH),
            sample_period: u64_at(hdr::PERIOD),
            sample_freq: u64_at(hdr::FREQ),
            start_time: u64_at(hdr::START),
            event_name,
        })
    }

    /// The event name up to its first NUL.
    pub fn event_name_bytes(&self) -> &[u8] {
        let end = self
            .event_name
            .iter()
            .position(|&c| c == 0)
            .unwrap_or(EVENT_NAME_LEN);
        self.event_name.get(..end).unwrap_or(&[])
    }
}

// ---------------------------------------------------------------------------
// Records
// ---------------------------------------------------------------------------

/// Record type: a sample ([`SampleHead`] and its callchain).
pub const SAMPLE: u16 = 1;
/// Record type: a task's name ([`Comm`]).
pub const COMM: u16 = 2;
/// Record type: samples a CPU could not record ([`Lost`]).
pub const LOST: u16 = 3;
/// Record type: `tracing_on` changed ([`Tracing`]).
pub const TRACING: u16 = 4;
/// Record type: the configuration in force from here on ([`Config`]).
pub const CONFIG: u16 = 5;
/// Record type: a flight-recorder snapshot's frame ([`Snapshot`]).
pub const SNAPSHOT: u16 = 6;
/// Record type: a task left its CPU ([`Switch`]), written before the
/// SAMPLE of the `context-switches` event that took its stacks.
pub const SWITCH: u16 = 7;

/// Records are aligned to, and their sizes are multiples of, 8 bytes.
pub const RECORD_ALIGN: usize = 8;
/// Bytes of the [`Prefix`] that starts every record (the smallest record).
pub const PREFIX_LEN: usize = 8;
/// Bytes of a version-1 SAMPLE without callchain (each entry adds 8).
pub const SAMPLE_LEN: usize = 32;
/// Bytes of an extended ([`SAMPLE_FLAG_EXT`]) SAMPLE's fixed part, without
/// callchains (each entry adds 8).
pub const SAMPLE_EXT_LEN: usize = 48;
/// Bytes of a COMM record.
pub const COMM_LEN: usize = 40;
/// Bytes of a LOST record.
pub const LOST_LEN: usize = 24;
/// Bytes of a TRACING record.
pub const TRACING_LEN: usize = 16;
/// Bytes of a task name in a COMM record (NUL-padded, `TASK_COMM_LEN`).
pub const COMM_NAME_LEN: usize = 16;
/// SAMPLE flags (byte 6) bit: the sample was taken in kernel mode.
pub const SAMPLE_FLAG_KERNEL: u8 = 1;
/// SAMPLE flags (byte 6) bit: the extended form (version 2): a
/// [`SAMPLE_EXT_LEN`]-byte fixed part with period, event and user chain depth.
pub const SAMPLE_FLAG_EXT: u8 = 2;
/// SAMPLE flags (byte 6) bit: perf throttled the sampled event's counter
/// on this CPU right after this overflow (more overflows in one tick than
/// `kernel.perf_event_max_sample_rate` allows): no further sample of that
/// event comes from this CPU until perf's next tick unthrottles it. Readers
/// that do not know a flag bit ignore it.
pub const SAMPLE_FLAG_THROTTLED: u8 = 4;
/// SAMPLE flags (byte 6) bit, extended form only: a copy of the sampled
/// task's user stack follows the callchains ([`UserStack`]: the user
/// registers, the bytes copied, then [`SampleHead::user_stack`] bytes of
/// stack from the stack pointer up), for unwinding with the binaries'
/// `.eh_frame` (perf's `--call-graph dwarf`). Readers that do not know it
/// skip the part as appended fields.
pub const SAMPLE_FLAG_USER_STACK: u8 = 8;
/// Bytes of a user stack part's fixed fields: `ip`, `sp`, `bp` and the
/// count of bytes copied, 8 each.
pub const USER_STACK_REGS_LEN: usize = 32;
/// The largest user stack copy (the `user_stack_size` parameter's maximum,
/// perf's default dump size for `--call-graph dwarf`).
pub const MAX_USER_STACK: usize = 8192;
/// The deepest kernel callchain the module records (the `backtrace_depth`
/// parameter's maximum; the depth byte could say 255).
pub const MAX_DEPTH: usize = 64;
/// The deepest user callchain the module records (the
/// `user_backtrace_depth` parameter's maximum).
pub const MAX_USER_DEPTH: usize = 64;
/// The most events a [`Config`] lists (the module samples at most this many).
pub const MAX_EVENTS: usize = 8;
/// The largest record the module writes: a SAMPLE with the deepest
/// callchains (larger than a [`Config`] of [`MAX_EVENTS`]).
/// Records with a user stack copy are larger: see [`max_record`].
pub const MAX_RECORD: usize = sample_ext_len(MAX_DEPTH as u8, MAX_USER_DEPTH as u8);
/// The largest record the module writes when it copies `user_stack` bytes
/// of user stack per sample (0: none, [`MAX_RECORD`]).
pub const fn max_record(user_stack: usize) -> usize {
    if user_stack == 0 {
        MAX_RECORD
    } else {
        MAX_RECORD + USER_STACK_REGS_LEN + user_stack
    }
}
/// The largest record of any configuration.
pub const MAX_STACK_RECORD: usize = max_record(MAX_USER_STACK);
/// The SAMPLE fixed part's offset of the user stack copy's size (`u16`).
const USER_STACK_AT: usize = 44;

/// Field offsets shared by several record types.
const TIME_AT: usize = 8;

/// Bytes of a version-1 SAMPLE with `depth` callchain entries.
pub const fn sample_len(depth: u8) -> usize {
    SAMPLE_LEN + 8 * depth as usize
}

/// Bytes of an extended SAMPLE with `kernel` and `user` callchain entries.
pub const fn sample_ext_len(kernel: u8, user: u8) -> usize {
    SAMPLE_EXT_LEN + 8 * (kernel as usize + user as usize)
}

/// The name of a record type, `"unknown"` for a type this version does not
/// define. (For the host decoder's messages: not in the module.)
#[cfg(format_host)]
pub const fn type_name(kind: u16) -> &'static str {
    match kind {
        SAMPLE => "SAMPLE",
        COMM => "COMM",
        LOST => "LOST",
        TRACING => "TRACING",
        CONFIG => "CONFIG",
        SNAPSHOT => "SNAPSHOT",
        SWITCH => "SWITCH",
        _ => "unknown",
    }
}

/// The 8 bytes that start every record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prefix {
    /// Record type ([`SAMPLE`], ...).
    pub kind: u16,
    /// Bytes of the whole record, prefix included.
    pub size: u16,
    /// The CPU the record comes from.
    pub cpu: u16,
    /// Type-specific byte 6 (SAMPLE flags, TRACING state, CONFIG events,
    /// SNAPSHOT phase; else 0).
    pub b6: u8,
    /// Type-specific byte 7 (SAMPLE kernel depth, CONFIG mode; else 0).
    pub b7: u8,
}

impl Prefix {
    /// Reads the prefix at the start of `rec`, if it holds one (no check of
    /// the fields: see [`parse`]).
    #[inline]
    pub fn read(e: Endian, rec: &[u8]) -> Option<Prefix> {
        Some(Prefix {
            kind: e.read_u16(rec, 0)?,
            size: e.read_u16(rec, 2)?,
            cpu: e.read_u16(rec, 4)?,
            b6: *rec.get(6)?,
            b7: *rec.get(7)?,
        })
    }

    /// Writes the prefix into `out`'s first 8 bytes (nothing if shorter).
    pub fn write(&self, e: Endian, out: &mut [u8]) {
        if let Some(out) = out.first_chunk_mut::<PREFIX_LEN>() {
            put(out, 0, &e.u16_bytes(self.kind));
            put(out, 2, &e.u16_bytes(self.size));
            put(out, 4, &e.u16_bytes(self.cpu));
            put(out, 6, &[self.b6, self.b7]);
        }
    }
}

/// The size of the record at the start of `rec` (its `size` field), if `rec`
/// holds a prefix.
pub fn record_len(e: Endian, rec: &[u8]) -> Option<usize> {
    e.read_u16(rec, 2).map(usize::from)
}

/// The fixed part of a SAMPLE record; the kernel callchain (`depth` entries,
/// `u64`, innermost caller first, the `pc` not repeated) and then the user
/// callchain (`user_depth` entries) follow it.
///
/// The user chain of a user-mode sample holds the callers of `pc`; that of a
/// kernel-mode sample of a user task starts with the user-space address
/// where the task entered the kernel, then its callers (as perf records it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SampleHead {
    /// The sampled CPU.
    pub cpu: u16,
    /// Taken in kernel mode ([`SAMPLE_FLAG_KERNEL`]).
    pub kernel: bool,
    /// Kernel callchain entries following the fixed part.
    pub depth: u8,
    /// Clock of the header.
    pub time: u64,
    /// The sampled instruction address.
    pub pc: u64,
    /// Thread id (`task->pid`).
    pub pid: u32,
    /// Process id.
    pub tgid: u32,
    /// The count of events this sample stands for (perf's period at this
    /// overflow; in frequency mode it changes from sample to sample); 0:
    /// not known (version 1: the header's `sample_period`).
    pub period: u64,
    /// The sampled event: an index into the event list of the latest
    /// [`Config`] record before it (0 in version 1).
    pub event: u16,
    /// User callchain entries following the kernel callchain (0 in
    /// version 1).
    pub user_depth: u8,
    /// The extended form ([`SAMPLE_FLAG_EXT`]): what [`SampleHead::encode`]
    /// writes when set, and what [`SampleHead::read`] found. Version-1
    /// records have no period, event and user chain.
    pub ext: bool,
    /// perf throttled the event's counter after this overflow
    /// ([`SAMPLE_FLAG_THROTTLED`]).
    pub throttled: bool,
    /// Bytes of the user stack copy after the callchains (a multiple of 8,
    /// at most [`MAX_USER_STACK`]); with it, a [`USER_STACK_REGS_LEN`]-byte
    /// [`UserStack`] part precedes them ([`SAMPLE_FLAG_USER_STACK`]; 0:
    /// no such part). Extended form only.
    pub user_stack: u16,
}

impl SampleHead {
    /// Bytes of the fixed part: [`SAMPLE_EXT_LEN`], or [`SAMPLE_LEN`] in the
    /// version-1 form.
    pub const fn fixed_len(&self) -> usize {
        if self.ext {
            SAMPLE_EXT_LEN
        } else {
            SAMPLE_LEN
        }
    }

    /// Bytes of the whole record, callchains and user stack part included.
    pub const fn size(&self) -> usize {
        if self.ext {
            sample_ext_len(self.depth, self.user_depth) + user_stack_part_len(self.user_stack)
        } else {
            sample_len(self.depth)
        }
    }

    /// Writes the fixed part (whose size field counts the callchains) into
    /// the first [`SampleHead::fixed_len`] bytes of `out` (nothing if
    /// shorter). The version-1 form (`ext` clear) writes neither period,
    /// event nor user depth.
    pub fn encode(&self, e: Endian, out: &mut [u8]) {
        let Some(out) = out.get_mut(..self.fixed_len()) else {
            return;
        };
        out.fill(0);
        Prefix {
            kind: SAMPLE,
            size: self.size_field(),
            cpu: self.cpu,
            b6: self.flags(),
            b7: self.depth,
        }
        .write(e, out);
        put(out, TIME_AT, &e.u64_bytes(self.time));
        put(out, 16, &e.u64_bytes(self.pc));
        put(out, 24, &e.u32_bytes(self.pid));
        put(out, 28, &e.u32_bytes(self.tgid));
        if self.ext {
            put(out, 32, &e.u64_bytes(self.period));
            put(out, 40, &e.u16_bytes(self.event));
            put(out, 42, &[self.user_depth]);
            put(out, USER_STACK_AT, &e.u16_bytes(self.user_stack));
        }
    }

    /// The flags byte (byte 6) of its record.
    const fn flags(&self) -> u8 {
        let mut flags = if self.kernel { SAMPLE_FLAG_KERNEL } else { 0 };
        if self.ext {
            flags |= SAMPLE_FLAG_EXT;
        }
        if self.throttled {
            flags |= SAMPLE_FLAG_THROTTLED;
        }
        if self.ext && self.user_stack != 0 {
            flags |= SAMPLE_FLAG_USER_STACK;
        }
        flags
    }

    /// The size field of its record ([`SampleHead::size`], `u16::MAX` if
    /// it does not fit).
    fn size_field(&self) -> u16 {
        u16::try_from(self.size()).unwrap_or(u16::MAX)
    }

    /// The extended fixed part's bytes (`ext` is taken as set).
    pub fn encoded(&self, e: Endian) -> [u8; SAMPLE_EXT_LEN] {
        let mut b = [0u8; SAMPLE_EXT_LEN];
        SampleHead { ext: true, ..*self }.encode(e, &mut b);
        b
    }

    /// [`SampleHead::encoded`] in the machine's byte order, as the six
    /// words its bytes make (each 8 read with `u64::from_ne_bytes`): what
    /// the module writes into its ring, word by word.
    pub fn native_words(&self) -> [u64; SAMPLE_EXT_LEN / 8] {
        let ext = SampleHead { ext: true, ..*self };
        let flags = ext.flags();
        let [k0, k1] = SAMPLE.to_ne_bytes();
        let [s0, s1] = ext.size_field().to_ne_bytes();
        let [c0, c1] = self.cpu.to_ne_bytes();
        let [p0, p1, p2, p3] = self.pid.to_ne_bytes();
        let [t0, t1, t2, t3] = self.tgid.to_ne_bytes();
        let [e0, e1] = self.event.to_ne_bytes();
        let [u0, u1] = self.user_stack.to_ne_bytes();
        [
            u64::from_ne_bytes([k0, k1, s0, s1, c0, c1, flags, self.depth]),
            self.time,
            self.pc,
            u64::from_ne_bytes([p0, p1, p2, p3, t0, t1, t2, t3]),
            self.period,
            u64::from_ne_bytes([e0, e1, self.user_depth, 0, u0, u1, 0, 0]),
        ]
    }

    /// Reads the fixed part of the SAMPLE record `rec` (no check of its
    /// type or size: see [`parse`]), if `rec` holds it.
    pub fn read(e: Endian, rec: &[u8]) -> Option<SampleHead> {
        let p = Prefix::read(e, rec)?;
        let ext = p.b6 & SAMPLE_FLAG_EXT != 0;
        let (period, event, user_depth) = if ext {
            (e.read_u64(rec, 32)?, e.read_u16(rec, 40)?, *rec.get(42)?)
        } else {
            (0, 0, 0)
        };
        let user_stack = if ext && p.b6 & SAMPLE_FLAG_USER_STACK != 0 {
            e.read_u16(rec, USER_STACK_AT)?
        } else {
            0
        };
        Some(SampleHead {
            cpu: p.cpu,
            kernel: p.b6 & SAMPLE_FLAG_KERNEL != 0,
            depth: p.b7,
            time: e.read_u64(rec, TIME_AT)?,
            pc: e.read_u64(rec, 16)?,
            pid: e.read_u32(rec, 24)?,
            tgid: e.read_u32(rec, 28)?,
            period,
            event,
            user_depth,
            ext,
            throttled: p.b6 & SAMPLE_FLAG_THROTTLED != 0,
            user_stack,
        })
    }
}

/// Bytes of a user stack part with `user_stack` bytes of stack (0 without).
pub const fn user_stack_part_len(user_stack: u16) -> usize {
    if user_stack == 0 {
        0
    } else {
        USER_STACK_REGS_LEN + user_stack as usize
    }
}

/// The fixed fields of a user stack part, as the words they are written as
/// ([`USER_STACK_REGS_LEN`] bytes, in the stream's byte order): the user
/// `ip`, `sp`, `bp`, then the bytes of stack copied; the copy's area
/// follows them. (The module writes them straight into its ring buffer,
/// the host encoder through [`Endian::u64_bytes`].)
pub const fn user_stack_words(ip: u64, sp: u64, bp: u64, copied: u64) -> [u64; 4] {
    [ip, sp, bp, copied]
}

/// A SAMPLE's user stack part ([`SAMPLE_FLAG_USER_STACK`]), after its
/// callchains (read by the host tools: the module writes it word by word,
/// see `sampler.rs`): the sampled task's user registers (for a kernel-mode sample,
/// those it entered the kernel with) and a copy of its stack from `sp` up.
#[cfg(format_host)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UserStack<'a> {
    /// The user instruction pointer.
    pub ip: u64,
    /// The user stack pointer: the address of `data[0]`.
    pub sp: u64,
    /// The user frame pointer (`rbp`).
    pub bp: u64,
    /// The bytes copied from `sp` up (at most the part's size: the copy
    /// stops at the first page it could not read; the rest is zeros).
    pub data: &'a [u8],
}

/// The user stack part of the SAMPLE record `rec`, if it has one (and holds
/// it whole).
#[cfg(format_host)]
pub fn user_stack(e: Endian, rec: &[u8]) -> Option<UserStack<'_>> {
    let head = SampleHead::read(e, rec)?;
    if head.user_stack == 0 {
        return None;
    }
    let at = sample_ext_len(head.depth, head.user_depth);
    let ip = e.read_u64(rec, at)?;
    let sp = e.read_u64(rec, at + 8)?;
    let bp = e.read_u64(rec, at + 16)?;
    let copied = e.read_u64(rec, at + 24)?;
    let n = usize::try_from(copied.min(u64::from(head.user_stack))).ok()?;
    let start = at + USER_STACK_REGS_LEN;
    let data = rec.get(start..start.checked_add(n)?)?;
    // The whole part must be there, not only the bytes copied.
    rec.get(start..start + usize::from(head.user_stack))?;
    Some(UserStack { ip, sp, bp, data })
}

/// Writes `kernel` and then `user` as the callchains of a SAMPLE record
/// whose fixed part (of `fixed_len` bytes: [`SAMPLE_EXT_LEN`] or, version
/// 1, [`SAMPLE_LEN`]) starts `out`. Returns the record's length, or `None`
/// (nothing written) if `out` cannot hold it. (For the host encoder: the
/// module's sampler stores the callchains as words straight into its ring
/// buffer, see `sampler.rs`.)
#[cfg(format_host)]
pub fn encode_callchains(
    e: Endian,
    fixed_len: usize,
    kernel: &[u64],
    user: &[u64],
    out: &mut [u8],
) -> Option<usize> {
    let n = kernel.len().checked_add(user.len())?;
    let end = fixed_len.checked_add(n.checked_mul(8)?)?;
    let dst = out.get_mut(fixed_len..end)?;
    for (d, v) in dst.chunks_exact_mut(8).zip(kernel.iter().chain(user)) {
        d.copy_from_slice(&e.u64_bytes(*v));
    }
    Some(end)
}

/// Writes `chain` as the callchain of a version-1 SAMPLE record whose fixed
/// part starts `out` (see [`encode_callchains`]).
#[cfg(format_host)]
pub fn encode_callchain(e: Endian, chain: &[u64], out: &mut [u8]) -> Option<usize> {
    encode_callchains(e, SAMPLE_LEN, chain, &[], out)
}

/// The entries of one callchain of a SAMPLE record, innermost caller first.
#[derive(Debug, Clone)]
pub struct Callchain<'a> {
    /// The entries not read yet (whole words).
    words: &'a [u8],
    endian: Endian,
}

impl Iterator for Callchain<'_> {
    type Item = u64;

    fn next(&mut self) -> Option<u64> {
        let (w, rest) = self.words.split_first_chunk::<8>()?;
        self.words = rest;
        self.endian.read_u64(w, 0)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.words.len() / 8;
        (n, Some(n))
    }
}

impl ExactSizeIterator for Callchain<'_> {}

/// The byte range of a SAMPLE record's kernel chain and of its user chain
/// (each as far as `rec` holds it, whole words).
fn chain_ranges(rec: &[u8]) -> ((usize, usize), (usize, usize)) {
    let flags = byte(rec, 6);
    let kernel = usize::from(byte(rec, 7));
    let (fixed, user) = if flags & SAMPLE_FLAG_EXT != 0 {
        (SAMPLE_EXT_LEN, usize::from(byte(rec, 42)))
    } else {
        (SAMPLE_LEN, 0)
    };
    let whole = rec.len() / 8 * 8;
    let k_end = (fixed + 8 * kernel).min(whole);
    let u_end = (k_end + 8 * user).min(whole);
    ((fixed.min(k_end), k_end), (k_end, u_end))
}

/// The kernel callchain of the SAMPLE record `rec`: as many of the entries
/// its fixed part announces as `rec` holds.
pub fn callchain(e: Endian, rec: &[u8]) -> Callchain<'_> {
    let ((start, end), _) = chain_ranges(rec);
    Callchain {
        words: rec.get(start..end).unwrap_or(&[]),
        endian: e,
    }
}

/// The user callchain of the SAMPLE record `rec` (empty in version 1): as
/// many of the entries its fixed part announces as `rec` holds.
pub fn user_callchain(e: Endian, rec: &[u8]) -> Callchain<'_> {
    let (_, (start, end)) = chain_ranges(rec);
    Callchain {
        words: rec.get(start..end).unwrap_or(&[]),
        endian: e,
    }
}

/// A COMM record: a task's name, written before the first sample of a task
/// on a CPU that last saw another task or name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Comm {
    /// The CPU.
    pub cpu: u16,
    /// Clock of the header.
    pub time: u64,
    /// Thread id.
    pub pid: u32,
    /// Process id.
    pub tgid: u32,
    /// The task's name, NUL-padded.
    pub comm: [u8; COMM_NAME_LEN],
}

impl Comm {
    /// Writes the record.
    pub fn encode(&self, e: Endian, out: &mut [u8; COMM_LEN]) {
        fixed_prefix(COMM, COMM_LEN, self.cpu, 0).write(e, out);
        put(out, TIME_AT, &e.u64_bytes(self.time));
        put(out, 16, &e.u32_bytes(self.pid));
        put(out, 20, &e.u32_bytes(self.tgid));
        put(out, 24, &self.comm);
    }

    /// The record's bytes.
    pub fn encoded(&self, e: Endian) -> [u8; COMM_LEN] {
        let mut b = [0u8; COMM_LEN];
        self.encode(e, &mut b);
        b
    }

    /// Reads the COMM record `rec` (no check of its type or size: see
    /// [`parse`]), if `rec` holds it.
    pub fn read(e: Endian, rec: &[u8]) -> Option<Comm> {
        Some(Comm {
            cpu: Prefix::read(e, rec)?.cpu,
            time: e.read_u64(rec, TIME_AT)?,
            pid: e.read_u32(rec, 16)?,
            tgid: e.read_u32(rec, 20)?,
            comm: array(rec, 24)?,
        })
    }
}

/// A LOST record: `count` samples of `cpu` its ring buffer could not take,
/// the latest taken at `time`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lost {
    /// The CPU.
    pub cpu: u16,
    /// The time of the latest sample lost (of the drop, for samples
    /// dropped at `tracing_on=0`).
    pub time: u64,
    /// Samples lost.
    pub count: u64,
}

impl Lost {
    /// Writes the record.
    pub fn encode(&self, e: Endian, out: &mut [u8; LOST_LEN]) {
        fixed_prefix(LOST, LOST_LEN, self.cpu, 0).write(e, out);
        put(out, TIME_AT, &e.u64_bytes(self.time));
        put(out, 16, &e.u64_bytes(self.count));
    }

    /// The record's bytes.
    pub fn encoded(&self, e: Endian) -> [u8; LOST_LEN] {
        let mut b = [0u8; LOST_LEN];
        self.encode(e, &mut b);
        b
    }

    /// Reads the LOST record `rec` (no check of its type or size: see
    /// [`parse`]), if `rec` holds it.
    pub fn read(e: Endian, rec: &[u8]) -> Option<Lost> {
        Some(Lost {
            cpu: Prefix::read(e, rec)?.cpu,
            time: e.read_u64(rec, TIME_AT)?,
            count: e.read_u64(rec, 16)?,
        })
    }
}

/// A TRACING record: `tracing_on` switched to `on`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tracing {
    /// The CPU that wrote it (the module writes 0).
    pub cpu: u16,
    /// Time of the switch.
    pub time: u64,
    /// The new state (byte 6: `1` on, `0` off).
    pub on: bool,
}

impl Tracing {
    /// Writes the record.
    pub fn encode(&self, e: Endian, out: &mut [u8; TRACING_LEN]) {
        fixed_prefix(TRACING, TRACING_LEN, self.cpu, u8::from(self.on)).write(e, out);
        put(out, TIME_AT, &e.u64_bytes(self.time));
    }

    /// The record's bytes.
    pub fn encoded(&self, e: Endian) -> [u8; TRACING_LEN] {
        let mut b = [0u8; TRACING_LEN];
        self.encode(e, &mut b);
        b
    }

    /// Reads the TRACING record `rec` (no check of its type or size: see
    /// [`parse`]), if `rec` holds it.
    pub fn read(e: Endian, rec: &[u8]) -> Option<Tracing> {
        let p = Prefix::read(e, rec)?;
        Some(Tracing {
            cpu: p.cpu,
            time: e.read_u64(rec, TIME_AT)?,
            on: p.b6 != 0,
        })
    }
}

/// What a change of a setting at run time does (`SET_CONFIG`, the debugfs
/// files; always while recording is off): the module's steps, in the order
/// it takes them (`src/control/config.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Apply {
    /// The counters are made anew on every online CPU (or bound anew to the
    /// process's threads).
    Counters,
    /// The counters are made anew, and the CPU buffers change mode (the
    /// periodic syncs stop or start, the staging areas are replaced).
    Mode,
    /// The CPU buffers are resized.
    CpuBuffers,
    /// The event buffer is replaced (its waiting records kept).
    EventBuffer,
    /// Taken by the sample path or the sync from then on, nothing remade.
    InPlace,
}

// Read by the host's tests, not the module.
#[allow(dead_code)]
impl Apply {
    /// How the documentation's table of settings says it.
    pub const fn describe(self) -> &'static str {
        match self {
            Apply::Counters => "counters made anew",
            Apply::Mode => "counters made anew, CPU buffers change mode",
            Apply::CpuBuffers => "CPU buffers resized",
            Apply::EventBuffer => "event buffer replaced, records kept",
            Apply::InPlace => "in place",
        }
    }
}

/// One setting of the module: its one definition, from which come the keys
/// of the `config` text and of `SET_CONFIG` ([`CONFIG_KEYS`]), the names of
/// the debugfs files, the limits the module checks, and the documentation's
/// table of settings (`Documentation/design.md`, checked against this one by
/// `crates/format/tests/settings.rs`, which also checks the load
/// parameters' defaults in `src/oprofile.rs` and `src/shims/glue.c`).
// The documentation's columns are read by the host's tests, not the module.
#[allow(dead_code)]
#[derive(Clone, Copy, Debug)]
pub struct Setting {
    /// The key: of the `config` text, the debugfs file and the load
    /// parameter.
    pub key: &'static str,
    /// Whether it is also a load parameter (`insmod oprofile_rs.ko
    /// key=value`).
    pub load_param: bool,
    /// The load parameter's default, as written on the command line.
    pub default: &'static str,
    /// What the default means, when the value alone does not say it.
    pub default_means: &'static str,
    /// The smallest and largest value of a number (`None`: not one number).
    pub range: Option<(u64, u64)>,
    /// The values it takes, in words (besides `range`).
    pub values: &'static str,
    /// What a change at run time does.
    pub apply: Apply,
}

/// The module's settings, in the order of [`CONFIG_KEYS`].
pub const SETTINGS: [Setting; 15] = [
    Setting {
        key: "event",
        load_param: true,
        default: "default",
        default_means: "cycles, else cpu-clock",
        range: None,
        values: "a comma list of 1 to 8, none twice: cycles, instructions, cache-references, \
                 cache-misses, branch-instructions, branch-misses (PMU), cpu-clock, task-clock \
                 (clocks), page-faults, context-switches, cpu-migrations (task-context software \
                 events); `default` alone",
        apply: Apply::Counters,
    },
    Setting {
        key: "sample_period",
        load_param: true,
        default: "",
        default_means: "each event's own, 1,000,000 (PMU events; ns for the clocks: 1 kHz), 1,000 \
                        (page-faults), 100 (context-switches), 1 (cpu-migrations)",
        range: None,
        values: "one value or one per event; the clocks and `default` 10,000 .. 1,000,000,000, \
                 the others 1 .. 1,000,000,000; 0: not given",
        apply: Apply::Counters,
    },
    Setting {
        key: "sample_freq",
        load_param: true,
        default: "",
        default_means: "period mode",
        range: None,
        values: "one value or one per event; 1 .. 100,000 Hz; not with a period for the same \
                 event; 0: not given",
        apply: Apply::Counters,
    },
    Setting {
        key: "backtrace_depth",
        load_param: true,
        default: "0",
        default_means: "no kernel call stacks",
        range: Some((0, MAX_DEPTH as u64)),
        values: "kernel callchain entries per sample",
        apply: Apply::InPlace,
    },
    Setting {
        key: "user_backtrace_depth",
        load_param: true,
        default: "32",
        default_means: "",
        range: Some((0, MAX_USER_DEPTH as u64)),
        values: "user callchain entries per sample, by frame pointers",
        apply: Apply::InPlace,
    },
    Setting {
        key: "cpu_buffer_size",
        load_param: true,
        default: "65536",
        default_means: "",
        range: Some((4096, 64 << 20)),
        values: "bytes per CPU ring buffer, a power of two",
        apply: Apply::CpuBuffers,
    },
    Setting {
        key: "buffer_size",
        load_param: true,
        default: "1048576",
        default_means: "",
        range: Some((64 << 10, 256 << 20)),
        values: "bytes of the event buffer behind `/dev/oprofile/buffer`",
        apply: Apply::EventBuffer,
    },
    Setting {
        key: "buffer_watershed",
        load_param: true,
        default: "0",
        default_means: "`buffer_size`/4",
        range: None,
        values: "bytes waiting that wake a reader, below `buffer_size`",
        apply: Apply::InPlace,
    },
    Setting {
        key: "exclude_user",
        load_param: true,
        default: "0",
        default_means: "",
        range: Some((0, 1)),
        values: "1 drops the samples taken in user mode; not with `exclude_kernel`",
        apply: Apply::Counters,
    },
    Setting {
        key: "exclude_kernel",
        load_param: true,
        default: "0",
        default_means: "",
        range: Some((0, 1)),
        values: "1 drops the samples taken in kernel mode; not with `exclude_user`",
        apply: Apply::Counters,
    },
    Setting {
        key: "mode",
        load_param: true,
        default: "consume",
        default_means: "",
        range: None,
        values: "`consume` (drained continuously) or `overwrite` (the flight recorder: snapshots)",
        apply: Apply::Mode,
    },
    Setting {
        key: "cgroup",
        load_param: true,
        default: "",
        default_means: "`/`, every task",
        range: None,
        values: "a path below the cgroup2 root or a cgroup id",
        apply: Apply::InPlace,
    },
    Setting {
        key: "user_stack_size",
        load_param: true,
        default: "0",
        default_means: "no copy",
        range: Some((0, MAX_USER_STACK as u64)),
        values: "bytes of user stack copied per sample, a multiple of 8; the CPU buffers hold two \
                 such samples",
        apply: Apply::InPlace,
    },
    Setting {
        key: "user_stack_fit",
        load_param: true,
        default: "0",
        default_means: "",
        range: Some((0, 1)),
        values: "1 stops each copy after the first frame record (the hybrid)",
        apply: Apply::InPlace,
    },
    Setting {
        key: "pid",
        load_param: false,
        default: "0",
        default_means: "every task",
        range: None,
        values: "a process profiled alone, its threads and children (run time only)",
        apply: Apply::Counters,
    },
];

/// The setting `key`, if there is one (a `const fn`: the module takes its
/// limits from here at build time).
pub const fn setting(key: &str) -> Option<Setting> {
    let mut rest: &[Setting] = &SETTINGS;
    while let [s, tail @ ..] = rest {
        if same_bytes(s.key.as_bytes(), key.as_bytes()) {
            return Some(*s);
        }
        rest = tail;
    }
    None
}

/// Whether `a` and `b` hold the same bytes (`==` is not `const`; the module
/// compares names at build time with it).
pub const fn same_bytes(mut a: &[u8], mut b: &[u8]) -> bool {
    while let ([x, a_tail @ ..], [y, b_tail @ ..]) = (a, b) {
        if *x != *y {
            return false;
        }
        a = a_tail;
        b = b_tail;
    }
    a.is_empty() && b.is_empty()
}

/// The names of the settings a [`Config`] record carries that can be
/// changed while recording is off: the module's debugfs files and the
/// `key=value` words of its `SET_CONFIG`/`GET_CONFIG` text (the user guide),
/// which the tool's `record` options write. In the order the module's
/// `config` text lists them and the tool applies them: `event` first
/// (writing it resets every period and frequency), then the periods and
/// frequencies, then the rest, `mode` last (a switch to overwrite mode may
/// need the larger `buffer_size` set before it). (`exclude_user` and
/// `exclude_kernel` are per event in the record's event flags, the same for
/// every event; `mode` is the record's byte 7; `cgroup` and `pid`, added
/// after `mode`, are the record's extension, [`Config::cgroup`] and
/// [`Config::pid`].)
// Evaluated at build time (a `const`): the indexing cannot fail at run time.
#[allow(clippy::indexing_slicing)]
pub const CONFIG_KEYS: [&str; SETTINGS.len()] = {
    let mut keys = [""; SETTINGS.len()];
    let mut i = 0;
    while i < SETTINGS.len() {
        keys[i] = SETTINGS[i].key;
        i += 1;
    }
    keys
};

/// Bytes of a CONFIG record's fixed part (each event adds
/// [`EVENT_DESC_LEN`]).
pub const CONFIG_LEN: usize = 48;
/// Bytes of a CONFIG record's extension, after its event descriptors: the
/// cgroup filter's id (8 bytes), then the profiled process's id (4 bytes)
/// and 4 reserved zero bytes (both added within version 2; records without
/// them, of the modules before, have no filter and profile every task).
pub const CONFIG_EXT_LEN: usize = 16;
/// Bytes of the largest CONFIG record this version writes.
pub const CONFIG_MAX_LEN: usize = config_len(MAX_EVENTS as u8) + CONFIG_EXT_LEN;
/// Bytes of an event descriptor in a CONFIG record.
pub const EVENT_DESC_LEN: usize = 48;
/// Bytes of an event descriptor's name field (names are at most one byte
/// shorter: always NUL-terminated).
pub const EVENT_DESC_NAME_LEN: usize = 24;
/// Bytes of a SNAPSHOT record.
pub const SNAPSHOT_LEN: usize = 40;
/// [`EventDesc`] `flags` bit: `value` is a frequency (samples per second per
/// CPU), not a period.
pub const EVENT_FLAG_FREQ: u8 = 1;
/// [`EventDesc`] `flags` bit: user mode is not sampled.
pub const EVENT_FLAG_EXCLUDE_USER: u8 = 2;
/// [`EventDesc`] `flags` bit: kernel mode is not sampled.
pub const EVENT_FLAG_EXCLUDE_KERNEL: u8 = 4;
/// [`EventDesc`] `flags` bit: a hardware event, sampled in NMI context.
pub const EVENT_FLAG_NMI: u8 = 8;
/// [`Config`] `mode`: the sync drains the CPU buffers (producer/consumer).
pub const MODE_CONSUME: u8 = 0;
/// [`Config`] `mode`: flight recorder: the CPU buffers overwrite their
/// oldest records and are drained only by snapshots.
pub const MODE_OVERWRITE: u8 = 1;
/// Bytes of a CONFIG record of `nr_events` events without the extension
/// (the least a reader needs; the module writes [`CONFIG_EXT_LEN`] more).
pub const fn config_len(nr_events: u8) -> usize {
    CONFIG_LEN + EVENT_DESC_LEN * nr_events as usize
}

/// One sampled event, as a [`Config`] record lists it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EventDesc {
    /// perf's `perf_event_attr.type` (0 hardware, 1 software).
    pub perf_type: u32,
    /// `EVENT_FLAG_*` bits.
    pub flags: u8,
    /// perf's `perf_event_attr.config`.
    pub config: u64,
    /// The period (events, or ns for the clocks), or with
    /// [`EVENT_FLAG_FREQ`] the frequency.
    pub value: u64,
    /// NUL-padded name (see [`EventDesc::name_field`]).
    pub name: [u8; EVENT_DESC_NAME_LEN],
}

impl EventDesc {
    /// The name field for `name`: its first `EVENT_DESC_NAME_LEN - 1`
    /// bytes, NUL-padded.
    pub fn name_field(name: &[u8]) -> [u8; EVENT_DESC_NAME_LEN] {
        let mut field = [0u8; EVENT_DESC_NAME_LEN];
        let n = name.len().min(EVENT_DESC_NAME_LEN - 1);
        put(&mut field, 0, name.get(..n).unwrap_or(&[]));
        field
    }

    /// The name up to its first NUL.
    pub fn name_bytes(&self) -> &[u8] {
        let end = self
            .name
            .iter()
            .position(|&c| c == 0)
            .unwrap_or(EVENT_DESC_NAME_LEN);
        self.name.get(..end).unwrap_or(&[])
    }

    fn encode(&self, e: Endian, out: &mut [u8]) {
        put(out, 0, &e.u32_bytes(self.perf_type));
        put(out, 4, &[self.flags]);
        put(out, 8, &e.u64_bytes(self.config));
        put(out, 16, &e.u64_bytes(self.value));
        put(out, 24, &self.name);
    }

    fn read(e: Endian, d: &[u8]) -> Option<EventDesc> {
        Some(EventDesc {
            perf_type: e.read_u32(d, 0)?,
            flags: *d.get(4)?,
            config: e.read_u64(d, 8)?,
            value: e.read_u64(d, 16)?,
            name: array(d, 24)?,
        })
    }
}

/// A CONFIG record: the configuration in force from this record on. The
/// module writes one after the header of every stream and one whenever the
/// configuration changes (only while recording is off); the `event` of a
/// SAMPLE indexes the `events` of the latest CONFIG before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// Time of the change (of the stream's start for the opening one).
    pub time: u64,
    /// 1 at load, one more at each change.
    pub generation: u32,
    /// [`MODE_CONSUME`] or [`MODE_OVERWRITE`] (byte 7).
    pub mode: u8,
    /// Deepest kernel callchain recorded (0: none).
    pub backtrace_depth: u8,
    /// Deepest user callchain recorded (0: none).
    pub user_backtrace_depth: u8,
    /// Bytes per CPU ring buffer.
    pub cpu_buffer_size: u64,
    /// Bytes of the event buffer.
    pub buffer_size: u64,
    /// Fill of the event buffer that wakes readers.
    pub buffer_watershed: u64,
    /// Events listed (byte 6), at most [`MAX_EVENTS`]: a record listing
    /// more is read with its first [`MAX_EVENTS`].
    pub nr_events: u8,
    /// The events; those past `nr_events` are unused.
    pub events: [EventDesc; MAX_EVENTS],
    /// The cgroup filter: only tasks of the cgroup (v2) with this id and of
    /// its descendants are sampled; `0`, none (the extension's 8 bytes
    /// after the event descriptors; `0` in a record without them).
    pub cgroup: u64,
    /// The profiled process (its id in the namespace of the writer of the
    /// change): only its threads and the tasks they create after the change
    /// are sampled, through counters bound to them; `0`, every task, on
    /// every CPU (the extension's bytes 8..12; `0` in a record without
    /// them).
    pub pid: u32,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            time: 0,
            generation: 0,
            mode: MODE_CONSUME,
            backtrace_depth: 0,
            user_backtrace_depth: 0,
            cpu_buffer_size: 0,
            buffer_size: 0,
            buffer_watershed: 0,
            nr_events: 0,
            events: [EventDesc::default(); MAX_EVENTS],
            cgroup: 0,
            pid: 0,
        }
    }
}

impl Config {
    /// The listed events.
    pub fn events(&self) -> &[EventDesc] {
        let n = usize::from(self.nr_events).min(MAX_EVENTS);
        self.events.get(..n).unwrap_or(&[])
    }

    /// Bytes of the record: [`config_len`] of its events and the
    /// extension.
    pub fn encoded_len(&self) -> usize {
        config_len(self.nr_events.min(MAX_EVENTS as u8)) + CONFIG_EXT_LEN
    }

    /// Writes the record into the first [`Config::encoded_len`] bytes of
    /// `out`; returns that length, or `None` (nothing written) if `out` is
    /// shorter.
    pub fn encode(&self, e: Endian, out: &mut [u8]) -> Option<usize> {
        let len = self.encoded_len();
        let out = out.get_mut(..len)?;
        out.fill(0);
        let n = self.nr_events.min(MAX_EVENTS as u8);
        Prefix {
            kind: CONFIG,
            size: len as u16,
            cpu: 0,
            b6: n,
            b7: self.mode,
        }
        .write(e, out);
        put(out, TIME_AT, &e.u64_bytes(self.time));
        put(out, 16, &e.u32_bytes(self.generation));
        put(out, 20, &[self.backtrace_depth, self.user_backtrace_depth]);
        put(out, 24, &e.u64_bytes(self.cpu_buffer_size));
        put(out, 32, &e.u64_bytes(self.buffer_size));
        put(out, 40, &e.u64_bytes(self.buffer_watershed));
        for (i, ev) in self.events().iter().enumerate() {
            let at = CONFIG_LEN + EVENT_DESC_LEN * i;
            if let Some(d) = out.get_mut(at..at + EVENT_DESC_LEN) {
                ev.encode(e, d);
            }
        }
        put(out, config_len(n), &e.u64_bytes(self.cgroup));
        put(out, config_len(n) + 8, &e.u32_bytes(self.pid));
        Some(len)
    }

    /// Reads the CONFIG record `rec` (no check of its type or size: see
    /// [`parse`]), if `rec` holds it.
    pub fn read(e: Endian, rec: &[u8]) -> Option<Config> {
        let p = Prefix::read(e, rec)?;
        let n = p.b6.min(MAX_EVENTS as u8);
        let mut events = [EventDesc::default(); MAX_EVENTS];
        for (i, ev) in events.iter_mut().take(usize::from(n)).enumerate() {
            let at = CONFIG_LEN + EVENT_DESC_LEN * i;
            *ev = EventDesc::read(e, rec.get(at..at + EVENT_DESC_LEN)?)?;
        }
        Some(Config {
            time: e.read_u64(rec, TIME_AT)?,
            generation: e.read_u32(rec, 16)?,
            mode: p.b7,
            backtrace_depth: *rec.get(20)?,
            user_backtrace_depth: *rec.get(21)?,
            cpu_buffer_size: e.read_u64(rec, 24)?,
            buffer_size: e.read_u64(rec, 32)?,
            buffer_watershed: e.read_u64(rec, 40)?,
            nr_events: n,
            events,
            // The extension, where the record has it (the byte count of
            // the events it lists, not of the ones kept).
            cgroup: e.read_u64(rec, config_len(p.b6)).unwrap_or(0),
            pid: e.read_u32(rec, config_len(p.b6) + 8).unwrap_or(0),
        })
    }
}

/// A SNAPSHOT record: frames a flight-recorder snapshot. A snapshot is one
/// BEGIN record per CPU, then the CPUs' records merged by time, then one END
/// record (cpu 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Snapshot {
    /// The CPU a BEGIN record describes (0 for END).
    pub cpu: u16,
    /// When the snapshot was taken.
    pub time: u64,
    /// END (byte 6 = 1) or BEGIN (0).
    pub end: bool,
    /// The snapshot's number since load (1 for the first).
    pub seq: u32,
    /// BEGIN: records of this CPU overwritten since the previous snapshot;
    /// END: the total of all CPUs.
    pub overwritten: u64,
    /// BEGIN: records of this CPU in the snapshot; END: the total.
    pub records: u64,
}

impl Snapshot {
    /// Writes the record.
    pub fn encode(&self, e: Endian, out: &mut [u8; SNAPSHOT_LEN]) {
        fixed_prefix(SNAPSHOT, SNAPSHOT_LEN, self.cpu, u8::from(self.end)).write(e, out);
        put(out, TIME_AT, &e.u64_bytes(self.time));
        put(out, 16, &e.u32_bytes(self.seq));
        put(out, 24, &e.u64_bytes(self.overwritten));
        put(out, 32, &e.u64_bytes(self.records));
    }

    /// The record's bytes.
    pub fn encoded(&self, e: Endian) -> [u8; SNAPSHOT_LEN] {
        let mut b = [0u8; SNAPSHOT_LEN];
        self.encode(e, &mut b);
        b
    }

    /// Reads the SNAPSHOT record `rec` (no check of its type or size: see
    /// [`parse`]), if `rec` holds it.
    pub fn read(e: Endian, rec: &[u8]) -> Option<Snapshot> {
        let p = Prefix::read(e, rec)?;
        Some(Snapshot {
            cpu: p.cpu,
            time: e.read_u64(rec, TIME_AT)?,
            end: p.b6 != 0,
            seq: e.read_u32(rec, 16)?,
            overwritten: e.read_u64(rec, 24)?,
            records: e.read_u64(rec, 32)?,
        })
    }
}

/// Bytes of a SWITCH record.
pub const SWITCH_LEN: usize = 48;
/// SWITCH flags (byte 6) bit: [`Switch::run_delay`] is known (a kernel
/// with `CONFIG_SCHED_INFO`).
pub const SWITCH_FLAG_RUN_DELAY: u8 = 1;

/// Why a task left its CPU: a [`Switch`] record's byte 7, which the module
/// derives from the task's scheduler state at the switch (stable across
/// kernel versions, unlike the raw state the record also carries).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SwitchReason {
    /// Still runnable (its time slice ran out, a task of higher priority
    /// woke, `sched_yield`): it waits on the run queue, it is not blocked.
    Preempted,
    /// An interruptible sleep (`TASK_INTERRUPTIBLE`: sleeps, waits for a
    /// pipe, a socket, a futex, `poll`).
    Sleep,
    /// An uninterruptible sleep (`TASK_UNINTERRUPTIBLE`, "D": disk I/O,
    /// page faults served from storage, some kernel locks).
    Blocked,
    /// The task's last switch: it exited (`TASK_DEAD`).
    Exit,
    /// Stopped or traced (`SIGSTOP`, a debugger).
    Stopped,
    /// Any other state (parked kernel threads, frozen tasks, a code this
    /// version does not know).
    Other,
    /// Waiting for work (`TASK_IDLE`: uninterruptible but not counted in
    /// the load average, as `ps` shows "I"): idle kernel workers, mostly.
    /// Code 6, since the module of 2026-11-30; before, these were
    /// [`SwitchReason::Blocked`].
    Idle,
}

impl SwitchReason {
    /// The byte 7 code.
    pub const fn code(self) -> u8 {
        match self {
            SwitchReason::Preempted => 0,
            SwitchReason::Sleep => 1,
            SwitchReason::Blocked => 2,
            SwitchReason::Exit => 3,
            SwitchReason::Stopped => 4,
            SwitchReason::Other => 5,
            SwitchReason::Idle => 6,
        }
    }

    /// The reason a byte 7 code says (unknown codes: [`SwitchReason::Other`]).
    pub const fn from_code(code: u8) -> SwitchReason {
        match code {
            0 => SwitchReason::Preempted,
            1 => SwitchReason::Sleep,
            2 => SwitchReason::Blocked,
            3 => SwitchReason::Exit,
            4 => SwitchReason::Stopped,
            6 => SwitchReason::Idle,
            _ => SwitchReason::Other,
        }
    }

    /// Its name in the tool's reports. (For the host tools: not in the
    /// module.)
    #[cfg(format_host)]
    pub const fn name(self) -> &'static str {
        match self {
            SwitchReason::Preempted => "preempted",
            SwitchReason::Sleep => "sleep",
            SwitchReason::Blocked => "blocked-D",
            SwitchReason::Exit => "exit",
            SwitchReason::Stopped => "stopped",
            SwitchReason::Other => "other",
            SwitchReason::Idle => "idle",
        }
    }
}

/// A SWITCH record: the current task leaves `cpu` at `time` (perf's
/// `context-switches` event, at every switch-out of a sampled task when its
/// period is 1). The SAMPLE of that overflow, with the same `cpu`, `time`
/// and `pid`, follows it and holds the stacks where the task blocked. The
/// time the task stays off its CPU is read between two SWITCH records of
/// one thread: `time` minus `exec_runtime` gone up, of which `run_delay`
/// gone up was spent waiting on a run queue (see the user guide).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Switch {
    /// The CPU.
    pub cpu: u16,
    /// Clock of the header.
    pub time: u64,
    /// Thread id.
    pub pid: u32,
    /// Process id.
    pub tgid: u32,
    /// Why it leaves (byte 7).
    pub reason: SwitchReason,
    /// The task's raw scheduler state (`__state`), for the curious: its
    /// bits are the running kernel's.
    pub state: u32,
    /// ns the task has run on CPUs since it was created
    /// (`se.sum_exec_runtime`), up to this switch.
    pub exec_runtime: u64,
    /// ns the task has waited on run queues since it was created
    /// (`sched_info.run_delay`, updated at each switch-in); `None` without
    /// `CONFIG_SCHED_INFO` ([`SWITCH_FLAG_RUN_DELAY`] clear).
    pub run_delay: Option<u64>,
}

impl Switch {
    /// Writes the record.
    pub fn encode(&self, e: Endian, out: &mut [u8; SWITCH_LEN]) {
        let flags = if self.run_delay.is_some() {
            SWITCH_FLAG_RUN_DELAY
        } else {
            0
        };
        let mut p = fixed_prefix(SWITCH, SWITCH_LEN, self.cpu, flags);
        p.b7 = self.reason.code();
        out.fill(0);
        p.write(e, out);
        put(out, TIME_AT, &e.u64_bytes(self.time));
        put(out, 16, &e.u32_bytes(self.pid));
        put(out, 20, &e.u32_bytes(self.tgid));
        put(out, 24, &e.u32_bytes(self.state));
        put(out, 32, &e.u64_bytes(self.exec_runtime));
        put(out, 40, &e.u64_bytes(self.run_delay.unwrap_or(0)));
    }

    /// The record's bytes.
    pub fn encoded(&self, e: Endian) -> [u8; SWITCH_LEN] {
        let mut b = [0u8; SWITCH_LEN];
        self.encode(e, &mut b);
        b
    }

    /// Reads the SWITCH record `rec` (no check of its type or size: see
    /// [`parse`]), if `rec` holds it.
    pub fn read(e: Endian, rec: &[u8]) -> Option<Switch> {
        let p = Prefix::read(e, rec)?;
        let run_delay = e.read_u64(rec, 40)?;
        Some(Switch {
            cpu: p.cpu,
            time: e.read_u64(rec, TIME_AT)?,
            pid: e.read_u32(rec, 16)?,
            tgid: e.read_u32(rec, 20)?,
            reason: SwitchReason::from_code(p.b7),
            state: e.read_u32(rec, 24)?,
            exec_runtime: e.read_u64(rec, 32)?,
            run_delay: (p.b6 & SWITCH_FLAG_RUN_DELAY != 0).then_some(run_delay),
        })
    }
}

/// The prefix of a fixed-size record.
const fn fixed_prefix(kind: u16, len: usize, cpu: u16, b6: u8) -> Prefix {
    Prefix {
        kind,
        size: len as u16,
        cpu,
        b6,
        b7: 0,
    }
}

/// The fields of a record of a type this version defines.
///
/// A CONFIG makes it a few hundred bytes: it stays a plain `Copy` value (no
/// allocation in `no_std` and in the module), read on the stack.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fields {
    /// A SAMPLE's fixed part (its callchain: [`Parsed::callchain`]).
    Sample(SampleHead),
    /// A COMM record.
    Comm(Comm),
    /// A LOST record.
    Lost(Lost),
    /// A TRACING record.
    Tracing(Tracing),
    /// A CONFIG record.
    Config(Config),
    /// A SNAPSHOT record.
    Snapshot(Snapshot),
    /// A SWITCH record.
    Switch(Switch),
}

/// One record, checked by [`parse`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parsed<'a> {
    /// Its type.
    pub kind: u16,
    /// Its bytes (`size` of them, a multiple of 8, at least 8).
    pub bytes: &'a [u8],
    /// Its fields; `None` for a type this version does not define (skip
    /// `bytes`).
    pub fields: Option<Fields>,
    /// Bytes this version defines for it (`bytes.len()` for unknown types).
    pub needed: usize,
    /// Byte order of the stream.
    pub endian: Endian,
}

impl Parsed<'_> {
    /// Bytes of the record.
    pub fn size(&self) -> usize {
        self.bytes.len()
    }

    /// Whether the record is larger than this version defines (later
    /// versions may append fields; readers ignore them).
    pub fn oversized(&self) -> bool {
        self.bytes.len() > self.needed
    }

    /// A SAMPLE's kernel callchain (empty for other types).
    pub fn callchain(&self) -> Callchain<'_> {
        match self.fields {
            Some(Fields::Sample(_)) => callchain(self.endian, self.bytes),
            _ => callchain(self.endian, &[]),
        }
    }

    /// A SAMPLE's user callchain (empty for other types and in version 1).
    pub fn user_callchain(&self) -> Callchain<'_> {
        match self.fields {
            Some(Fields::Sample(_)) => user_callchain(self.endian, self.bytes),
            _ => callchain(self.endian, &[]),
        }
    }

    /// A SAMPLE's user stack part, if it has one.
    #[cfg(format_host)]
    pub fn user_stack(&self) -> Option<UserStack<'_>> {
        match self.fields {
            Some(Fields::Sample(_)) => user_stack(self.endian, self.bytes),
            _ => None,
        }
    }
}

/// Why a record cannot be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordError {
    /// The data ends inside the record (or inside its prefix).
    Truncated,
    /// `size` below 8 or not a multiple of 8: corruption.
    BadSize {
        /// The record's type.
        kind: u16,
        /// Its `size` field.
        size: u16,
    },
    /// `size` too small for the record's type (and, for a SAMPLE, its
    /// depths; for a CONFIG, its events).
    TooSmall {
        /// The record's type.
        kind: u16,
        /// Its `size` field.
        size: u16,
        /// The bytes the type needs.
        needed: usize,
    },
}

/// A record checked as [`parse`] checks it, its fields not decoded: for a
/// reader that needs a few fields of most records (`record`'s scan reads a
/// SAMPLE's time and process through [`Framed::sample_scan`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Framed<'a> {
    /// Its prefix.
    pub prefix: Prefix,
    /// Its bytes (`size` of them, a multiple of 8, at least 8, at least
    /// `needed`).
    pub bytes: &'a [u8],
    /// Bytes this version defines for it (`bytes.len()` for unknown types).
    pub needed: usize,
}

/// What a recorder's scan needs of a SAMPLE ([`Framed::sample_scan`]).
#[cfg(format_host)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SampleScan {
    /// [`SampleHead::time`].
    pub time: u64,
    /// [`SampleHead::tgid`].
    pub tgid: u32,
    /// [`SampleHead::kernel`].
    pub kernel: bool,
    /// [`SampleHead::throttled`].
    pub throttled: bool,
    /// [`SampleHead::user_depth`].
    pub user_depth: u8,
    /// [`SampleHead::user_stack`].
    pub user_stack: u16,
}

#[cfg(format_host)]
impl Framed<'_> {
    /// A SAMPLE's time, process and the extent of its user part, read as
    /// [`SampleHead::read`] reads them; `None` for another type.
    #[inline]
    pub fn sample_scan(&self, e: Endian) -> Option<SampleScan> {
        if self.prefix.kind != SAMPLE {
            return None;
        }
        let b6 = self.prefix.b6;
        let ext = b6 & SAMPLE_FLAG_EXT != 0;
        let rec = self.bytes;
        Some(SampleScan {
            time: e.read_u64(rec, TIME_AT)?,
            tgid: e.read_u32(rec, 28)?,
            kernel: b6 & SAMPLE_FLAG_KERNEL != 0,
            throttled: b6 & SAMPLE_FLAG_THROTTLED != 0,
            user_depth: if ext { *rec.get(42)? } else { 0 },
            user_stack: if ext && b6 & SAMPLE_FLAG_USER_STACK != 0 {
                e.read_u16(rec, USER_STACK_AT)?
            } else {
                0
            },
        })
    }
}

/// The recorder's fast path for the common record: a SAMPLE of the extended
/// form without a user stack part, in the machine's byte order, whole in
/// `buf`. Its size and [`Framed::sample_scan`]'s fields, exactly as
/// [`frame`] and `sample_scan` give them; `None` for anything else (another
/// type or form, a bad size, a record cut short), which [`frame`] then
/// sorts out. One bounds check for the fixed part, no error values.
#[cfg(format_host)]
#[inline(always)]
pub fn native_sample_scan(buf: &[u8]) -> Option<(usize, SampleScan)> {
    let h: &[u8; SAMPLE_EXT_LEN] = buf.first_chunk()?;
    // Fixed offsets within the fixed part: the bounds checks fold away.
    let bytes = |at: usize| h.get(at..).and_then(|b| b.first_chunk::<8>());
    let [k0, k1, s0, s1, _, _, b6, b7] = *bytes(0)?;
    let kind = u16::from_ne_bytes([k0, k1]);
    let size = usize::from(u16::from_ne_bytes([s0, s1]));
    let user_depth = *h.get(42)?;
    if kind != SAMPLE
        || b6 & (SAMPLE_FLAG_EXT | SAMPLE_FLAG_USER_STACK) != SAMPLE_FLAG_EXT
        || size % RECORD_ALIGN != 0
        || size < sample_ext_len(b7, user_depth)
        || size > buf.len()
    {
        return None;
    }
    let [_, _, _, _, g0, g1, g2, g3] = *bytes(24)?;
    Some((
        size,
        SampleScan {
            time: u64::from_ne_bytes(*bytes(TIME_AT)?),
            tgid: u32::from_ne_bytes([g0, g1, g2, g3]),
            kernel: b6 & SAMPLE_FLAG_KERNEL != 0,
            throttled: b6 & SAMPLE_FLAG_THROTTLED != 0,
            user_depth,
            user_stack: 0,
        },
    ))
}

/// Checks the record at the start of `buf` as [`parse`] does (its size
/// against its type's, and for a SAMPLE its depths), without reading its
/// fields.
#[inline]
pub fn frame(e: Endian, buf: &[u8]) -> Result<Framed<'_>, RecordError> {
    let p = Prefix::read(e, buf).ok_or(RecordError::Truncated)?;
    let size = usize::from(p.size);
    if size < PREFIX_LEN || size % RECORD_ALIGN != 0 {
        return Err(RecordError::BadSize {
            kind: p.kind,
            size: p.size,
        });
    }
    let rec = buf.get(..size).ok_or(RecordError::Truncated)?;
    let needed = match p.kind {
        // The user depth (byte 42) counts only if the fixed part is there;
        // a record too short for it is too small for any depth.
        SAMPLE if p.b6 & SAMPLE_FLAG_EXT != 0 => {
            let stack = if p.b6 & SAMPLE_FLAG_USER_STACK != 0 {
                e.read_u16(rec, USER_STACK_AT).unwrap_or(0)
            } else {
                0
            };
            sample_ext_len(p.b7, rec.get(42).copied().unwrap_or(0)) + user_stack_part_len(stack)
        }
        SAMPLE => sample_len(p.b7),
        COMM => COMM_LEN,
        LOST => LOST_LEN,
        TRACING => TRACING_LEN,
        // The extension is optional (records of earlier modules lack it).
        CONFIG if size >= config_len(p.b6) + CONFIG_EXT_LEN => config_len(p.b6) + CONFIG_EXT_LEN,
        // The modules with the cgroup filter and without `pid`.
        CONFIG if size >= config_len(p.b6) + 8 => config_len(p.b6) + 8,
        CONFIG => config_len(p.b6),
        SNAPSHOT => SNAPSHOT_LEN,
        SWITCH => SWITCH_LEN,
        _ => size,
    };
    if size < needed {
        return Err(RecordError::TooSmall {
            kind: p.kind,
            size: p.size,
            needed,
        });
    }
    Ok(Framed {
        prefix: p,
        bytes: rec,
        needed,
    })
}

impl Framed<'_> {
    /// Its fields, read (`None` for a type this version does not define).
    pub fn fields(&self, e: Endian) -> Result<Option<Fields>, RecordError> {
        let rec = self.bytes;
        let too_small = RecordError::TooSmall {
            kind: self.prefix.kind,
            size: self.prefix.size,
            needed: self.needed,
        };
        Ok(match self.prefix.kind {
            SAMPLE => Some(Fields::Sample(SampleHead::read(e, rec).ok_or(too_small)?)),
            COMM => Some(Fields::Comm(Comm::read(e, rec).ok_or(too_small)?)),
            LOST => Some(Fields::Lost(Lost::read(e, rec).ok_or(too_small)?)),
            TRACING => Some(Fields::Tracing(Tracing::read(e, rec).ok_or(too_small)?)),
            CONFIG => Some(Fields::Config(Config::read(e, rec).ok_or(too_small)?)),
            SNAPSHOT => Some(Fields::Snapshot(Snapshot::read(e, rec).ok_or(too_small)?)),
            SWITCH => Some(Fields::Switch(Switch::read(e, rec).ok_or(too_small)?)),
            _ => None,
        })
    }
}

/// Checks and reads the record at the start of `buf` (which may hold more
/// records after it).
pub fn parse(e: Endian, buf: &[u8]) -> Result<Parsed<'_>, RecordError> {
    let f = frame(e, buf)?;
    Ok(Parsed {
        kind: f.prefix.kind,
        bytes: f.bytes,
        fields: f.fields(e)?,
        needed: f.needed,
        endian: e,
    })
}

// ---------------------------------------------------------------------------
// The device: its ioctls and its mapping's meta page
// ---------------------------------------------------------------------------

/// The ioctl commands of `/dev/oprofile/buffer` (the user guide;
/// `include/uapi/oprofile_rs.h` for C, checked against these by
/// `crates/format/tests/uapi_header.rs`). The module checks them against
/// the kernel's own `_IO*` encodings at build time (`device.rs`).
pub mod ioctl {
    /// The type byte of every command.
    pub const MAGIC: u8 = b'O';
    /// `_IOC` direction: no argument.
    pub const NONE: u32 = 0;
    /// `_IOC` direction: the caller writes the argument.
    pub const WRITE: u32 = 1;
    /// `_IOC` direction: the caller reads the argument.
    pub const READ: u32 = 2;

    /// `_IOC(dir, 'O', nr, size)` in the asm-generic encoding (x86, arm64,
    /// riscv; the architectures with other encodings fail the module's
    /// build-time check).
    pub const fn ioc(dir: u32, nr: u32, size: u32) -> u32 {
        (dir << 30) | (size << 16) | ((MAGIC as u32) << 8) | nr
    }

    /// Bytes of `struct oprofile_rs_config_text { __u64 ptr; __u64 len; }`
    /// (a configuration text buffer).
    pub const CONFIG_TEXT_LEN: u32 = 16;
    /// Bytes of `struct oprofile_rs_consume { __u64 tail; __u64 new_tail; }`
    /// (the consumer position seen and the one after the records processed).
    pub const CONSUME_LEN: u32 = 16;

    /// Resume recording (`echo 1 > tracing_on`).
    pub const TRACING_ON: u32 = ioc(NONE, 1, 0);
    /// Stop recording and hand everything recorded to the reader.
    pub const TRACING_OFF: u32 = ioc(NONE, 2, 0);
    /// Hand everything recorded to the reader now (`echo 1 > flush`).
    pub const FLUSH: u32 = ioc(NONE, 3, 0);
    /// Write the `tracing_on` state (0 or 1) to a `__u32`.
    pub const GET_TRACING: u32 = ioc(READ, 4, 4);
    /// Consume from a mapping (`Documentation/mmap.md`).
    pub const CONSUME: u32 = ioc(WRITE, 5, CONSUME_LEN);
    /// Take a flight-recorder snapshot (`mode=overwrite`). Number 32: far
    /// from the control ioctls that follow 4.
    pub const SNAPSHOT: u32 = ioc(NONE, 32, 0);
    /// Apply configuration text (`key=value` words).
    pub const SET_CONFIG: u32 = ioc(WRITE, 33, CONFIG_TEXT_LEN);
    /// Write the `config` text (NUL-terminated) to the buffer; returns its
    /// length.
    pub const GET_CONFIG: u32 = ioc(READ | WRITE, 34, CONFIG_TEXT_LEN);
    /// Bytes of `struct oprofile_rs_unwind_table { __u64 ptr; __u64 len; }`
    /// (an unwind table's bytes, [`super::unwind`]).
    pub const UNWIND_TABLE_LEN: u32 = 16;
    /// Bytes of `struct oprofile_rs_unwind_map` ([`super::unwind::MAP_LEN`]).
    pub const UNWIND_MAP_LEN: u32 = 40;
    /// Load an unwind table ([`super::unwind`]); returns its number (1 or
    /// more) for [`UNWIND_MAP`].
    pub const UNWIND_TABLE: u32 = ioc(WRITE, 35, UNWIND_TABLE_LEN);
    /// Unwind a mapping of a process with a table loaded through the same
    /// open file.
    pub const UNWIND_MAP: u32 = ioc(WRITE, 36, UNWIND_MAP_LEN);
    /// Drop every table and mapping loaded through this open file (as its
    /// last close does).
    pub const UNWIND_RESET: u32 = ioc(NONE, 37, 0);
}

/// Unwind tables for the overflow handler's user stack walk (`Documentation/
/// design.md`, "In-kernel unwinding"): the call frame information of a
/// binary (`.eh_frame`), reduced to the three rules x86-64 code needs, loaded
/// by the tool for the mappings of the processes it profiles. With them the
/// handler finds the callers of code without frame pointers, and of leaf
/// functions, without copying the stack.
///
/// A table is [`TABLE_HEAD_LEN`] bytes of head, then its rows: [`ROW_LEN`]
/// bytes each, native-endian, sorted by strictly increasing `addr`. A row
/// holds from its `addr` up to the next row's; the last row must be
/// [`UNKNOWN`] (the table's end). Addresses are the binary's own (its ELF
/// virtual addresses); a mapping gives the bias to add at run time.
///
/// For the frame at instruction pointer `ip` (the sampled one for the first
/// frame, a return address minus one for the others), the row holding
/// `ip - bias` says where the frame's canonical frame address (CFA) is; the
/// return address is the word at `CFA - 8`; the caller's stack pointer is
/// the CFA; its frame pointer the word at `CFA + 8 * bp` (`bp < 0`) or, for
/// `bp == 0`, the callee's.
pub mod unwind {
    /// Bytes of a table's head: `u32` [`MAGIC`], `u32` rows, `u64` reserved (0).
    pub const TABLE_HEAD_LEN: usize = 16;
    /// The head's first word.
    pub const MAGIC: u32 = 0x4f52_5501;
    /// Bytes of a row: `u32` addr, `u8` rule, `i8` bp, `u16` CFA offset
    /// (bytes).
    pub const ROW_LEN: usize = 8;
    /// Rows a table may have (4 Mi rows, 32 MiB).
    pub const MAX_ROWS: u32 = 1 << 22;
    /// Bytes of rows all the tables loaded through the device may hold
    /// together (refused with `ENOSPC` beyond).
    pub const MAX_TOTAL_BYTES: usize = 64 << 20;
    /// Mappings that may be unwound with tables at once (`ENOSPC` beyond).
    pub const MAX_MAPS: usize = 1 << 16;
    /// Rule: no frame to unwind here; the walk ends cleanly (the outermost
    /// frame, whose return address the CFI leaves undefined).
    pub const END: u8 = 0;
    /// Rule: `CFA = sp + offset`.
    pub const CFA_SP: u8 = 1;
    /// Rule: `CFA = bp + offset`.
    pub const CFA_BP: u8 = 2;
    /// Rule: not expressible here (or no CFI): the walk is cut.
    pub const UNKNOWN: u8 = 3;
    /// The lowest `bp` (the saved frame pointer at most 128 words below the
    /// CFA).
    #[allow(dead_code)] // The tool's (it builds the tables).
    pub const MIN_BP: i8 = -128;
    /// The user callchain entry after the last frame of a walk with tables
    /// that was cut (no rule for an address, a fault, a frame out of
    /// bounds): `-1024`, among perf's context markers (at or above
    /// `PERF_CONTEXT_MAX`, none of which it is), so readers that do not know
    /// it skip it.
    pub const CHAIN_CUT: u64 = (-1024i64) as u64;

    /// Bytes of `struct oprofile_rs_unwind_map`: `u32` pid, `u32` table (as
    /// [`super::ioctl::UNWIND_TABLE`] returned it), `u64` start, `u64` end
    /// (the mapping's addresses: `[start, end)`), `u64` bias (run-time
    /// address minus the table's address), `u64` inode (of the mapped
    /// file, or 0 for a mapping of no file, the vDSO: the module checks that
    /// the process maps it executable there).
    pub const MAP_LEN: usize = 40;

    /// One row.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct Row {
        /// The first address the row holds for (the binary's own).
        pub addr: u32,
        /// [`END`], [`CFA_SP`], [`CFA_BP`] or [`UNKNOWN`].
        pub rule: u8,
        /// Where the caller's frame pointer was saved, in words from the
        /// CFA (`< 0`), or 0: not saved (unchanged).
        pub bp: i8,
        /// The CFA's offset from the register of `rule`, in bytes.
        pub cfa: u16,
    }

    impl Row {
        /// The row's bytes, native-endian.
        #[allow(dead_code)] // The tool's (it builds the tables).
        pub fn encoded(&self) -> [u8; ROW_LEN] {
            let [a0, a1, a2, a3] = self.addr.to_ne_bytes();
            let [c0, c1] = self.cfa.to_ne_bytes();
            [a0, a1, a2, a3, self.rule, self.bp as u8, c0, c1]
        }

        /// The row in `b` (native-endian), whatever its values; `None` if
        /// `b` is shorter than a row.
        pub fn decode(b: &[u8]) -> Option<Row> {
            let b: &[u8; ROW_LEN] = b.get(..ROW_LEN)?.try_into().ok()?;
            let [a0, a1, a2, a3, rule, bp, c0, c1] = *b;
            Some(Row {
                addr: u32::from_ne_bytes([a0, a1, a2, a3]),
                rule,
                bp: bp as i8,
                cfa: u16::from_ne_bytes([c0, c1]),
            })
        }

        /// Whether the row's values are ones the walk knows.
        pub fn valid(&self) -> bool {
            match self.rule {
                END | UNKNOWN => true,
                CFA_SP | CFA_BP => self.bp <= 0,
                _ => false,
            }
        }
    }

    /// A table's head for `rows` rows.
    #[allow(dead_code)] // The tool's (it builds the tables).
    pub fn head(rows: u32) -> [u8; TABLE_HEAD_LEN] {
        let [m0, m1, m2, m3] = MAGIC.to_ne_bytes();
        let [r0, r1, r2, r3] = rows.to_ne_bytes();
        [m0, m1, m2, m3, r0, r1, r2, r3, 0, 0, 0, 0, 0, 0, 0, 0]
    }

    /// Why a table's bytes are refused (`EINVAL` from the ioctl).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum TableError {
        /// Shorter than its head, or its length is not the head's rows.
        Length,
        /// Not [`MAGIC`], or a reserved word not 0.
        Head,
        /// No rows, or more than [`MAX_ROWS`].
        Rows,
        /// A row with an unknown rule or a positive `bp`.
        Rule,
        /// Rows not in strictly increasing order of `addr`.
        Order,
        /// The last row is not [`UNKNOWN`].
        End,
    }

    /// Checks a table's bytes (head and rows); returns its rows' bytes.
    pub fn check(bytes: &[u8]) -> Result<&[u8], TableError> {
        let (head, body) = match (bytes.get(..TABLE_HEAD_LEN), bytes.get(TABLE_HEAD_LEN..)) {
            (Some(h), Some(b)) => (h, b),
            _ => return Err(TableError::Length),
        };
        let word = |i: usize| {
            head.get(i..i + 4)
                .and_then(|w| w.try_into().ok())
                .map_or(u32::MAX, u32::from_ne_bytes)
        };
        if word(0) != MAGIC || word(8) != 0 || word(12) != 0 {
            return Err(TableError::Head);
        }
        let rows = word(4);
        if rows == 0 || rows > MAX_ROWS {
            return Err(TableError::Rows);
        }
        if body.len() != rows as usize * ROW_LEN {
            return Err(TableError::Length);
        }
        let mut last: Option<Row> = None;
        for chunk in body.chunks_exact(ROW_LEN) {
            let row = Row::decode(chunk).ok_or(TableError::Length)?;
            if !row.valid() {
                return Err(TableError::Rule);
            }
            if last.is_some_and(|l| l.addr >= row.addr) {
                return Err(TableError::Order);
            }
            last = Some(row);
        }
        match last {
            Some(r) if r.rule == UNKNOWN => Ok(body),
            _ => Err(TableError::End),
        }
    }

    /// The row of `rows` (a checked table's rows' bytes) holding `addr`,
    /// or `None` below the first row.
    pub fn find(rows: &[u8], addr: u64) -> Option<Row> {
        let n = rows.len() / ROW_LEN;
        let at = |i: usize| Row::decode(rows.get(i * ROW_LEN..)?);
        // The number of rows whose addr is <= addr.
        let (mut lo, mut hi) = (0usize, n);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if u64::from(at(mid)?.addr) <= addr {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        at(lo.checked_sub(1)?)
    }

    /// One caller step: the CFA the row gives for the registers `sp`, `bp`
    /// (`None` for [`END`] and [`UNKNOWN`] rows, or an overflow).
    pub fn cfa(row: &Row, sp: u64, bp: u64) -> Option<u64> {
        let base = match row.rule {
            CFA_SP => sp,
            CFA_BP => bp,
            _ => return None,
        };
        base.checked_add(u64::from(row.cfa))
    }
}

/// The first page of a mapping of the device (`Documentation/mmap.md`):
/// byte offsets of its fields, all native-endian and aligned
/// (`struct oprofile_rs_meta` in `include/uapi/oprofile_rs.h`).
pub mod meta {
    /// `u32`: the layout's version, [`VERSION`].
    pub const VERSION_AT: usize = 0;
    /// `u32`: bytes of the meta page (the page size).
    pub const META_SIZE_AT: usize = 4;
    /// `u64`: the mmap offset of the data (the page size).
    pub const DATA_OFFSET_AT: usize = 8;
    /// `u64`: bytes of ring storage (a multiple of the page size); the data
    /// may be mapped twice back to back.
    pub const DATA_SIZE_AT: usize = 16;
    /// `u64`: producer position, bytes ever appended (stored with release
    /// after the bytes).
    pub const HEAD_AT: usize = 24;
    /// `u64`: consumer position, bytes ever consumed (by `read` or the
    /// consume ioctl). It only grows; a reader that finds it moved while it
    /// looked at the data has lost its view (another consumer).
    pub const TAIL_AT: usize = 32;
    /// `u64`: bytes of the stream's opening (header and restated records)
    /// that `read` must deliver before records are consumed from the
    /// mapping; 0 once read.
    pub const OPENING_AT: usize = 40;
    /// `u64`: appends refused because the ring was full (back-pressure: the
    /// refused records wait in the CPU buffers, whose drops the stream
    /// reports as LOST records).
    pub const FULL_AT: usize = 48;
    /// Bytes of the fields (the page is larger).
    pub const LEN: usize = 56;
    /// The layout's version.
    pub const VERSION: u32 = 1;
}

// ---------------------------------------------------------------------------
// Settings values
// ---------------------------------------------------------------------------

/// Parses a decimal number (digits only, no sign, no overflow): the syntax
/// of every numeric setting (load parameters, debugfs files, `config`
/// text).
pub fn parse_u64(text: &[u8]) -> Option<u64> {
    if text.is_empty() {
        return None;
    }
    text.iter().try_fold(0u64, |v, &c| {
        if !c.is_ascii_digit() {
            return None;
        }
        v.checked_mul(10)?.checked_add(u64::from(c - b'0'))
    })
}
