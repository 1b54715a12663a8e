// SPDX-License-Identifier: GPL-2.0
#![allow(dead_code)]

use oprofile_ringbuf::atomics::AtomicU64;
use oprofile_ringbuf::{CpuBuffer, Mode, ReadError, RecordSwitch, ReserveError, Switches};

pub type Buf = CpuBuffer<'static, Box<[AtomicU64]>>;

pub static ON: RecordSwitch = RecordSwitch::new(true);

pub fn storage(words: usize) -> Box<[AtomicU64]> {
    (0..words).map(|_| AtomicU64::new(0)).collect()
}

pub fn switches() -> Switches<'static> {
    Switches {
        global: &ON,
        set: &ON,
    }
}

pub fn buf(words: usize, mode: Mode) -> Buf {
    CpuBuffer::new(storage(words), mode, switches()).unwrap()
}

/// Payload derived from an id, `len` bytes.
pub fn payload(id: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (id as u8).wrapping_mul(31).wrapping_add(i as u8))
        .collect()
}

pub fn write(b: &Buf, data: &[u8], ts: u64) -> Result<(), ReserveError> {
    let mut s = b.reserve(data.len(), ts)?;
    assert!(s.write_bytes(0, data));
    s.commit();
    Ok(())
}

/// (ts, payload, lost)
pub fn read(b: &Buf) -> Option<(u64, Vec<u8>, u64)> {
    let mut out = vec![0u8; 4096];
    match b.consume(&mut out) {
        Ok(i) => {
            out.truncate(i.len);
            Some((i.ts, out, i.lost))
        }
        Err(ReadError::Empty) => None,
        Err(e) => panic!("read error {e:?}"),
    }
}

pub fn drain(b: &Buf) -> Vec<(u64, Vec<u8>, u64)> {
    std::iter::from_fn(|| read(b)).collect()
}

/// Consumes up to `max` records with one `consume_batch` (ts, payload, lost);
/// `None` when the buffer is empty.
pub fn read_batch(b: &Buf, max: usize) -> Option<Vec<(u64, Vec<u8>, u64)>> {
    let mut scratch = vec![0u8; 4096];
    let mut got = Vec::new();
    match b.consume_batch(&mut scratch, |i, p| {
        assert_eq!(p.len(), i.len);
        got.push((i.ts, p.to_vec(), i.lost));
        got.len() < max
    }) {
        Ok(n) => {
            assert_eq!(n, got.len());
            Some(got)
        }
        Err(ReadError::Empty) => None,
        Err(e) => panic!("read error {e:?}"),
    }
}

/// Drains the buffer with batches of at most `max` records.
pub fn drain_batched(b: &Buf, max: usize) -> Vec<(u64, Vec<u8>, u64)> {
    std::iter::from_fn(|| read_batch(b, max))
        .flatten()
        .collect()
}
