//! Issue 9: task names are chosen by the profiled programs
//! (`prctl(PR_SET_NAME)`): no text output may pass their control characters
//! (terminal escape sequences, BEL, newlines) or invalid UTF-8 through, and
//! folded stacks must keep their format.

mod common;

use assert_cmd::Command;
use common::*;
use oprofile_stream::{Comm, Encoder, Header, Record, Sample};

/// ESC [2J (clear screen), BEL, a newline and a `;`, then an invalid UTF-8 byte.
const HOSTILE: &[u8] = b"\x1b[2J\x07a\nb;c\xff";
const SHOWN: &str = "\\e[2J\\x07a\\nb;c\\xff";

fn hostile_recording(dir: &std::path::Path) -> std::path::PathBuf {
    let v = victim();
    let h = Header {
        nr_cpus: 1,
        start_time: 1_000,
        ..Header::default()
    };
    let mut e = Encoder::new(&h);
    let mut comm = Comm::new(0, 1_000, PID, PID, "x");
    comm.comm = [0; 16];
    comm.comm[..HOSTILE.len()].copy_from_slice(HOSTILE);
    e.record(&Record::Comm(comm));
    for i in 0..3u64 {
        e.record(&Record::Sample(Sample {
            cpu: 0,
            kernel: i == 2,
            time: 2_000 + i,
            pc: if i == 2 {
                0xffffffff81001410
            } else {
                sym_addr(v, "alpha", 4)
            },
            pid: PID,
            tgid: PID,
            callchain: if i == 2 {
                vec![0xffffffff81001010]
            } else {
                vec![]
            },
            ..Default::default()
        }));
    }
    write_recording(dir, &e.finish(), &fake_maps(v, &v.path))
}

fn run(args: &[&str]) -> (String, String) {
    let out = Command::cargo_bin("oprofile-rs")
        .unwrap()
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "{args:?}: {out:?}");
    // Every byte printed is valid UTF-8 (invalid bytes were escaped).
    (
        String::from_utf8(out.stdout).expect("stdout is UTF-8"),
        String::from_utf8(out.stderr).expect("stderr is UTF-8"),
    )
}

/// No control character but the line ends (and the tab that starts a
/// callchain line of `script -g`).
fn assert_clean(what: &str, out: &str) {
    for line in out.lines() {
        let body = line.strip_prefix('\t').unwrap_or(line);
        assert!(
            !body.chars().any(|c| c.is_control()),
            "{what}: control character in {line:?}"
        );
    }
}

#[test]
fn hostile_comm_is_escaped_in_every_text_output() {
    let dir = tempfile::tempdir().unwrap();
    let file = hostile_recording(dir.path());
    let f = file.to_str().unwrap();

    let (out, err) = run(&["report", "-i", f, "--sort", "pid"]);
    assert_clean("report", &out);
    assert_clean("report stderr", &err);
    assert!(out.contains(&format!("{PID}/{SHOWN}")), "{out}");

    let (out, _) = run(&["report", "-i", f]);
    assert_clean("report", &out);
    assert!(out.contains(SHOWN), "{out}");

    // One line per sample, one more per callchain entry and its blank line.
    let (out, _) = run(&["script", "-i", f, "-g"]);
    assert_clean("script", &out);
    assert_eq!(out.lines().count(), 3 + 1 + 1, "{out}");
    assert_eq!(out.matches(SHOWN).count(), 3, "{out}");

    // The filter's echo on stderr is escaped too.
    let comm_arg = String::from_utf8_lossy(HOSTILE).into_owned();
    let out = Command::cargo_bin("oprofile-rs")
        .unwrap()
        .args(["report", "-i", f, "--comm", &comm_arg])
        .output()
        .unwrap();
    assert_clean("filter warning", &String::from_utf8_lossy(&out.stderr));
    assert_clean("filter header", &String::from_utf8_lossy(&out.stdout));

    // Folded stacks: one stack per line, the comm is one frame (its `;` and
    // newline cannot add frames or lines), then the count.
    let (out, _) = run(&["folded", "-i", f]);
    assert_clean("folded", &out);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{out}");
    for l in &lines {
        let (stack, count) = l.rsplit_once(' ').unwrap();
        count.parse::<u64>().unwrap();
        let frames: Vec<&str> = stack.split(';').collect();
        assert_eq!(frames[0], "\\e[2J\\x07a\\nb:c\\xff", "{l}");
        assert!(frames.len() == 2 || frames.len() == 3, "{l}");
    }
}
