//! perf throttling, as the tool shows it: SAMPLEs with the THROTTLED flag
//! (perf stopped their counter until its next tick) are counted per CPU and
//! per event in `report` (header, per-CPU column, JSON, a warning that names
//! the sysctl) and marked by a THROTTLE line after their sample in
//! `script --events`; a recording without them shows none of it.

mod common;

use common::*;
use oprofile_stream::oprofile_format::EVENT_FLAG_FREQ;
use oprofile_stream::{
    config_with_events, Comm, Config, Encoder, EventDesc, EventDescExt, Header, Record, Sample,
};

/// cpu-clock and page-faults on CPUs 0 and 1, 12 samples; with `throttle`,
/// samples 3 and 7 (cpu-clock, CPU 1) and 10 (page-faults, CPU 0) throttled.
fn stream(throttle: bool) -> Vec<u8> {
    let v = victim();
    let alpha = sym_addr(v, "alpha", 4);
    let mut e = Encoder::new(&Header {
        nr_cpus: 2,
        start_time: 1_000_000_000,
        ..Header::default()
    });
    let t0 = 1_000_000_000u64;
    e.record(&Record::Config(Box::new(config_with_events(
        Config {
            generation: 1,
            time: t0,
            ..Config::default()
        },
        &[
            EventDesc::new("cpu-clock", 1, 0, 4000, EVENT_FLAG_FREQ),
            EventDesc::new("page-faults", 1, 2, 10, 0),
        ],
    ))));
    for cpu in 0..2 {
        e.record(&Record::Comm(Comm::new(cpu, t0, PID, PID, "victim")));
    }
    for i in 0..12u64 {
        let event = u16::from(i >= 9);
        e.record(&Record::Sample(Sample {
            cpu: if event == 0 { (i % 2) as u16 } else { 0 },
            kernel: false,
            time: t0 + (i + 1) * 1_000_000,
            pc: alpha,
            pid: PID,
            tgid: PID,
            event,
            period: if event == 0 { 250_000 } else { 10 },
            throttled: throttle && matches!(i, 3 | 7 | 10),
            ..Default::default()
        }));
    }
    e.finish()
}

fn recording(throttle: bool) -> (tempfile::TempDir, String) {
    let v = victim();
    let dir = tempfile::tempdir().unwrap();
    let file = write_recording(dir.path(), &stream(throttle), &fake_maps(v, &v.path));
    (dir, file.to_str().unwrap().to_string())
}

fn report(f: &str, extra: &[&str]) -> (String, String) {
    let (ok, out, err) = run_tool_any(&[&["report", "-i", f], extra].concat());
    assert!(ok, "{err}");
    (out, err)
}

fn cpu_row(out: &str, cpu: &str) -> Vec<String> {
    out.lines()
        .map(|l| l.split_whitespace().map(String::from).collect::<Vec<_>>())
        .find(|w| w.len() > 2 && w[0] == "#" && w[1] == cpu)
        .unwrap_or_else(|| panic!("no row for cpu {cpu}: {out}"))
}

#[test]
fn report_counts_throttled_samples_per_cpu_and_warns() {
    let (_d, f) = recording(true);
    let (out, err) = report(&f, &[]);
    assert!(
        out.contains("# samples: 12, lost: 0, throttled by perf: 3"),
        "{out}"
    );
    assert!(
        out.lines()
            .any(|l| l.starts_with("#  cpu") && l.trim_end().ends_with("throttled")),
        "{out}"
    );
    // CPU 0: samples 0, 2, 4, 6, 8, 9, 10, 11 (one throttled); CPU 1: 1, 3,
    // 5, 7 (two throttled). Columns: cpu, samples, lost, taken/s, throttled.
    let r0 = cpu_row(&out, "0");
    let r1 = cpu_row(&out, "1");
    assert_eq!((r0[2].as_str(), r0[5].as_str()), ("8", "1"), "{out}");
    assert_eq!((r1[2].as_str(), r1[5].as_str()), ("4", "2"), "{out}");
    assert!(
        err.contains("warning: perf throttled the sampling 3 times (cpu-clock 2, page-faults 1)")
            && err.contains("kernel.perf_event_max_sample_rate"),
        "{err}"
    );
    // JSON: the count per report section (one per event).
    let (out, _) = report(&f, &["--json"]);
    let v = json(&out);
    let per_event: Vec<u64> = v["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["throttled"].as_u64().unwrap())
        .collect();
    assert_eq!(per_event, [3, 3], "{out}");
}

#[test]
fn script_marks_each_throttle_after_its_sample() {
    let (_d, f) = recording(true);
    let out = run_tool(&["script", "-i", &f, "--events"]);
    let lines: Vec<&str> = out.lines().collect();
    let marks: Vec<usize> = lines
        .iter()
        .enumerate()
        .filter(|(_, l)| l.contains(" THROTTLE "))
        .map(|(i, _)| i)
        .collect();
    assert_eq!(marks.len(), 3, "{out}");
    for (&i, (cpu, event, time)) in marks.iter().zip([
        ("[001]", "cpu-clock", "1.004000"),
        ("[001]", "cpu-clock", "1.008000"),
        ("[000]", "page-faults", "1.011000"),
    ]) {
        let mark = lines[i];
        assert!(
            mark.contains(&format!("{cpu} THROTTLE {event}: perf stopped the counter"))
                && mark.trim_start().starts_with(time),
            "{mark}\n{out}"
        );
        // Right after its own sample: same time and CPU.
        let before = lines[i - 1];
        assert!(
            before.trim_start().starts_with(time) && before.contains(cpu) && before.contains(event),
            "{before}\n{out}"
        );
    }
    // Without --events, the sample lines only.
    let plain = run_tool(&["script", "-i", &f]);
    assert!(!plain.contains("THROTTLE"), "{plain}");
    assert_eq!(plain.lines().count(), 12, "{plain}");
}

#[test]
fn a_recording_without_throttling_shows_none_of_it() {
    let (_d, f) = recording(false);
    let (out, err) = report(&f, &[]);
    assert!(out.contains("# samples: 12, lost: 0\n"), "{out}");
    assert!(!out.contains("throttled"), "{out}");
    assert_eq!(cpu_row(&out, "0").len(), 5, "{out}");
    assert!(!err.contains("throttled"), "{err}");
    let (out, _) = report(&f, &["--json"]);
    assert!(json(&out)["events"]
        .as_array()
        .unwrap()
        .iter()
        .all(|s| s["throttled"] == 0));
    assert!(!run_tool(&["script", "-i", &f, "--events"]).contains("THROTTLE"));
}
