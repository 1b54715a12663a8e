//! Streams written with the module's own encoders (`src/format.rs`, as
//! `src/control/device.rs`, `src/path/sampler.rs` and `src/path/sync.rs` call them) decode to
//! exactly the records encoded, whatever their fields; and the format's own
//! record reader keeps its promises on arbitrary bytes.
use oprofile_stream::oprofile_format as format;
use oprofile_stream::*;
use proptest::prelude::*;

/// One record as the module writes it.
#[allow(clippy::large_enum_variant)] // a test's few dozen values
#[derive(Debug, Clone)]
enum Written {
    Sample(format::SampleHead, Vec<u64>, Vec<u64>, Option<Stack>),
    Comm(format::Comm),
    Lost(format::Lost),
    Tracing(format::Tracing),
    Config(format::Config),
    Snapshot(format::Snapshot),
}

/// A user stack part as `src/path/sampler.rs` writes it after the callchains:
/// the registers, `copied`, then the head's `user_stack` bytes (those past
/// `copied` zero).
#[derive(Debug, Clone)]
struct Stack {
    ip: u64,
    sp: u64,
    bp: u64,
    copied: u64,
    bytes: Vec<u8>,
}

fn arb_stack() -> impl Strategy<Value = Option<Stack>> {
    let area = prop_oneof![1..=64usize, Just(format::MAX_USER_STACK / 8)].prop_map(|k| 8 * k);
    let some = (any::<(u64, u64, u64)>(), area)
        .prop_flat_map(|(regs, area)| {
            (
                Just(regs),
                Just(area),
                0..=area,
                prop::collection::vec(any::<u8>(), area),
            )
        })
        .prop_map(|((ip, sp, bp), _, copied, mut bytes)| {
            bytes[copied..].fill(0);
            Some(Stack {
                ip,
                sp,
                bp,
                copied: copied as u64,
                bytes,
            })
        });
    prop_oneof![3 => Just(None), 1 => some]
}

fn arb_event() -> impl Strategy<Value = format::EventDesc> {
    (any::<(u32, u8, u64, u64)>(), "[a-z-]{0,30}").prop_map(|((t, flags, config, value), name)| {
        format::EventDesc {
            perf_type: t,
            flags,
            config,
            value,
            name: format::EventDesc::name_field(name.as_bytes()),
        }
    })
}

fn arb_written() -> impl Strategy<Value = Written> {
    prop_oneof![
        (
            any::<(u16, bool, u64, u64, u32, u32)>(),
            any::<(u64, u16, bool)>(),
            prop::collection::vec(any::<u64>(), 0..=format::MAX_DEPTH),
            prop::collection::vec(any::<u64>(), 0..=format::MAX_USER_DEPTH),
            arb_stack(),
        )
            .prop_map(
                |(
                    (cpu, kernel, time, pc, pid, tgid),
                    (period, event, throttled),
                    chain,
                    user,
                    stack,
                )| {
                    let head = format::SampleHead {
                        cpu,
                        kernel,
                        depth: chain.len() as u8,
                        time,
                        pc,
                        pid,
                        tgid,
                        period,
                        event,
                        user_depth: user.len() as u8,
                        ext: true,
                        throttled,
                        user_stack: stack.as_ref().map_or(0, |s| s.bytes.len() as u16),
                    };
                    Written::Sample(head, chain, user, stack)
                }
            ),
        (
            any::<(u64, u32, u8, u8, u8, u64, u64, u64)>(),
            prop::collection::vec(arb_event(), 0..=format::MAX_EVENTS)
        )
            .prop_map(|((time, generation, mode, kd, ud, cbs, bs, wm), events)| {
                let mut c = format::Config {
                    time,
                    generation,
                    mode,
                    backtrace_depth: kd,
                    user_backtrace_depth: ud,
                    cpu_buffer_size: cbs,
                    buffer_size: bs,
                    buffer_watershed: wm,
                    nr_events: events.len() as u8,
                    ..format::Config::default()
                };
                c.events[..events.len()].copy_from_slice(&events);
                Written::Config(c)
            }),
        any::<(u16, u64, bool, u32, u64, u64)>().prop_map(
            |(cpu, time, end, seq, overwritten, records)| Written::Snapshot(format::Snapshot {
                cpu,
                time,
                end,
                seq,
                overwritten,
                records
            })
        ),
        (any::<(u16, u64, u32, u32)>(), any::<[u8; 16]>()).prop_map(
            |((cpu, time, pid, tgid), comm)| Written::Comm(format::Comm {
                cpu,
                time,
                pid,
                tgid,
                comm
            })
        ),
        any::<(u16, u64, u64)>().prop_map(|(cpu, time, count)| Written::Lost(format::Lost {
            cpu,
            time,
            count
        })),
        any::<(u16, u64, bool)>().prop_map(|(cpu, time, on)| Written::Tracing(format::Tracing {
            cpu,
            time,
            on
        })),
    ]
}

/// The header `src/control/device.rs` writes.
fn module_header(name: &str, start_time: u64) -> format::Header {
    format::Header {
        version: format::VERSION,
        header_size: format::HEADER_LEN as u16,
        word_size: format::WORD_SIZE,
        endian: format::Endian::native(),
        clock: format::CLOCK_LOCAL,
        sample_source: format::SOURCE_SOFTWARE,
        nr_cpus: 2,
        backtrace_depth: format::MAX_DEPTH as u32,
        sample_period: 1_000_000,
        sample_freq: 0,
        start_time,
        event_name: format::event_name_field(name.as_bytes()),
    }
}

/// The bytes the module's writers produce for `recs`: the header into a
/// `[u8; HEADER_LEN]`, each record's fixed part from its encoder, and a
/// SAMPLE's callchain after it as words in the stream's order.
fn module_stream(name: &str, recs: &[Written]) -> Vec<u8> {
    let e = format::Endian::native();
    let mut header = [0u8; format::HEADER_LEN];
    assert_eq!(
        module_header(name, 5).encode(&mut header),
        Some(format::HEADER_LEN)
    );
    let mut out = header.to_vec();
    for r in recs {
        match r {
            Written::Sample(head, chain, user, stack) => {
                out.extend_from_slice(&head.encoded(e));
                for w in chain.iter().chain(user) {
                    out.extend_from_slice(&e.u64_bytes(*w));
                }
                if let Some(s) = stack {
                    for w in [s.ip, s.sp, s.bp, s.copied] {
                        out.extend_from_slice(&e.u64_bytes(w));
                    }
                    out.extend_from_slice(&s.bytes);
                }
            }
            Written::Comm(c) => out.extend_from_slice(&c.encoded(e)),
            Written::Lost(l) => out.extend_from_slice(&l.encoded(e)),
            Written::Tracing(t) => out.extend_from_slice(&t.encoded(e)),
            Written::Config(c) => {
                let mut b = vec![0u8; c.encoded_len()];
                assert_eq!(c.encode(e, &mut b), Some(b.len()));
                out.extend_from_slice(&b);
            }
            Written::Snapshot(s) => out.extend_from_slice(&s.encoded(e)),
        }
    }
    out
}

/// What the decoder must return for `r`.
fn expected(r: &Written) -> Record {
    match r {
        Written::Sample(h, chain, user, stack) => Record::Sample(Sample {
            cpu: h.cpu,
            kernel: h.kernel,
            time: h.time,
            pc: h.pc,
            pid: h.pid,
            tgid: h.tgid,
            callchain: chain.clone(),
            user_callchain: user.clone(),
            period: h.period,
            event: h.event,
            throttled: h.throttled,
            user_stack: stack.as_ref().map(|s| UserStack {
                ip: s.ip,
                sp: s.sp,
                bp: s.bp,
                size: h.user_stack,
                data: s.bytes[..s.copied as usize].to_vec(),
            }),
        }),
        Written::Config(c) => Record::Config(Box::new(*c)),
        Written::Snapshot(s) => Record::Snapshot(*s),
        Written::Comm(c) => Record::Comm(Comm {
            cpu: c.cpu,
            time: c.time,
            pid: c.pid,
            tgid: c.tgid,
            comm: c.comm,
        }),
        Written::Lost(l) => Record::Lost(Lost {
            cpu: l.cpu,
            time: l.time,
            count: l.count,
        }),
        Written::Tracing(t) => Record::Tracing(Tracing {
            cpu: t.cpu,
            on: t.on,
            time: t.time,
        }),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn module_encoded_streams_decode_exactly(
        recs in prop::collection::vec(arb_written(), 0..24),
        name in "[a-z-]{0,60}",
    ) {
        let data = module_stream(&name, &recs);
        let d = decode(&data).unwrap();
        prop_assert!(d.error.is_none(), "{:?}", d.error);
        prop_assert!(d.warnings.is_empty(), "{:?}", d.warnings);
        prop_assert_eq!(d.valid_len, data.len() as u64);
        prop_assert_eq!(d.header.header_size as usize, HEADER_SIZE);
        prop_assert_eq!(d.header.endian, Endian::native());
        prop_assert_eq!(d.header.start_time, 5);
        let cut = name.len().min(EVENT_NAME_SIZE - 1);
        prop_assert_eq!(d.header.event_name(), &name[..cut]);
        let want: Vec<Record> = recs.iter().map(expected).collect();
        prop_assert_eq!(&d.records, &want);
        // And the crate's encoder (on the same encoders) gives the same bytes.
        let mut enc = Encoder::new(&d.header);
        for r in &want {
            enc.record(r);
        }
        prop_assert_eq!(enc.finish(), data);
    }

    #[test]
    fn format_parse_holds_its_promises_on_any_bytes(
        data in prop::collection::vec(any::<u8>(), 0..200),
        big in any::<bool>(),
    ) {
        let e = if big { Endian::Big } else { Endian::Little };
        match format::parse(e, &data) {
            Ok(p) => {
                let size = usize::from(e.read_u16(&data, 2).unwrap());
                prop_assert_eq!(p.size(), size);
                prop_assert!(size >= 8 && size % 8 == 0 && size <= data.len());
                prop_assert_eq!(p.bytes, &data[..size]);
                prop_assert!(p.needed <= size);
                prop_assert_eq!(p.oversized(), p.needed < size);
                let chain: Vec<u64> = p.callchain().collect();
                let user: Vec<u64> = p.user_callchain().collect();
                match p.fields {
                    Some(format::Fields::Sample(h)) => {
                        prop_assert_eq!(chain.len(), usize::from(h.depth));
                        prop_assert_eq!(user.len(), usize::from(h.user_depth));
                        prop_assert_eq!(p.needed, h.size());
                    }
                    Some(format::Fields::Config(c)) => {
                        prop_assert!(usize::from(c.nr_events) <= format::MAX_EVENTS);
                        prop_assert!(chain.is_empty() && user.is_empty());
                    }
                    Some(_) => prop_assert!(chain.is_empty() && user.is_empty()),
                    None => prop_assert!(!(1..=6).contains(&p.kind)),
                }
            }
            Err(format::RecordError::Truncated) => {
                let size = e.read_u16(&data, 2).map(usize::from);
                prop_assert!(data.len() < 8 || size.is_some_and(|s| s > data.len()));
            }
            Err(format::RecordError::BadSize { size, .. }) => {
                prop_assert!(size < 8 || size % 8 != 0);
            }
            Err(format::RecordError::TooSmall { size, needed, .. }) => {
                prop_assert!(usize::from(size) < needed);
            }
        }
    }
}

#[test]
fn a_full_depth_sample_is_the_largest_record() {
    let head = format::SampleHead {
        cpu: 1,
        kernel: true,
        depth: format::MAX_DEPTH as u8,
        time: 1,
        pc: 2,
        pid: 3,
        tgid: 4,
        period: 5,
        event: 1,
        user_depth: format::MAX_USER_DEPTH as u8,
        ext: true,
        throttled: true,
        user_stack: 0,
    };
    let chain: Vec<u64> = (0..format::MAX_DEPTH as u64).collect();
    let user: Vec<u64> = (100..100 + format::MAX_USER_DEPTH as u64).collect();
    let data = module_stream(
        "cycles",
        &[Written::Sample(head, chain.clone(), user.clone(), None)],
    );
    assert_eq!(data.len(), HEADER_SIZE + format::MAX_RECORD);
    let d = decode(&data).unwrap();
    match &d.records[..] {
        [Record::Sample(s)] => {
            assert_eq!(s.callchain, chain);
            assert_eq!(s.user_callchain, user);
            assert_eq!((s.period, s.event), (5, 1));
        }
        other => panic!("{other:?}"),
    }
}
