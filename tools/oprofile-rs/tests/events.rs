//! Issue 11 part 2, the tool: recordings of several events. CONFIG records
//! name each SAMPLE's event (an index into the latest CONFIG's list, which
//! may change between two recording phases); samples of an event whose
//! periods differ (frequency mode) weigh their period; `--event` on every
//! analysis command; per-event report sections and pprof sample types;
//! `script` prints each sample's event and period. An old (version 1)
//! recording still reads as before.

mod common;

use common::*;
use oprofile_stream::oprofile_format::EVENT_FLAG_FREQ;
use oprofile_stream::{
    config_with_events, Comm, Config, Encoder, EventDesc, EventDescExt, Header, Record, Sample,
    Tracing,
};

fn desc(name: &str, value: u64, freq: bool) -> EventDesc {
    EventDesc::new(name, 1, 0, value, if freq { EVENT_FLAG_FREQ } else { 0 })
}

fn config(generation: u32, time: u64, events: &[EventDesc]) -> Record {
    Record::Config(Box::new(config_with_events(
        Config {
            generation,
            time,
            ..Config::default()
        },
        events,
    )))
}

/// Two phases:
/// 1. cpu-clock at 1000 Hz (periods differ: alpha 2 × 1 ms, beta 1 × 4 ms)
///    and page-faults every 10 (beta 3 ×, the SAMPLEs carry no period);
/// 2. (recording off, new configuration) page-faults every 100, now event 0
///    (alpha 1 ×), and cycles every 1000 (alpha 2 ×).
///
/// page-faults' periods differ too (10, then 100): it weighs its periods;
/// cycles' do not: its samples count.
fn stream() -> Vec<u8> {
    let v = victim();
    let alpha = sym_addr(v, "alpha", 4);
    let beta = sym_addr(v, "beta", 8);
    let mut e = Encoder::new(&Header {
        start_time: 1_000_000_000,
        ..Header::default()
    });
    let mut t = 1_000_000_000u64;
    e.record(&config(
        1,
        t,
        &[
            desc("cpu-clock", 1000, true),
            desc("page-faults", 10, false),
        ],
    ));
    e.record(&Record::Comm(Comm::new(0, t, PID, PID, "victim")));
    let mut sample = |e: &mut Encoder, pc: u64, event: u16, period: u64| {
        t += 1_000_000;
        e.record(&Record::Sample(Sample {
            cpu: 0,
            kernel: false,
            time: t,
            pc,
            pid: PID,
            tgid: PID,
            event,
            period,
            ..Default::default()
        }));
    };
    sample(&mut e, alpha, 0, 1_000_000);
    sample(&mut e, alpha, 0, 1_000_000);
    sample(&mut e, beta, 0, 4_000_000);
    for _ in 0..3 {
        sample(&mut e, beta, 1, 0);
    }
    e.record(&Record::Tracing(Tracing {
        cpu: 0,
        on: false,
        time: 1_100_000_000,
    }));
    e.record(&config(
        2,
        1_100_000_001,
        &[desc("page-faults", 100, false), desc("cycles", 1000, false)],
    ));
    e.record(&Record::Tracing(Tracing {
        cpu: 0,
        on: true,
        time: 1_100_000_002,
    }));
    sample(&mut e, alpha, 0, 100);
    sample(&mut e, alpha, 1, 1000);
    sample(&mut e, alpha, 1, 1000);
    e.finish()
}

fn recording() -> (tempfile::TempDir, String) {
    let v = victim();
    let dir = tempfile::tempdir().unwrap();
    let file = write_recording(dir.path(), &stream(), &fake_maps(v, &v.path));
    (dir, file.to_str().unwrap().to_string())
}

fn run(args: &[&str]) -> (bool, String, String) {
    run_tool_any(args)
}

fn weight(v: &serde_json::Value, sym: &str) -> u64 {
    report_row(v, sym)["weight"].as_u64().unwrap()
}

#[test]
fn report_has_a_section_per_event_weighted_by_period_where_periods_differ() {
    let (_d, f) = recording();
    let v = json(&run_tool(&["report", "-i", &f, "--json"]));
    let ev = v["events"].as_array().expect("one report per event");
    let names: Vec<&str> = ev.iter().map(|r| r["event"].as_str().unwrap()).collect();
    assert_eq!(names, ["cpu-clock", "page-faults", "cycles"], "{v}");
    // cpu-clock in frequency mode: beta's one sample stands for 4 ms, twice
    // alpha's two together.
    let clock = &ev[0];
    assert_eq!(clock["weight_unit"], "ns");
    assert_eq!(clock["kept_samples"], 3);
    assert_eq!(clock["kept_weight"], 6_000_000);
    assert_eq!(weight(clock, "beta"), 4_000_000);
    assert_eq!(weight(clock, "alpha"), 2_000_000);
    let beta = report_row(clock, "beta");
    assert_eq!(beta["samples"], 1);
    assert!((beta["percent"].as_f64().unwrap() - 200.0 / 3.0).abs() < 1e-9);
    // page-faults: every 10 in the first phase (3 samples in beta), every
    // 100 in the second (1 in alpha), though its index changed.
    let pf = &ev[1];
    assert_eq!(pf["weight_unit"], "events");
    assert_eq!(pf["event_settings"], "period 10, then period 100");
    assert_eq!((weight(pf, "beta"), weight(pf, "alpha")), (30, 100));
    assert_eq!(pf["kept_samples"], 4);
    // cycles: one period, its samples count.
    let cy = &ev[2];
    assert_eq!(cy["weight_unit"], "samples");
    assert_eq!(weight(cy, "alpha"), 2);

    // Text: a section per event, each with its own header.
    let out = run_tool(&["report", "-i", &f]);
    let heads: Vec<&str> = out.lines().filter(|l| l.starts_with("# event:")).collect();
    assert_eq!(
        heads,
        [
            "# event: cpu-clock (software cpu-clock (IRQ)), 1000 Hz, 1 CPUs",
            "# event: page-faults, period 10, then period 100, 1 CPUs",
            "# event: cycles, period 1000, 1 CPUs"
        ],
        "{out}"
    );
    assert!(
        out.contains("# filter: event page-faults: 4 of 9 samples"),
        "{out}"
    );
    assert!(
        out.contains("# weights: each sample's period (ns)"),
        "{out}"
    );
}

#[test]
fn event_option_keeps_one_event() {
    let (_d, f) = recording();
    let v = json(&run_tool(&[
        "report",
        "-i",
        &f,
        "--json",
        "--event",
        "page-faults",
    ]));
    assert_eq!(v["event"], "page-faults", "{v}");
    assert_eq!(v["kept_samples"], 4);
    assert_eq!(v["kept_weight"], 130);
    assert_eq!(v["filter"], "event page-faults");

    let out = run_tool(&["script", "-i", &f, "--event", "cycles"]);
    assert_eq!(out.lines().count(), 2, "{out}");
    assert!(out.lines().all(|l| l.ends_with(" cycles 1000")), "{out}");

    let (ok, out, err) = run(&["folded", "-i", &f, "--event", "cycles"]);
    assert!(ok, "{err}");
    assert_eq!(out.trim(), "victim;alpha 2");
    assert!(!err.contains("shows event"), "{err}");

    // With other filters: the pid filter still applies.
    let v = json(&run_tool(&[
        "report", "-i", &f, "--json", "--event", "cycles", "--pid", "1",
    ]));
    assert_eq!(v["kept_samples"], 0);
}

#[test]
fn views_of_one_event_show_the_first_and_say_so() {
    let (_d, f) = recording();
    let (ok, out, err) = run(&["folded", "-i", &f]);
    assert!(ok, "{err}");
    // cpu-clock, weighted by its periods (ns).
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        ["victim;alpha 2000000", "victim;beta 4000000"]
    );
    assert!(
        err.contains("folded shows event cpu-clock (the recording has cpu-clock, page-faults, cycles; --event NAME for another)"),
        "{err}"
    );
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("f.svg");
    let (ok, _, err) = run(&["flamegraph", "-i", &f, "-o", svg.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert!(err.contains("flamegraph shows event cpu-clock"), "{err}");
    // The diff of a recording with itself: the same event on both sides.
    let (ok, out, err) = run(&["diff", &f, &f, "--event", "page-faults"]);
    assert!(ok, "{err}");
    assert!(
        out.starts_with("# old: 4 samples, new: 4 samples of page-faults"),
        "{out}"
    );
    let (ok, out, err) = run(&["diff", &f, &f]);
    assert!(ok, "{err}");
    assert!(out.contains("3 samples of cpu-clock"), "{out}");
    assert!(err.contains("diff shows event cpu-clock"), "{err}");
}

#[test]
fn script_prints_each_samples_event_and_period() {
    let (_d, f) = recording();
    let out = run_tool(&["script", "-i", &f]);
    let tails: Vec<String> = out
        .lines()
        .map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            w[w.len() - 2..].join(" ")
        })
        .collect();
    assert_eq!(
        tails,
        [
            "cpu-clock 1000000",
            "cpu-clock 1000000",
            "cpu-clock 4000000",
            "page-faults 10",
            "page-faults 10",
            "page-faults 10",
            "page-faults 100",
            "cycles 1000",
            "cycles 1000"
        ],
        "{out}"
    );
    // The configurations, with --events.
    let out = run_tool(&["script", "-i", &f, "--events"]);
    let configs: Vec<&str> = out.lines().filter(|l| l.contains(" CONFIG ")).collect();
    assert_eq!(configs.len(), 2, "{out}");
    assert!(
        configs[1].contains("CONFIG generation 2: page-faults period 100, cycles period 1000"),
        "{out}"
    );
    // perf's text: the period and the event on each sample's line.
    let out = run_tool(&["script", "-i", &f, "--format", "perf"]);
    assert!(out.contains(":    4000000 cpu-clock:"), "{out}");
    assert!(out.contains(":        100 page-faults:"), "{out}");
}

/// Values summed per sample type: `type/unit` → total.
fn pprof_totals(path: &std::path::Path) -> Vec<(String, i64)> {
    let p = oprofile_tool::pprof::read(&std::fs::read(path).unwrap()).unwrap();
    let s = |i: i64| p.string_table[i as usize].clone();
    p.sample_type
        .iter()
        .enumerate()
        .map(|(i, t)| {
            (
                format!("{}/{}", s(t.r#type), s(t.unit)),
                p.sample.iter().map(|x| x.value[i]).sum(),
            )
        })
        .collect()
}

#[test]
fn pprof_has_sample_types_per_event() {
    let (_d, f) = recording();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("p.pb.gz");
    run_tool(&["pprof", "-i", &f, "-o", out.to_str().unwrap()]);
    let t = pprof_totals(&out);
    let want: Vec<(String, i64)> = [
        ("cpu-clock_samples/count", 3),
        ("cpu-clock/nanoseconds", 6_000_000),
        ("page-faults_samples/count", 4),
        ("page-faults/count", 130),
        ("cycles_samples/count", 2),
        ("cycles/count", 2000),
    ]
    .iter()
    .map(|(a, b)| (a.to_string(), *b))
    .collect();
    assert_eq!(t, want);
    // One event: the usual two types.
    run_tool(&[
        "pprof",
        "-i",
        &f,
        "-o",
        out.to_str().unwrap(),
        "--event",
        "page-faults",
    ]);
    assert_eq!(
        pprof_totals(&out),
        [
            ("samples/count".to_string(), 4),
            ("page-faults/count".to_string(), 130)
        ]
    );
}

#[test]
fn an_unknown_event_is_refused_with_the_recordings_events() {
    let (_d, f) = recording();
    let dir = tempfile::tempdir().unwrap();
    let o = dir.path().join("out");
    let o = o.to_str().unwrap();
    for args in [
        &["report", "-i", &f][..],
        &["script", "-i", &f],
        &["folded", "-i", &f],
        &["flamegraph", "-i", &f, "-o", o],
        &["pprof", "-i", &f, "-o", o],
        &["firefox", "-i", &f, "-o", o],
        &["annotate", "alpha", "-i", &f],
        &["diff", &f, &f],
    ] {
        let mut a = args.to_vec();
        a.extend(["--event", "instructions"]);
        let (ok, _, err) = run(&a);
        assert!(!ok, "{a:?}");
        assert!(
            err.contains(
                "--event instructions: the recording has no such event; its events are: cpu-clock, page-faults, cycles"
            ),
            "{a:?}: {err}"
        );
    }
}

#[test]
fn a_sample_naming_an_event_the_config_lacks_is_counted_not_fatal() {
    let mut e = Encoder::new(&Header::default());
    e.record(&config(1, 0, &[desc("cycles", 1000, false)]));
    e.record(&Record::Sample(Sample {
        cpu: 0,
        kernel: true,
        time: 1,
        pc: 0xffff_ffff_8100_1010,
        pid: 1,
        tgid: 1,
        event: 5,
        period: 7,
        ..Default::default()
    }));
    let dir = tempfile::tempdir().unwrap();
    let file = write_recording(dir.path(), &e.finish(), "");
    let (ok, out, err) = run(&["script", "-i", file.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert!(out.trim_end().ends_with("event-5 7"), "{out}");
    assert!(
        err.contains("1 samples name an event the configuration before them does not list"),
        "{err}"
    );
}

#[test]
fn an_old_version_1_recording_reads_as_before() {
    // A real stream of the first module (version 1, 64-byte header,
    // cpu-clock every 200 µs, no CONFIG record, no period per sample).
    let fixture = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../crates/stream/tests/fixtures/vm-cpu-clock-2cpu-depth4.bin"
    );
    let data = std::fs::read(fixture).unwrap();
    assert_eq!(u16::from_ne_bytes([data[8], data[9]]), 1, "version 1");
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("v1.data");
    std::fs::write(&f, &data).unwrap();
    let f = f.to_str().unwrap();
    let v = json(&run_tool(&["report", "-q", "-i", f, "--json"]));
    assert_eq!(v["event"], "cpu-clock", "{v}");
    assert_eq!(v["weight_unit"], "samples");
    assert_eq!(v["kept_weight"], v["kept_samples"]);
    let n = v["samples"].as_u64().unwrap();
    assert!(n > 100, "{n}");
    let out = run_tool(&["script", "-q", "-i", f]);
    assert_eq!(out.lines().count() as u64, n);
    assert!(
        out.lines().all(|l| l.ends_with(" cpu-clock 200000")),
        "{}",
        out.lines().next().unwrap_or("")
    );
    let pb = dir.path().join("p.pb.gz");
    run_tool(&["pprof", "-q", "-i", f, "-o", pb.to_str().unwrap()]);
    assert_eq!(
        pprof_totals(&pb),
        [
            ("samples/count".to_string(), n as i64),
            ("cpu/nanoseconds".to_string(), n as i64 * 200_000)
        ]
    );
    // Its only event by name; another is refused.
    run_tool(&["report", "-q", "-i", f, "--event", "cpu-clock"]);
    let (ok, _, err) = run(&["report", "-q", "-i", f, "--event", "cycles"]);
    assert!(!ok);
    assert!(err.contains("its events are: cpu-clock"), "{err}");
}

#[test]
fn annotate_sums_the_weights_of_the_event_shown_in_their_unit() {
    let (_d, f) = recording();
    let (ok, out, err) = run(&["annotate", "alpha", "-i", &f]);
    assert!(ok, "{err}");
    assert!(err.contains("annotate shows event cpu-clock"), "{err}");
    let head = out.lines().next().unwrap();
    assert!(head.contains("), 2000000 ns"), "{out}");
    let (ok, out, err) = run(&["annotate", "alpha", "-i", &f, "--event", "cycles"]);
    assert!(ok, "{err}");
    assert!(
        out.lines().next().unwrap().contains("), 2 samples"),
        "{out}"
    );
}

/// The modes a CONFIG's event flags exclude show in words: a phase sampled in
/// user mode only, then one in both modes.
#[test]
fn excluded_modes_show_in_the_event_line_and_the_configs() {
    use oprofile_stream::oprofile_format::{EVENT_FLAG_EXCLUDE_KERNEL, EVENT_FLAG_EXCLUDE_USER};
    let v = victim();
    let alpha = sym_addr(v, "alpha", 4);
    let mut e = Encoder::new(&Header {
        start_time: 1_000_000_000,
        ..Header::default()
    });
    let phase = |e: &mut Encoder, generation: u32, t: u64, flags: u8| {
        e.record(&config(
            generation,
            t,
            &[EventDesc::new("cpu-clock", 1, 0, 1_000_000, flags)],
        ));
        e.record(&Record::Comm(Comm::new(0, t, PID, PID, "victim")));
        e.record(&Record::Sample(Sample {
            time: t + 1,
            pc: alpha,
            pid: PID,
            tgid: PID,
            ..Default::default()
        }));
    };
    phase(&mut e, 1, 1_000_000_000, EVENT_FLAG_EXCLUDE_KERNEL);
    phase(&mut e, 2, 1_100_000_000, 0);
    phase(&mut e, 3, 1_200_000_000, EVENT_FLAG_EXCLUDE_USER);
    let dir = tempfile::tempdir().unwrap();
    let file = write_recording(dir.path(), &e.finish(), &fake_maps(v, &v.path));
    let f = file.to_str().unwrap();
    let out = run_tool(&["report", "-i", f]);
    assert!(
        out.contains(
            "# event: cpu-clock, period 1000000 (user mode only), then period 1000000, \
             then period 1000000 (kernel mode only), 1 CPUs"
        ),
        "{out}"
    );
    let out = run_tool(&["script", "-i", f, "--events"]);
    let configs: Vec<&str> = out.lines().filter(|l| l.contains(" CONFIG ")).collect();
    assert_eq!(configs.len(), 3, "{out}");
    assert!(
        configs[0].contains("cpu-clock period 1000000 (user mode only);"),
        "{out}"
    );
    assert!(configs[1].contains("cpu-clock period 1000000;"), "{out}");
    assert!(
        configs[2].contains("cpu-clock period 1000000 (kernel mode only);"),
        "{out}"
    );
}
