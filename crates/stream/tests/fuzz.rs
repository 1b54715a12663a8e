//! Property-based fuzzing: the decoder never panics on mutated or truncated
//! valid streams, and always keeps a valid prefix.
use oprofile_stream::*;
use proptest::prelude::*;

fn arb_record() -> impl Strategy<Value = Record> {
    prop_oneof![
        (
            any::<u16>(),
            any::<bool>(),
            any::<u64>(),
            any::<u64>(),
            any::<u32>(),
            any::<u32>(),
            prop::collection::vec(any::<u64>(), 0..6)
        )
            .prop_map(
                |(cpu, kernel, time, pc, pid, tgid, callchain)| Record::Sample(Sample {
                    cpu,
                    kernel,
                    time,
                    pc,
                    pid,
                    tgid,
                    callchain,
                    ..Default::default()
                })
            ),
        (
            any::<u16>(),
            any::<u64>(),
            any::<u32>(),
            any::<u32>(),
            "[a-z/]{0,20}"
        )
            .prop_map(|(cpu, time, pid, tgid, name)| Record::Comm(Comm::new(
                cpu, time, pid, tgid, &name
            ))),
        (any::<u16>(), any::<u64>(), any::<u64>())
            .prop_map(|(cpu, time, count)| Record::Lost(Lost { cpu, time, count })),
        (any::<u16>(), any::<bool>(), any::<u64>())
            .prop_map(|(cpu, on, time)| Record::Tracing(Tracing { cpu, on, time })),
        (
            (any::<u16>(), any::<u64>(), any::<u32>(), any::<u32>()),
            (0u8..6, any::<u32>(), any::<u64>(), any::<Option<u64>>())
        )
            .prop_map(
                |((cpu, time, pid, tgid), (reason, state, exec_runtime, run_delay))| {
                    Record::Switch(Switch {
                        cpu,
                        time,
                        pid,
                        tgid,
                        reason: SwitchReason::from_code(reason),
                        state,
                        exec_runtime,
                        run_delay,
                    })
                }
            ),
    ]
}

fn arb_stream() -> impl Strategy<Value = (Vec<Record>, Vec<u8>)> {
    (prop::collection::vec(arb_record(), 0..20), any::<bool>()).prop_map(|(records, big)| {
        let h = Header {
            endian: if big { Endian::Big } else { Endian::Little },
            ..Header::default()
        };
        let mut e = Encoder::new(&h);
        for r in &records {
            e.record(r);
        }
        (records, e.finish())
    })
}

#[derive(Debug, Clone)]
enum Mutation {
    Flip(usize, u8),
    Set(usize, u8),
    Truncate(usize),
    Insert(usize, Vec<u8>),
    Remove(usize, usize),
}

fn arb_mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), 1u8..).prop_map(|(i, b)| Mutation::Flip(i, b)),
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Set(i, b)),
        any::<usize>().prop_map(Mutation::Truncate),
        (any::<usize>(), prop::collection::vec(any::<u8>(), 1..24))
            .prop_map(|(i, v)| Mutation::Insert(i, v)),
        (any::<usize>(), 1usize..24).prop_map(|(i, n)| Mutation::Remove(i, n)),
    ]
}

fn apply(data: &mut Vec<u8>, m: &Mutation) {
    if data.is_empty() {
        return;
    }
    let len = data.len();
    match m {
        Mutation::Flip(i, b) => data[i % len] ^= b,
        Mutation::Set(i, b) => data[i % len] = *b,
        Mutation::Truncate(i) => data.truncate(i % len),
        Mutation::Insert(i, v) => {
            let at = i % (len + 1);
            data.splice(at..at, v.iter().copied());
        }
        Mutation::Remove(i, n) => {
            let at = i % len;
            let end = (at + n).min(len);
            data.drain(at..end);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn round_trip((records, data) in arb_stream()) {
        let d = decode(&data).unwrap();
        prop_assert!(d.error.is_none());
        prop_assert_eq!(d.records, records);
    }

    #[test]
    fn truncation_keeps_prefix((records, data) in arb_stream(), cut in any::<usize>()) {
        let cut = HEADER_SIZE + cut % (data.len() - HEADER_SIZE + 1);
        let d = decode(&data[..cut]).unwrap();
        // Every record fully before the cut is returned, unchanged.
        let mut end = HEADER_SIZE;
        let mut n = 0;
        for r in &records {
            if end + r.encoded_size() > cut { break; }
            end += r.encoded_size();
            n += 1;
        }
        prop_assert_eq!(&d.records[..], &records[..n]);
        if cut == end {
            prop_assert!(d.error.is_none());
        } else {
            let e = d.error.unwrap();
            prop_assert!(e.is_truncation());
            prop_assert_eq!(e.offset, end as u64);
        }
    }

    #[test]
    fn mutated_streams_never_panic((_records, data) in arb_stream(),
                                   muts in prop::collection::vec(arb_mutation(), 1..6)) {
        let mut data = data;
        for m in &muts { apply(&mut data, m); }
        match decode(&data) {
            Err(e) => { prop_assert!(e.is_header_error()); let _ = e.to_string(); }
            Ok(d) => {
                prop_assert!(d.valid_len <= data.len() as u64);
                // Re-encoding the decoded records and decoding again is stable.
                let mut enc = Encoder::new(&Header { header_size: 64, ..d.header.clone() });
                for r in &d.records { enc.record(r); }
                let again = decode(&enc.finish()).unwrap();
                prop_assert_eq!(again.records, d.records);
                for w in &d.warnings { let _ = w.to_string(); }
                if let Some(e) = d.error { let _ = e.to_string(); }
            }
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(data in prop::collection::vec(any::<u8>(), 0..300), with_header in any::<bool>()) {
        let mut v = if with_header { Header::default().to_bytes() } else { Vec::new() };
        v.extend_from_slice(&data);
        if let Ok(d) = decode(&v) { let _ = d.error.map(|e| e.to_string()); }
    }
}
