//! Decoder (and encoder) for the `/dev/oprofile/buffer` stream, versions 1
//! and 2.
//!
//! The format is specified in `Documentation/stream-format.md` and defined in
//! code once, in `src/format.rs`: the module's own definition (types, sizes,
//! offsets, encoders, readers), compiled for the host as the `no_std` crate
//! [`oprofile_format`]. This crate is the user-space side built on it: owned
//! [`Record`]s, whole-stream decoding with error offsets and warnings, and an
//! [`Encoder`] for tests and fixtures, both going through the module's
//! encoders and readers. It never panics on any input: every malformed byte
//! sequence becomes a [`DecodeError`] carrying the byte offset where decoding
//! stopped.
//!
//! ```
//! use oprofile_stream::{decode, Encoder, Header, Record, Sample};
//!
//! let mut enc = Encoder::new(&Header::default());
//! enc.record(&Record::Sample(Sample { cpu: 1, kernel: true, time: 10, pc: 0xffff_ffff_8100_0000,
//!                                     pid: 42, tgid: 42, ..Sample::default() }));
//! let decoded = decode(&enc.finish()).unwrap();
//! assert_eq!(decoded.records.len(), 1);
//! assert!(decoded.error.is_none());
//! ```

use std::collections::BTreeSet;
use std::fmt;

use oprofile_format as format;

/// The stream format's own definition (`src/format.rs`), for readers that
/// want its field readers and encoders.
pub use oprofile_format;
/// Byte order announced by the header.
pub use oprofile_format::Endian;

/// `OPRFRS\0\n`
pub const MAGIC: [u8; 8] = format::MAGIC;
/// The stream version the module writes (and [`Encoder`] by default).
pub const VERSION: u16 = format::VERSION;
/// The oldest stream version this crate reads.
pub const MIN_VERSION: u16 = format::MIN_VERSION;
/// Size of the header the module writes: the 48-byte fields, then the event
/// name, NUL-padded, up to byte 96. A longer header's extra bytes are skipped.
pub const HEADER_SIZE: usize = format::HEADER_LEN;
/// The smallest valid header (the first modules wrote 64 bytes: a 16-byte
/// event name field).
pub const MIN_HEADER_SIZE: usize = format::MIN_HEADER_LEN;
/// Offset of the event name field (to the end of the header, at most
/// [`HEADER_SIZE`]).
pub const EVENT_NAME_OFFSET: usize = format::EVENT_NAME_AT;
/// Bytes of the event name field in a [`HEADER_SIZE`] header (the longest
/// name is one byte less: it is NUL-terminated).
pub const EVENT_NAME_SIZE: usize = format::EVENT_NAME_LEN;

pub const TYPE_SAMPLE: u16 = format::SAMPLE;
pub const TYPE_COMM: u16 = format::COMM;
pub const TYPE_LOST: u16 = format::LOST;
pub const TYPE_TRACING: u16 = format::TRACING;
pub const TYPE_CONFIG: u16 = format::CONFIG;
pub const TYPE_SNAPSHOT: u16 = format::SNAPSHOT;
pub const TYPE_SWITCH: u16 = format::SWITCH;

/// Fixed part of a version-1 SAMPLE record (the callchain follows).
pub const SAMPLE_BASE_SIZE: usize = format::SAMPLE_LEN;
/// Fixed part of a version-2 (extended) SAMPLE record (the callchains follow).
pub const SAMPLE_EXT_SIZE: usize = format::SAMPLE_EXT_LEN;
pub const COMM_SIZE: usize = format::COMM_LEN;
pub const LOST_SIZE: usize = format::LOST_LEN;
pub const TRACING_SIZE: usize = format::TRACING_LEN;
/// SAMPLE `flags` bit 0.
pub const SAMPLE_FLAG_KERNEL: u8 = format::SAMPLE_FLAG_KERNEL;

/// The stream header: the format definition's own ([`oprofile_format::Header`],
/// with its `Default`, `read`, `encode` and `event_name_bytes`); [`HeaderExt`]
/// adds the host's helpers.
pub use oprofile_format::Header;
/// The CONFIG record, an event it lists, and the SNAPSHOT record: the format
/// definition's own types (plain `Copy` data).
pub use oprofile_format::{Config, EventDesc, Snapshot, Switch, SwitchReason};

/// An [`EventDesc`]'s helpers for user space.
pub trait EventDescExt {
    /// A descriptor; `name` is cut as the module cuts it.
    fn new(name: &str, perf_type: u32, config: u64, value: u64, flags: u8) -> Self;
    /// The name up to the first NUL (lossy UTF-8).
    fn name(&self) -> String;
    /// Whether `value` is a frequency.
    fn is_freq(&self) -> bool;
}

impl EventDescExt for EventDesc {
    fn new(name: &str, perf_type: u32, config: u64, value: u64, flags: u8) -> EventDesc {
        EventDesc {
            perf_type,
            flags,
            config,
            value,
            name: EventDesc::name_field(name.as_bytes()),
        }
    }

    fn name(&self) -> String {
        String::from_utf8_lossy(self.name_bytes()).into_owned()
    }

    fn is_freq(&self) -> bool {
        self.flags & format::EVENT_FLAG_FREQ != 0
    }
}

/// A [`Config`] of `events` (at most [`format::MAX_EVENTS`]; more are cut).
pub fn config_with_events(base: Config, events: &[EventDesc]) -> Config {
    let mut c = base;
    let n = events.len().min(format::MAX_EVENTS);
    c.events[..n].copy_from_slice(&events[..n]);
    c.nr_events = n as u8;
    c
}

/// A [`Header`]'s helpers for user space.
pub trait HeaderExt {
    /// The event name up to the first NUL (lossy UTF-8).
    fn event_name(&self) -> String;
    /// Sets the event name, cut as the module cuts it
    /// ([`oprofile_format::event_name_field`]).
    fn set_event_name(&mut self, name: &str);
    /// The sample source in words.
    fn sample_source_name(&self) -> &'static str;
    /// Encodes the header (always `header_size` bytes, at least 64; extra
    /// bytes are zero; a 64-byte header keeps 16 bytes of the name).
    fn to_bytes(&self) -> Vec<u8>;
}

impl HeaderExt for Header {
    fn event_name(&self) -> String {
        String::from_utf8_lossy(self.event_name_bytes()).into_owned()
    }

    fn set_event_name(&mut self, name: &str) {
        self.event_name = format::event_name_field(name.as_bytes());
    }

    fn sample_source_name(&self) -> &'static str {
        match self.sample_source {
            format::SOURCE_HARDWARE => "hardware PMU (NMI)",
            format::SOURCE_SOFTWARE => "software cpu-clock (IRQ)",
            _ => "unknown source",
        }
    }

    fn to_bytes(&self) -> Vec<u8> {
        let mut out = vec![0u8; self.encoded_len()];
        self.encode(&mut out);
        out
    }
}

/// Parses a stream header at the start of `data`.
pub fn parse_header(data: &[u8]) -> Result<Header, DecodeError> {
    format::Header::read(data).map_err(|e| {
        let kind = match e {
            format::HeaderError::BadMagic => ErrorKind::BadMagic,
            format::HeaderError::Truncated { len } => ErrorKind::TruncatedHeader { len },
            format::HeaderError::BadEndianness(c) => ErrorKind::BadEndianness(c),
            format::HeaderError::UnsupportedVersion(v) => ErrorKind::UnsupportedVersion(v),
            format::HeaderError::BadHeaderSize(s) => ErrorKind::BadHeaderSize(s),
            format::HeaderError::UnsupportedWordSize(w) => ErrorKind::UnsupportedWordSize(w),
        };
        DecodeError::new(e.offset() as u64, kind)
    })
}

/// SAMPLE record.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Sample {
    pub cpu: u16,
    /// flags bit 0: taken in kernel mode.
    pub kernel: bool,
    pub time: u64,
    pub pc: u64,
    /// Thread id (`task->pid`).
    pub pid: u32,
    /// Process id.
    pub tgid: u32,
    /// Kernel callchain, innermost caller first; `pc` is not repeated.
    pub callchain: Vec<u64>,
    /// User callchain, innermost first (version 2): the callers of `pc` for
    /// a user-mode sample; for a kernel-mode sample of a user task, the user
    /// address where it entered the kernel, then its callers.
    pub user_callchain: Vec<u64>,
    /// Events this sample stands for (version 2; 0: not known, take the
    /// period of the event's CONFIG entry or of the header).
    pub period: u64,
    /// Index of the sampled event in the latest CONFIG record (0 in
    /// version 1).
    pub event: u16,
    /// flags bit 2: perf throttled the event's counter on this CPU right
    /// after this sample (no sample of it from this CPU until perf's next
    /// tick).
    pub throttled: bool,
    /// flags bit 3: the task's user registers and a copy of its user stack,
    /// for unwinding with the binaries' `.eh_frame` (version 2, extended
    /// form only).
    pub user_stack: Option<UserStack>,
}

/// A SAMPLE's user stack part ([`format::SAMPLE_FLAG_USER_STACK`]): the
/// sampled task's user registers (for a kernel-mode sample, those it
/// entered the kernel with) and the bytes copied from its stack pointer up.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct UserStack {
    /// The user instruction pointer.
    pub ip: u64,
    /// The user stack pointer: the address of `data[0]`.
    pub sp: u64,
    /// The user frame pointer (`rbp`).
    pub bp: u64,
    /// Bytes of the record's copy area (the module's `user_stack_size` when
    /// it was taken; a multiple of 8). The [`Encoder`] writes at least
    /// `data.len()` rounded up to 8.
    pub size: u16,
    /// The bytes copied (at most `size`: the copy stops at the first page
    /// the module could not read, e.g. the top of the stack). A `copied`
    /// count larger than the area is read as the whole area.
    pub data: Vec<u8>,
}

impl UserStack {
    /// Bytes of the copy area the [`Encoder`] writes: `size`, or `data`
    /// rounded up to 8 if larger.
    pub fn area(&self) -> usize {
        usize::from(self.size).max(self.data.len().div_ceil(8) * 8)
    }
}

/// COMM record: a task's name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Comm {
    pub cpu: u16,
    pub time: u64,
    pub pid: u32,
    pub tgid: u32,
    /// Raw NUL-padded name; see [`Comm::name`].
    pub comm: [u8; format::COMM_NAME_LEN],
}

impl Comm {
    pub fn new(cpu: u16, time: u64, pid: u32, tgid: u32, name: &str) -> Comm {
        let mut comm = [0u8; format::COMM_NAME_LEN];
        let n = name.len().min(format::COMM_NAME_LEN);
        comm[..n].copy_from_slice(&name.as_bytes()[..n]);
        Comm {
            cpu,
            time,
            pid,
            tgid,
            comm,
        }
    }
    /// The name up to the first NUL (lossy UTF-8).
    pub fn name(&self) -> String {
        nul_str(&self.comm)
    }
}

/// LOST record: `count` samples this CPU dropped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lost {
    pub cpu: u16,
    pub time: u64,
    pub count: u64,
}

/// TRACING record: `tracing_on` changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tracing {
    pub cpu: u16,
    pub on: bool,
    pub time: u64,
}

/// One decoded record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    Sample(Sample),
    Comm(Comm),
    Lost(Lost),
    Tracing(Tracing),
    /// Boxed: a CONFIG is a few hundred bytes, and records are held by the
    /// million.
    Config(Box<Config>),
    Snapshot(Snapshot),
    /// A task left its CPU (the `context-switches` event).
    Switch(format::Switch),
}

impl Record {
    pub fn cpu(&self) -> u16 {
        match self {
            Record::Sample(s) => s.cpu,
            Record::Comm(c) => c.cpu,
            Record::Lost(l) => l.cpu,
            Record::Tracing(t) => t.cpu,
            Record::Config(_) => 0,
            Record::Snapshot(s) => s.cpu,
            Record::Switch(s) => s.cpu,
        }
    }
    pub fn time(&self) -> u64 {
        match self {
            Record::Sample(s) => s.time,
            Record::Comm(c) => c.time,
            Record::Lost(l) => l.time,
            Record::Tracing(t) => t.time,
            Record::Config(c) => c.time,
            Record::Snapshot(s) => s.time,
            Record::Switch(s) => s.time,
        }
    }

    /// The record type.
    pub fn rtype(&self) -> u16 {
        match self {
            Record::Sample(_) => TYPE_SAMPLE,
            Record::Comm(_) => TYPE_COMM,
            Record::Lost(_) => TYPE_LOST,
            Record::Tracing(_) => TYPE_TRACING,
            Record::Config(_) => TYPE_CONFIG,
            Record::Snapshot(_) => TYPE_SNAPSHOT,
            Record::Switch(_) => TYPE_SWITCH,
        }
    }
    /// Encoded size in bytes (version 2).
    pub fn encoded_size(&self) -> usize {
        self.encoded_size_in(VERSION)
    }

    /// Encoded size in bytes in a stream of version `version`.
    pub fn encoded_size_in(&self, version: u16) -> usize {
        match self {
            Record::Sample(s) if version < 2 => format::SAMPLE_LEN + 8 * s.callchain.len(),
            Record::Sample(s) => {
                format::SAMPLE_EXT_LEN
                    + 8 * (s.callchain.len() + s.user_callchain.len())
                    + s.user_stack
                        .as_ref()
                        .map_or(0, |u| format::USER_STACK_REGS_LEN + u.area())
            }
            Record::Comm(_) => COMM_SIZE,
            Record::Lost(_) => LOST_SIZE,
            Record::Tracing(_) => TRACING_SIZE,
            Record::Config(c) => c.encoded_len(),
            Record::Snapshot(_) => format::SNAPSHOT_LEN,
            Record::Switch(_) => format::SWITCH_LEN,
        }
    }
}

/// What went wrong, without the offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ErrorKind {
    /// The data does not start with `OPRFRS\0\n`.
    BadMagic,
    /// Fewer bytes than a header.
    TruncatedHeader {
        len: usize,
    },
    UnsupportedVersion(u16),
    BadHeaderSize(u16),
    UnsupportedWordSize(u8),
    BadEndianness(u8),
    /// The final record (or its 8-byte header) does not fit in the data.
    Truncated,
    /// `size` < 8 or not a multiple of 8.
    BadRecordSize {
        rtype: u16,
        size: u16,
    },
    /// A known record type whose `size` is too small for its contents.
    RecordTooSmall {
        rtype: u16,
        size: u16,
        needed: usize,
    },
}

/// A decoding error at a byte offset of the stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError {
    /// Byte offset (from the start of the stream) of the header field or
    /// record where decoding stopped.
    pub offset: u64,
    pub kind: ErrorKind,
}

impl DecodeError {
    pub fn new(offset: u64, kind: ErrorKind) -> Self {
        DecodeError { offset, kind }
    }
    /// True for a truncated final record: everything before it is intact
    /// (e.g. a recording that was killed mid-write).
    pub fn is_truncation(&self) -> bool {
        matches!(self.kind, ErrorKind::Truncated)
    }
    /// True if the error is in the stream header (no record could be read).
    pub fn is_header_error(&self) -> bool {
        matches!(
            self.kind,
            ErrorKind::BadMagic
                | ErrorKind::TruncatedHeader { .. }
                | ErrorKind::UnsupportedVersion(_)
                | ErrorKind::BadHeaderSize(_)
                | ErrorKind::UnsupportedWordSize(_)
                | ErrorKind::BadEndianness(_)
        )
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let o = self.offset;
        match &self.kind {
            ErrorKind::BadMagic => write!(f, "not an oprofile-rs stream: bad magic (expected \"OPRFRS\\0\\n\" at offset 0)"),
            ErrorKind::TruncatedHeader { len } => {
                write!(f, "truncated stream header: only {len} bytes (header is {HEADER_SIZE} bytes)")
            }
            ErrorKind::UnsupportedVersion(v) => {
                write!(f, "unsupported stream version {v} at offset {o} (this tool reads versions {MIN_VERSION} to {VERSION})")
            }
            ErrorKind::BadHeaderSize(s) => write!(f, "corrupt header: header_size {s} < {MIN_HEADER_SIZE} at offset {o}"),
            ErrorKind::UnsupportedWordSize(w) => {
                write!(f, "unsupported word_size {w} at offset {o} (only 8-byte kernel pointers are supported)")
            }
            ErrorKind::BadEndianness(e) => write!(f, "corrupt header: endianness {e} at offset {o} (expected 1 or 2)"),
            ErrorKind::Truncated => write!(f, "truncated at offset {o}"),
            ErrorKind::BadRecordSize { rtype, size } => write!(
                f,
                "corrupt record at offset {o}: type {rtype} has size {size} (must be a multiple of 8, at least 8)"
            ),
            ErrorKind::RecordTooSmall { rtype, size, needed } => write!(
                f,
                "corrupt record at offset {o}: type {rtype} ({}) has size {size}, needs {needed}",
                type_name(*rtype)
            ),
        }
    }
}

impl std::error::Error for DecodeError {}

/// Name of a record type, for messages.
pub fn type_name(rtype: u16) -> &'static str {
    format::type_name(rtype)
}

/// A non-fatal oddity met while decoding (reported once per kind).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Warning {
    /// Records of this type were skipped; `first_offset` is the first one.
    UnknownType { rtype: u16, first_offset: u64 },
    /// Records of a known type were larger than this version defines; the
    /// extra bytes were ignored.
    OversizedRecord { rtype: u16, first_offset: u64 },
    /// The header was longer than [`HEADER_SIZE`]; the extra bytes were skipped.
    LongHeader { header_size: u16 },
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Warning::UnknownType { rtype, first_offset } => {
                write!(f, "skipped records of unknown type {rtype} (first at offset {first_offset})")
            }
            Warning::OversizedRecord { rtype, first_offset } => write!(
                f,
                "{} records larger than expected, extra bytes ignored (first at offset {first_offset})",
                type_name(*rtype)
            ),
            Warning::LongHeader { header_size } => {
                write!(f, "stream header is {header_size} bytes, skipped the {} unknown bytes", *header_size as usize - HEADER_SIZE)
            }
        }
    }
}

/// Result of decoding one record from a buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decoded1 {
    /// A known record, and its size in bytes.
    Record(Record, usize),
    /// A record of an unknown type (size bytes to skip).
    Unknown { rtype: u16, size: usize },
    /// A known record with bytes beyond what this version defines.
    Oversized(Record, usize),
}

/// Decodes one record at the start of `buf`. `offset` is only used for error
/// messages.  Never panics.
pub fn decode_record(buf: &[u8], endian: Endian, offset: u64) -> Result<Decoded1, DecodeError> {
    let p = format::parse(endian, buf).map_err(|e| {
        let kind = match e {
            format::RecordError::Truncated => ErrorKind::Truncated,
            format::RecordError::BadSize { kind, size } => {
                ErrorKind::BadRecordSize { rtype: kind, size }
            }
            format::RecordError::TooSmall { kind, size, needed } => ErrorKind::RecordTooSmall {
                rtype: kind,
                size,
                needed,
            },
        };
        DecodeError::new(offset, kind)
    })?;
    let record = match p.fields {
        None => {
            return Ok(Decoded1::Unknown {
                rtype: p.kind,
                size: p.size(),
            })
        }
        Some(format::Fields::Sample(s)) => Record::Sample(Sample {
            user_stack: p.user_stack().map(|u| UserStack {
                ip: u.ip,
                sp: u.sp,
                bp: u.bp,
                size: s.user_stack,
                data: u.data.to_vec(),
            }),
            cpu: s.cpu,
            kernel: s.kernel,
            time: s.time,
            pc: s.pc,
            pid: s.pid,
            tgid: s.tgid,
            callchain: p.callchain().collect(),
            user_callchain: p.user_callchain().collect(),
            period: s.period,
            event: s.event,
            throttled: s.throttled,
        }),
        Some(format::Fields::Comm(c)) => Record::Comm(Comm {
            cpu: c.cpu,
            time: c.time,
            pid: c.pid,
            tgid: c.tgid,
            comm: c.comm,
        }),
        Some(format::Fields::Lost(l)) => Record::Lost(Lost {
            cpu: l.cpu,
            time: l.time,
            count: l.count,
        }),
        Some(format::Fields::Tracing(t)) => Record::Tracing(Tracing {
            cpu: t.cpu,
            on: t.on,
            time: t.time,
        }),
        Some(format::Fields::Config(c)) => Record::Config(Box::new(c)),
        Some(format::Fields::Snapshot(s)) => Record::Snapshot(s),
        Some(format::Fields::Switch(s)) => Record::Switch(s),
    };
    if p.oversized() {
        Ok(Decoded1::Oversized(record, p.size()))
    } else {
        Ok(Decoded1::Record(record, p.size()))
    }
}

/// Streaming decoder over a complete (or truncated) stream in memory.
///
/// Iterating yields `Ok(record)` until the end of the data or the first
/// error, after which it yields nothing more (a corrupt size leaves no way to
/// find the next record).  Unknown record types are skipped and noted in
/// [`Decoder::warnings`].
pub struct Decoder<'a> {
    data: &'a [u8],
    header: Header,
    pos: usize,
    failed: bool,
    warnings: Vec<Warning>,
    warned_unknown: BTreeSet<u16>,
    warned_oversized: BTreeSet<u16>,
}

impl<'a> Decoder<'a> {
    /// Parses the header; fails on bad magic, unknown version, truncated header.
    pub fn new(data: &'a [u8]) -> Result<Decoder<'a>, DecodeError> {
        let header = parse_header(data)?;
        let mut warnings = Vec::new();
        if header.header_size as usize > HEADER_SIZE {
            warnings.push(Warning::LongHeader {
                header_size: header.header_size,
            });
        }
        Ok(Decoder {
            data,
            pos: header.header_size as usize,
            header,
            failed: false,
            warnings,
            warned_unknown: BTreeSet::new(),
            warned_oversized: BTreeSet::new(),
        })
    }

    pub fn header(&self) -> &Header {
        &self.header
    }

    /// Warnings collected so far (one per unknown type / oddity).
    pub fn warnings(&self) -> &[Warning] {
        &self.warnings
    }

    /// Byte offset of the next record.
    pub fn offset(&self) -> u64 {
        self.pos as u64
    }
}

impl Iterator for Decoder<'_> {
    type Item = Result<Record, DecodeError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if self.failed || self.pos >= self.data.len() {
                return None;
            }
            let offset = self.pos as u64;
            match decode_record(&self.data[self.pos..], self.header.endian, offset) {
                Err(e) => {
                    self.failed = true;
                    return Some(Err(e));
                }
                Ok(Decoded1::Record(r, size)) => {
                    self.pos += size;
                    return Some(Ok(r));
                }
                Ok(Decoded1::Oversized(r, size)) => {
                    let t = r.rtype();
                    if self.warned_oversized.insert(t) {
                        self.warnings.push(Warning::OversizedRecord {
                            rtype: t,
                            first_offset: offset,
                        });
                    }
                    self.pos += size;
                    return Some(Ok(r));
                }
                Ok(Decoded1::Unknown { rtype, size }) => {
                    if self.warned_unknown.insert(rtype) {
                        self.warnings.push(Warning::UnknownType {
                            rtype,
                            first_offset: offset,
                        });
                    }
                    self.pos += size;
                }
            }
        }
    }
}

/// A whole stream decoded: the records before any error are always kept.
#[derive(Debug, Clone)]
pub struct Decoded {
    pub header: Header,
    pub records: Vec<Record>,
    pub warnings: Vec<Warning>,
    /// The error that stopped decoding, if any (truncation or corruption).
    pub error: Option<DecodeError>,
    /// Bytes successfully decoded (header + intact records).
    pub valid_len: u64,
}

/// Decodes a whole stream.  `Err` only for header errors (nothing usable);
/// record errors are returned in [`Decoded::error`] with every record before
/// them.
pub fn decode(data: &[u8]) -> Result<Decoded, DecodeError> {
    let mut dec = Decoder::new(data)?;
    let mut records = Vec::new();
    let mut error = None;
    for r in dec.by_ref() {
        match r {
            Ok(r) => records.push(r),
            Err(e) => error = Some(e),
        }
    }
    let valid_len = match &error {
        Some(e) => e.offset,
        None => data.len() as u64,
    };
    Ok(Decoded {
        header: dec.header.clone(),
        records,
        warnings: dec.warnings,
        error,
        valid_len,
    })
}

/// Builds streams (for tests, fixtures and tools).
pub struct Encoder {
    endian: Endian,
    version: u16,
    buf: Vec<u8>,
}

impl Encoder {
    /// Starts a stream with `header`; records are encoded as its version
    /// defines them (a version-1 header gets version-1 SAMPLEs).
    pub fn new(header: &Header) -> Encoder {
        Encoder {
            endian: header.endian,
            version: header.version,
            buf: header.to_bytes(),
        }
    }

    /// Appends one record.
    ///
    /// # Panics
    /// If a SAMPLE has more than 255 entries in a callchain (not
    /// representable), a user stack part that makes it larger than a
    /// record can be, or a user callchain or user stack in a version-1
    /// stream.
    pub fn record(&mut self, r: &Record) -> &mut Self {
        let out = encode_record_version(r, self.endian, self.version);
        self.buf.extend_from_slice(&out);
        self
    }

    /// Appends a raw record: type, cpu, byte 6, byte 7 and a payload (from
    /// offset 8, zero-padded to a multiple of 8).  The size field is computed
    /// unless `size_override` is given.
    pub fn raw(
        &mut self,
        rtype: u16,
        cpu: u16,
        b6: u8,
        b7: u8,
        payload: &[u8],
        size_override: Option<u16>,
    ) -> &mut Self {
        let mut rec = vec![0u8; format::PREFIX_LEN + payload.len().div_ceil(8) * 8];
        let size = size_override.unwrap_or(rec.len() as u16);
        format::Prefix {
            kind: rtype,
            size,
            cpu,
            b6,
            b7,
        }
        .write(self.endian, &mut rec);
        rec[format::PREFIX_LEN..format::PREFIX_LEN + payload.len()].copy_from_slice(payload);
        self.buf.extend_from_slice(&rec);
        self
    }

    /// Appends arbitrary bytes.
    pub fn bytes(&mut self, b: &[u8]) -> &mut Self {
        self.buf.extend_from_slice(b);
        self
    }

    pub fn len(&self) -> usize {
        self.buf.len()
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    pub fn finish(self) -> Vec<u8> {
        self.buf
    }
}

/// Encodes one record as version 2, with the module's encoders
/// (`src/format.rs`).
///
/// # Panics
/// If a SAMPLE has more than 255 entries in a callchain.
pub fn encode_record(r: &Record, e: Endian) -> Vec<u8> {
    encode_record_version(r, e, VERSION)
}

/// Encodes one record as stream version `version` defines it (1: a SAMPLE
/// without period, event and user chain).
///
/// # Panics
/// If a SAMPLE has more than 255 entries in a callchain, a user stack
/// part that makes it larger than a record can be (65528 bytes), or a
/// user callchain, a user stack, a period or an event in version 1.
pub fn encode_record_version(r: &Record, e: Endian, version: u16) -> Vec<u8> {
    match r {
        Record::Sample(s) => {
            assert!(s.callchain.len() <= 255, "callchain depth > 255");
            assert!(s.user_callchain.len() <= 255, "user callchain depth > 255");
            let ext = version >= 2;
            assert!(
                ext || (s.user_callchain.is_empty()
                    && s.period == 0
                    && s.event == 0
                    && s.user_stack.is_none()),
                "version 1 SAMPLEs have no user chain, user stack, period or event"
            );
            let area = s.user_stack.as_ref().map_or(0, UserStack::area);
            let area = u16::try_from(area).expect("user stack area > 65535 bytes");
            let head = format::SampleHead {
                cpu: s.cpu,
                kernel: s.kernel,
                depth: s.callchain.len() as u8,
                time: s.time,
                pc: s.pc,
                pid: s.pid,
                tgid: s.tgid,
                period: s.period,
                event: s.event,
                user_depth: s.user_callchain.len() as u8,
                ext,
                throttled: s.throttled,
                user_stack: area,
            };
            assert!(
                head.size() <= usize::from(u16::MAX) & !7,
                "SAMPLE of {} bytes: larger than a record can be",
                head.size()
            );
            let mut out = vec![0u8; head.size()];
            head.encode(e, &mut out);
            format::encode_callchains(
                e,
                head.fixed_len(),
                &s.callchain,
                &s.user_callchain,
                &mut out,
            );
            if let Some(u) = &s.user_stack {
                let at = format::sample_ext_len(head.depth, head.user_depth);
                encode_user_stack(e, u, &mut out[at..]);
            }
            out
        }
        Record::Config(c) => {
            let mut out = vec![0u8; c.encoded_len()];
            c.encode(e, &mut out);
            out
        }
        Record::Snapshot(s) => s.encoded(e).to_vec(),
        Record::Switch(s) => s.encoded(e).to_vec(),
        Record::Comm(c) => format::Comm {
            cpu: c.cpu,
            time: c.time,
            pid: c.pid,
            tgid: c.tgid,
            comm: c.comm,
        }
        .encoded(e)
        .to_vec(),
        Record::Lost(l) => format::Lost {
            cpu: l.cpu,
            time: l.time,
            count: l.count,
        }
        .encoded(e)
        .to_vec(),
        Record::Tracing(t) => format::Tracing {
            cpu: t.cpu,
            time: t.time,
            on: t.on,
        }
        .encoded(e)
        .to_vec(),
    }
}

/// Writes a user stack part (registers, `copied`, then the bytes; the rest
/// of `out` stays zero) at the start of `out`, which holds the whole part.
fn encode_user_stack(e: Endian, u: &UserStack, out: &mut [u8]) {
    let regs = format::user_stack_words(u.ip, u.sp, u.bp, u.data.len() as u64);
    for (i, v) in regs.into_iter().enumerate() {
        out[8 * i..8 * i + 8].copy_from_slice(&e.u64_bytes(v));
    }
    let start = format::USER_STACK_REGS_LEN;
    out[start..start + u.data.len()].copy_from_slice(&u.data);
}

fn nul_str(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}
