// SPDX-License-Identifier: GPL-2.0

//! Encoding of the stream records of `Documentation/stream-format.md`.
//!
//! The per-CPU ring buffers hold records already in stream form, so the sync
//! only moves bytes. Fields are in native byte order (the header says which).

/// Record types.
pub(crate) const SAMPLE: u16 = 1;
pub(crate) const COMM: u16 = 2;
pub(crate) const LOST: u16 = 3;
pub(crate) const TRACING: u16 = 4;

/// Sizes of the fixed records.
pub(crate) const SAMPLE_LEN: usize = 32;
pub(crate) const COMM_LEN: usize = 40;
pub(crate) const LOST_LEN: usize = 24;
pub(crate) const TRACING_LEN: usize = 16;
/// Bytes of the stream header: 48 bytes of fields, then the event name.
pub(crate) const HEADER_LEN: usize = 96;
/// Where the event name starts in the header (NUL-padded to its end, so at
/// most `HEADER_LEN - EVENT_NAME_AT - 1` bytes long).
const EVENT_NAME_AT: usize = 48;
/// The largest record the module writes: a SAMPLE with the deepest callchain.
pub(crate) const MAX_RECORD: usize = SAMPLE_LEN + 8 * crate::sampler::MAX_DEPTH;

fn put(buf: &mut [u8], at: usize, bytes: &[u8]) {
    if let Some(dst) = buf.get_mut(at..at + bytes.len()) {
        dst.copy_from_slice(bytes);
    }
}

/// Writes the common 8-byte record prefix.
fn prefix(buf: &mut [u8], kind: u16, len: usize, cpu: u16, b6: u8, b7: u8) {
    put(buf, 0, &kind.to_ne_bytes());
    put(buf, 2, &(len as u16).to_ne_bytes());
    put(buf, 4, &cpu.to_ne_bytes());
    put(buf, 6, &[b6, b7]);
}

/// The fixed part of a SAMPLE record announcing `depth` callchain entries,
/// which follow it as native-endian u64s.
pub(crate) fn sample(
    cpu: u16,
    kernel: bool,
    time: u64,
    pc: u64,
    pid: u32,
    tgid: u32,
    depth: u8,
) -> [u8; SAMPLE_LEN] {
    let mut b = [0u8; SAMPLE_LEN];
    let len = SAMPLE_LEN + 8 * usize::from(depth);
    prefix(&mut b, SAMPLE, len, cpu, u8::from(kernel), depth);
    put(&mut b, 8, &time.to_ne_bytes());
    put(&mut b, 16, &pc.to_ne_bytes());
    put(&mut b, 24, &pid.to_ne_bytes());
    put(&mut b, 28, &tgid.to_ne_bytes());
    b
}

/// A COMM record.
pub(crate) fn comm(cpu: u16, time: u64, pid: u32, tgid: u32, name: &[u8; 16]) -> [u8; COMM_LEN] {
    let mut b = [0u8; COMM_LEN];
    prefix(&mut b, COMM, COMM_LEN, cpu, 0, 0);
    put(&mut b, 8, &time.to_ne_bytes());
    put(&mut b, 16, &pid.to_ne_bytes());
    put(&mut b, 20, &tgid.to_ne_bytes());
    put(&mut b, 24, name);
    b
}

/// A LOST record.
pub(crate) fn lost(cpu: u16, time: u64, count: u64) -> [u8; LOST_LEN] {
    let mut b = [0u8; LOST_LEN];
    prefix(&mut b, LOST, LOST_LEN, cpu, 0, 0);
    put(&mut b, 8, &time.to_ne_bytes());
    put(&mut b, 16, &count.to_ne_bytes());
    b
}

/// A TRACING record.
pub(crate) fn tracing(cpu: u16, time: u64, on: bool) -> [u8; TRACING_LEN] {
    let mut b = [0u8; TRACING_LEN];
    prefix(&mut b, TRACING, TRACING_LEN, cpu, u8::from(on), 0);
    put(&mut b, 8, &time.to_ne_bytes());
    b
}

/// Parameters written into the stream header.
pub(crate) struct HeaderInfo<'a> {
    pub(crate) hardware: bool,
    pub(crate) nr_cpus: u32,
    pub(crate) backtrace_depth: u32,
    pub(crate) sample_period: u64,
    pub(crate) sample_freq: u64,
    pub(crate) start_time: u64,
    pub(crate) event_name: &'a str,
}

/// The stream header.
pub(crate) fn header(h: &HeaderInfo<'_>) -> [u8; HEADER_LEN] {
    let mut b = [0u8; HEADER_LEN];
    put(&mut b, 0, b"OPRFRS\0\n");
    put(&mut b, 8, &1u16.to_ne_bytes());
    put(&mut b, 10, &(HEADER_LEN as u16).to_ne_bytes());
    let little = cfg!(target_endian = "little");
    put(
        &mut b,
        12,
        &[
            8,
            if little { 1 } else { 2 },
            1,
            if h.hardware { 1 } else { 2 },
        ],
    );
    put(&mut b, 16, &h.nr_cpus.to_ne_bytes());
    put(&mut b, 20, &h.backtrace_depth.to_ne_bytes());
    put(&mut b, 24, &h.sample_period.to_ne_bytes());
    put(&mut b, 32, &h.sample_freq.to_ne_bytes());
    put(&mut b, 40, &h.start_time.to_ne_bytes());
    let name = h.event_name.as_bytes();
    let max = HEADER_LEN - EVENT_NAME_AT - 1;
    put(
        &mut b,
        EVENT_NAME_AT,
        name.get(..name.len().min(max)).unwrap_or(&[]),
    );
    b
}

/// Size of the record starting at `buf` (its bytes 2..4), if readable.
pub(crate) fn record_len(buf: &[u8]) -> Option<usize> {
    let b = buf.get(2..4)?;
    Some(usize::from(u16::from_ne_bytes([b[0], b[1]])))
}

#[cfg(oprofile_rs_kunit)]
#[kernel::prelude::kunit_tests(oprofile_rs_records)]
mod tests {
    use super::*;

    /// Time of a record (bytes 8..16; every record type has it there).
    fn record_time(buf: &[u8]) -> u64 {
        let mut t = [0u8; 8];
        if let Some(b) = buf.get(8..16) {
            t.copy_from_slice(b);
        }
        u64::from_ne_bytes(t)
    }

    #[test]
    fn sample_layout() {
        let s = sample(3, true, 0x1122, 0xffff_ffff_8100_0000, 42, 41, 0);
        assert_eq!(record_len(&s), Some(SAMPLE_LEN));
        assert_eq!(record_time(&s), 0x1122);
        assert_eq!(&s[0..2], &SAMPLE.to_ne_bytes());
        assert_eq!(&s[4..8], &[3, 0, 1, 0]);
        assert_eq!(&s[24..28], &42u32.to_ne_bytes());
    }

    #[test]
    fn sample_with_callchain_announces_its_depth() {
        let s = sample(1, true, 5, 0xffff_ffff_8100_0000, 42, 41, 3);
        assert_eq!(record_len(&s), Some(SAMPLE_LEN + 24));
        assert_eq!(&s[4..8], &[1, 0, 1, 3]);
        assert!(MAX_RECORD >= SAMPLE_LEN + 8 * 64);
    }

    #[test]
    fn header_layout() {
        let h = header(&HeaderInfo {
            hardware: false,
            nr_cpus: 4,
            backtrace_depth: 0,
            sample_period: 1000,
            sample_freq: 0,
            start_time: 7,
            event_name: "cpu-clock",
        });
        assert_eq!(&h[0..8], b"OPRFRS\0\n");
        assert_eq!(h[15], 2);
        assert_eq!(&h[48..58], b"cpu-clock\0");
        assert_eq!(&h[10..12], &96u16.to_ne_bytes());
    }

    #[test]
    fn header_holds_every_event_name_whole() {
        for e in crate::perf::Event::ALL {
            let h = header(&HeaderInfo {
                hardware: e.is_hardware(),
                nr_cpus: 1,
                backtrace_depth: 0,
                sample_period: 1,
                sample_freq: 0,
                start_time: 0,
                event_name: e.name(),
            });
            let name = e.name().as_bytes();
            assert!(name.len() < HEADER_LEN - EVENT_NAME_AT);
            assert_eq!(&h[48..48 + name.len()], name);
            assert_eq!(h[48 + name.len()], 0);
        }
    }
}
