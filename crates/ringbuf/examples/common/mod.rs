//! What the ring-buffer examples (`bench`, `cost`) share: a buffer of the
//! size they measure, recording on.

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
