//! Issue 11 part 4, the flight recorder in the tool: SNAPSHOT records in
//! `script --events`, `--snapshot N` in the analysis commands, and
//! `record --snapshot`'s switch of the module to overwrite mode and back.

mod common;

use assert_cmd::Command;
use common::*;
use oprofile_stream::{Comm, Encoder, Header, Lost, Record, Sample, Snapshot};

fn sample(cpu: u16, time: u64) -> Record {
    Record::Sample(Sample {
        cpu,
        kernel: true,
        time,
        pc: 0xffff_ffff_8100_0010,
        pid: 7,
        tgid: 7,
        callchain: vec![],
        ..Default::default()
    })
}

fn frame(cpu: u16, time: u64, end: bool, seq: u32, overwritten: u64, records: u64) -> Record {
    Record::Snapshot(Snapshot {
        cpu,
        time,
        end,
        seq,
        overwritten,
        records,
    })
}

/// Two snapshots (seq 4 and 5: an earlier reader took 1..3): 3 and 2
/// samples, with a LOST record before the second.
fn stream() -> Vec<u8> {
    let mut e = Encoder::new(&Header::default());
    e.record(&frame(0, 100, false, 4, 10, 3))
        .record(&frame(1, 100, false, 4, 0, 2))
        .record(&Record::Comm(Comm::new(0, 20, 7, 7, "flight")))
        .record(&Record::Comm(Comm::new(1, 21, 7, 7, "flight")))
        .record(&sample(0, 30))
        .record(&sample(1, 40))
        .record(&sample(0, 50))
        .record(&frame(0, 100, true, 4, 10, 5))
        .record(&Record::Lost(Lost {
            cpu: 1,
            time: 150,
            count: 2,
        }))
        .record(&frame(1, 200, false, 5, 3, 3))
        .record(&Record::Comm(Comm::new(1, 120, 7, 7, "flight")))
        .record(&sample(1, 130))
        .record(&sample(1, 140))
        .record(&frame(0, 200, true, 5, 3, 3));
    e.finish()
}

fn run(args: &[&str]) -> std::process::Output {
    Command::cargo_bin("oprofile-rs")
        .unwrap()
        .args(args)
        .output()
        .unwrap()
}

fn stdout(args: &[&str]) -> String {
    let out = run(args);
    assert!(out.status.success(), "{args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn script_shows_snapshots_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let file = write_recording(dir.path(), &stream(), "");
    let f = file.to_str().unwrap();
    let out = stdout(&["script", "-i", f, "--events"]);
    let kinds: Vec<String> = out
        .lines()
        .map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            match w.get(2) {
                Some(&"SNAPSHOT") => format!("{} {}", w[3], w[4]),
                Some(&"LOST") => "lost".into(),
                _ => format!("sample {}", w[0]),
            }
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "4 begin:",
            "4 begin:",
            "sample 0.000000",
            "sample 0.000000",
            "sample 0.000000",
            "4 end:",
            "lost",
            "5 begin:",
            "sample 0.000000",
            "sample 0.000000",
            "5 end:",
        ],
        "{out}"
    );
    assert!(
        out.contains("SNAPSHOT 4 end: 5 records, 10 overwritten"),
        "{out}"
    );
}

#[test]
fn snapshot_option_selects_one() {
    let dir = tempfile::tempdir().unwrap();
    let file = write_recording(dir.path(), &stream(), "");
    let f = file.to_str().unwrap();
    let count = |n: &str| {
        stdout(&["script", "-i", f, "--snapshot", n])
            .lines()
            .count()
    };
    assert_eq!(count("4"), 3);
    assert_eq!(count("5"), 2);
    assert_eq!(stdout(&["script", "-i", f]).lines().count(), 5);
    let out = run(&["report", "-i", f, "--snapshot", "6"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("the recording has snapshots 4 to 5"), "{err}");
    // A recording without snapshots says so.
    let mut e = Encoder::new(&Header::default());
    e.record(&Record::Comm(Comm::new(0, 1, 7, 7, "x")))
        .record(&sample(0, 2));
    let plain_dir = dir.path().join("plain");
    std::fs::create_dir_all(&plain_dir).unwrap();
    let plain = write_recording(&plain_dir, &e.finish(), "");
    let out = run(&["report", "-i", plain.to_str().unwrap(), "--snapshot", "1"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("has no snapshot"), "{err}");
}

#[test]
fn profile_knows_each_samples_snapshot() {
    let p = oprofile_tool::profile::Profile::from_bytes(
        &stream(),
        &Default::default(),
        &Default::default(),
    )
    .unwrap();
    let seqs: Vec<u32> = p.samples.iter().map(|s| s.snapshot).collect();
    assert_eq!(seqs, [4, 4, 4, 5, 5]);
    assert_eq!(p.snapshots(), [(4, 100, 5, 10), (5, 200, 3, 3)]);
}

#[test]
fn record_snapshot_switches_the_module_to_overwrite_mode_and_back() {
    // A module in consume mode, reached through its debugfs files (the
    // "device" is a plain file: its ioctls fail with ENOTTY). record
    // --snapshot switches the mode for the recording and puts it back; the
    // snapshot ioctl failing is a warning, and the stream is still recorded.
    let dir = tempfile::tempdir().unwrap();
    let dbg = common::fake_debugfs(dir.path());
    let dev = dir.path().join("dev");
    std::fs::write(&dev, stream()).unwrap();
    let out_file = dir.path().join("out.data");
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("oprofile-rs"))
        .args(["record", "--snapshot", "-o", out_file.to_str().unwrap()])
        .args(["--device", dev.to_str().unwrap()])
        .args(["--debugfs", dbg.to_str().unwrap(), "--maps", "poll"])
        // Long enough for the poll below to see the switch on a loaded host
        // (1.5 s was missed once in a parallel `cargo test`).
        .args(["--duration", "4"])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The fake debugfs files are plain files that the tool rewrites
    // (truncate, then write): a read in between finds them empty.
    let settled = |name: &str| {
        let t = std::time::Instant::now();
        loop {
            let v = std::fs::read_to_string(dbg.join(name)).unwrap();
            if !v.is_empty() || t.elapsed() > std::time::Duration::from_secs(2) {
                return v;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    };
    let mode = || settled("mode");
    let t = std::time::Instant::now();
    while mode().trim() != "overwrite" && t.elapsed() < std::time::Duration::from_secs(10) {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(mode().trim(), "overwrite", "while recording");
    assert_eq!(settled("tracing_on").trim(), "1");
    let status = child.wait().unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert!(status.success(), "{err}");
    assert_eq!(mode().trim(), "consume", "put back: {err}");
    assert!(err.contains("a snapshot failed"), "{err}");
    assert_eq!(std::fs::read(&out_file).unwrap(), stream());
    let info = std::fs::read_to_string(dir.path().join("out.data.meta/info")).unwrap();
    assert!(info.contains("settings: mode=overwrite"), "{info}");
    assert!(info.contains("settings-restored: mode=consume"), "{info}");
}
