//! `--call-graph dwarf`: user stacks copied into samples are unwound with
//! the binaries' `.eh_frame`. A real program built without frame pointers
//! (`tests/fixtures/unwind.c`: main → alpha_fn → beta_fn → gamma_fn)
//! captures its own registers and stack in gamma_fn as the module copies a
//! sampled task's; a stream carrying them (with an empty or one-entry
//! frame-pointer chain) must show the whole chain in every view, and
//! garbage must fall back to the frame-pointer chain without a panic.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{json, run_tool, write_recording, PID};
use oprofile_stream::{Comm, Encoder, Header, Record, Sample, UserStack};

/// What the fixture captured in gamma_fn.
struct Capture {
    rip: u64,
    rsp: u64,
    rbp: u64,
    gamma: u64,
    main: u64,
    stack: Vec<u8>,
    maps: String,
}

/// Without what the fixture needs (a C compiler, or a static libc for
/// `-static`) the test fails, saying what to install: `scripts/setup`
/// installs both, and a test that returned early would pass untested. Only
/// `OPROFILE_RS_ALLOW_SKIP=1` makes it a skip (`None`, with the reason on
/// stderr).
fn missing(what: &str) -> Option<(PathBuf, Capture)> {
    if std::env::var("OPROFILE_RS_ALLOW_SKIP").as_deref() == Ok("1") {
        eprintln!("{what}: skipped (OPROFILE_RS_ALLOW_SKIP=1)");
        return None;
    }
    panic!(
        "{what}: install gcc and the static C library (apt-get install gcc libc6-dev; \
         scripts/setup does), or set OPROFILE_RS_ALLOW_SKIP=1 to skip this test"
    );
}

/// Builds the fixture with `extra` flags and runs it; `None` (the test is
/// skipped) only with `OPROFILE_RS_ALLOW_SKIP=1` when the toolchain is
/// missing (see `missing`).
fn capture(dir: &Path, name: &str, extra: &[&str]) -> Option<(PathBuf, Capture)> {
    if Command::new("cc").arg("--version").output().is_err() {
        return missing("no C compiler (cc)");
    }
    // Flags the toolchain cannot link at all (`-static` without libc.a).
    if !extra.is_empty() {
        let probe = dir.join("probe.c");
        std::fs::write(&probe, "int main(void) { return 0; }\n").unwrap();
        let ok = Command::new("cc")
            .args(extra)
            .arg("-o")
            .arg(dir.join("probe"))
            .arg(&probe)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            return missing(&format!("cc {extra:?} cannot link a program"));
        }
    }
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/unwind.c");
    let bin = dir.join(name);
    let st = Command::new("cc")
        .args([
            "-O2",
            "-fomit-frame-pointer",
            "-fasynchronous-unwind-tables",
        ])
        .args(extra)
        .arg("-o")
        .arg(&bin)
        .arg(&src)
        .status()
        .unwrap();
    assert!(st.success(), "cc {extra:?} failed");
    let (out, maps) = (
        dir.join(format!("{name}.bin")),
        dir.join(format!("{name}.maps")),
    );
    let st = Command::new(&bin).arg(&out).arg(&maps).status().unwrap();
    assert!(st.success(), "{st:?}");
    let data = std::fs::read(&out).unwrap();
    let word = |i: usize| u64::from_ne_bytes(data[8 * i..8 * i + 8].try_into().unwrap());
    let copied = word(3) as usize;
    assert!((256..=8192).contains(&copied), "{copied}");
    assert_eq!(data.len(), 48 + copied);
    Some((
        bin,
        Capture {
            rip: word(0),
            rsp: word(1),
            rbp: word(2),
            gamma: word(4),
            main: word(5),
            stack: data[48..].to_vec(),
            maps: std::fs::read_to_string(&maps).unwrap(),
        },
    ))
}

/// A user-mode sample at gamma_fn's captured rip with the stack `stack`
/// and the frame-pointer chain `fp`.
fn user_sample(c: &Capture, time: u64, stack: UserStack, fp: Vec<u64>) -> Record {
    Record::Sample(Sample {
        cpu: 0,
        kernel: false,
        time,
        pc: c.rip,
        pid: PID,
        tgid: PID,
        user_callchain: fp,
        period: 1,
        user_stack: Some(stack),
        ..Default::default()
    })
}

fn stack_of(c: &Capture) -> UserStack {
    UserStack {
        ip: c.rip,
        sp: c.rsp,
        bp: c.rbp,
        size: 8192,
        data: c.stack.clone(),
    }
}

fn write(dir: &Path, c: &Capture, records: &[Record]) -> String {
    let h = Header {
        nr_cpus: 1,
        backtrace_depth: 4,
        start_time: 1_000,
        ..Header::default()
    };
    let mut e = Encoder::new(&h);
    e.record(&Record::Comm(Comm::new(0, 1_000, PID, PID, "unwind")));
    for r in records {
        e.record(r);
    }
    let file = write_recording(dir, &e.finish(), &c.maps);
    file.to_str().unwrap().to_string()
}

/// The whole chain is found: main → alpha_fn → beta_fn → gamma_fn, in the
/// folded stacks, `script`, the report's call graph and its header.
fn check_unwound(name: &str, extra: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let Some((_bin, c)) = capture(dir.path(), name, extra) else {
        return;
    };
    // A user-mode sample without a frame-pointer chain, one with a single
    // (wrong) entry, and a kernel-mode sample taken in a system call the
    // task entered at gamma_fn's rip.
    let records = [
        user_sample(&c, 2_000, stack_of(&c), vec![]),
        user_sample(&c, 3_000, stack_of(&c), vec![c.main + 1]),
        Record::Sample(Sample {
            kernel: true,
            time: 4_000,
            pc: 0xffffffff81001410,
            pid: PID,
            tgid: PID,
            callchain: vec![0xffffffff81001010, 0xffffffff81001820],
            user_callchain: vec![c.rip],
            period: 1,
            user_stack: Some(stack_of(&c)),
            ..Default::default()
        }),
    ];
    let f = write(dir.path(), &c, &records);
    let folded = run_tool(&["folded", "-i", &f]);
    let lines: Vec<&str> = folded.lines().collect();
    assert_eq!(lines.len(), 2, "{folded}");
    let user = lines
        .iter()
        .find(|l| l.ends_with(";main;alpha_fn;beta_fn;gamma_fn 2"))
        .unwrap_or_else(|| panic!("{name}: no unwound user stack: {folded}"));
    assert!(user.starts_with("unwind;"), "{user}");
    assert!(
        lines.iter().any(|l| l.contains(
            ";main;alpha_fn;beta_fn;gamma_fn;entry_SYSCALL_64_[k];do_syscall_64_[k];__schedule_[k] 1"
        )),
        "{name}: kernel-mode sample: {folded}"
    );
    // script: the caller frames after the sampled one, innermost first.
    let out = run_tool(&["script", "-i", &f, "--callchain"]);
    let first = out.split("\n\n").next().unwrap();
    let frames: Vec<&str> = first
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().nth(1).unwrap_or(""))
        .collect();
    assert_eq!(frames[..3], ["beta_fn", "alpha_fn", "main"], "{first}");
    // report: the callers of gamma_fn, and the counts in the header.
    let out = run_tool(&["report", "-i", &f, "--children", "-g"]);
    assert!(
        out.contains("# call graph: 3 samples with a user stack copy: 3 unwound with .eh_frame (DWARF), 0 fell back to the frame-pointer chain"),
        "{out}"
    );
    let v = json(&run_tool(&["report", "-i", &f, "--json", "--children"]));
    assert_eq!(v["user_stacks"]["dwarf"], 3, "{v}");
    assert_eq!(v["user_stacks"]["frame_pointer"], 0, "{v}");
    let row = common::report_row(&v, "alpha_fn");
    assert_eq!(row["children_weight"], 3, "{row}");
    // pprof carries the same stack.
    let pb = dir.path().join("p.pb.gz");
    run_tool(&["pprof", "-i", &f, "-o", pb.to_str().unwrap()]);
    let pb = std::fs::read(&pb).unwrap();
    let mut raw = Vec::new();
    use std::io::Read;
    flate2::read::GzDecoder::new(&pb[..])
        .read_to_end(&mut raw)
        .unwrap();
    let raw = String::from_utf8_lossy(&raw);
    for f in ["alpha_fn", "beta_fn", "gamma_fn"] {
        assert!(raw.contains(f), "pprof lacks {f}");
    }
}

#[test]
fn a_pie_without_frame_pointers_unwinds_through_main_into_libc() {
    check_unwound("pie", &[]);
}

#[test]
fn a_static_binary_without_eh_frame_hdr_unwinds() {
    check_unwound("static", &["-static"]);
}

#[test]
fn garbage_stacks_fall_back_to_the_frame_pointer_chain() {
    let dir = tempfile::tempdir().unwrap();
    let Some((_bin, c)) = capture(dir.path(), "garbage", &[]) else {
        return;
    };
    let fp = vec![c.main + 1];
    let good = stack_of(&c);
    let mut noise: u64 = 0x9e37_79b9_7f4a_7c15;
    let random: Vec<u8> = (0..8192)
        .map(|_| {
            noise ^= noise << 13;
            noise ^= noise >> 7;
            noise ^= noise << 17;
            noise as u8
        })
        .collect();
    let stacks = [
        // Bytes that are no stack.
        UserStack {
            data: vec![0xab; 8192],
            ..good.clone()
        },
        UserStack {
            data: random,
            ..good.clone()
        },
        // A copy that ends before gamma_fn's return address.
        UserStack {
            data: good.data[..8].to_vec(),
            ..good.clone()
        },
        UserStack {
            data: vec![],
            ..good.clone()
        },
        // Registers that make no sense.
        UserStack {
            sp: u64::MAX - 7,
            ..good.clone()
        },
        UserStack {
            ip: 0,
            ..good.clone()
        },
        UserStack {
            ip: 0x10,
            ..good.clone()
        },
        UserStack {
            ip: u64::MAX,
            sp: 0,
            bp: u64::MAX,
            ..good.clone()
        },
    ];
    let n = stacks.len();
    let records: Vec<Record> = stacks
        .into_iter()
        .enumerate()
        .map(|(i, s)| user_sample(&c, 2_000 + i as u64, s, fp.clone()))
        .collect();
    let f = write(dir.path(), &c, &records);
    let v = json(&run_tool(&["report", "-i", &f, "--json"]));
    assert_eq!(v["user_stacks"]["samples"], n, "{v}");
    let dwarf = v["user_stacks"]["dwarf"].as_u64().unwrap();
    let fallback = v["user_stacks"]["frame_pointer"].as_u64().unwrap();
    assert_eq!(dwarf + fallback, n as u64);
    // Every sample whose stack holds nothing of gamma_fn's frame falls back
    // (the random bytes might, at worst, name a few real addresses).
    assert!(fallback >= n as u64 - 1, "{v}");
    let folded = run_tool(&["folded", "-i", &f]);
    let fp_line = folded
        .lines()
        .find(|l| l.starts_with("unwind;main;gamma_fn "))
        .unwrap_or_else(|| panic!("{folded}"));
    let count: u64 = fp_line.rsplit(' ').next().unwrap().parse().unwrap();
    assert!(count >= fallback - 1, "{folded}");
    for cmd in [&["script", "-g"][..], &["report", "--children", "-g"]] {
        let mut args = cmd.to_vec();
        args.extend(["-i", f.as_str()]);
        run_tool(&args);
    }
}

#[test]
fn the_library_unwinds_return_addresses_named_after_their_calls() {
    use oprofile_tool::maps::parse_maps;
    use oprofile_tool::symbols::Resolver;
    use oprofile_tool::unwind::DwarfUnwinder;
    let dir = tempfile::tempdir().unwrap();
    let Some((_bin, c)) = capture(dir.path(), "lib", &[]) else {
        return;
    };
    let r = Resolver::new(
        None,
        std::collections::HashMap::from([(PID, parse_maps(&c.maps))]),
        None,
    );
    let mut u = DwarfUnwinder::default();
    let chain = u.unwind(&r, PID, 0, &stack_of(&c));
    let names: Vec<String> = chain
        .iter()
        .map(|&a| r.resolve_return(PID, 0, a).name())
        .collect();
    assert_eq!(names[..3], ["beta_fn", "alpha_fn", "main"], "{names:?}");
    // main's caller is libc's; the unwind ends at the root, well before
    // the frame limit.
    assert!(names.len() > 3 && names.len() < 16, "{names:?}");
    assert!(r.resolve(false, PID, c.rip).name() == "gamma_fn");
    assert!(c.gamma <= c.rip);
    // A kernel-mode sample's chain starts where the task entered the kernel.
    let k = u
        .callchain(&r, PID, 0, true, &stack_of(&c), &[])
        .unwrap()
        .chain;
    assert_eq!(k[0], c.rip);
    assert_eq!(k[1..], chain[..]);
    assert_eq!(
        (u.stats.with_stack, u.stats.dwarf, u.stats.fallback),
        (1, 1, 0)
    );
}

/// The frame-pointer chain the module records for `c` (its walk from
/// `rbp`: the return address of each frame record, while the copy holds
/// them), as the stream's user callchain of a user-mode sample.
fn fp_chain_of(c: &Capture) -> Vec<u64> {
    let word = |addr: u64| -> Option<u64> {
        let off = usize::try_from(addr.checked_sub(c.rsp)?).ok()?;
        Some(u64::from_le_bytes(
            c.stack.get(off..off + 8)?.try_into().ok()?,
        ))
    };
    let (mut fp, mut chain) = (c.rbp, Vec::new());
    while let (Some(next), Some(ret)) = (word(fp), word(fp + 8)) {
        if ret == 0 {
            break;
        }
        chain.push(ret);
        if next <= fp {
            break;
        }
        fp = next;
    }
    chain
}

/// `c`'s stack copy cut to its first `n` bytes, as a copy area of `n`.
fn short_stack(c: &Capture, n: usize) -> UserStack {
    UserStack {
        ip: c.rip,
        sp: c.rsp,
        bp: c.rbp,
        size: n as u16,
        data: c.stack[..n].to_vec(),
    }
}

/// The hybrid (`record`'s default): a copy too short for the whole stack
/// of a program built with frame pointers goes on along the frame-pointer
/// chain from the frame where the copy ends, and gives the stack the whole
/// copy gives.
#[test]
fn a_short_copy_goes_on_along_the_frame_pointer_chain() {
    let dir = tempfile::tempdir().unwrap();
    let Some((_bin, c)) = capture(dir.path(), "fp", &["-fno-omit-frame-pointer"]) else {
        return;
    };
    let chain = fp_chain_of(&c);
    assert!(
        chain.len() >= 4,
        "the frame-pointer walk of the fixture: {chain:x?}"
    );
    // gamma_fn's frame and its frame record, not beta_fn's frame: the
    // unwind of beta_fn needs the stack past the copy.
    let n = usize::try_from(c.rbp - c.rsp).unwrap() + 16;
    assert!(n < c.stack.len() && n.is_multiple_of(8), "{n}");
    let records = [
        user_sample(&c, 2_000, stack_of(&c), chain.clone()),
        user_sample(&c, 3_000, short_stack(&c, n), chain.clone()),
    ];
    let f = write(dir.path(), &c, &records);
    // The program's own frames are the whole copy's. (The chain ends in
    // glibc's start code, built without frame pointers, where the whole
    // copy's unwind reaches _start.)
    let folded = run_tool(&["folded", "-i", &f]);
    let lines: Vec<&str> = folded.lines().collect();
    assert_eq!(lines.len(), 2, "{folded}");
    for l in &lines {
        assert!(l.ends_with(";main;alpha_fn;beta_fn;gamma_fn 1"), "{folded}");
    }
    assert!(!folded.contains("[truncated]"), "{folded}");
    let out = run_tool(&["report", "-i", &f, "--children", "-g"]);
    assert!(
        out.contains("past the copy's end 1 went on along the frame-pointer chain, 0 were cut"),
        "{out}"
    );
    assert!(!out.contains("call stacks cut"), "{out}");
    let v = json(&run_tool(&["report", "-i", &f, "--json"]));
    assert_eq!(v["user_stacks"]["spliced"], 1, "{v}");
    assert_eq!(v["truncated_stacks"], 0, "{v}");

    // A chain that disagrees with the copy is not spliced on: cut, marked.
    let mut wrong = chain.clone();
    wrong[0] ^= 0x10;
    let f = write(
        dir.path(),
        &c,
        &[user_sample(&c, 2_000, short_stack(&c, n), wrong)],
    );
    let folded = run_tool(&["folded", "-i", &f]);
    assert!(
        folded
            .trim_end()
            .ends_with(";[truncated];beta_fn;gamma_fn 1"),
        "{folded}"
    );
}

/// Without frame pointers a copy that ends before the outermost frame
/// cuts the stack there, marked, and the report says why and what fixes it.
#[test]
fn a_short_copy_without_frame_pointers_is_cut_and_marked() {
    let dir = tempfile::tempdir().unwrap();
    let Some((_bin, c)) = capture(dir.path(), "nofp", &[]) else {
        return;
    };
    // Less than gamma_fn's frame (its 96-byte buffer, its locals, the
    // saved registers): not even its return address is in the copy.
    let n = 256;
    let f = write(
        dir.path(),
        &c,
        &[user_sample(&c, 2_000, short_stack(&c, n), vec![])],
    );
    let folded = run_tool(&["folded", "-i", &f]);
    assert!(
        folded.trim_end() == "unwind;[truncated];gamma_fn 1",
        "{folded}"
    );
    let note = common::cut_note(&f);
    assert!(
        note.contains("1 where the user stack copy ended") && note.contains("--call-graph dwarf"),
        "{note}"
    );
    assert!(!note.contains("no executable mapping"), "{note}");
}
