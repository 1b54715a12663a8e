//! Arbitrary records and side-car contents through every output: no panic.
use oprofile_stream::{Comm, Encoder, Header, Lost, Record, Sample};
use oprofile_tool::profile::{LoadOptions, Profile};
use oprofile_tool::sidecar::Sidecar;
use oprofile_tool::{folded, pprof, report, script};
use proptest::prelude::*;

fn addr() -> impl Strategy<Value = u64> {
    prop_oneof![
        any::<u64>(),
        Just(u64::MAX),
        Just(0),
        0x5555_5555_0000u64..0x5555_5556_0000,
        0xffff_ffff_8100_0000u64..0xffff_ffff_8100_4000
    ]
}

fn rec() -> impl Strategy<Value = Record> {
    prop_oneof![
        (
            0u16..4,
            any::<bool>(),
            any::<u64>(),
            addr(),
            0u32..4,
            0u32..4,
            prop::collection::vec(addr(), 0..4)
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
        (0u16..4, any::<u64>(), 0u32..4, 0u32..4, "[ -~]{0,16}")
            .prop_map(|(c, t, p, g, n)| Record::Comm(Comm::new(c, t, p, g, &n))),
        (0u16..4, any::<u64>(), any::<u64>()).prop_map(|(cpu, time, count)| Record::Lost(Lost {
            cpu,
            time,
            count: count >> 8
        })),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]
    #[test]
    fn any_records_any_sidecar(records in prop::collection::vec(rec(), 0..30),
                               kallsyms in "([0-9a-f]{1,16} [tTdW] [a-z_]{1,8}( \\[[a-z]{1,4}\\])?\n){0,8}",
                               maps in "([0-9a-f]{1,12}-[0-9a-f]{1,12} r-xp [0-9a-f]{1,16} 00:00 0 (/bin/sh|\\[vdso\\]|/nonexistent|)\n){0,5}") {
        let mut e = Encoder::new(&Header::default());
        for r in &records { e.record(r); }
        let sc = Sidecar {
            kallsyms: Some(kallsyms),
            modules: Some("mod 4096 0 - Live 0xffffffff81001000\n".into()),
            maps: (0..4).map(|t| (t, maps.clone())).collect(),
            info: None,
            ..Default::default()
        };
        let p = Profile::from_bytes(&e.finish(), &sc, &LoadOptions::default()).unwrap();
        let mut out = Vec::new();
        use report::SortKey::*;
        for sort in [vec![Symbol], vec![Pid], vec![Cpu], vec![Dso, Comm], vec![Symbol, Cpu, Pid], vec![Srcline, Symbol]] {
            use oprofile_tool::calltree::{CallGraph, Order};
            let order = if sort.len() % 2 == 0 { Order::Caller } else { Order::Callee };
            for children in [false, true] {
                let graph = Some(CallGraph { order, threshold: 0.0 });
                let o = report::ReportOptions { sort: sort.clone(), per_cpu: true, per_process: true, children, graph, ..Default::default() };
                report::write(&p, &o, &mut out).unwrap();
                report::write_json(&p, &o, &mut out).unwrap();
            }
            let o = report::ReportOptions { sort, per_cpu: true, per_process: true, children: true, callers: true, ..Default::default() };
            report::write(&p, &o, &mut out).unwrap();
            report::write_json(&p, &o, &mut out).unwrap();
        }
        for format in [script::ScriptFormat::Oprofile, script::ScriptFormat::Perf] {
            script::write(&p, &script::ScriptOptions { callchain: true, events: true, format }, &mut out).unwrap();
        }
        folded::write_folded(&p, &mut out).unwrap();
        let mut pb = Vec::new();
        pprof::write(&p, &mut pb).unwrap();
        let back = pprof::read(&pb).unwrap();
        prop_assert_eq!(back.sample.iter().map(|s| s.value[0]).sum::<i64>(), p.samples.len() as i64);
    }
}
