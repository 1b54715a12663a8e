// SPDX-License-Identifier: GPL-2.0

//! Record header encoding and time deltas.
//!
//! Every record occupies whole 64-bit words of the buffer:
//!
//! ```text
//! [optional time prefix word] [record header word] [payload words ...]
//! ```
//!
//! Record header word (`DATA` or `PADDING`):
//!
//! ```text
//!  63                32 31 30 29                3 2    0
//! +--------------------+-----+-------------------+------+
//! |  payload length    | 0 0 |  time_delta (27)  | type |
//! |  in bytes (32)     |     |                   |      |
//! +--------------------+-----+-------------------+------+
//! ```
//!
//! Time prefix word (`TIME_EXTEND` or `TIME_STAMP`), directly before a header:
//!
//! ```text
//!  63                                           3 2    0
//! +----------------------------------------------+------+
//! |  high part (bits 27.. of delta / of stamp)   | type |
//! +----------------------------------------------+------+
//! ```
//!
//! * no prefix: `ts = prev_ts + time_delta`
//! * `TIME_EXTEND(hi)`: `ts = prev_ts + (hi << 27 | time_delta)`
//! * `TIME_STAMP(hi)`: `ts = hi << 27 | time_delta` (absolute)

/// Number of bits of the inline time delta in a record header.
pub const DELTA_BITS: u32 = 27;
/// Largest time delta (in ns) stored inline in a record header.
pub const DELTA_MAX: u64 = (1 << DELTA_BITS) - 1;

const TYPE_BITS: u32 = 3;
const TYPE_MASK: u64 = (1 << TYPE_BITS) - 1;
const LEN_SHIFT: u32 = 32;
const RESERVED_MASK: u64 = 0b11 << 30;

/// Type field of a record header word: a data record.
pub(crate) const TYPE_DATA: u64 = 1;
/// Type field of a record header word: padding (a discarded record).
pub(crate) const TYPE_PADDING: u64 = 2;
/// Type field of a prefix word: relative time extension.
pub(crate) const TYPE_EXTEND: u64 = 3;
/// Type field of a prefix word: absolute time stamp.
pub(crate) const TYPE_STAMP: u64 = 4;

/// Time information that precedes a record header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Prefix {
    /// The inline delta is enough.
    None,
    /// `TIME_EXTEND`: the value is the delta shifted right by [`DELTA_BITS`].
    Extend(u64),
    /// `TIME_STAMP`: the value is the absolute time shifted right by [`DELTA_BITS`].
    Stamp(u64),
}

impl Prefix {
    /// Number of words the prefix occupies.
    #[inline(always)]
    pub(crate) fn words(self) -> u64 {
        match self {
            Prefix::None => 0,
            _ => 1,
        }
    }

    /// Encodes the prefix word (meaningless for [`Prefix::None`]).
    #[inline(always)]
    pub(crate) fn encode(self) -> u64 {
        match self {
            Prefix::None => 0,
            Prefix::Extend(hi) => TYPE_EXTEND | hi.wrapping_shl(TYPE_BITS),
            Prefix::Stamp(hi) => TYPE_STAMP | hi.wrapping_shl(TYPE_BITS),
        }
    }

    /// Decodes a prefix word; `None` if the word is not a prefix.
    #[inline(always)]
    pub(crate) fn decode(word: u64) -> Option<Prefix> {
        let hi = word.wrapping_shr(TYPE_BITS);
        match word & TYPE_MASK {
            TYPE_EXTEND => Some(Prefix::Extend(hi)),
            TYPE_STAMP => Some(Prefix::Stamp(hi)),
            _ => None,
        }
    }
}

/// Decides how to encode `ts` given the time of the previous record (if known).
///
/// Returns the prefix and the low 27 bits to put in the header.
#[inline(always)]
pub(crate) fn plan_time(prev: Option<u64>, ts: u64) -> (Prefix, u64) {
    match prev {
        Some(p) if ts >= p => {
            let delta = ts.wrapping_sub(p);
            if delta <= DELTA_MAX {
                (Prefix::None, delta)
            } else {
                (
                    Prefix::Extend(delta.wrapping_shr(DELTA_BITS)),
                    delta & DELTA_MAX,
                )
            }
        }
        // Unknown previous time, or time went backwards: absolute stamp.
        _ => (Prefix::Stamp(ts.wrapping_shr(DELTA_BITS)), ts & DELTA_MAX),
    }
}

/// Reconstructs the absolute time of a record (reader side).
///
/// `base` is the time of the previous record, if known. Returns `None` when
/// the record's time cannot be known (unknown base and no absolute stamp).
#[inline(always)]
pub(crate) fn apply_time(base: Option<u64>, prefix: Prefix, lo: u64) -> Option<u64> {
    match prefix {
        Prefix::None => base.map(|b| b.wrapping_add(lo)),
        Prefix::Extend(hi) => base.map(|b| b.wrapping_add(hi.wrapping_shl(DELTA_BITS) | lo)),
        Prefix::Stamp(hi) => Some(hi.wrapping_shl(DELTA_BITS) | lo),
    }
}

/// Encodes a record header word.
#[inline(always)]
pub(crate) fn encode_header(kind: u64, delta_lo: u64, len: u32) -> u64 {
    (kind & TYPE_MASK)
        | (delta_lo & DELTA_MAX).wrapping_shl(TYPE_BITS)
        | u64::from(len).wrapping_shl(LEN_SHIFT)
}

/// Turns a data record header into a padding header, keeping delta and length.
#[inline(always)]
pub(crate) fn to_padding(header: u64) -> u64 {
    (header & !TYPE_MASK) | TYPE_PADDING
}

/// A decoded record header word.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Header {
    /// `true` for data, `false` for padding.
    pub(crate) is_data: bool,
    /// Low bits of the time delta.
    pub(crate) delta_lo: u64,
    /// Payload length in bytes.
    pub(crate) len: u64,
}

impl Header {
    /// Decodes a record header word; `None` if it is not a valid header.
    #[inline(always)]
    pub(crate) fn decode(word: u64) -> Option<Header> {
        if word & RESERVED_MASK != 0 {
            return None;
        }
        let is_data = match word & TYPE_MASK {
            TYPE_DATA => true,
            TYPE_PADDING => false,
            _ => return None,
        };
        Some(Header {
            is_data,
            delta_lo: word.wrapping_shr(TYPE_BITS) & DELTA_MAX,
            len: word.wrapping_shr(LEN_SHIFT),
        })
    }
}

/// The common record's header, decoded without the general parser: a data
/// record header word (so not a time prefix) with valid reserved bits gives
/// `(delta_lo, len)`; anything else (padding, a prefix, garbage) `None`.
#[inline(always)]
pub(crate) fn plain_data(word: u64) -> Option<(u64, u64)> {
    (word & (TYPE_MASK | RESERVED_MASK) == TYPE_DATA).then(|| {
        (
            word.wrapping_shr(TYPE_BITS) & DELTA_MAX,
            word.wrapping_shr(LEN_SHIFT),
        )
    })
}

/// Number of payload words for a payload of `len` bytes (`len` < 2^32).
#[inline(always)]
pub(crate) fn payload_words(len: u64) -> u64 {
    len.wrapping_add(7).wrapping_shr(3)
}

/// A record parsed from the buffer (prefix + header + payload).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Record {
    /// Total number of words (prefix, header and payload).
    pub(crate) total: u64,
    /// Position of the record header word.
    pub(crate) data_pos: u64,
    /// The decoded header.
    pub(crate) header: Header,
    /// Absolute time of the record, if it can be known.
    pub(crate) ts: Option<u64>,
}

/// Parses the record starting at `pos`.
///
/// `avail` is the number of committed words from `pos` on; `base` the time of
/// the previous record if known. Returns `None` if the words do not form a
/// valid record that fits in `avail` (possible only if a writer overwrote
/// them meanwhile, which the caller must then detect).
#[inline(always)]
pub(crate) fn parse_record(
    words: &[super::atomics::AtomicU64],
    mask: u64,
    pos: u64,
    avail: u64,
    base: Option<u64>,
) -> Option<Record> {
    let first = super::load_word(words, mask, pos)?;
    let (prefix, data_pos, hword) = match Prefix::decode(first) {
        None => (Prefix::None, pos, first),
        Some(p) => {
            let data_pos = pos.wrapping_add(1);
            (p, data_pos, super::load_word(words, mask, data_pos)?)
        }
    };
    let header = Header::decode(hword)?;
    let total = prefix
        .words()
        .wrapping_add(1)
        .wrapping_add(payload_words(header.len));
    if total > avail {
        return None;
    }
    Some(Record {
        total,
        data_pos,
        header,
        ts: apply_time(base, prefix, header.delta_lo),
    })
}
