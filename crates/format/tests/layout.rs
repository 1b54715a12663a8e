//! The byte layout of `Documentation/stream-format.md`, checked on the
//! module's own encoders and readers (`src/format.rs`) byte by byte.
use oprofile_format::*;

fn le16(v: u16) -> [u8; 2] {
    v.to_le_bytes()
}

#[test]
fn sample_layout_version_1() {
    let head = SampleHead {
        cpu: 3,
        kernel: true,
        depth: 2,
        time: 0x1122,
        pc: 0xffff_ffff_8100_0000,
        pid: 42,
        tgid: 41,
        period: 0,
        event: 0,
        user_depth: 0,
        ext: false,
        throttled: false,
        user_stack: 0,
    };
    assert_eq!(head.size(), SAMPLE_LEN + 16);
    let mut rec = vec![0u8; head.size()];
    head.encode(Endian::Little, &mut rec);
    assert_eq!(
        encode_callchain(Endian::Little, &[0xa, 0xb], &mut rec),
        Some(48)
    );
    assert_eq!(&rec[0..8], &[1, 0, 48, 0, 3, 0, 1, 2]);
    assert_eq!(&rec[8..16], &0x1122u64.to_le_bytes());
    assert_eq!(&rec[16..24], &0xffff_ffff_8100_0000u64.to_le_bytes());
    assert_eq!(&rec[24..28], &42u32.to_le_bytes());
    assert_eq!(&rec[28..32], &41u32.to_le_bytes());
    assert_eq!(&rec[32..40], &0xau64.to_le_bytes());
    assert_eq!(&rec[40..48], &0xbu64.to_le_bytes());
    assert_eq!(SampleHead::read(Endian::Little, &rec), Some(head));
    assert_eq!(
        callchain(Endian::Little, &rec).collect::<Vec<_>>(),
        [0xa, 0xb]
    );
    assert_eq!(user_callchain(Endian::Little, &rec).count(), 0);
    // A user-mode sample has no flag; the chain must fit the buffer.
    let user = SampleHead {
        kernel: false,
        depth: 0,
        ..head
    };
    let mut b = [0u8; SAMPLE_LEN];
    user.encode(Endian::Little, &mut b);
    assert_eq!(b[6..8], [0, 0]);
    assert_eq!(encode_callchain(Endian::Little, &[1, 2, 3], &mut rec), None);
}

#[test]
fn sample_layout_version_2() {
    let head = SampleHead {
        cpu: 3,
        kernel: true,
        depth: 2,
        time: 0x1122,
        pc: 0xffff_ffff_8100_0000,
        pid: 42,
        tgid: 41,
        period: 0x3344,
        event: 5,
        user_depth: 3,
        ext: true,
        throttled: false,
        user_stack: 0,
    };
    assert_eq!(head.size(), SAMPLE_EXT_LEN + 40);
    let mut rec = vec![0u8; head.size()];
    rec[..SAMPLE_EXT_LEN].copy_from_slice(&head.encoded(Endian::Little));
    assert_eq!(
        encode_callchains(
            Endian::Little,
            SAMPLE_EXT_LEN,
            &[0xa, 0xb],
            &[0x10, 0x20, 0x30],
            &mut rec
        ),
        Some(88)
    );
    assert_eq!(&rec[0..8], &[1, 0, 88, 0, 3, 0, 3, 2]);
    assert_eq!(&rec[8..16], &0x1122u64.to_le_bytes());
    assert_eq!(&rec[16..24], &0xffff_ffff_8100_0000u64.to_le_bytes());
    assert_eq!(&rec[24..28], &42u32.to_le_bytes());
    assert_eq!(&rec[28..32], &41u32.to_le_bytes());
    assert_eq!(&rec[32..40], &0x3344u64.to_le_bytes());
    assert_eq!(&rec[40..48], &[5, 0, 3, 0, 0, 0, 0, 0]);
    assert_eq!(&rec[48..56], &0xau64.to_le_bytes());
    assert_eq!(&rec[64..72], &0x10u64.to_le_bytes());
    assert_eq!(&rec[80..88], &0x30u64.to_le_bytes());
    assert_eq!(SampleHead::read(Endian::Little, &rec), Some(head));
    let e = Endian::Little;
    assert_eq!(callchain(e, &rec).collect::<Vec<_>>(), [0xa, 0xb]);
    assert_eq!(
        user_callchain(e, &rec).collect::<Vec<_>>(),
        [0x10, 0x20, 0x30]
    );
    // The THROTTLED flag is bit 2 of byte 6 and reads back; nothing else
    // of the record changes.
    let throttled = SampleHead {
        throttled: true,
        ..head
    };
    let mut t = rec.clone();
    t[..SAMPLE_EXT_LEN].copy_from_slice(&throttled.encoded(Endian::Little));
    assert_eq!(t[6], 1 | 2 | 4);
    assert_eq!(SAMPLE_FLAG_THROTTLED, 4);
    t[6] = rec[6];
    assert_eq!(t, rec);
    t[6] |= SAMPLE_FLAG_THROTTLED;
    assert_eq!(SampleHead::read(Endian::Little, &t), Some(throttled));
    let p = parse(e, &rec).unwrap();
    assert_eq!(p.fields, Some(Fields::Sample(head)));
    assert_eq!(p.user_callchain().count(), 3);
    assert!(!p.oversized());
    // A user chain that needs more than the size: too small.
    let mut short = rec.clone();
    short[42] = 4;
    assert_eq!(
        parse(e, &short),
        Err(RecordError::TooSmall {
            kind: SAMPLE,
            size: 88,
            needed: 96
        })
    );
    // Cut records give the entries they hold, never more.
    assert_eq!(user_callchain(e, &rec[..72]).count(), 1);
    assert_eq!(callchain(e, &rec[..56]).count(), 1);
    assert_eq!(user_callchain(e, &rec[..40]).count(), 0);
    // Big-endian: the same fields in the other order.
    let mut be = [0u8; SAMPLE_EXT_LEN];
    head.encode(Endian::Big, &mut be);
    assert_eq!(&be[32..40], &0x3344u64.to_be_bytes());
    assert_eq!(&be[40..43], &[0, 5, 3]);
    assert_eq!(SampleHead::read(Endian::Big, &be), Some(head));
}

#[test]
fn config_layout() {
    let mut c = Config {
        time: 9,
        generation: 2,
        mode: MODE_OVERWRITE,
        backtrace_depth: 16,
        user_backtrace_depth: 32,
        cpu_buffer_size: 65536,
        buffer_size: 1 << 20,
        buffer_watershed: 1 << 18,
        nr_events: 2,
        cgroup: 0x1234_5678_9abc,
        pid: 0x4321,
        ..Config::default()
    };
    c.events[0] = EventDesc {
        perf_type: 1,
        flags: EVENT_FLAG_FREQ,
        config: 0,
        value: 4000,
        name: EventDesc::name_field(b"cpu-clock"),
    };
    c.events[1] = EventDesc {
        perf_type: 1,
        flags: EVENT_FLAG_EXCLUDE_KERNEL,
        config: 2,
        value: 10,
        name: EventDesc::name_field(b"page-faults-with-a-very-long-name"),
    };
    assert_eq!(c.encoded_len(), 48 + 96 + CONFIG_EXT_LEN);
    let mut b = vec![0u8; c.encoded_len()];
    assert_eq!(c.encode(Endian::Little, &mut b), Some(160));
    assert_eq!(&b[0..8], &[5, 0, 160, 0, 0, 0, 2, 1]);
    assert_eq!(&b[8..16], &9u64.to_le_bytes());
    assert_eq!(&b[16..24], &[2, 0, 0, 0, 16, 32, 0, 0]);
    assert_eq!(&b[24..32], &65536u64.to_le_bytes());
    assert_eq!(&b[32..40], &(1u64 << 20).to_le_bytes());
    assert_eq!(&b[40..48], &(1u64 << 18).to_le_bytes());
    assert_eq!(&b[48..56], &[1, 0, 0, 0, 1, 0, 0, 0]);
    assert_eq!(&b[64..72], &4000u64.to_le_bytes());
    assert_eq!(&b[72..81], b"cpu-clock");
    assert_eq!(&b[96..104], &[1, 0, 0, 0, 4, 0, 0, 0]);
    assert_eq!(&b[104..112], &2u64.to_le_bytes());
    // Names are cut at 23 bytes, NUL-terminated.
    assert_eq!(&b[120..143], b"page-faults-with-a-very");
    assert_eq!(b[143], 0);
    // The extension: the cgroup filter's id, the profiled process, zeros.
    assert_eq!(&b[144..152], &0x1234_5678_9abcu64.to_le_bytes());
    assert_eq!(&b[152..160], &[0x21, 0x43, 0, 0, 0, 0, 0, 0]);
    let p = parse(Endian::Little, &b).unwrap();
    assert_eq!(p.fields, Some(Fields::Config(c)));
    assert!(!p.oversized());
    // A record of the modules with the filter and without `pid`: every
    // task, and not oversized.
    let mut mid = b[..152].to_vec();
    mid[2] = 152;
    let p = parse(Endian::Little, &mid).unwrap();
    assert_eq!(p.fields, Some(Fields::Config(Config { pid: 0, ..c })));
    assert!(!p.oversized());
    // A record of the modules before the extension: no filter, and not
    // oversized either.
    let mut old = b[..144].to_vec();
    old[2] = 144;
    let p = parse(Endian::Little, &old).unwrap();
    assert_eq!(
        p.fields,
        Some(Fields::Config(Config {
            cgroup: 0,
            pid: 0,
            ..c
        }))
    );
    assert!(!p.oversized());
    assert_eq!(c.events().len(), 2);
    assert_eq!(c.events()[1].name_bytes(), b"page-faults-with-a-very");
    // Short of its events: too small; a short buffer: nothing written.
    assert_eq!(
        parse(Endian::Little, &{
            let mut s = b.clone();
            s[6] = 3;
            s
        }),
        Err(RecordError::TooSmall {
            kind: CONFIG,
            size: 160,
            needed: 192
        })
    );
    assert_eq!(c.encode(Endian::Little, &mut [0u8; 100]), None);
    // More events than MAX_EVENTS: the first MAX_EVENTS are read.
    let n = MAX_EVENTS + 2;
    let mut big = vec![0u8; config_len(n as u8)];
    big[..48].copy_from_slice(&b[..48]);
    let len = big.len() as u16;
    big[2..4].copy_from_slice(&len.to_le_bytes());
    big[6] = n as u8;
    let p = parse(Endian::Little, &big).unwrap();
    match p.fields {
        Some(Fields::Config(r)) => assert_eq!(usize::from(r.nr_events), MAX_EVENTS),
        other => panic!("{other:?}"),
    }
}

#[test]
fn snapshot_layout() {
    let s = Snapshot {
        cpu: 1,
        time: 77,
        end: false,
        seq: 3,
        overwritten: 1000,
        records: 20,
    };
    let b = s.encoded(Endian::Little);
    assert_eq!(&b[0..8], &[6, 0, 40, 0, 1, 0, 0, 0]);
    assert_eq!(&b[8..16], &77u64.to_le_bytes());
    assert_eq!(&b[16..24], &[3, 0, 0, 0, 0, 0, 0, 0]);
    assert_eq!(&b[24..32], &1000u64.to_le_bytes());
    assert_eq!(&b[32..40], &20u64.to_le_bytes());
    assert_eq!(
        parse(Endian::Little, &b).unwrap().fields,
        Some(Fields::Snapshot(s))
    );
    let end = Snapshot {
        end: true,
        cpu: 0,
        ..s
    };
    assert_eq!(end.encoded(Endian::Little)[6], 1);
    assert_eq!(type_name(SNAPSHOT), "SNAPSHOT");
    assert_eq!(type_name(CONFIG), "CONFIG");
}

#[test]
fn comm_lost_tracing_layout() {
    let comm = Comm {
        cpu: 1,
        time: 5,
        pid: 7,
        tgid: 6,
        comm: *b"kworker/0:1\0\0\0\0\0",
    };
    let b = comm.encoded(Endian::Little);
    assert_eq!(&b[0..8], &[2, 0, 40, 0, 1, 0, 0, 0]);
    assert_eq!(&b[8..16], &5u64.to_le_bytes());
    assert_eq!(&b[16..20], &7u32.to_le_bytes());
    assert_eq!(&b[20..24], &6u32.to_le_bytes());
    assert_eq!(&b[24..40], b"kworker/0:1\0\0\0\0\0");
    assert_eq!(Comm::read(Endian::Little, &b), Some(comm));

    let lost = Lost {
        cpu: 2,
        time: 9,
        count: 17,
    };
    let b = lost.encoded(Endian::Little);
    assert_eq!(&b[0..8], &[3, 0, 24, 0, 2, 0, 0, 0]);
    assert_eq!(&b[8..16], &9u64.to_le_bytes());
    assert_eq!(&b[16..24], &17u64.to_le_bytes());
    assert_eq!(Lost::read(Endian::Little, &b), Some(lost));

    for on in [false, true] {
        let t = Tracing {
            cpu: 0,
            time: 11,
            on,
        };
        let b = t.encoded(Endian::Little);
        assert_eq!(&b[0..8], &[4, 0, 16, 0, 0, 0, u8::from(on), 0]);
        assert_eq!(&b[8..16], &11u64.to_le_bytes());
        assert_eq!(Tracing::read(Endian::Little, &b), Some(t));
    }
}

#[test]
fn big_endian_fields() {
    let b = Lost {
        cpu: 0x0102,
        time: 0x0304,
        count: 0x0506,
    }
    .encoded(Endian::Big);
    assert_eq!(&b[0..6], &[0, 3, 0, 24, 1, 2]);
    assert_eq!(&b[8..16], &[0, 0, 0, 0, 0, 0, 3, 4]);
    assert_eq!(record_len(Endian::Big, &b), Some(24));
    assert_eq!(record_len(Endian::Little, &b), Some(24 << 8));
}

fn module_header(name: &str) -> Header {
    Header {
        version: VERSION,
        header_size: HEADER_LEN as u16,
        word_size: WORD_SIZE,
        endian: Endian::Little,
        clock: CLOCK_LOCAL,
        sample_source: SOURCE_SOFTWARE,
        nr_cpus: 4,
        backtrace_depth: 8,
        sample_period: 1000,
        sample_freq: 0,
        start_time: 7,
        event_name: event_name_field(name.as_bytes()),
    }
}

#[test]
fn header_layout() {
    let h = module_header("cpu-clock");
    let mut b = [0xffu8; HEADER_LEN + 8];
    assert_eq!(h.encode(&mut b), Some(HEADER_LEN));
    assert_eq!(&b[0..8], b"OPRFRS\0\n");
    assert_eq!(&b[8..16], &[2, 0, 96, 0, 8, 1, 1, 2]);
    assert_eq!(&b[16..20], &4u32.to_le_bytes());
    assert_eq!(&b[20..24], &8u32.to_le_bytes());
    assert_eq!(&b[24..32], &1000u64.to_le_bytes());
    assert_eq!(&b[32..40], &0u64.to_le_bytes());
    assert_eq!(&b[40..48], &7u64.to_le_bytes());
    assert_eq!(&b[48..58], b"cpu-clock\0");
    assert!(b[58..96].iter().all(|&c| c == 0));
    assert_eq!(b[96], 0xff, "nothing written past the header");
    assert_eq!(Header::read(&b[..HEADER_LEN]), Ok(h.clone()));
    assert_eq!(h.event_name_bytes(), b"cpu-clock");
    // Too short a buffer: nothing written.
    let mut short = [0u8; HEADER_LEN - 1];
    assert_eq!(h.encode(&mut short), None);
    assert!(short.iter().all(|&c| c == 0));
}

#[test]
fn event_names_are_cut_at_47_bytes_and_nul_terminated() {
    let long = "x".repeat(60);
    let f = event_name_field(long.as_bytes());
    assert_eq!(&f[..EVENT_NAME_LEN - 1], &long.as_bytes()[..47]);
    assert_eq!(f[EVENT_NAME_LEN - 1], 0);
    let h = module_header("stalled-cycles-frontend");
    assert_eq!(h.event_name_bytes(), b"stalled-cycles-frontend");
}

#[test]
fn old_64_byte_header_reads_with_a_16_byte_name() {
    let mut h = module_header("branch-instructions");
    h.header_size = MIN_HEADER_LEN as u16;
    let mut b = [0u8; MIN_HEADER_LEN];
    assert_eq!(h.encode(&mut b), Some(MIN_HEADER_LEN));
    assert_eq!(&b[10..12], &le16(64));
    let r = Header::read(&b).unwrap();
    assert_eq!(r.header_size, 64);
    // The field's 16 bytes are all read (the old module wrote 15 and a NUL).
    assert_eq!(r.event_name_bytes(), b"branch-instructi");
    assert!(r.event_name[16..].iter().all(|&c| c == 0));
}

#[test]
fn header_errors_name_their_field() {
    let mut b = [0u8; HEADER_LEN];
    module_header("cpu-clock").encode(&mut b).unwrap();
    let check = |bytes: &[u8], want: HeaderError, at: usize| {
        let e = Header::read(bytes).unwrap_err();
        assert_eq!(e, want);
        assert_eq!(e.offset(), at);
    };
    check(&b[..5], HeaderError::Truncated { len: 5 }, 0);
    check(b"OPRFxx", HeaderError::BadMagic, 0);
    check(&b[..13], HeaderError::Truncated { len: 13 }, 0);
    check(&b[..95], HeaderError::Truncated { len: 95 }, 0);
    let mut bad = b;
    bad[0] = b'X';
    check(&bad, HeaderError::BadMagic, 0);
    let mut bad = b;
    bad[13] = 3;
    check(&bad, HeaderError::BadEndianness(3), 13);
    let mut bad = b;
    bad[8] = 3;
    check(&bad, HeaderError::UnsupportedVersion(3), 8);
    let mut bad = b;
    bad[8] = 0;
    check(&bad, HeaderError::UnsupportedVersion(0), 8);
    // Version 1 streams are still read.
    let mut old = b;
    old[8] = 1;
    assert_eq!(Header::read(&old).map(|h| h.version), Ok(1));
    let mut bad = b;
    bad[10] = 63;
    check(&bad, HeaderError::BadHeaderSize(63), 10);
    let mut bad = b;
    bad[12] = 4;
    check(&bad, HeaderError::UnsupportedWordSize(4), 12);
}

#[test]
fn parse_checks_sizes() {
    let e = Endian::Little;
    let lost = Lost {
        cpu: 1,
        time: 2,
        count: 3,
    }
    .encoded(e);
    let p = parse(e, &lost).unwrap();
    assert_eq!(p.kind, LOST);
    assert_eq!(p.size(), LOST_LEN);
    assert!(!p.oversized());
    assert_eq!(
        p.fields,
        Some(Fields::Lost(Lost {
            cpu: 1,
            time: 2,
            count: 3
        }))
    );
    assert_eq!(parse(e, &lost[..7]), Err(RecordError::Truncated));
    assert_eq!(parse(e, &lost[..16]), Err(RecordError::Truncated));
    let with_size = |size: u16| {
        let mut r = lost.to_vec();
        r.extend_from_slice(&[0; 16]);
        r[2..4].copy_from_slice(&size.to_le_bytes());
        r
    };
    assert_eq!(
        parse(e, &with_size(12)),
        Err(RecordError::BadSize {
            kind: LOST,
            size: 12
        })
    );
    assert_eq!(
        parse(e, &with_size(0)),
        Err(RecordError::BadSize {
            kind: LOST,
            size: 0
        })
    );
    assert_eq!(
        parse(e, &with_size(16)),
        Err(RecordError::TooSmall {
            kind: LOST,
            size: 16,
            needed: LOST_LEN
        })
    );
    let big = with_size(32);
    let p = parse(e, &big).unwrap();
    assert!(p.oversized());
    assert_eq!(p.size(), 32);
    // A SAMPLE whose depth needs more than its size.
    let head = SampleHead {
        cpu: 0,
        kernel: true,
        depth: 0,
        time: 1,
        pc: 2,
        pid: 3,
        tgid: 4,
        period: 0,
        event: 0,
        user_depth: 0,
        ext: false,
        throttled: false,
        user_stack: 0,
    };
    let mut s = [0u8; SAMPLE_LEN];
    head.encode(e, &mut s);
    s[7] = 1;
    assert_eq!(
        parse(e, &s),
        Err(RecordError::TooSmall {
            kind: SAMPLE,
            size: 32,
            needed: 40
        })
    );
    // An unknown type is returned for skipping.
    let mut u = [0u8; 24];
    Prefix {
        kind: 99,
        size: 24,
        cpu: 0,
        b6: 0,
        b7: 0,
    }
    .write(e, &mut u);
    let p = parse(e, &u).unwrap();
    assert_eq!((p.kind, p.size(), p.fields), (99, 24, None));
    assert_eq!(type_name(99), "unknown");
    assert_eq!(type_name(SAMPLE), "SAMPLE");
}

#[test]
fn limits() {
    assert_eq!(MAX_DEPTH, 64);
    assert_eq!(
        MAX_RECORD,
        sample_ext_len(MAX_DEPTH as u8, MAX_USER_DEPTH as u8)
    );
    const { assert!(MAX_RECORD >= CONFIG_MAX_LEN) };
    assert!(MAX_RECORD <= usize::from(u16::MAX));
    assert_eq!(MAX_RECORD % RECORD_ALIGN, 0);
    assert_eq!(
        Endian::from_code(Endian::native().code()),
        Some(Endian::native())
    );
    assert_eq!(Endian::from_code(0), None);
}

/// The user stack part (`SAMPLE_FLAG_USER_STACK`): after the callchains, the
/// registers, the count copied and the area, whose size is at byte 44.
#[test]
fn sample_user_stack_part() {
    let e = Endian::Little;
    let head = SampleHead {
        cpu: 1,
        kernel: false,
        depth: 0,
        time: 7,
        pc: 0x40_1000,
        pid: 9,
        tgid: 9,
        period: 100,
        event: 0,
        user_depth: 1,
        ext: true,
        throttled: false,
        user_stack: 16,
    };
    assert_eq!(head.size(), SAMPLE_EXT_LEN + 8 + USER_STACK_REGS_LEN + 16);
    let mut rec = vec![0u8; head.size()];
    rec[..SAMPLE_EXT_LEN].copy_from_slice(&head.encoded(e));
    assert_eq!(rec[6], SAMPLE_FLAG_EXT | SAMPLE_FLAG_USER_STACK);
    assert_eq!(SAMPLE_FLAG_USER_STACK, 8);
    assert_eq!(&rec[2..4], &le16(head.size() as u16));
    assert_eq!(&rec[44..46], &le16(16));
    let at = SAMPLE_EXT_LEN + 8;
    rec[SAMPLE_EXT_LEN..at].copy_from_slice(&0x40_2000u64.to_le_bytes());
    for (i, v) in [0x40_1000u64, 0x7ffd_0000, 0x7ffd_0040, 12]
        .iter()
        .enumerate()
    {
        rec[at + 8 * i..at + 8 * i + 8].copy_from_slice(&v.to_le_bytes());
    }
    rec[at + 32..at + 44].copy_from_slice(b"stack bytes!");
    assert_eq!(SampleHead::read(e, &rec), Some(head));
    let p = parse(e, &rec).unwrap();
    assert_eq!(p.needed, rec.len());
    assert!(!p.oversized());
    assert_eq!(p.user_callchain().collect::<Vec<_>>(), [0x40_2000]);
    let s = p.user_stack().unwrap();
    assert_eq!((s.ip, s.sp, s.bp), (0x40_1000, 0x7ffd_0000, 0x7ffd_0040));
    assert_eq!(s.data, b"stack bytes!");
    // A count copied above the area is clamped to it.
    let mut over = rec.clone();
    over[at + 24..at + 32].copy_from_slice(&1000u64.to_le_bytes());
    assert_eq!(user_stack(e, &over).unwrap().data.len(), 16);
    // A record too short for its part: too small, and no part read.
    let mut short = rec.clone();
    short.truncate(rec.len() - 8);
    let short_len = short.len() as u16;
    short[2..4].copy_from_slice(&le16(short_len));
    assert!(matches!(
        parse(e, &short),
        Err(RecordError::TooSmall { needed, .. }) if needed == rec.len()
    ));
    assert_eq!(user_stack(e, &short), None);
    // Without the flag the bytes at 44 mean nothing and no part is read:
    // the earlier records.
    let mut plain = rec.clone();
    plain[6] &= !SAMPLE_FLAG_USER_STACK;
    let p = parse(e, &plain).unwrap();
    assert_eq!(p.needed, SAMPLE_EXT_LEN + 8);
    assert!(p.oversized());
    assert_eq!(p.user_stack(), None);
    // Sizes: the largest record with the largest copy still fits the u16.
    assert_eq!(max_record(0), MAX_RECORD);
    assert_eq!(
        MAX_STACK_RECORD,
        MAX_RECORD + USER_STACK_REGS_LEN + MAX_USER_STACK
    );
    const { assert!(MAX_STACK_RECORD <= u16::MAX as usize) };
    assert_eq!(CONFIG_KEYS.last(), Some(&"pid"));
}

/// `frame` (the recorder's scan) checks every record as `parse` does, and a
/// SAMPLE's `sample_scan` reads the fields `SampleHead::read` reads: on
/// valid records of each type, and on them with random bytes of their
/// first 48 changed and random cuts. Seeded: `OPROFILE_RS_SEED=N` replays.
#[test]
fn frame_checks_as_parse_and_sample_scan_reads_as_sample_head() {
    let seed = std::env::var("OPROFILE_RS_SEED")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
                | 1
        });
    println!("seed {seed} (OPROFILE_RS_SEED={seed} replays it)");
    let mut x = seed;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for e in [Endian::Little, Endian::Big] {
        let head = |ext: bool, user_depth: u8, user_stack: u16| SampleHead {
            cpu: 1,
            kernel: user_depth == 0,
            depth: 2,
            time: 1_000_000_007,
            pc: 0xffff_ffff_8100_0000,
            pid: 42,
            tgid: 41,
            period: 1000,
            event: 1,
            user_depth,
            ext,
            throttled: true,
            user_stack,
        };
        let sample = |h: SampleHead| {
            let mut r = vec![0u8; h.size()];
            h.encode(e, &mut r);
            r
        };
        let mut valid = vec![
            sample(head(false, 0, 0)),
            sample(head(true, 3, 0)),
            sample(head(true, 0, 16)),
            Comm {
                cpu: 0,
                time: 5,
                pid: 7,
                tgid: 7,
                comm: *b"workload\0\0\0\0\0\0\0\0",
            }
            .encoded(e)
            .to_vec(),
            Lost {
                cpu: 1,
                time: 9,
                count: 4,
            }
            .encoded(e)
            .to_vec(),
        ];
        let mut sw = [0u8; SWITCH_LEN];
        Switch {
            cpu: 1,
            time: 11,
            pid: 3,
            tgid: 3,
            reason: SwitchReason::Idle,
            state: 0x402,
            exec_runtime: 100,
            run_delay: Some(7),
        }
        .encode(e, &mut sw);
        valid.push(sw.to_vec());
        for _ in 0..20_000 {
            let mut r = valid[next() as usize % valid.len()].clone();
            // Room past the record, so that a larger size can still fit.
            r.extend_from_slice(&[0u8; 64]);
            for _ in 0..next() % 4 {
                let at = next() as usize % 48;
                r[at] = next() as u8;
            }
            if next() % 4 == 0 {
                r.truncate(next() as usize % r.len());
            }
            let f = frame(e, &r);
            let p = parse(e, &r);
            // The recorder's fast path: what `frame` and `sample_scan` give
            // for an extended SAMPLE without a user stack in the machine's
            // order, nothing for every other record.
            if e == Endian::native() {
                let expected = f.as_ref().ok().and_then(|f| {
                    let plain =
                        f.prefix.b6 & (SAMPLE_FLAG_EXT | SAMPLE_FLAG_USER_STACK) == SAMPLE_FLAG_EXT;
                    plain
                        .then(|| f.sample_scan(e).map(|s| (f.bytes.len(), s)))
                        .flatten()
                });
                assert_eq!(native_sample_scan(&r), expected, "seed {seed}: {r:?}");
            }
            match (&f, &p) {
                (Ok(f), Ok(p)) => {
                    assert_eq!(
                        (f.prefix.kind, f.bytes, f.needed),
                        (p.kind, p.bytes, p.needed),
                        "seed {seed}"
                    );
                    let scan = f.sample_scan(e);
                    match p.fields {
                        Some(Fields::Sample(s)) => assert_eq!(
                            scan,
                            Some(SampleScan {
                                time: s.time,
                                tgid: s.tgid,
                                kernel: s.kernel,
                                throttled: s.throttled,
                                user_depth: s.user_depth,
                                user_stack: s.user_stack,
                            }),
                            "seed {seed}"
                        ),
                        _ => assert_eq!(scan, None, "seed {seed}"),
                    }
                }
                (Err(a), Err(b)) => assert_eq!(a, b, "seed {seed}"),
                _ => panic!("seed {seed}: frame {f:?} against parse {p:?} on {r:?}"),
            }
        }
    }
}

/// The module writes a SAMPLE's head as words (`native_words`): their bytes
/// are `encoded`'s in the machine's order, for heads with and without a user
/// part, throttled or not, kernel or user, at the field's extremes.
#[test]
fn native_words_are_the_encoded_bytes() {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for i in 0..2_000 {
        let r = next();
        let h = SampleHead {
            cpu: r as u16,
            kernel: r & 1 != 0,
            depth: (r >> 8) as u8 % 65,
            time: if i == 0 { u64::MAX } else { next() },
            pc: next(),
            pid: (r >> 16) as u32,
            tgid: (r >> 24) as u32,
            period: next(),
            event: (r >> 40) as u16,
            user_depth: (r >> 48) as u8 % 65,
            // `ext` is taken as set by both.
            ext: r & 2 != 0,
            throttled: r & 4 != 0,
            user_stack: if r & 8 != 0 {
                (r >> 52) as u16 & 0x1ff8
            } else {
                0
            },
        };
        let words: Vec<u8> = h
            .native_words()
            .iter()
            .flat_map(|w| w.to_ne_bytes())
            .collect();
        assert_eq!(words, h.encoded(Endian::native()).to_vec(), "{h:?}");
    }
}
