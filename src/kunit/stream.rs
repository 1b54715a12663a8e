// SPDX-License-Identifier: GPL-2.0

//! KUnit test of what the module writes into the stream besides samples,
//! read back with the stream format's own readers (`src/format.rs`, the ones
//! the host decoder uses): the header `/dev/oprofile/buffer` starts with, for
//! every event, and the opening records a new reader gets (the CONFIG in
//! force, the last COMM per CPU and a TRACING `off` record), restated from
//! what an earlier reader was delivered, records split across the ring's
//! wrap included.

use kernel::prelude::*;

use crate::{
    control::{
        device::stream_header,
        params::{Config, Raw},
        settings::Settings,
    },
    format::{self, Endian, Fields},
    path::reader_state::ReaderState,
    shims::perf::Event,
};

/// Settings sampling `event` (at 4000 Hz) and `extra`, if any.
fn settings(event: Event, extra: Option<Event>) -> Result<Settings> {
    let mut names = KVec::new();
    names.extend_from_slice(event.name().as_bytes(), GFP_KERNEL)?;
    if let Some(x) = extra {
        names.push(b',', GFP_KERNEL)?;
        names.extend_from_slice(x.name().as_bytes(), GFP_KERNEL)?;
    }
    let config = Config::validate(Raw {
        cpu_buffer_size: 4096,
        buffer_size: 64 << 10,
        buffer_watershed: 16 << 10,
        event: &names,
        sample_period: b"",
        sample_freq: b"4000",
        exclude_user: false,
        exclude_kernel: true,
        backtrace_depth: format::MAX_DEPTH as u64,
        user_backtrace_depth: 0,
        user_stack_size: 0,
        user_stack_fit: false,
        mode: b"consume",
    })?;
    Ok(Settings::new(config, Event::CpuClock, 1))
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
            let s = settings(e, None);
            assert!(s.is_ok());
            let Ok(s) = s else { return };
            let bytes = stream_header(&s, 3, 12345);
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
        let s = settings(Event::CpuClock, None);
        assert!(s.is_ok());
        let Ok(s) = s else { return };
        let good = stream_header(&s, 1, 0);
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
    fn the_config_record_lists_every_event() {
        let s = settings(Event::CpuClock, Some(Event::PageFaults));
        assert!(s.is_ok());
        let Ok(s) = s else { return };
        let rec = s.record(77);
        assert_eq!((rec.time, rec.generation, rec.nr_events), (77, 1, 2));
        let names: [&[u8]; 2] = [b"cpu-clock", b"page-faults"];
        let configs = [0, 2];
        for (i, d) in rec.events().iter().enumerate() {
            assert_eq!(d.perf_type, 1);
            assert_eq!(Some(d.name_bytes()), names.get(i).copied());
            assert_eq!(Some(d.config), configs.get(i).copied());
            assert_eq!(d.value, 4000);
            assert_eq!(
                d.flags,
                format::EVENT_FLAG_FREQ | format::EVENT_FLAG_EXCLUDE_KERNEL
            );
        }
        // Encoded and read back with the format's parser.
        let mut buf = [0u8; format::CONFIG_MAX_LEN];
        let len = rec.encode(Endian::native(), &mut buf);
        assert_eq!(len, Some(format::config_len(2) + format::CONFIG_EXT_LEN));
        let recs = parse_all(buf.get(..len.unwrap_or(0)).unwrap_or(&[]));
        assert_eq!(recs.as_deref(), Some(&[Fields::Config(rec)][..]));
    }

    #[test]
    fn a_new_stream_restates_what_was_delivered() {
        let s = settings(Event::CpuClock, None);
        assert!(s.is_ok());
        let Ok(s) = s else { return };
        let load = s.record(1);
        let st = ReaderState::new(2, load);
        assert!(st.is_ok());
        let Ok(mut st) = st else { return };
        // Nothing delivered yet: only the load's CONFIG, stamped anew.
        assert!(st.start_stream().is_ok());
        let recs = parse_all(st.prefix_chunk(usize::MAX));
        let c = match recs.as_deref() {
            Some([Fields::Config(c)]) => Some(*c),
            _ => None,
        };
        assert!(c.is_some());
        if let Some(c) = c {
            assert_eq!(c.generation, 1);
            assert!(c.time > 1);
        }

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
        let two = settings(Event::PageFaults, Some(Event::ContextSwitches));
        assert!(two.is_ok());
        let Ok(two) = two else { return };
        let changed = format::Config {
            generation: 2,
            ..two.record(8)
        };
        let mut cfg = [0u8; format::config_len(2) + format::CONFIG_EXT_LEN];
        assert_eq!(changed.encode(Endian::native(), &mut cfg), Some(cfg.len()));
        for r in [
            &comm.encoded(Endian::native())[..],
            &lost.encoded(Endian::native())[..],
            &cfg[..],
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
        assert_eq!(recs.len(), 3);
        // The delivered CONFIG (generation 2) first, stamped with the
        // stream's start.
        let c = match recs.first() {
            Some(Fields::Config(c)) => Some(*c),
            _ => None,
        };
        assert!(c.is_some());
        if let Some(c) = c {
            assert_eq!(c.generation, 2);
            assert_eq!(c.events(), changed.events());
            assert!(c.time > 8);
        }
        assert_eq!(recs.get(1), Some(&Fields::Comm(comm)));
        assert!(matches!(
            recs.get(2),
            Some(Fields::Tracing(format::Tracing {
                cpu: 0,
                on: false,
                ..
            }))
        ));
        // Only whole records: a chunk smaller than the CONFIG holds nothing.
        let cl = format::config_len(2) + format::CONFIG_EXT_LEN;
        assert!(st.prefix_chunk(cl - 8).is_empty());
        assert_eq!(st.prefix_chunk(cl).len(), cl);
    }

    #[test]
    fn version_2_records_read_back() {
        let e = Endian::native();
        // An extended SAMPLE with both chains, written as the sampler does:
        // the fixed part, then the chains as words.
        let head = format::SampleHead {
            cpu: 1,
            kernel: true,
            depth: 2,
            time: 5,
            pc: 0xffff_ffff_8100_0000,
            pid: 7,
            tgid: 7,
            period: 250_000,
            event: 1,
            user_depth: 3,
            ext: true,
            throttled: true,
            user_stack: 0,
        };
        let mut rec = KVec::new();
        assert!(rec.extend_from_slice(&head.encoded(e), GFP_KERNEL).is_ok());
        for w in [0xa_u64, 0xb, 0x40_1000, 0x40_2000, 0x40_3000] {
            assert!(rec.extend_from_slice(&e.u64_bytes(w), GFP_KERNEL).is_ok());
        }
        let p = format::parse(e, &rec);
        assert!(p.is_ok());
        let Ok(p) = p else { return };
        assert_eq!(p.size(), head.size());
        assert_eq!(p.fields, Some(Fields::Sample(head)));
        assert!(p.callchain().eq([0xa, 0xb]));
        assert!(p.user_callchain().eq([0x40_1000, 0x40_2000, 0x40_3000]));
        assert!(format::user_callchain(e, &rec).eq(p.user_callchain()));

        // A CONFIG of two events, and a SNAPSHOT frame.
        let mut cfg = format::Config {
            time: 3,
            generation: 2,
            mode: format::MODE_OVERWRITE,
            backtrace_depth: 8,
            user_backtrace_depth: 16,
            cpu_buffer_size: 4096,
            buffer_size: 64 << 10,
            buffer_watershed: 16 << 10,
            nr_events: 2,
            ..format::Config::default()
        };
        let flags = [
            format::EVENT_FLAG_FREQ | format::EVENT_FLAG_NMI,
            format::EVENT_FLAG_EXCLUDE_USER | format::EVENT_FLAG_EXCLUDE_KERNEL,
        ];
        for (i, (ev, f)) in cfg.events.iter_mut().zip(flags).enumerate() {
            *ev = format::EventDesc {
                perf_type: i as u32,
                flags: f,
                config: 0,
                value: 4000,
                name: format::EventDesc::name_field(b"an-event-name-longer-than-its-field"),
            };
        }
        let mut buf = [0u8; format::config_len(2) + format::CONFIG_EXT_LEN];
        assert_eq!(cfg.encode(e, &mut buf), Some(buf.len()));
        let snap = format::Snapshot {
            cpu: 1,
            time: 9,
            end: true,
            seq: 1,
            overwritten: 12,
            records: 4,
        };
        let mut run = KVec::new();
        assert!(run.extend_from_slice(&buf, GFP_KERNEL).is_ok());
        assert!(run.extend_from_slice(&snap.encoded(e), GFP_KERNEL).is_ok());
        let recs = parse_all(&run);
        assert!(recs.is_some());
        let Some(recs) = recs else { return };
        assert_eq!(recs.len(), 2);
        assert_eq!(recs.first(), Some(&Fields::Config(cfg)));
        assert_eq!(recs.get(1), Some(&Fields::Snapshot(snap)));
        assert_eq!(cfg.events().len(), 2);
        let name = cfg.events().first().map(|ev| ev.name_bytes().len());
        assert_eq!(name, Some(format::EVENT_DESC_NAME_LEN - 1));
    }
}
