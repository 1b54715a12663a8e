//! What the module sampled, as the analyses say it: the CONFIG records'
//! `pid` (the extension's bytes 8..12; `record -- CMD`, `record -p PID`)
//! in `report`'s header and JSON and in `script --events`' configuration
//! lines; the records of the modules before the field (and a stream
//! without CONFIG records) are read as they were.

mod common;

use common::*;
use oprofile_stream::{
    config_with_events, Comm, Config, Encoder, EventDesc, EventDescExt, Header, Record, Sample,
};

const T0: u64 = 1_000_000_000;

fn header() -> Header {
    Header {
        nr_cpus: 1,
        start_time: T0,
        ..Header::default()
    }
}

/// CONFIG records with these `pid` values, each followed by `samples[i]`
/// samples of the victim.
fn stream(configs: &[(u32, u64)]) -> Vec<u8> {
    let alpha = sym_addr(victim(), "alpha", 4);
    let mut e = Encoder::new(&header());
    for (g, &(pid, n)) in configs.iter().enumerate() {
        let at = T0 + (g as u64 + 1) * 10_000_000;
        e.record(&Record::Config(Box::new(config_with_events(
            Config {
                generation: g as u32 + 1,
                time: at,
                pid,
                ..Config::default()
            },
            &[EventDesc::new("cpu-clock", 1, 0, 1_000_000, 0)],
        ))));
        e.record(&Record::Comm(Comm::new(0, at, PID, PID, "victim")));
        for i in 1..=n {
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

fn run(bytes: &[u8], args: &[&str]) -> String {
    let v = victim();
    let dir = tempfile::tempdir().unwrap();
    let file = write_recording(dir.path(), bytes, &fake_maps(v, &v.path));
    let f = file.to_str().unwrap();
    let (ok, out, err) = run_tool_any(&[&args[..1], &["-i", f], &args[1..]].concat());
    assert!(ok, "{err}");
    out
}

#[test]
fn report_says_a_command_was_profiled_alone() {
    // The stream's opening configuration (every task, no samples), then
    // the one record set for the command.
    let bytes = stream(&[(0, 0), (PID, 3)]);
    let out = run(&bytes, &["report"]);
    let line = format!("# profiled: pid {PID} and the tasks it created\n");
    assert!(out.contains(&line), "{out}");
    assert!(!out.contains("every task"), "{out}");
    let j = json(&run(&bytes, &["report", "--json"]));
    assert_eq!(
        j["profiled"],
        format!("pid {PID} and the tasks it created").as_str()
    );
    assert_eq!(j["profiled_pids"], serde_json::json!([PID]));
    // script --events: each configuration says whom it samples.
    let out = run(&bytes, &["script", "--events"]);
    let configs: Vec<&str> = out.lines().filter(|l| l.contains("CONFIG")).collect();
    assert_eq!(configs.len(), 2, "{out}");
    assert!(!configs[0].contains("only pid"), "{}", configs[0]);
    assert!(
        configs[1].contains(&format!("only pid {PID} and the tasks it creates")),
        "{}",
        configs[1]
    );
}

#[test]
fn report_says_every_task_or_both_in_order() {
    let out = run(&stream(&[(0, 2)]), &["report"]);
    assert!(
        out.contains("# profiled: every task (system-wide)\n"),
        "{out}"
    );
    // Samples under both: in the order they came.
    let out = run(&stream(&[(0, 2), (PID, 2)]), &["report"]);
    assert!(
        out.contains(&format!(
            "# profiled: every task (system-wide), then pid {PID} and the tasks it created\n"
        )),
        "{out}"
    );
    let j = json(&run(&stream(&[(PID, 1), (0, 1)]), &["report", "--json"]));
    assert_eq!(j["profiled_pids"], serde_json::json!([PID, 0]));
    // No samples: the last configuration's.
    let out = run(&stream(&[(0, 0), (77, 0)]), &["report"]);
    assert!(
        out.contains("# profiled: pid 77 and the tasks it created"),
        "{out}"
    );
}

#[test]
fn older_config_records_and_streams_without_them_read_as_before() {
    // The header alone tells where the first record starts.
    let at = Encoder::new(&header()).finish().len();
    let mut bytes = stream(&[(PID, 2)]);
    // The CONFIG record of the modules with the cgroup filter and without
    // pid: its 16-byte extension cut to 8 (the pid's bytes dropped).
    assert_eq!(bytes[at], 5, "a CONFIG record first");
    let size = u16::from_le_bytes([bytes[at + 2], bytes[at + 3]]) as usize;
    bytes.drain(at + size - 8..at + size);
    bytes[at + 2..at + 4].copy_from_slice(&((size - 8) as u16).to_le_bytes());
    let out = run(&bytes, &["report"]);
    assert!(
        out.contains("# profiled: every task (system-wide)\n"),
        "{out}"
    );
    assert!(out.contains("# samples: 2, lost: 0"), "{out}");
    // No CONFIG record: nothing said.
    let mut e = Encoder::new(&header());
    e.record(&Record::Comm(Comm::new(0, T0, PID, PID, "victim")));
    e.record(&Record::Sample(Sample {
        time: T0 + 1,
        pc: sym_addr(victim(), "alpha", 4),
        pid: PID,
        tgid: PID,
        ..Default::default()
    }));
    let bytes = e.finish();
    let out = run(&bytes, &["report"]);
    assert!(!out.contains("# profiled"), "{out}");
    let j = json(&run(&bytes, &["report", "--json"]));
    assert!(j.get("profiled").is_none() && j.get("profiled_pids").is_none());
}
