//! The byte layout of `Documentation/stream-format.md`, checked on the
//! module's own encoders and readers (`src/format.rs`) byte by byte.
use oprofile_format::*;

fn le16(v: u16) -> [u8; 2] {
    v.to_le_bytes()
}

#[test]
fn sample_layout() {
    let head = SampleHead {
        cpu: 3,
        kernel: true,
        depth: 2,
        time: 0x1122,
        pc: 0xffff_ffff_8100_0000,
        pid: 42,
        tgid: 41,
    };
    assert_eq!(head.size(), SAMPLE_LEN + 16);
    let mut rec = vec![0u8; head.size()];
    rec[..SAMPLE_LEN].copy_from_slice(&head.encoded(Endian::Little));
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
    // A user-mode sample has no flag; the chain must fit the buffer.
    let user = SampleHead {
        kernel: false,
        depth: 0,
        ..head
    };
    assert_eq!(user.encoded(Endian::Little)[6..8], [0, 0]);
    assert_eq!(encode_callchain(Endian::Little, &[1, 2, 3], &mut rec), None);
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
    assert_eq!(&b[8..16], &[1, 0, 96, 0, 8, 1, 1, 2]);
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
    bad[8] = 2;
    check(&bad, HeaderError::UnsupportedVersion(2), 8);
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
    let mut s = SampleHead {
        cpu: 0,
        kernel: true,
        depth: 0,
        time: 1,
        pc: 2,
        pid: 3,
        tgid: 4,
    }
    .encoded(e);
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
    assert_eq!(MAX_RECORD, sample_len(MAX_DEPTH as u8));
    assert!(MAX_RECORD <= usize::from(u16::MAX));
    assert_eq!(MAX_RECORD % RECORD_ALIGN, 0);
    assert_eq!(
        Endian::from_code(Endian::native().code()),
        Some(Endian::native())
    );
    assert_eq!(Endian::from_code(0), None);
}
