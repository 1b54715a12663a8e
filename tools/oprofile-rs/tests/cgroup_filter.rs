//! The module's cgroup filter, as the tool shows it: the CONFIG records'
//! cgroup id (the 8-byte extension) in `report`'s header and in `script
//! --events`' configuration lines; a recording without a filter shows
//! neither.

mod common;

use common::*;
use oprofile_stream::{
    config_with_events, Comm, Config, Encoder, EventDesc, EventDescExt, Header, Record, Sample,
};

/// Two configurations: the first with the filter `first` (0: none), the
/// second with cgroup 4242; two samples under each.
fn stream(first: u64) -> Vec<u8> {
    let v = victim();
    let alpha = sym_addr(v, "alpha", 4);
    let t0 = 1_000_000_000u64;
    let mut e = Encoder::new(&Header {
        nr_cpus: 1,
        start_time: t0,
        ..Header::default()
    });
    for (g, cgroup) in [(1u32, first), (2, 4242)] {
        let at = t0 + u64::from(g) * 10_000_000;
        e.record(&Record::Config(Box::new(config_with_events(
            Config {
                generation: g,
                time: at,
                cgroup,
                ..Config::default()
            },
            &[EventDesc::new("cpu-clock", 1, 0, 1_000_000, 0)],
        ))));
        e.record(&Record::Comm(Comm::new(0, at, PID, PID, "victim")));
        for i in 1..=2u64 {
            e.record(&Record::Sample(Sample {
                cpu: 0,
                time: at + i * 1_000_000,
                pc: alpha,
                pid: PID,
                tgid: PID,
                period: 1_000_000,
                ..Default::default()
            }));
        }
    }
    e.finish()
}

fn tool(first: u64, args: &[&str]) -> String {
    let v = victim();
    let dir = tempfile::tempdir().unwrap();
    let file = write_recording(dir.path(), &stream(first), &fake_maps(v, &v.path));
    let f = file.to_str().unwrap();
    let (ok, out, err) = run_tool_any(&[&args[..1], &["-i", f], &args[1..]].concat());
    assert!(ok, "{err}");
    out
}

#[test]
fn report_names_the_cgroup_filters_in_its_header() {
    let out = tool(17, &["report"]);
    assert!(
        out.contains(
            "# recorded with the module's cgroup filter: only the tasks of cgroup 17, then 4242 and below"
        ),
        "{out}"
    );
    let out = tool(0, &["report"]);
    assert!(
        out.contains("only the tasks of cgroup 4242 and below"),
        "{out}"
    );
}

#[test]
fn script_events_show_each_configurations_filter() {
    let out = tool(0, &["script", "--events"]);
    let configs: Vec<&str> = out.lines().filter(|l| l.contains("CONFIG")).collect();
    assert_eq!(configs.len(), 2, "{out}");
    assert!(!configs[0].contains("cgroup"), "{}", configs[0]);
    assert!(
        configs[1].contains("only cgroup 4242 and below"),
        "{}",
        configs[1]
    );
}

#[test]
fn no_filter_no_line() {
    // Both configurations without a filter: rewrite the second's id to 0.
    let v = victim();
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = stream(0);
    // The second CONFIG record's extension: find the id's bytes and zero them.
    let id = 4242u64.to_le_bytes();
    let at = bytes.windows(8).rposition(|w| w == id).unwrap();
    bytes[at..at + 8].fill(0);
    let file = write_recording(dir.path(), &bytes, &fake_maps(v, &v.path));
    let (ok, out, err) = run_tool_any(&["report", "-i", file.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert!(!out.contains("cgroup"), "{out}");
}
