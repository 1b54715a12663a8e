mod common;

use common::*;

fn recording() -> (tempfile::TempDir, std::path::PathBuf) {
    let v = victim();
    let dir = tempfile::tempdir().unwrap();
    let file = write_recording(dir.path(), &synthetic_stream(v), &fake_maps(v, &v.path));
    (dir, file)
}

fn run(args: &[&str]) -> (bool, String, String) {
    run_tool_any(args)
}

/// Runs `COMMAND -i input -o output`, which must succeed.
fn export(command: &str, input: &std::path::Path, output: &std::path::Path) {
    let (ok, _, err) = run(&[
        command,
        "-i",
        input.to_str().unwrap(),
        "-o",
        output.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
}

fn victim_name() -> String {
    victim()
        .path
        .file_name()
        .unwrap()
        .to_str()
        .unwrap()
        .to_string()
}

#[test]
fn report_lists_symbols_in_order_with_percentages() {
    let (_d, file) = recording();
    let (ok, out, err) = run(&["report", "-i", file.to_str().unwrap()]);
    assert!(ok, "{err}");
    println!("{out}");
    assert!(
        out.contains("# samples: 20, lost: 5 (20.00% of the samples taken)"),
        "{out}"
    );
    assert!(
        err.contains("warning: 5 samples were lost (20.00%)") && err.contains("cpu_buffer_size"),
        "{err}"
    );
    // 20 samples 1 ms apart after the start: 20 ms; per CPU, samples taken
    // (kept + lost) per second of that.
    assert!(
        out.contains("# recording: 0.02 s, 1000 samples/s per CPU asked for"),
        "{out}"
    );
    // Per-CPU totals: CPU 0 = 5 alpha + 3 + 1 kernel, CPU 1 = 5 alpha + 6 beta, 5 lost.
    assert!(
        out.lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["#", "0", "9", "0", "450"]),
        "{out}"
    );
    assert!(
        out.lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["#", "1", "11", "5", "800"]),
        "{out}"
    );
    let rows: Vec<Vec<&str>> = out
        .lines()
        .filter(|l| !l.starts_with('#') && !l.contains("Samples"))
        .map(|l| l.split_whitespace().collect())
        .collect();
    let vn = victim_name();
    let pid = format!("{PID}/victim");
    assert_eq!(
        rows[0],
        ["10", "50.00%", "alpha", vn.as_str(), pid.as_str()]
    );
    assert_eq!(rows[1], ["6", "30.00%", "beta", vn.as_str(), pid.as_str()]);
    assert_eq!(
        rows[2],
        [
            "3",
            "15.00%",
            "__schedule",
            "[kernel.kallsyms]",
            pid.as_str()
        ]
    );
    assert_eq!(
        rows[3],
        [
            "1",
            "5.00%",
            "[unknown]",
            "0xffffffff81002010",
            "[unknown]",
            pid.as_str()
        ]
    );
    assert_eq!(rows.len(), 4);
}

#[test]
fn report_sort_and_split_options() {
    let (_d, file) = recording();
    let f = file.to_str().unwrap();
    let (ok, out, _) = run(&["report", "-i", f, "--sort", "cpu"]);
    assert!(ok);
    let rows: Vec<Vec<&str>> = out
        .lines()
        .filter(|l| !l.starts_with('#') && !l.contains("Samples"))
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        rows,
        vec![vec!["11", "55.00%", "1"], vec!["9", "45.00%", "0"]]
    );

    let (ok, out, _) = run(&["report", "-i", f, "--sort", "pid"]);
    assert!(ok);
    assert!(
        out.lines().any(|l| l.split_whitespace().collect::<Vec<_>>()
            == ["20", "100.00%", &format!("{PID}/victim")]),
        "{out}"
    );

    let (ok, out, _) = run(&["report", "-i", f, "--per-cpu", "--top", "2"]);
    assert!(ok);
    let rows: Vec<Vec<&str>> = out
        .lines()
        .filter(|l| !l.starts_with('#') && !l.contains("Samples"))
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows.len(), 2);
    assert_eq!(&rows[0][..4], ["6", "30.00%", "1", "beta"]);
    assert_eq!(&rows[1][..4], ["5", "25.00%", "0", "alpha"]);
}

fn rows(out: &str) -> Vec<Vec<&str>> {
    out.lines()
        .filter(|l| !l.starts_with('#') && !l.contains("Samples"))
        .map(|l| l.split_whitespace().collect())
        .collect()
}

#[test]
fn filters_keep_matching_samples_only() {
    let (_d, file) = recording();
    let f = file.to_str().unwrap();
    // CPU 1 holds 5 alpha and 6 beta samples; the stream totals stay.
    let (ok, out, err) = run(&["report", "-i", f, "--cpu", "1"]);
    assert!(ok, "{err}");
    assert!(out.contains("# samples: 20, lost: 5"), "{out}");
    assert!(out.contains("# filter: cpu 1: 11 of 20 samples"), "{out}");
    let r = rows(&out);
    assert_eq!(r.len(), 2, "{out}");
    assert_eq!(&r[0][..3], ["6", "54.55%", "beta"]);
    assert_eq!(&r[1][..3], ["5", "45.45%", "alpha"]);

    let pid = PID.to_string();
    let (ok, out, _) = run(&[
        "report",
        "-i",
        f,
        "--pid",
        &format!("1,{pid}"),
        "--comm",
        "victim",
        "--cpu",
        "0",
    ]);
    assert!(ok);
    assert!(
        out.contains(&format!(
            "# filter: pid 1,{pid}, comm victim, cpu 0: 9 of 20 samples"
        )),
        "{out}"
    );
    assert_eq!(
        rows(&out)
            .iter()
            .map(|r| r[0].parse::<u64>().unwrap())
            .sum::<u64>(),
        9
    );

    // A filter that matches nothing: an empty profile and a warning, not an error.
    let (ok, out, err) = run(&["report", "-i", f, "--comm", "nosuch"]);
    assert!(ok, "{err}");
    assert!(rows(&out).is_empty(), "{out}");
    assert!(err.contains("keeps none of the 20 samples"), "{err}");

    // Every analysis honours the filter.
    let (ok, out, _) = run(&["script", "-i", f, "--cpu", "1"]);
    assert!(ok);
    assert_eq!(out.lines().count(), 11, "{out}");
    let (ok, out, _) = run(&["folded", "-i", f, "--cpu", "0"]);
    assert!(ok);
    let total: u64 = out
        .lines()
        .map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap())
        .sum();
    assert_eq!(total, 9, "{out}");

    let (ok, _, err) = run(&["report", "-i", f, "--cpu", "x"]);
    assert!(!ok);
    assert!(err.contains("--cpu"), "{err}");
}

#[test]
fn script_prints_one_line_per_sample() {
    let (_d, file) = recording();
    let (ok, out, err) = run(&["script", "-i", file.to_str().unwrap()]);
    assert!(ok, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 20);
    let first: Vec<&str> = lines[0].split_whitespace().collect();
    let alpha = format!("{:016x}", sym_addr(victim(), "alpha", 4));
    assert_eq!(
        first,
        [
            "1.001000",
            "[000]",
            &format!("{PID}/{PID}"),
            "victim",
            alpha.as_str(),
            "alpha",
            &format!("({})", victim_name()),
            // The event and the period the sample stands for (the
            // header's: a stream without CONFIG records).
            "cpu-clock",
            "1000000"
        ]
    );
    assert!(
        lines[16].contains("ffffffff81001410 __schedule ([kernel.kallsyms])"),
        "{}",
        lines[16]
    );
    // With events and callchains.
    let (ok, out, _) = run(&["script", "-i", file.to_str().unwrap(), "--events", "-g"]);
    assert!(ok);
    assert!(out.contains("[001] LOST 5 samples"));
    assert!(out.contains("[000] TRACING on"));
    assert!(out.contains("\tffffffff81001010 do_syscall_64 ([kernel.kallsyms])"));
}

#[test]
fn folded_stacks() {
    let (_d, file) = recording();
    let (ok, out, err) = run(&["folded", "-i", file.to_str().unwrap()]);
    assert!(ok, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines,
        vec![
            "victim;[unknown]_[k] 1",
            "victim;alpha 10",
            "victim;beta 6",
            "victim;entry_SYSCALL_64_[k];do_syscall_64_[k];__schedule_[k] 3",
        ]
    );
}

#[test]
fn flamegraph_svg() {
    let (d, file) = recording();
    let svg = d.path().join("out.svg");
    export("flamegraph", &file, &svg);
    let s = std::fs::read_to_string(&svg).unwrap();
    assert!(s.starts_with("<?xml"));
    assert!(s.contains("alpha") && s.contains("__schedule") && s.contains("victim"));
}

#[test]
fn pprof_round_trip() {
    use oprofile_tool::pprof;
    let (d, file) = recording();
    let pb = d.path().join("p.pb.gz");
    export("pprof", &file, &pb);
    let data = std::fs::read(&pb).unwrap();
    assert_eq!(&data[..2], &[0x1f, 0x8b], "gzipped");
    let p = pprof::read(&data).unwrap();
    let st = |i: i64| p.string_table[i as usize].as_str();
    assert_eq!(st(0), "");
    assert_eq!(p.sample_type.len(), 2);
    assert_eq!(
        (st(p.sample_type[0].r#type), st(p.sample_type[0].unit)),
        ("samples", "count")
    );
    assert_eq!(
        (st(p.sample_type[1].r#type), st(p.sample_type[1].unit)),
        ("cpu", "nanoseconds")
    );
    let total: i64 = p.sample.iter().map(|s| s.value[0]).sum();
    assert_eq!(total, 20);
    // cpu-clock with a 1 ms period: 1,000,000 ns per sample.
    assert!(p
        .sample
        .iter()
        .all(|s| s.value[1] == s.value[0] * 1_000_000));
    // Count per leaf function name.
    let mut per_fn = std::collections::HashMap::<String, i64>::new();
    for s in &p.sample {
        let loc = p
            .location
            .iter()
            .find(|l| l.id == s.location_id[0])
            .unwrap();
        let f = p
            .function
            .iter()
            .find(|f| f.id == loc.line[0].function_id)
            .unwrap();
        *per_fn.entry(st(f.name).to_string()).or_default() += s.value[0];
        let m = p.mapping.iter().find(|m| m.id == loc.mapping_id).unwrap();
        assert!(!st(m.filename).is_empty());
    }
    assert_eq!(per_fn["alpha"], 10);
    assert_eq!(per_fn["beta"], 6);
    assert_eq!(per_fn["__schedule"], 3);
    // Kernel callchain: leaf first.
    let s = p.sample.iter().find(|s| s.location_id.len() == 3).unwrap();
    let names: Vec<&str> = s
        .location_id
        .iter()
        .map(|id| {
            let loc = p.location.iter().find(|l| l.id == *id).unwrap();
            st(p.function
                .iter()
                .find(|f| f.id == loc.line[0].function_id)
                .unwrap()
                .name)
        })
        .collect();
    assert_eq!(names, ["__schedule", "do_syscall_64", "entry_SYSCALL_64"]);
    let comm_key = p.string_table.iter().position(|s| s == "comm").unwrap() as i64;
    assert!(s
        .label
        .iter()
        .any(|l| l.key == comm_key && st(l.str) == "victim"));
}

/// The program's binary is the first mapping, which `go tool pprof` shows
/// as the profile's file ("File:"), even when the first sample is a
/// kernel-mode one (an off-CPU profile's are all): it read
/// `[kernel.kallsyms]` there.
#[test]
fn pprof_names_the_program_first() {
    use oprofile_stream::{Encoder, Header, Record, Sample};
    use oprofile_tool::pprof;
    let v = victim();
    let dir = tempfile::tempdir().unwrap();
    let mut e = Encoder::new(&Header {
        nr_cpus: 1,
        backtrace_depth: 4,
        ..Header::default()
    });
    e.record(&Record::Comm(oprofile_stream::Comm::new(
        0, 1, PID, PID, "victim",
    )));
    e.record(&Record::Sample(Sample {
        cpu: 0,
        kernel: true,
        time: 10,
        pc: 0xffff_ffff_8100_1000,
        pid: PID,
        tgid: PID,
        callchain: vec![0xffff_ffff_8100_2000],
        user_callchain: vec![sym_addr(v, "beta", 8), sym_addr(v, "alpha", 4)],
        ..Default::default()
    }));
    let file = write_recording(dir.path(), &e.finish(), &fake_maps(v, &v.path));
    let pb = dir.path().join("p.pb.gz");
    export("pprof", &file, &pb);
    let p = pprof::read(&std::fs::read(&pb).unwrap()).unwrap();
    let main = &p.string_table[p.mapping[0].filename as usize];
    assert_eq!(main, &v.path.display().to_string());
}

#[test]
fn truncated_stream_warns_and_continues() {
    let v = victim();
    let dir = tempfile::tempdir().unwrap();
    let mut data = synthetic_stream(v);
    let full = data.len();
    data.truncate(full - 5);
    let file = write_recording(dir.path(), &data, &fake_maps(v, &v.path));
    let (ok, out, err) = run(&["report", "-i", file.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert!(
        err.contains(&format!(
            "truncated at offset {}",
            full - oprofile_stream::SAMPLE_EXT_SIZE
        )),
        "{err}"
    );
    assert!(out.contains("# samples: 19,"));
}

#[test]
fn corrupt_stream_fails_unless_allowed() {
    let v = victim();
    let dir = tempfile::tempdir().unwrap();
    let mut data = synthetic_stream(v);
    // Record 2 (after TRACING 16 + COMM 40) gets size 3.
    data[oprofile_stream::HEADER_SIZE + 16 + 2] = 3;
    let file = write_recording(dir.path(), &data, &fake_maps(v, &v.path));
    let (ok, _, err) = run(&["report", "-i", file.to_str().unwrap()]);
    assert!(!ok);
    assert!(
        err.contains(&format!(
            "corrupt record at offset {}",
            oprofile_stream::HEADER_SIZE + 16
        )),
        "{err}"
    );
    let (ok, out, err) = run(&["report", "-i", file.to_str().unwrap(), "--allow-corrupt"]);
    assert!(ok, "{err}");
    assert!(out.contains("# samples: 0,"));
}

#[test]
fn bad_inputs_give_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("x");
    std::fs::write(&f, b"this is not a stream at all, definitely not").unwrap();
    let (ok, _, err) = run(&["report", "-i", f.to_str().unwrap()]);
    assert!(!ok);
    assert!(err.contains("bad magic"), "{err}");
    let (ok, _, err) = run(&["script", "-i", dir.path().join("missing").to_str().unwrap()]);
    assert!(!ok);
    assert!(err.contains("cannot read"), "{err}");
    let mut h = oprofile_stream::HeaderExt::to_bytes(&oprofile_stream::Header::default());
    h[8] = 9;
    std::fs::write(&f, &h).unwrap();
    let (ok, _, err) = run(&["report", "-i", f.to_str().unwrap()]);
    assert!(!ok);
    assert!(err.contains("unsupported stream version 9"), "{err}");
}

#[test]
fn no_sidecar_still_works() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("s");
    std::fs::write(&f, synthetic_stream(victim())).unwrap();
    let (ok, out, err) = run(&["report", "-i", f.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert!(err.contains("no side-car"), "{err}");
    assert!(out.contains("[unknown] 0x"));
    assert!(!out.contains("alpha"));
}

#[test]
fn shell_completions_and_man_pages() {
    for shell in ["bash", "zsh", "fish"] {
        let (ok, out, err) = run(&["completions", shell]);
        assert!(ok, "{err}");
        for word in ["report", "diff", "children", "time", "symbolizer"] {
            assert!(out.contains(word), "{shell}: no {word}");
        }
    }
    // bash: the script defines its completion function and registers it.
    let (_, out, _) = run(&["completions", "bash"]);
    assert!(
        out.contains("complete -F _oprofile-rs") || out.contains("complete -F _oprofile__rs"),
        "{out}"
    );
    let (ok, _, _) = run(&["completions", "tcsh"]);
    assert!(!ok);

    let dir = tempfile::tempdir().unwrap();
    let man = dir.path().join("man1");
    let (ok, _, err) = run(&["man", man.to_str().unwrap()]);
    assert!(ok, "{err}");
    let page = std::fs::read_to_string(man.join("oprofile-rs.1")).unwrap();
    assert!(
        page.starts_with(".ie") || page.contains(".TH oprofile-rs 1"),
        "{page}"
    );
    assert!(page.contains("report"), "{page}");
    let report = std::fs::read_to_string(man.join("oprofile-rs-report.1")).unwrap();
    assert!(report.contains(".TH oprofile-rs-report"), "{report}");
    for opt in ["children", "callers", "sort", "time", "json"] {
        assert!(report.contains(opt), "no {opt} in the report page");
    }
    for sub in [
        "record",
        "script",
        "folded",
        "flamegraph",
        "pprof",
        "html",
        "diff",
    ] {
        assert!(man.join(format!("oprofile-rs-{sub}.1")).is_file(), "{sub}");
    }
}

/// A module's frames are named `[NAME]` after the module (`[oprofile_rs]`,
/// the name Kbuild gives it) in report, script and `script --format
/// perf`, and the user guide and `--help` say so: no `[module]` where the
/// tool prints the module's name, and the `--format perf` paragraph does
/// not put every kernel address in `[kernel.kallsyms]` (issue 35).
#[test]
fn module_binaries_are_named_as_the_guide_says() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let kbuild = std::fs::read_to_string(root.join("Kbuild")).unwrap();
    let module = kbuild
        .lines()
        .find_map(|l| l.strip_prefix("obj-m := ")?.strip_suffix(".o"))
        .expect("the module's name in Kbuild");
    let dir = tempfile::tempdir().unwrap();
    let file = kernel_recording(dir.path(), "kt", &[0xffff_ffff_c010_0010]);
    let meta = dir.path().join("oprofile.data.meta");
    std::fs::write(
        meta.join("kallsyms"),
        format!("ffffffff81000000 T _text\nffffffffc0100000 t opr_handler\t[{module}]\n"),
    )
    .unwrap();
    std::fs::write(
        meta.join("modules"),
        format!("{module} 16384 0 - Live 0xffffffffc0100000 (O)\n"),
    )
    .unwrap();
    let f = file.to_str().unwrap();
    let binary = format!("[{module}]");
    let (ok, report, err) = run(&["report", "-q", "--all", "-i", f]);
    assert!(
        ok && report.contains(&format!("opr_handler  {binary}")),
        "{report}{err}"
    );
    for format in ["oprofile", "perf"] {
        let (ok, script, err) = run(&["script", "-q", "--all", "-i", f, "--format", format]);
        assert!(
            ok && script.contains(&format!("opr_handler ({binary})")),
            "{script}{err}"
        );
    }

    let guide = std::fs::read_to_string(root.join("Documentation/user-guide.md")).unwrap();
    let (_, help, _) = run(&["report", "--help"]);
    for (what, text) in [("the guide", &guide), ("report --help", &help)] {
        assert!(!text.contains("[module]"), "{what} says [module]");
    }
    assert!(
        guide.contains(&format!("`{binary}`")),
        "the guide has no {binary}"
    );
    let perf = guide
        .split("\n\n")
        .find(|p| p.starts_with("A header line per sample"))
        .expect("the --format perf paragraph");
    assert!(perf.contains("`[NAME]`"), "{perf}");
}

/// The rows of a report, the `#` lines and the header left out.
fn table(out: &str) -> Vec<Vec<String>> {
    rows(out)
        .into_iter()
        .map(|r| r.into_iter().map(str::to_string).collect())
        .collect()
}

/// How many lines of `err` contain `what`.
fn lines_with(err: &str, what: &str) -> usize {
    err.lines().filter(|l| l.contains(what)).count()
}

/// perf report's spellings do what perf's do: `-n` (--show-nr-samples) is
/// the Samples column, which is always there; `-c`/`--comms`, `-C` (with
/// ranges), `-d`/`--dsos`, `--tid`, `-S`/`--symbols`, `--percent-limit`,
/// `--stdio`, `--no-children`, and the sort keys `sym` and `tgid`.
#[test]
fn report_takes_perf_spellings() {
    let (_d, file) = recording();
    let f = file.to_str().unwrap();
    let report = |extra: &[&str]| -> (String, String) {
        let mut args = vec!["report", "-i", f];
        args.extend_from_slice(extra);
        let (ok, out, err) = run(&args);
        assert!(ok, "{extra:?}: {err}");
        assert!(!err.contains("old spelling"), "{extra:?}: {err}");
        (out, err)
    };
    let (plain, _) = report(&[]);
    let samples: Vec<String> = table(&plain).iter().map(|r| r[0].clone()).collect();
    assert_eq!(samples, ["10", "6", "3", "1"], "{plain}");
    assert!(plain.contains("   Samples       %  Symbol"), "{plain}");
    for same in [
        &["-n"][..],
        &["--show-nr-samples"],
        &["--stdio"],
        &["-n", "--stdio", "--no-children"],
        &["--children", "--no-children"],
        &["--sort", "sym"],
        &["-C", "0-1"],
        &["--tid", &PID.to_string()],
    ] {
        let (out, _) = report(same);
        assert_eq!(table(&out), table(&plain), "{same:?}: {out}");
    }
    let (out, _) = report(&["--no-children", "--children"]);
    assert!(out.contains("Children     Self    Samples"), "{out}");
    let (tgid, _) = report(&["--sort", "tgid"]);
    assert_eq!(tgid, report(&["--sort", "pid"]).0);

    // Filters under perf's names.
    for args in [&["-c", "victim"][..], &["--comms", "victim"]] {
        let (out, _) = report(args);
        assert!(out.contains("# filter: comm victim: 20 of 20"), "{out}");
    }
    for args in [&["-C", "1"][..], &["--cpu", "1-1"]] {
        let (out, _) = report(args);
        assert!(out.contains("# filter: cpu 1: 11 of 20"), "{out}");
    }
    let (out, _) = report(&["--tid", "1"]);
    assert!(out.contains("# filter: tid 1: 0 of 20"), "{out}");
    let (out, _) = report(&["-d", "[kernel.kallsyms]"]);
    assert!(
        out.contains("# filter: dso [kernel.kallsyms]: 3 of 20"),
        "{out}"
    );
    assert_eq!(table(&out).len(), 1, "{out}");
    assert_eq!(table(&out)[0][..3], ["3", "100.00%", "__schedule"]);
    // By name (the Binary column's) or path, the program's 16.
    let victim_path = victim().path.to_str().unwrap().to_string();
    for dso in [victim_name(), victim_path] {
        let (out, _) = report(&["--dsos", &dso]);
        assert!(out.contains(": 16 of 20 samples"), "{dso}: {out}");
    }
    for args in [&["-S", "beta"][..], &["--symbols", "beta"]] {
        let (out, _) = report(args);
        let t = table(&out);
        assert_eq!(t.len(), 1, "{out}");
        assert_eq!(t[0][..3], ["6", "30.00%", "beta"]);
    }
    // --percent-limit: rows at or above it (the 5% one goes).
    for pct in ["10", "15%"] {
        let (out, _) = report(&["--percent-limit", pct]);
        let names: Vec<String> = table(&out).iter().map(|r| r[2].clone()).collect();
        assert_eq!(names, ["alpha", "beta", "__schedule"], "{pct}: {out}");
    }
    let (out, _) = report(&["--percent-limit", "30"]);
    assert_eq!(table(&out).len(), 2, "{out}");
    // With --children, of the inclusive share: do_syscall_64 and
    // entry_SYSCALL_64 (15% each, Self 0) stay at 15.
    let (out, _) = report(&["--children", "--percent-limit", "15"]);
    let names: Vec<String> = table(&out).iter().map(|r| r[3].clone()).collect();
    assert_eq!(names.len(), 5, "{out}");
    assert!(names.contains(&"do_syscall_64".to_string()), "{out}");
    for bad in ["-1", "x", "101"] {
        let arg = format!("--percent-limit={bad}");
        let (ok, _, err) = run(&["report", "-i", f, &arg]);
        assert!(!ok && err.contains("--percent-limit"), "{bad}: {err}");
    }
    let (ok, _, err) = run(&["report", "-i", f, "-C", "3-1"]);
    assert!(!ok && err.contains("ends before it starts"), "{err}");
}

/// The old `report -n N` and `diff -n N` (a count after -n) are still the
/// first N rows, with one warning naming `--top N`.
#[test]
fn old_top_n_spelling_warns_once_and_works() {
    let (_d, file) = recording();
    let f = file.to_str().unwrap();
    let (ok, top, err) = run(&["report", "-i", f, "--top", "2"]);
    assert!(ok && !err.contains("old spelling"), "{err}");
    assert_eq!(table(&top).len(), 2, "{top}");
    for old in [
        &["-n", "2"][..],
        &["-n2"],
        &["-n=2"],
        &["-qn", "2"],
        &["-n", "2", "--sort", "symbol"],
    ] {
        let mut args = vec!["report", "-i", f];
        args.extend_from_slice(old);
        let (ok, out, err) = run(&args);
        assert!(ok, "{old:?}: {err}");
        assert_eq!(out, top, "{old:?}");
        assert_eq!(
            lines_with(
                &err,
                "oprofile-rs: warning: report -n 2 is read as --top 2, its old spelling"
            ),
            1,
            "{old:?}: {err}"
        );
        assert_eq!(lines_with(&err, "old spelling"), 1, "{old:?}: {err}");
        assert!(err.contains("use --top 2"), "{err}");
    }
    // -n and a count both: the samples column and the first 2 rows.
    let (ok, out, err) = run(&["report", "-i", f, "-n", "--top", "2"]);
    assert!(ok && out == top && !err.contains("old spelling"), "{err}");

    let (ok, top, err) = run(&["diff", f, f, "--top", "1"]);
    assert!(ok && !err.contains("old spelling"), "{err}");
    let diff_rows = |out: &str| {
        out.lines()
            .filter(|l| !l.starts_with('#') && !l.contains("Old%"))
            .count()
    };
    assert_eq!(diff_rows(&top), 1, "{top}");
    let (ok, out, err) = run(&["diff", f, f, "-n", "1"]);
    assert!(ok, "{err}");
    assert_eq!(out, top);
    assert_eq!(
        lines_with(&err, "warning: diff -n 1 is read as --top 1"),
        1,
        "{err}"
    );
    // perf diff has no -n: alone it is an error.
    let (ok, _, err) = run(&["diff", f, f, "-n"]);
    assert!(!ok && err.contains("-n"), "{err}");
    // perf diff's -C is --comms, its -d --dsos.
    let (ok, out, err) = run(&["diff", f, f, "-C", "victim", "-d", "[kernel.kallsyms]"]);
    assert!(ok, "{err}");
    assert!(out.contains("# old: 3 samples, new: 3 samples"), "{out}");
}

/// script's -c and -C are perf script's (comms, CPUs); annotate takes the
/// function as perf annotate -s does, and --stdio and -l (which change
/// nothing).
#[test]
fn script_and_annotate_take_perf_spellings() {
    let (_d, file) = recording();
    let f = file.to_str().unwrap();
    let (ok, out, err) = run(&["script", "-i", f, "-C", "1", "-c", "victim"]);
    assert!(ok, "{err}");
    assert_eq!(out.lines().count(), 11, "{out}");
    let (ok, plain, err) = run(&["annotate", "alpha", "-i", f]);
    assert!(ok, "{err}");
    for args in [
        &["annotate", "-s", "alpha", "-i", f][..],
        &["annotate", "--symbol", "alpha", "-i", f, "--stdio"],
        &["annotate", "alpha", "-i", f, "-l"],
        &["annotate", "alpha", "-i", f, "--print-line"],
    ] {
        let (ok, out, err) = run(args);
        assert!(ok, "{args:?}: {err}");
        assert_eq!(out, plain, "{args:?}");
    }
    let (ok, _, err) = run(&["annotate", "-i", f]);
    assert!(!ok && err.contains("SYMBOL"), "{err}");
    let (ok, _, err) = run(&["annotate", "alpha", "-s", "beta", "-i", f]);
    assert!(!ok && err.contains("cannot be used with"), "{err}");
}

/// A relative --time span that starts past the recording's end gets a
/// note: perf's --time (and `script`) times are written with @ here.
#[test]
fn a_time_span_past_the_end_names_the_absolute_spelling() {
    let (_d, file) = recording();
    let f = file.to_str().unwrap();
    // The recording runs from 1.000 s to 1.020 s of the clock.
    let (ok, _, err) = run(&["report", "-i", f, "--time", "1.016,"]);
    assert!(ok, "{err}");
    assert_eq!(
        lines_with(&err, "--time 1.016,: the recording lasted 0.020 s"),
        1,
        "{err}"
    );
    assert!(err.contains("are written --time @1.016,"), "{err}");
    let (ok, out, err) = run(&["report", "-i", f, "--time", "@1.016,"]);
    assert!(ok && !err.contains("lasted"), "{err}");
    assert!(out.contains(": 5 of 20 samples"), "{out}");
    let (_, _, err) = run(&["report", "-i", f, "--time", "0.01,"]);
    assert!(!err.contains("lasted"), "{err}");
    let (_, _, err) = run(&["report", "-q", "-i", f, "--time", "1.016,"]);
    assert!(!err.contains("lasted"), "{err}");
}

/// `--help` shows the new names, and perf's where they were added.
#[test]
fn help_shows_the_new_names() {
    let help = |cmd: &str| {
        let (ok, out, err) = run(&[cmd, "--help"]);
        assert!(ok, "{err}");
        out
    };
    let report = help("report");
    for want in [
        "--top <N>",
        "-n, --show-nr-samples",
        "--percent-limit <PCT>",
        "-c, --comm <COMM,...>",
        "[alias: --comms]",
        "-C, --cpu <CPU,...>",
        "-d, --dsos <DSO,...>",
        "--tid <TID,...>",
        "-S, --symbol <NAME,...>",
        "[alias: --symbols]",
        "--no-children",
        "--stdio",
    ] {
        assert!(report.contains(want), "report --help: no {want}");
    }
    assert!(!report.contains("-n, --top"), "{report}");
    let diff = help("diff");
    assert!(
        diff.contains("--top <N>") && !diff.contains("-n, "),
        "{diff}"
    );
    assert!(diff.contains("-C, --comm") && diff.contains("-d, --dsos"));
    let record = help("record");
    assert!(record.contains("      --duration <SECS>"), "{record}");
    assert!(!record.contains("-d, "), "{record}");
    assert!(record.contains("-a, --all-cpus"), "{record}");
    let annotate = help("annotate");
    assert!(annotate.contains("-s, --symbol <SYMBOL>"), "{annotate}");
    // No perf spelling that means something else in that command: perf
    // diff's -c is --compute, perf script's -d --debug-mode.
    assert!(!diff.contains("-c, "), "{diff}");
    assert!(!help("script").contains("-d, "));
}

/// The guide, the README and the guest scripts use the new spellings: no
/// `report -n N`, `diff -n N` or `record -d SECS` is left to warn.
#[test]
fn docs_and_guest_scripts_use_the_new_spellings() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files = vec![
        root.join("Documentation/user-guide.md"),
        root.join("README.md"),
    ];
    for e in std::fs::read_dir(root.join("tests/guest")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "sh") {
            files.push(p);
        }
    }
    let mut old = Vec::new();
    for path in &files {
        let text = std::fs::read_to_string(path).unwrap().replace("\\\n", " ");
        for line in text.lines() {
            // Each oprofile-rs command of the line, to the next shell
            // operator.
            for cmd in line.split("oprofile-rs ").skip(1) {
                let cmd = cmd
                    .split(['|', ';', '>', '&', ')', '`'])
                    .next()
                    .unwrap_or("");
                // The tool's own words (`[-n 20]` in a synopsis too): a
                // COMMAND's options are its own.
                let words: Vec<&str> = cmd
                    .split_whitespace()
                    .take_while(|w| *w != "--")
                    .map(|w| w.trim_matches(['[', ']']))
                    .collect();
                let (Some(&sub), rest) = (words.first(), words.get(1..).unwrap_or(&[])) else {
                    continue;
                };
                let count = |w: &str| !w.is_empty() && w.bytes().all(|b| b.is_ascii_digit());
                let number = |w: &str| w.parse::<f64>().is_ok();
                let bad = rest.iter().enumerate().any(|(i, w)| {
                    let next = rest.get(i + 1).copied().unwrap_or("");
                    match sub {
                        "report" | "diff" => {
                            (*w == "-n" && count(next)) || w.strip_prefix("-n").is_some_and(count)
                        }
                        "record" => *w == "-d" || w.strip_prefix("-d").is_some_and(number),
                        _ => false,
                    }
                });
                if bad {
                    old.push(format!("{}: oprofile-rs {cmd}", path.display()));
                }
            }
        }
    }
    assert!(old.is_empty(), "old spellings:\n{}", old.join("\n"));
}

/// The stream of a recording whose module buffered COMM records before the
/// stream started (`record` drops the backlog's samples, keeps its COMM
/// records) and whose first TRACING record is an off (record turns
/// recording off to apply its settings): the recording counted from the
/// oldest COMM, "recording: 17.09 s" for a 4 s recording, and samples/s per
/// CPU a fourth of the truth. COMM records name tasks; they are no time of
/// recording.
#[test]
fn recording_time_does_not_count_comm_records_from_before_the_stream() {
    use oprofile_stream::{Comm, Encoder, Header, Record, Sample, Tracing};
    let v = victim();
    let dir = tempfile::tempdir().unwrap();
    let ms = 1_000_000u64;
    let start = 1_000_000_000u64;
    let mut e = Encoder::new(&Header {
        nr_cpus: 1,
        start_time: start,
        ..Header::default()
    });
    // Seen by the module a second before the stream.
    e.record(&Record::Comm(Comm::new(0, 1, PID, PID, "victim")));
    e.record(&Record::Tracing(Tracing {
        cpu: 0,
        on: false,
        time: start + ms,
    }));
    e.record(&Record::Tracing(Tracing {
        cpu: 0,
        on: true,
        time: start + 2 * ms,
    }));
    for i in 0..10 {
        e.record(&Record::Sample(Sample {
            cpu: 0,
            time: start + (3 + i) * ms,
            pc: sym_addr(v, "alpha", 4),
            pid: PID,
            tgid: PID,
            ..Default::default()
        }));
    }
    let file = write_recording(dir.path(), &e.finish(), &fake_maps(v, &v.path));
    let (ok, out, err) = run(&["report", "-i", file.to_str().unwrap()]);
    assert!(ok, "{err}");
    // On from the stream's start to the off (1 ms), then from the on to the
    // last sample (10 ms).
    assert!(out.contains("# recording: 0.01 s,"), "{out}");
}

#[test]
fn off_cpu_views_refuse_a_recording_without_switches_and_bad_input() {
    let (_d, file) = recording();
    let f = file.to_str().unwrap();
    let (ok, _, err) = run(&["report", "-i", f, "--off-cpu"]);
    assert!(!ok && err.contains("no switch-outs"), "{err}");
    let (ok, _, err) = run(&["report", "-i", f, "--wall-clock"]);
    assert!(!ok && err.contains("record --off-cpu"), "{err}");
    let (ok, _, err) = run(&["report", "-i", f, "--off-cpu", "--json"]);
    assert!(!ok && err.contains("no JSON form"), "{err}");
    let (ok, _, err) = run(&["report", "-i", f, "--off-cpu", "--off-cpu-thresh", "ten"]);
    assert!(!ok && err.contains("--off-cpu-thresh"), "{err}");
    let (ok, _, err) = run(&["folded", "-i", f, "--weight", "joules"]);
    assert!(!ok && err.contains("--weight"), "{err}");
    // Without switches the off-CPU folded stacks are empty, not an error.
    let (ok, out, err) = run(&["folded", "-i", f, "--off-cpu"]);
    assert!(ok, "{err}");
    assert!(out.trim().is_empty(), "{out}");
}
