//! What the ring-buffer examples (`bench`, `coherence`, `cost`) share: a
//! buffer of the size they measure, recording on, and the record they write.

use oprofile_ringbuf::atomics::AtomicU64;
use oprofile_ringbuf::{CpuBuffer, Mode, RecordSwitch, Switches};

static ON: RecordSwitch = RecordSwitch::new(true);

/// Words per buffer: 512 KiB, the module's order of magnitude.
pub const WORDS: usize = 1 << 16;

/// The buffers the examples measure: heap storage, recording on.
pub type Buf = CpuBuffer<'static, Box<[AtomicU64]>>;

/// A new empty buffer of [`WORDS`] words in `mode`.
pub fn buffer(mode: Mode) -> Buf {
    let storage: Box<[AtomicU64]> = (0..WORDS).map(|_| AtomicU64::new(0)).collect();
    CpuBuffer::new(
        storage,
        mode,
        Switches {
            global: &ON,
            set: &ON,
        },
    )
    .unwrap()
}

/// Payload bytes of the records `bench` and `coherence` write.
#[allow(dead_code)] // `cost` writes its own way
pub const PAYLOAD: usize = 16;

/// Writes record `i` (payload `[i, !i]`, time `10 * i`); false if the
/// reserve failed.
#[allow(dead_code)] // `cost` writes its own way
#[inline(always)]
pub fn write(b: &Buf, i: u64) -> bool {
    match b.reserve(PAYLOAD, i.wrapping_mul(10)) {
        Ok(mut s) => {
            s.write_words(0, &[i, !i]);
            s.commit();
            true
        }
        Err(_) => false,
    }
}
