//! Issue 30: a user call stack the module's walk with unwind tables cut (no
//! rule for an address, a fault) ends with `CHAIN_CUT` in the stream; every
//! output shows the cut as a `[truncated]` frame after the frames before
//! it, and `report` counts those samples apart, saying why.

mod common;

use common::*;
use oprofile_stream::oprofile_format::unwind::CHAIN_CUT;
use oprofile_stream::{Comm, Encoder, Header, Record, Sample};

fn ret(name: &str, delta: u64) -> u64 {
    sym_addr(victim(), name, delta)
}

/// 3 × beta ← alpha ← (cut), 2 × beta ← main (whole), 1 × alpha ← (cut
/// at once).
fn stream() -> Vec<u8> {
    let h = Header {
        nr_cpus: 1,
        backtrace_depth: 4,
        start_time: 1_000_000_000,
        ..Header::default()
    };
    let mut e = Encoder::new(&h);
    e.record(&Record::Comm(Comm::new(
        0,
        1_000_000_000,
        PID,
        PID,
        "victim",
    )));
    let mut t = 1_000_000_000u64;
    let mut sample = |pc: u64, user: Vec<u64>| {
        t += 1_000_000;
        e.record(&Record::Sample(Sample {
            cpu: 0,
            time: t,
            pc,
            pid: PID,
            tgid: PID,
            user_callchain: user,
            ..Default::default()
        }));
    };
    for _ in 0..3 {
        sample(ret("beta", 8), vec![ret("alpha", 4), CHAIN_CUT]);
    }
    for _ in 0..2 {
        sample(ret("beta", 8), vec![ret("main", 0x14)]);
    }
    sample(ret("alpha", 4), vec![CHAIN_CUT]);
    e.finish()
}

fn recording() -> (tempfile::TempDir, String) {
    let v = victim();
    let dir = tempfile::tempdir().unwrap();
    let file = write_recording(dir.path(), &stream(), &fake_maps(v, &v.path));
    let f = file.to_str().unwrap().to_string();
    (dir, f)
}

#[test]
fn every_output_shows_the_cut() {
    let (d, f) = recording();
    let out = run_tool(&["folded", "-i", &f]);
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        [
            "victim;[truncated];alpha 1",
            "victim;[truncated];alpha;beta 3",
            "victim;main;beta 2",
        ],
        "{out}"
    );
    let p = d.path().join("p.pb.gz");
    run_tool(&["pprof", "-i", &f, "-o", p.to_str().unwrap()]);
    let stacks = pprof_stacks(&p);
    assert!(
        stacks.contains(&"beta <- alpha <- [truncated]".into()),
        "{stacks:?}"
    );
    let out = run_tool(&["script", "-i", &f, "--callchain"]);
    assert_eq!(
        out.matches(" [truncated] ([truncated])").count(),
        4,
        "{out}"
    );
    let ff = d.path().join("ff.json");
    run_tool(&["firefox", "-i", &f, "-o", ff.to_str().unwrap()]);
    assert!(std::fs::read_to_string(ff).unwrap().contains("[truncated]"));
}

#[test]
fn report_counts_the_cut_apart_and_says_why() {
    let (_d, f) = recording();
    let note = common::cut_note(&f);
    assert!(note.contains("4 of 6 samples"), "{note}");
    assert!(
        note.contains("4 where the module's walk with the binaries' unwind tables found no rule"),
        "{note}"
    );
    // Not the frame-pointer reason: nothing here was read as a frame.
    assert!(!note.contains("no executable mapping"), "{note}");
    let v = json(&run_tool(&["report", "-i", &f, "--json"]));
    assert_eq!(v["truncated_stacks"], 4);
}
