// SPDX-License-Identifier: GPL-2.0

//! KUnit test of what the module writes into the stream besides samples,
//! read back with the stream format's own readers (`src/format.rs`, the ones
//! the host decoder uses): the header `/dev/oprofile/buffer` starts with, for
//! every event, and the opening records a new reader gets (the last COMM per
//! CPU and a TRACING `off` record), restated from what an earlier reader was
//! delivered, records split across the ring's wrap included.

use kernel::prelude::*;

use crate::{
    device::stream_header,
    format::{self, Endian, Fields},
    params::{Config, EventChoice},
    perf::Event,
    reader_state::ReaderState,
};

fn config(event: Event) -> Config {
    Config {
        cpu_buffer_size: 4096,
        buffer_size: 64 << 10,
        buffer_watershed: 16 << 10,
        event: EventChoice::Only(event),
        sample_period: 0,
        sample_freq: 4000,
        exclude_user: false,
        exclude_kernel: false,
        backtrace_depth: format::MAX_DEPTH as u32,
        mode: crate::params::RecordMode::Consume,
    }
}

/// The records of `bytes`, parsed one after another; `None` if any does not
/// parse or they do not end exactly at the end.
fn parse_all(bytes: &[u8]) -> Option<KVec<Fields>> {
    let mut out = KVec::new();
    let mut rest = bytes;
    while !rest.is_empty() {
        let p = format::parse(Endian::native(), rest).ok()?;
        out.push(p.fields?, GFP_KERNEL).ok()?;
        rest = rest.get(p.size()..)?;
    }
    Some(out)
}

#[kunit_tests(oprofile_rs_stream)]
mod tests {
    use super::*;

    #[test]
    fn header_reads_back_for_every_event() {
        for e in Event::ALL {
            let bytes = stream_header(e, 3, &config(e), 12345);
            let h = format::Header::read(&bytes);
            assert!(h.is_ok());
            let Ok(h) = h else { return };
            assert_eq!(usize::from(h.header_size), format::HEADER_LEN);
            assert_eq!(h.version, format::VERSION);
            assert_eq!(h.endian, Endian::native());
            assert_eq!(h.clock, format::CLOCK_LOCAL);
            let source = if e.is_hardware() {
                format::SOURCE_HARDWARE
            } else {
                format::SOURCE_SOFTWARE
            };
            assert_eq!(h.sample_source, source);
            assert_eq!(h.nr_cpus, 3);
            assert_eq!(h.backtrace_depth, format::MAX_DEPTH as u32);
            assert_eq!((h.sample_period, h.sample_freq), (0, 4000));
            assert_eq!(h.start_time, 12345);
            // Every event's name whole, NUL-terminated.
            assert_eq!(h.event_name_bytes(), e.name().as_bytes());
        }
    }

    #[test]
    fn a_corrupt_header_is_refused_at_its_field() {
        let good = stream_header(Event::CpuClock, 1, &config(Event::CpuClock), 0);
        let mut bad = good;
        bad[0] ^= 0xff;
        let e = format::Header::read(&bad);
        assert_eq!(e, Err(format::HeaderError::BadMagic));
        let mut bad = good;
        bad[13] = 3;
        let e = format::Header::read(&bad);
        assert_eq!(e, Err(format::HeaderError::BadEndianness(3)));
        assert_eq!(e.map_err(|e| e.offset()), Err(13));
        let e = format::Header::read(&good[..format::HEADER_LEN - 1]);
        assert_eq!(e.map_err(|e| e.offset()), Err(0));
    }

    #[test]
    fn a_new_stream_restates_what_was_delivered() {
        let st = ReaderState::new(2);
        assert!(st.is_ok());
        let Ok(mut st) = st else { return };
        // Nothing delivered yet: no opening records.
        assert!(st.start_stream().is_ok());
        assert!(!st.prefix_pending());

        let comm = format::Comm {
            cpu: 1,
            time: 7,
            pid: 42,
            tgid: 41,
            comm: *b"worker\0\0\0\0\0\0\0\0\0\0",
        };
        let off = format::Tracing {
            cpu: 0,
            time: 9,
            on: false,
        };
        let mut run = KVec::new();
        let lost = format::Lost {
            cpu: 0,
            time: 8,
            count: 3,
        };
        for r in [
            &comm.encoded(Endian::native())[..],
            &lost.encoded(Endian::native())[..],
            &off.encoded(Endian::native())[..],
        ] {
            assert!(run.extend_from_slice(r, GFP_KERNEL).is_ok());
        }
        // Delivered as one run split in two slices (the event buffer's
        // wrap), the cut inside the COMM record.
        let (a, b) = run.split_at(13);
        st.delivered(a, b, run.len());

        assert!(st.start_stream().is_ok());
        let chunk = st.prefix_chunk(usize::MAX);
        let recs = parse_all(chunk);
        assert!(recs.is_some());
        let Some(recs) = recs else { return };
        assert_eq!(recs.len(), 2);
        assert_eq!(recs.first(), Some(&Fields::Comm(comm)));
        assert!(matches!(
            recs.get(1),
            Some(Fields::Tracing(format::Tracing {
                cpu: 0,
                on: false,
                ..
            }))
        ));
        // Only whole records: a chunk smaller than the COMM holds nothing.
        assert!(st.prefix_chunk(format::COMM_LEN - 8).is_empty());
        assert_eq!(st.prefix_chunk(format::COMM_LEN).len(), format::COMM_LEN);
    }
}
