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

    let (ok, out, _) = run(&["report", "-i", f, "--per-cpu", "-n", "2"]);
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
    let (ok, _, err) = run(&[
        "flamegraph",
        "-i",
        file.to_str().unwrap(),
        "-o",
        svg.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    let s = std::fs::read_to_string(&svg).unwrap();
    assert!(s.starts_with("<?xml"));
    assert!(s.contains("alpha") && s.contains("__schedule") && s.contains("victim"));
}

#[test]
fn pprof_round_trip() {
    use oprofile_tool::pprof;
    let (d, file) = recording();
    let pb = d.path().join("p.pb.gz");
    let (ok, _, err) = run(&[
        "pprof",
        "-i",
        file.to_str().unwrap(),
        "-o",
        pb.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
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
    for sub in ["record", "script", "folded", "flamegraph", "pprof", "diff"] {
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
