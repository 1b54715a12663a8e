//! Decoder (and encoder) for the `/dev/oprofile/buffer` stream, version 1.
//!
//! The format is specified in `Documentation/stream-format.md`; this crate is
//! the user-space side of that contract.  It has no dependencies and never
//! panics on any input: every malformed byte sequence becomes a
//! [`DecodeError`] carrying the byte offset where decoding stopped.
//!
//! ```
//! use oprofile_stream::{decode, Encoder, Header, Record, Sample};
//!
//! let mut enc = Encoder::new(&Header::default());
//! enc.record(&Record::Sample(Sample { cpu: 1, kernel: true, time: 10, pc: 0xffff_ffff_8100_0000,
//!                                     pid: 42, tgid: 42, callchain: vec![] }));
//! let decoded = decode(&enc.finish()).unwrap();
//! assert_eq!(decoded.records.len(), 1);
//! assert!(decoded.error.is_none());
//! ```

use std::collections::BTreeSet;
use std::fmt;

/// `OPRFRS\0\n`
pub const MAGIC: [u8; 8] = *b"OPRFRS\0\n";
/// The only stream version this crate understands.
pub const VERSION: u16 = 1;
/// Size of the header the module writes: the 48-byte fields, then the event
/// name, NUL-padded, up to byte 96. A longer header's extra bytes are skipped.
pub const HEADER_SIZE: usize = 96;
/// The smallest valid header (the first modules wrote 64 bytes: a 16-byte
/// event name field).
pub const MIN_HEADER_SIZE: usize = 64;
/// Offset of the event name field (to the end of the header, at most
/// [`HEADER_SIZE`]).
pub const EVENT_NAME_OFFSET: usize = 48;
/// Bytes of the event name field in a [`HEADER_SIZE`] header (the longest
/// name is one byte less: it is NUL-terminated).
pub const EVENT_NAME_SIZE: usize = HEADER_SIZE - EVENT_NAME_OFFSET;

pub const TYPE_SAMPLE: u16 = 1;
pub const TYPE_COMM: u16 = 2;
pub const TYPE_LOST: u16 = 3;
pub const TYPE_TRACING: u16 = 4;

/// Fixed part of a SAMPLE record (the callchain follows).
pub const SAMPLE_BASE_SIZE: usize = 32;
pub const COMM_SIZE: usize = 40;
pub const LOST_SIZE: usize = 24;
pub const TRACING_SIZE: usize = 16;
/// SAMPLE `flags` bit 0.
pub const SAMPLE_FLAG_KERNEL: u8 = 1;

/// Byte order announced by the header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endian {
    Little,
    Big,
}

impl Endian {
    pub const fn native() -> Endian {
        if cfg!(target_endian = "big") {
            Endian::Big
        } else {
            Endian::Little
        }
    }
    fn code(self) -> u8 {
        match self {
            Endian::Little => 1,
            Endian::Big => 2,
        }
    }
    fn u16(self, b: [u8; 2]) -> u16 {
        match self {
            Endian::Little => u16::from_le_bytes(b),
            Endian::Big => u16::from_be_bytes(b),
        }
    }
    fn u32(self, b: [u8; 4]) -> u32 {
        match self {
            Endian::Little => u32::from_le_bytes(b),
            Endian::Big => u32::from_be_bytes(b),
        }
    }
    fn u64(self, b: [u8; 8]) -> u64 {
        match self {
            Endian::Little => u64::from_le_bytes(b),
            Endian::Big => u64::from_be_bytes(b),
        }
    }
}

/// The stream header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    pub version: u16,
    /// As announced by the stream (>= 64); records start at this offset.
    pub header_size: u16,
    pub word_size: u8,
    pub endian: Endian,
    /// `1` = `local_clock()` ns since boot.
    pub clock: u8,
    /// `1` hardware PMU event, `2` software cpu-clock.
    pub sample_source: u8,
    pub nr_cpus: u32,
    pub backtrace_depth: u32,
    pub sample_period: u64,
    pub sample_freq: u64,
    pub start_time: u64,
    /// Raw NUL-padded event name; see [`Header::event_name`].
    pub event_name: [u8; EVENT_NAME_SIZE],
}

impl Default for Header {
    fn default() -> Self {
        let mut event_name = [0u8; EVENT_NAME_SIZE];
        event_name[..9].copy_from_slice(b"cpu-clock");
        Header {
            version: VERSION,
            header_size: HEADER_SIZE as u16,
            word_size: 8,
            endian: Endian::native(),
            clock: 1,
            sample_source: 2,
            nr_cpus: 1,
            backtrace_depth: 0,
            sample_period: 1_000_000,
            sample_freq: 0,
            start_time: 0,
            event_name,
        }
    }
}

impl Header {
    /// The event name up to the first NUL (lossy UTF-8).
    pub fn event_name(&self) -> String {
        nul_str(&self.event_name)
    }

    /// Sets the event name (truncated to `EVENT_NAME_SIZE - 1` bytes).
    pub fn set_event_name(&mut self, name: &str) {
        self.event_name = [0; EVENT_NAME_SIZE];
        let n = name.len().min(EVENT_NAME_SIZE - 1);
        self.event_name[..n].copy_from_slice(&name.as_bytes()[..n]);
    }

    /// Human-readable sample source.
    pub fn sample_source_name(&self) -> &'static str {
        match self.sample_source {
            1 => "hardware PMU (NMI)",
            2 => "software cpu-clock (IRQ)",
            _ => "unknown source",
        }
    }

    /// Encodes the header (always `header_size` bytes, at least 64; extra
    /// bytes are zero; a 64-byte header keeps 16 bytes of the name).
    pub fn encode(&self) -> Vec<u8> {
        let size = (self.header_size as usize).max(MIN_HEADER_SIZE);
        let mut out = vec![0u8; size];
        let e = self.endian;
        out[0..8].copy_from_slice(&MAGIC);
        put_u16(e, &mut out[8..10], self.version);
        put_u16(e, &mut out[10..12], size as u16);
        out[12] = self.word_size;
        out[13] = e.code();
        out[14] = self.clock;
        out[15] = self.sample_source;
        put_u32(e, &mut out[16..20], self.nr_cpus);
        put_u32(e, &mut out[20..24], self.backtrace_depth);
        put_u64(e, &mut out[24..32], self.sample_period);
        put_u64(e, &mut out[32..40], self.sample_freq);
        put_u64(e, &mut out[40..48], self.start_time);
        let name_end = size.min(HEADER_SIZE);
        out[EVENT_NAME_OFFSET..name_end]
            .copy_from_slice(&self.event_name[..name_end - EVENT_NAME_OFFSET]);
        out
    }

    /// Parses a header at the start of `data`.
    pub fn parse(data: &[u8]) -> Result<Header, DecodeError> {
        if data.len() < 8 {
            if data.len() < MAGIC.len() && MAGIC.starts_with(data) {
                return Err(DecodeError::new(
                    0,
                    ErrorKind::TruncatedHeader { len: data.len() },
                ));
            }
            return Err(DecodeError::new(0, ErrorKind::BadMagic));
        }
        if data[0..8] != MAGIC {
            return Err(DecodeError::new(0, ErrorKind::BadMagic));
        }
        if data.len() < 14 {
            return Err(DecodeError::new(
                0,
                ErrorKind::TruncatedHeader { len: data.len() },
            ));
        }
        let endian = match data[13] {
            1 => Endian::Little,
            2 => Endian::Big,
            other => return Err(DecodeError::new(13, ErrorKind::BadEndianness(other))),
        };
        let version = endian.u16([data[8], data[9]]);
        if version != VERSION {
            return Err(DecodeError::new(8, ErrorKind::UnsupportedVersion(version)));
        }
        let header_size = endian.u16([data[10], data[11]]);
        if (header_size as usize) < MIN_HEADER_SIZE {
            return Err(DecodeError::new(10, ErrorKind::BadHeaderSize(header_size)));
        }
        if data.len() < header_size as usize {
            return Err(DecodeError::new(
                0,
                ErrorKind::TruncatedHeader { len: data.len() },
            ));
        }
        let word_size = data[12];
        if word_size != 8 {
            return Err(DecodeError::new(
                12,
                ErrorKind::UnsupportedWordSize(word_size),
            ));
        }
        let mut event_name = [0u8; EVENT_NAME_SIZE];
        let name_end = (header_size as usize).min(HEADER_SIZE);
        event_name[..name_end - EVENT_NAME_OFFSET]
            .copy_from_slice(&data[EVENT_NAME_OFFSET..name_end]);
        Ok(Header {
            version,
            header_size,
            word_size,
            endian,
            clock: data[14],
            sample_source: data[15],
            nr_cpus: get_u32(endian, data, 16),
            backtrace_depth: get_u32(endian, data, 20),
            sample_period: get_u64(endian, data, 24),
            sample_freq: get_u64(endian, data, 32),
            start_time: get_u64(endian, data, 40),
            event_name,
        })
    }
}

/// SAMPLE record.
#[derive(Debug, Clone, PartialEq, Eq)]
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
}

/// COMM record: a task's name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Comm {
    pub cpu: u16,
    pub time: u64,
    pub pid: u32,
    pub tgid: u32,
    /// Raw NUL-padded name; see [`Comm::name`].
    pub comm: [u8; 16],
}

impl Comm {
    pub fn new(cpu: u16, time: u64, pid: u32, tgid: u32, name: &str) -> Comm {
        let mut comm = [0u8; 16];
        let n = name.len().min(16);
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
}

impl Record {
    pub fn cpu(&self) -> u16 {
        match self {
            Record::Sample(s) => s.cpu,
            Record::Comm(c) => c.cpu,
            Record::Lost(l) => l.cpu,
            Record::Tracing(t) => t.cpu,
        }
    }
    pub fn time(&self) -> u64 {
        match self {
            Record::Sample(s) => s.time,
            Record::Comm(c) => c.time,
            Record::Lost(l) => l.time,
            Record::Tracing(t) => t.time,
        }
    }
    /// Encoded size in bytes.
    pub fn encoded_size(&self) -> usize {
        match self {
            Record::Sample(s) => SAMPLE_BASE_SIZE + 8 * s.callchain.len(),
            Record::Comm(_) => COMM_SIZE,
            Record::Lost(_) => LOST_SIZE,
            Record::Tracing(_) => TRACING_SIZE,
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
                write!(f, "unsupported stream version {v} at offset {o} (this tool reads version {VERSION})")
            }
            ErrorKind::BadHeaderSize(s) => write!(f, "corrupt header: header_size {s} < {HEADER_SIZE} at offset {o}"),
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
    match rtype {
        TYPE_SAMPLE => "SAMPLE",
        TYPE_COMM => "COMM",
        TYPE_LOST => "LOST",
        TYPE_TRACING => "TRACING",
        _ => "unknown",
    }
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
    if buf.len() < 8 {
        return Err(DecodeError::new(offset, ErrorKind::Truncated));
    }
    let rtype = endian.u16([buf[0], buf[1]]);
    let size16 = endian.u16([buf[2], buf[3]]);
    let size = size16 as usize;
    if size < 8 || !size.is_multiple_of(8) {
        return Err(DecodeError::new(
            offset,
            ErrorKind::BadRecordSize {
                rtype,
                size: size16,
            },
        ));
    }
    if buf.len() < size {
        return Err(DecodeError::new(offset, ErrorKind::Truncated));
    }
    let r = &buf[..size];
    let cpu = endian.u16([r[4], r[5]]);
    let too_small = |needed: usize| {
        DecodeError::new(
            offset,
            ErrorKind::RecordTooSmall {
                rtype,
                size: size16,
                needed,
            },
        )
    };
    let (record, needed) = match rtype {
        TYPE_SAMPLE => {
            let depth = r[7] as usize;
            let needed = SAMPLE_BASE_SIZE + 8 * depth;
            if size < needed {
                return Err(too_small(needed));
            }
            let callchain = (0..depth)
                .map(|i| get_u64(endian, r, SAMPLE_BASE_SIZE + 8 * i))
                .collect();
            (
                Record::Sample(Sample {
                    cpu,
                    kernel: r[6] & SAMPLE_FLAG_KERNEL != 0,
                    time: get_u64(endian, r, 8),
                    pc: get_u64(endian, r, 16),
                    pid: get_u32(endian, r, 24),
                    tgid: get_u32(endian, r, 28),
                    callchain,
                }),
                needed,
            )
        }
        TYPE_COMM => {
            if size < COMM_SIZE {
                return Err(too_small(COMM_SIZE));
            }
            let mut comm = [0u8; 16];
            comm.copy_from_slice(&r[24..40]);
            (
                Record::Comm(Comm {
                    cpu,
                    time: get_u64(endian, r, 8),
                    pid: get_u32(endian, r, 16),
                    tgid: get_u32(endian, r, 20),
                    comm,
                }),
                COMM_SIZE,
            )
        }
        TYPE_LOST => {
            if size < LOST_SIZE {
                return Err(too_small(LOST_SIZE));
            }
            (
                Record::Lost(Lost {
                    cpu,
                    time: get_u64(endian, r, 8),
                    count: get_u64(endian, r, 16),
                }),
                LOST_SIZE,
            )
        }
        TYPE_TRACING => {
            if size < TRACING_SIZE {
                return Err(too_small(TRACING_SIZE));
            }
            (
                Record::Tracing(Tracing {
                    cpu,
                    on: r[6] != 0,
                    time: get_u64(endian, r, 8),
                }),
                TRACING_SIZE,
            )
        }
        _ => return Ok(Decoded1::Unknown { rtype, size }),
    };
    if size > needed {
        Ok(Decoded1::Oversized(record, size))
    } else {
        Ok(Decoded1::Record(record, size))
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
        let header = Header::parse(data)?;
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
                    let t = match &r {
                        Record::Sample(_) => TYPE_SAMPLE,
                        Record::Comm(_) => TYPE_COMM,
                        Record::Lost(_) => TYPE_LOST,
                        Record::Tracing(_) => TYPE_TRACING,
                    };
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
    buf: Vec<u8>,
}

impl Encoder {
    /// Starts a stream with `header`.
    pub fn new(header: &Header) -> Encoder {
        Encoder {
            endian: header.endian,
            buf: header.encode(),
        }
    }

    /// Appends one record.
    ///
    /// # Panics
    /// If a SAMPLE has more than 255 callchain entries (not representable).
    pub fn record(&mut self, r: &Record) -> &mut Self {
        let out = encode_record(r, self.endian);
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
        let mut rec = vec![0u8; 8 + payload.len().div_ceil(8) * 8];
        let size = size_override.unwrap_or(rec.len() as u16);
        put_u16(self.endian, &mut rec[0..2], rtype);
        put_u16(self.endian, &mut rec[2..4], size);
        put_u16(self.endian, &mut rec[4..6], cpu);
        rec[6] = b6;
        rec[7] = b7;
        rec[8..8 + payload.len()].copy_from_slice(payload);
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

/// Encodes one record.
///
/// # Panics
/// If a SAMPLE has more than 255 callchain entries.
pub fn encode_record(r: &Record, e: Endian) -> Vec<u8> {
    let size = r.encoded_size();
    let mut out = vec![0u8; size];
    let (rtype, b6, b7) = match r {
        Record::Sample(s) => {
            assert!(s.callchain.len() <= 255, "callchain depth > 255");
            (
                TYPE_SAMPLE,
                if s.kernel { SAMPLE_FLAG_KERNEL } else { 0 },
                s.callchain.len() as u8,
            )
        }
        Record::Comm(_) => (TYPE_COMM, 0, 0),
        Record::Lost(_) => (TYPE_LOST, 0, 0),
        Record::Tracing(t) => (TYPE_TRACING, t.on as u8, 0),
    };
    put_u16(e, &mut out[0..2], rtype);
    put_u16(e, &mut out[2..4], size as u16);
    put_u16(e, &mut out[4..6], r.cpu());
    out[6] = b6;
    out[7] = b7;
    put_u64(e, &mut out[8..16], r.time());
    match r {
        Record::Sample(s) => {
            put_u64(e, &mut out[16..24], s.pc);
            put_u32(e, &mut out[24..28], s.pid);
            put_u32(e, &mut out[28..32], s.tgid);
            for (i, a) in s.callchain.iter().enumerate() {
                let o = SAMPLE_BASE_SIZE + 8 * i;
                put_u64(e, &mut out[o..o + 8], *a);
            }
        }
        Record::Comm(c) => {
            put_u32(e, &mut out[16..20], c.pid);
            put_u32(e, &mut out[20..24], c.tgid);
            out[24..40].copy_from_slice(&c.comm);
        }
        Record::Lost(l) => put_u64(e, &mut out[16..24], l.count),
        Record::Tracing(_) => {}
    }
    out
}

fn nul_str(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

// Callers guarantee bounds (checked sizes above); `get` keeps it panic-free anyway.
fn get_u32(e: Endian, b: &[u8], at: usize) -> u32 {
    match b.get(at..at + 4) {
        Some(s) => e.u32([s[0], s[1], s[2], s[3]]),
        None => 0,
    }
}

fn get_u64(e: Endian, b: &[u8], at: usize) -> u64 {
    match b.get(at..at + 8) {
        Some(s) => e.u64([s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]]),
        None => 0,
    }
}

fn put_u16(e: Endian, b: &mut [u8], v: u16) {
    b.copy_from_slice(&match e {
        Endian::Little => v.to_le_bytes(),
        Endian::Big => v.to_be_bytes(),
    });
}

fn put_u32(e: Endian, b: &mut [u8], v: u32) {
    b.copy_from_slice(&match e {
        Endian::Little => v.to_le_bytes(),
        Endian::Big => v.to_be_bytes(),
    });
}

fn put_u64(e: Endian, b: &mut [u8], v: u64) {
    b.copy_from_slice(&match e {
        Endian::Little => v.to_le_bytes(),
        Endian::Big => v.to_be_bytes(),
    });
}
