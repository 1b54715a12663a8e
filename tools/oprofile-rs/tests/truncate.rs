//! Issue 30: a user call stack is cut, and marked `[truncated]`, at the
//! first address that lies in no executable mapping of the process at the
//! sample's time (what a frame-pointer walk through code built without
//! frame pointers reads: data taken for a frame), in every output; `report`
//! counts the samples cut and says what fixes it.

mod common;

use common::*;
use oprofile_stream::{Comm, Encoder, Header, Record, Sample};

fn ret(name: &str, delta: u64) -> u64 {
    sym_addr(victim(), name, delta)
}

/// Where the victim's text is mapped a second time, from `MAP2_AT` on
/// (a kernel MMAP2 record): its addresses are code after that, not before.
const BASE2: u64 = 0x7f00_0000_0000;
const MAP2_AT: u64 = 2_000_000_000;
/// A stack address: in the snapshot's `[stack]` mapping, not executable.
const STACK_ADDR: u64 = 0x7fff_fffe_f010;
/// The nanoseconds of a `timespec` read as a return address.
const GARBAGE: u64 = 0x1d4c_2f00;

/// - 4 × alpha called from main (whole),
/// - 3 × beta whose caller is GARBAGE then main: `beta;[truncated]`,
/// - 2 × beta ← alpha ← STACK_ADDR ← main: `beta;alpha;[truncated]`,
/// - 1 × kernel `__schedule` entered from gamma_fn, whose caller is
///   GARBAGE: the kernel frames kept, the user stack cut after gamma_fn,
/// - 1 × beta whose caller is main in the second mapping before it was
///   mapped (cut), 1 × after (whole).
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
    let mut sample = |t: u64, kernel: bool, pc: u64, chain: Vec<u64>, user: Vec<u64>| {
        e.record(&Record::Sample(Sample {
            cpu: 0,
            kernel,
            time: t,
            pc,
            pid: PID,
            tgid: PID,
            callchain: chain,
            user_callchain: user,
            ..Default::default()
        }));
    };
    let mut next = || {
        t += 1_000_000;
        t
    };
    for _ in 0..4 {
        sample(
            next(),
            false,
            ret("alpha", 4),
            vec![],
            vec![ret("main", 0x10)],
        );
    }
    for _ in 0..3 {
        sample(
            next(),
            false,
            ret("beta", 8),
            vec![],
            vec![GARBAGE, ret("main", 0x14)],
        );
    }
    for _ in 0..2 {
        sample(
            next(),
            false,
            ret("beta", 8),
            vec![],
            vec![ret("alpha", 4), STACK_ADDR, ret("main", 0x14)],
        );
    }
    sample(
        next(),
        true,
        0xffffffff81001410,
        vec![0xffffffff81001010, 0xffffffff81001820],
        vec![ret("gamma_fn", 4), GARBAGE, ret("main", 0x18)],
    );
    let main2 = ret("main", 0x10) - BASE + BASE2;
    sample(1_500_000_000, false, ret("beta", 8), vec![], vec![main2]);
    sample(2_500_000_000, false, ret("beta", 8), vec![], vec![main2]);
    e.finish()
}

fn recording() -> (tempfile::TempDir, String) {
    let v = victim();
    let dir = tempfile::tempdir().unwrap();
    let maps = fake_maps(v, &v.path)
        + "7ffffffde000-7ffffffff000 rw-p 00000000 00:00 0                          [stack]\n";
    let file = write_recording(dir.path(), &stream(), &maps);
    // The second mapping of the victim's text, as the kernel reports it.
    let mut events = String::new();
    for (off, va, _fsz, msz) in &v.loads {
        let start = BASE2 + (va & !0xfff);
        let end = (BASE2 + va + msz + 0xfff) & !0xfff;
        events += &format!(
            "{MAP2_AT} mmap {PID} {PID} {start:x} {end:x} {:x} 5 - {}\n",
            off & !0xfff,
            v.path.display()
        );
    }
    std::fs::write(dir.path().join("oprofile.data.meta/events"), events).unwrap();
    let f = file.to_str().unwrap().to_string();
    (dir, f)
}

#[test]
fn folded_and_flamegraph_end_the_stack_at_the_cut() {
    let (d, f) = recording();
    let out = run_tool(&["folded", "-i", &f]);
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        [
            "victim;[truncated];alpha;beta 2",
            "victim;[truncated];beta 4",
            "victim;[truncated];gamma_fn;entry_SYSCALL_64_[k];do_syscall_64_[k];__schedule_[k] 1",
            "victim;main;alpha 4",
            "victim;main;beta 1",
        ],
        "{out}"
    );
    let svg = d.path().join("fg.svg");
    run_tool(&["flamegraph", "-i", &f, "-o", svg.to_str().unwrap()]);
    let svg = std::fs::read_to_string(svg).unwrap();
    assert!(svg.contains(">[truncated]"), "[truncated] not drawn");
}

#[test]
fn report_counts_the_cut_samples_and_says_what_fixes_it() {
    let (_d, f) = recording();
    let note = common::cut_note(&f);
    assert!(
        note.contains("7 of 12 samples (58.3%) end in [truncated]"),
        "{note}"
    );
    assert!(note.contains("no executable mapping"), "{note}");
    assert!(note.contains("-fno-omit-frame-pointer"), "{note}");
    assert!(note.contains("--call-graph dwarf"), "{note}");
    let out = run_tool(&["report", "-i", &f, "--children", "-g"]);
    assert!(out.contains("[truncated]"), "{out}");
    // The call graph: the cut frame is the caller of beta in 4 samples.
    let v = json(&run_tool(&[
        "report",
        "-i",
        &f,
        "--children",
        "--callers",
        "--json",
    ]));
    assert_eq!(v["truncated_stacks"], 7);
    let t = report_row(&v, "[truncated]");
    assert_eq!(t["children_weight"], 7, "{t}");
    let beta = report_row(&v, "beta");
    let callers: Vec<(String, u64)> = beta["callers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["symbol"].as_str().unwrap().to_string(),
                e["weight"].as_u64().unwrap(),
            )
        })
        .collect();
    assert!(callers.contains(&("[truncated]".into(), 4)), "{callers:?}");
    // A filter: the count is of the samples kept.
    let out = run_tool(&["report", "-i", &f, "--time", "@1.4,"]);
    assert!(out.contains("# call stacks cut: 1 of 2 samples"), "{out}");
    // No cut, no note.
    let out = run_tool(&["report", "-i", &f, "--time", "@2.4,"]);
    assert!(!out.contains("call stacks cut"), "{out}");
}

#[test]
fn the_stacks_hint_does_not_offer_g_when_most_stacks_are_cut() {
    let (_d, f) = recording();
    let out = run_tool(&["report", "-i", &f]);
    let hint = out
        .lines()
        .find(|l| l.starts_with("# call stacks recorded"))
        .unwrap_or_else(|| panic!("no hint: {out}"));
    assert!(hint.contains("but 7 of them are cut short"), "{hint}");
    assert!(!hint.contains("-g shows who calls"), "{hint}");
    assert!(out.contains("# call stacks cut: 7 of 12 samples"), "{out}");
    // Samples with whole stacks only: the hint offers -g.
    let out = run_tool(&["report", "-i", &f, "--time", "@2.4,"]);
    assert!(out.contains("-g shows who calls each function"), "{out}");
    assert!(!out.contains("cut short"), "{out}");
}

#[test]
fn pprof_script_and_firefox_show_the_cut() {
    let (d, f) = recording();
    let out = d.path().join("p.pb.gz");
    run_tool(&["pprof", "-i", &f, "-o", out.to_str().unwrap()]);
    let stacks = pprof_stacks(&out);
    assert!(stacks.contains(&"beta <- [truncated]".into()), "{stacks:?}");
    assert!(
        stacks.contains(&"beta <- alpha <- [truncated]".into()),
        "{stacks:?}"
    );
    assert!(
        stacks.contains(
            &"__schedule <- do_syscall_64 <- entry_SYSCALL_64 <- gamma_fn <- [truncated]".into()
        ),
        "{stacks:?}"
    );

    // perf's text: the cut frame last, at the address that is not code.
    let out = run_tool(&["script", "-i", &f, "--format", "perf"]);
    let blocks: Vec<&str> = out.split("\n\n").filter(|b| !b.trim().is_empty()).collect();
    let b = blocks[4];
    let last = b.lines().last().unwrap();
    assert_eq!(
        last.split_whitespace().collect::<Vec<_>>(),
        [
            format!("{GARBAGE:x}").as_str(),
            "[truncated]",
            "([truncated])"
        ],
        "{b}"
    );
    assert!(!b.contains(" main "), "{b}");
    // The tool's own text.
    let out = run_tool(&["script", "-i", &f, "--callchain"]);
    assert_eq!(
        out.matches(" [truncated] ([truncated])").count(),
        7,
        "{out}"
    );

    let ff = d.path().join("ff.json");
    run_tool(&["firefox", "-i", &f, "-o", ff.to_str().unwrap()]);
    let ff = std::fs::read_to_string(ff).unwrap();
    assert!(ff.contains("\"[truncated] ([truncated])\""), "{ff}");
}
