use oprofile_stream::*;

fn header() -> Header {
    let mut h = Header {
        nr_cpus: 4,
        backtrace_depth: 8,
        start_time: 1_000,
        ..Header::default()
    };
    h.set_event_name("cpu-clock");
    h
}

fn all_records() -> Vec<Record> {
    vec![
        Record::Tracing(Tracing {
            cpu: 0,
            on: true,
            time: 1_000,
        }),
        Record::Comm(Comm::new(1, 1_100, 42, 40, "worker-thread-name")),
        Record::Sample(Sample {
            cpu: 1,
            kernel: false,
            time: 1_200,
            pc: 0x401000,
            pid: 42,
            tgid: 40,
            callchain: vec![],
            ..Default::default()
        }),
        Record::Sample(Sample {
            cpu: 1,
            kernel: true,
            time: 1_300,
            pc: 0xffff_ffff_8100_1234,
            pid: 42,
            tgid: 40,
            callchain: vec![
                0xffff_ffff_8100_2000,
                0xffff_ffff_8100_3000,
                0xffff_ffff_8100_4000,
            ],
            ..Default::default()
        }),
        Record::Lost(Lost {
            cpu: 3,
            time: 1_400,
            count: 17,
        }),
        Record::Tracing(Tracing {
            cpu: 2,
            on: false,
            time: 1_500,
        }),
    ]
}

fn stream(endian: Endian) -> Vec<u8> {
    let mut h = header();
    h.endian = endian;
    let mut e = Encoder::new(&h);
    for r in all_records() {
        e.record(&r);
    }
    e.finish()
}

#[test]
fn round_trip_every_record_type_both_endians() {
    for endian in [Endian::Little, Endian::Big] {
        let data = stream(endian);
        let d = decode(&data).unwrap();
        assert_eq!(d.header.endian, endian);
        assert_eq!(d.header.nr_cpus, 4);
        assert_eq!(d.header.event_name(), "cpu-clock");
        assert_eq!(d.records, all_records());
        assert!(d.error.is_none());
        assert!(d.warnings.is_empty());
        assert_eq!(d.valid_len, data.len() as u64);
    }
}

#[test]
fn exact_byte_layout_little_endian() {
    // Version 1, as early recordings hold it (version 2 below).
    let mut e = Encoder::new(&Header {
        version: 1,
        ..header()
    });
    e.record(&Record::Sample(Sample {
        cpu: 2,
        kernel: true,
        time: 5,
        pc: 0x1122,
        pid: 7,
        tgid: 6,
        callchain: vec![0xabc],
        ..Default::default()
    }));
    let b = e.finish();
    assert_eq!(&b[0..8], b"OPRFRS\0\n");
    assert_eq!(&b[8..14], &[1, 0, HEADER_SIZE as u8, 0, 8, 1]);
    let r = &b[HEADER_SIZE..];
    assert_eq!(r.len(), 40);
    assert_eq!(&r[0..8], &[1, 0, 40, 0, 2, 0, 1, 1]);
    assert_eq!(u64::from_le_bytes(r[8..16].try_into().unwrap()), 5);
    assert_eq!(u64::from_le_bytes(r[16..24].try_into().unwrap()), 0x1122);
    assert_eq!(u32::from_le_bytes(r[24..28].try_into().unwrap()), 7);
    assert_eq!(u32::from_le_bytes(r[28..32].try_into().unwrap()), 6);
    assert_eq!(u64::from_le_bytes(r[32..40].try_into().unwrap()), 0xabc);
    let d = decode(&b).unwrap();
    assert_eq!(d.header.version, 1);
    match &d.records[..] {
        [Record::Sample(s)] => {
            assert_eq!(s.callchain, [0xabc]);
            assert!(s.user_callchain.is_empty());
            assert_eq!((s.period, s.event), (0, 0));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn exact_byte_layout_version_2() {
    let mut e = Encoder::new(&header());
    e.record(&Record::Sample(Sample {
        cpu: 2,
        kernel: true,
        time: 5,
        pc: 0x1122,
        pid: 7,
        tgid: 6,
        callchain: vec![0xabc],
        user_callchain: vec![0x40_1000, 0x40_2000],
        period: 250_000,
        event: 1,
        throttled: false,
        user_stack: None,
    }));
    let b = e.finish();
    assert_eq!(&b[8..14], &[2, 0, HEADER_SIZE as u8, 0, 8, 1]);
    let r = &b[HEADER_SIZE..];
    assert_eq!(r.len(), 72);
    // Flags: kernel | extended; byte 7: kernel depth.
    assert_eq!(&r[0..8], &[1, 0, 72, 0, 2, 0, 3, 1]);
    assert_eq!(u64::from_le_bytes(r[32..40].try_into().unwrap()), 250_000);
    assert_eq!(&r[40..48], &[1, 0, 2, 0, 0, 0, 0, 0]);
    assert_eq!(u64::from_le_bytes(r[48..56].try_into().unwrap()), 0xabc);
    assert_eq!(u64::from_le_bytes(r[56..64].try_into().unwrap()), 0x40_1000);
    assert_eq!(u64::from_le_bytes(r[64..72].try_into().unwrap()), 0x40_2000);
    let d = decode(&b).unwrap();
    match &d.records[..] {
        [Record::Sample(s)] => {
            assert_eq!(s.user_callchain, [0x40_1000, 0x40_2000]);
            assert_eq!((s.period, s.event), (250_000, 1));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn throttled_flag_round_trips_and_unknown_flags_are_ignored() {
    let sample = Sample {
        cpu: 1,
        kernel: false,
        time: 9,
        pc: 0x40_1000,
        pid: 7,
        tgid: 7,
        period: 100,
        throttled: true,
        ..Sample::default()
    };
    let mut e = Encoder::new(&header());
    e.record(&Record::Sample(sample.clone()));
    e.record(&Record::Sample(Sample {
        throttled: false,
        time: 10,
        ..sample.clone()
    }));
    let mut b = e.finish();
    let r = HEADER_SIZE;
    // Flags: extended | throttled (user mode); the second: extended only.
    assert_eq!(b[r + 6], 2 | 4);
    assert_eq!(b[r + 48 + 6], 2);
    let d = decode(&b).unwrap();
    let flags: Vec<bool> = d
        .records
        .iter()
        .map(|r| match r {
            Record::Sample(s) => s.throttled,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(flags, [true, false]);
    // A flag bit this reader does not know is ignored, as the format says.
    b[r + 48 + 6] |= 0x80;
    let d = decode(&b).unwrap();
    assert!(d.error.is_none());
    assert_eq!(d.records.len(), 2);
}

#[test]
fn config_and_snapshot_records_round_trip() {
    let cfg = config_with_events(
        Config {
            time: 3,
            generation: 2,
            backtrace_depth: 8,
            user_backtrace_depth: 16,
            cpu_buffer_size: 65536,
            buffer_size: 1 << 20,
            buffer_watershed: 1 << 18,
            ..Config::default()
        },
        &[
            EventDesc::new("cpu-clock", 1, 0, 1_000_000, 0),
            EventDesc::new("page-faults", 1, 2, 10, 0),
        ],
    );
    let snap = Snapshot {
        cpu: 1,
        time: 9,
        end: false,
        seq: 1,
        overwritten: 12,
        records: 4,
    };
    let mut e = Encoder::new(&header());
    e.record(&Record::Config(Box::new(cfg)))
        .record(&Record::Snapshot(snap));
    let d = decode(&e.finish()).unwrap();
    assert!(d.error.is_none() && d.warnings.is_empty());
    assert_eq!(
        d.records,
        [Record::Config(Box::new(cfg)), Record::Snapshot(snap)]
    );
    match &d.records[0] {
        Record::Config(c) => {
            let names: Vec<String> = c.events().iter().map(|e| e.name()).collect();
            assert_eq!(names, ["cpu-clock", "page-faults"]);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
#[should_panic(expected = "version 1 SAMPLEs have no user chain")]
fn a_version_1_encoder_refuses_a_user_chain() {
    let mut e = Encoder::new(&Header {
        version: 1,
        ..header()
    });
    e.record(&Record::Sample(Sample {
        user_callchain: vec![1],
        ..Default::default()
    }));
}

#[test]
fn comm_name_is_truncated_to_16_and_nul_stripped() {
    let c = Comm::new(0, 0, 1, 1, "abcdefghijklmnopqrstuvwxyz");
    assert_eq!(c.name(), "abcdefghijklmnop");
    assert_eq!(Comm::new(0, 0, 1, 1, "sh").name(), "sh");
}

#[test]
fn empty_stream_is_header_only() {
    let data = Encoder::new(&header()).finish();
    assert_eq!(data.len(), HEADER_SIZE);
    let d = decode(&data).unwrap();
    assert!(d.records.is_empty());
    assert!(d.error.is_none());
}

#[test]
fn truncated_header() {
    let data = Encoder::new(&header()).finish();
    for n in [1usize, 7, 8, 13, 14, 40, 63] {
        let e = decode(&data[..n]).unwrap_err();
        assert!(
            matches!(e.kind, ErrorKind::TruncatedHeader { len } if len == n),
            "{n}: {e}"
        );
        assert!(e.to_string().contains("truncated stream header"), "{e}");
    }
}

#[test]
fn empty_input_is_truncated_header() {
    let e = decode(&[]).unwrap_err();
    assert!(matches!(e.kind, ErrorKind::TruncatedHeader { len: 0 }));
}

#[test]
fn wrong_magic() {
    let mut data = stream(Endian::Little);
    data[3] = b'X';
    let e = decode(&data).unwrap_err();
    assert_eq!(e.kind, ErrorKind::BadMagic);
    assert!(e.to_string().contains("bad magic"));
    assert_eq!(decode(b"hello").unwrap_err().kind, ErrorKind::BadMagic);
}

#[test]
fn unknown_version() {
    let mut data = stream(Endian::Little);
    data[8] = 3;
    let e = decode(&data).unwrap_err();
    assert_eq!(e.kind, ErrorKind::UnsupportedVersion(3));
    assert_eq!(
        e.to_string(),
        "unsupported stream version 3 at offset 8 (this tool reads versions 1 to 2)"
    );
}

#[test]
fn bad_word_size_and_endianness() {
    let mut data = stream(Endian::Little);
    data[12] = 4;
    assert_eq!(
        decode(&data).unwrap_err().kind,
        ErrorKind::UnsupportedWordSize(4)
    );
    let mut data = stream(Endian::Little);
    data[13] = 3;
    assert_eq!(decode(&data).unwrap_err().kind, ErrorKind::BadEndianness(3));
}

#[test]
fn longer_header_is_skipped_with_warning() {
    let mut h = header();
    h.header_size = 112;
    let mut e = Encoder::new(&h);
    e.record(&Record::Lost(Lost {
        cpu: 0,
        time: 9,
        count: 3,
    }));
    let data = e.finish();
    assert_eq!(data.len(), 112 + 24);
    let d = decode(&data).unwrap();
    assert_eq!(
        d.records,
        vec![Record::Lost(Lost {
            cpu: 0,
            time: 9,
            count: 3
        })]
    );
    assert_eq!(d.warnings, vec![Warning::LongHeader { header_size: 112 }]);
}

#[test]
fn header_size_smaller_than_64_is_corrupt() {
    let mut data = stream(Endian::Little);
    data[10] = 32;
    assert_eq!(
        decode(&data).unwrap_err().kind,
        ErrorKind::BadHeaderSize(32)
    );
}

#[test]
fn truncated_final_record_keeps_everything_before() {
    let full = stream(Endian::Little);
    let all = all_records();
    // Cut inside every record (and inside the 8-byte record header).
    let mut offset = HEADER_SIZE;
    for (i, r) in all.iter().enumerate() {
        let size = r.encoded_size();
        for cut in [1usize, 4, 7, 8, size - 1] {
            let d = decode(&full[..offset + cut]).unwrap();
            assert_eq!(d.records, all[..i].to_vec());
            let e = d.error.unwrap();
            assert!(e.is_truncation());
            assert_eq!(e.offset, offset as u64);
            assert_eq!(e.to_string(), format!("truncated at offset {offset}"));
            assert_eq!(d.valid_len, offset as u64);
        }
        offset += size;
    }
}

#[test]
fn size_zero_and_odd_sizes_are_corruption() {
    for bad in [0u16, 4, 7, 12, 33] {
        let mut e = Encoder::new(&header());
        e.record(&Record::Lost(Lost {
            cpu: 0,
            time: 1,
            count: 1,
        }));
        e.raw(TYPE_LOST, 0, 0, 0, &[0; 16], Some(bad));
        e.record(&Record::Lost(Lost {
            cpu: 0,
            time: 2,
            count: 2,
        }));
        let d = decode(&e.finish()).unwrap();
        assert_eq!(d.records.len(), 1, "size {bad}");
        let err = d.error.unwrap();
        assert_eq!(err.offset, HEADER_SIZE as u64 + 24);
        assert_eq!(
            err.kind,
            ErrorKind::BadRecordSize {
                rtype: TYPE_LOST,
                size: bad
            }
        );
        assert!(
            err.to_string()
                .contains(&format!("offset {}", HEADER_SIZE + 24)),
            "{err}"
        );
        assert!(!err.is_truncation());
    }
}

#[test]
fn size_past_end_is_truncation() {
    let mut e = Encoder::new(&header());
    e.raw(TYPE_LOST, 0, 0, 0, &[0; 16], Some(64));
    let d = decode(&e.finish()).unwrap();
    assert!(d.error.unwrap().is_truncation());
}

#[test]
fn known_record_too_small_is_corruption() {
    // SAMPLE with depth 3 but size 32.
    let mut e = Encoder::new(&header());
    e.raw(TYPE_SAMPLE, 0, 1, 3, &[0; 24], None);
    let d = decode(&e.finish()).unwrap();
    assert_eq!(
        d.error.unwrap().kind,
        ErrorKind::RecordTooSmall {
            rtype: TYPE_SAMPLE,
            size: 32,
            needed: 56
        }
    );
    let mut e = Encoder::new(&header());
    e.raw(TYPE_COMM, 0, 0, 0, &[0; 8], None);
    let d = decode(&e.finish()).unwrap();
    assert!(matches!(
        d.error.unwrap().kind,
        ErrorKind::RecordTooSmall {
            rtype: TYPE_COMM,
            ..
        }
    ));
}

#[test]
fn unknown_type_is_skipped_with_one_warning_per_type() {
    let mut e = Encoder::new(&header());
    e.raw(99, 0, 0, 0, &[0xff; 40], None);
    e.record(&Record::Lost(Lost {
        cpu: 1,
        time: 3,
        count: 4,
    }));
    e.raw(99, 1, 0, 0, &[], None);
    e.raw(77, 1, 0, 0, &[1; 8], None);
    e.record(&Record::Tracing(Tracing {
        cpu: 0,
        on: true,
        time: 5,
    }));
    let d = decode(&e.finish()).unwrap();
    assert!(d.error.is_none());
    assert_eq!(
        d.records,
        vec![
            Record::Lost(Lost {
                cpu: 1,
                time: 3,
                count: 4
            }),
            Record::Tracing(Tracing {
                cpu: 0,
                on: true,
                time: 5
            })
        ]
    );
    assert_eq!(
        d.warnings,
        vec![
            Warning::UnknownType {
                rtype: 99,
                first_offset: HEADER_SIZE as u64
            },
            Warning::UnknownType {
                rtype: 77,
                first_offset: HEADER_SIZE as u64 + 48 + 24 + 8
            }
        ]
    );
    assert!(d.warnings[0].to_string().contains("unknown type 99"));
}

#[test]
fn oversized_known_record_is_accepted_with_warning() {
    // A LOST record with 8 extra bytes (a future extension).
    let mut payload = Vec::new();
    payload.extend_from_slice(&7u64.to_le_bytes());
    payload.extend_from_slice(&11u64.to_le_bytes());
    payload.extend_from_slice(&[0xee; 8]);
    let mut e = Encoder::new(&Header {
        endian: Endian::Little,
        ..header()
    });
    e.raw(TYPE_LOST, 2, 0, 0, &payload, None);
    e.record(&Record::Lost(Lost {
        cpu: 2,
        time: 8,
        count: 1,
    }));
    let d = decode(&e.finish()).unwrap();
    assert_eq!(
        d.records[0],
        Record::Lost(Lost {
            cpu: 2,
            time: 7,
            count: 11
        })
    );
    assert_eq!(d.records.len(), 2);
    assert_eq!(
        d.warnings,
        vec![Warning::OversizedRecord {
            rtype: TYPE_LOST,
            first_offset: HEADER_SIZE as u64
        }]
    );
}

#[test]
fn decoder_iterator_stops_after_error() {
    let mut e = Encoder::new(&header());
    e.raw(TYPE_LOST, 0, 0, 0, &[0; 16], Some(3));
    e.record(&Record::Lost(Lost {
        cpu: 0,
        time: 2,
        count: 2,
    }));
    let data = e.finish();
    let mut dec = Decoder::new(&data).unwrap();
    assert!(dec.next().unwrap().is_err());
    assert!(dec.next().is_none());
}

#[test]
fn decode_record_standalone() {
    let r = Record::Comm(Comm::new(3, 4, 5, 6, "bash"));
    let b = encode_record(&r, Endian::Little);
    assert_eq!(
        decode_record(&b, Endian::Little, 0).unwrap(),
        Decoded1::Record(r, 40)
    );
    assert!(decode_record(&b[..39], Endian::Little, 100)
        .unwrap_err()
        .is_truncation());
}

#[test]
fn event_names_longer_than_15_bytes_survive() {
    let mut h = header();
    h.set_event_name("stalled-cycles-frontend");
    let data = Encoder::new(&h).finish();
    assert_eq!(data.len(), HEADER_SIZE);
    let d = decode(&data).unwrap();
    assert_eq!(d.header.event_name(), "stalled-cycles-frontend");
    assert!(d.warnings.is_empty());
}

#[test]
fn a_64_byte_header_of_the_first_modules_still_decodes() {
    let mut h = header();
    h.header_size = 64;
    h.set_event_name("branch-instructions");
    let mut e = Encoder::new(&h);
    e.record(&Record::Lost(Lost {
        cpu: 0,
        time: 9,
        count: 3,
    }));
    let data = e.finish();
    assert_eq!(data.len(), 64 + 24);
    let d = decode(&data).unwrap();
    // 16 bytes of name field, no NUL: all 16 are the name.
    assert_eq!(d.header.event_name(), "branch-instruct\u{69}");
    assert_eq!(d.records.len(), 1);
    assert!(d.warnings.is_empty());
}

#[test]
fn switch_records_decode_and_a_short_one_is_an_error() {
    use oprofile_stream::{Switch, SwitchReason};
    let sw = Switch {
        cpu: 3,
        time: 1_000,
        pid: 7,
        tgid: 6,
        reason: SwitchReason::Blocked,
        state: 2,
        exec_runtime: 500,
        run_delay: None,
    };
    let with_delay = Switch {
        run_delay: Some(42),
        reason: SwitchReason::Exit,
        ..sw
    };
    let mut e = Encoder::new(&header());
    e.record(&Record::Switch(sw));
    e.record(&Record::Switch(with_delay));
    let d = decode(&e.finish()).unwrap();
    assert!(d.error.is_none() && d.warnings.is_empty());
    assert_eq!(
        d.records,
        vec![Record::Switch(sw), Record::Switch(with_delay)]
    );
    // A SWITCH of 40 bytes is too small for its fields.
    let mut e = Encoder::new(&header());
    e.raw(TYPE_SWITCH, 0, 0, 0, &[0; 32], None);
    let d = decode(&e.finish()).unwrap();
    assert!(matches!(
        d.error.unwrap().kind,
        ErrorKind::RecordTooSmall {
            rtype: TYPE_SWITCH,
            needed: 48,
            ..
        }
    ));
}
