//! Issue 12, symbolisation: DWARF file:line and inlined functions, C++
//! demangling, separate debug files (`.gnu_debuglink`, build-id), JIT perf
//! maps, binaries of other mount namespaces.

mod common;

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

use common::{
    build_inline as build, elf_sym as sym, inline_line_of as line_of, maps_for, sh,
    write_recording, BASE, PID,
};
use oprofile_tool::maps::parse_maps;
use oprofile_tool::symbols::{demangle, Resolver, ResolverOptions, SymbolizerKind};

fn resolver(maps: &str, opts: ResolverOptions) -> Resolver {
    Resolver::with_options(None, HashMap::from([(PID, parse_maps(maps))]), None, opts)
}

/// Every address of `outer`: some are in the inlined `inner`, with the
/// lines of both.
fn check_outer(r: &Resolver, elf_with_syms: &Path, what: &str) {
    let (addr, size) = sym(elf_with_syms, "_ZN2ns5outerEi");
    let mut inlined_seen = false;
    for d in 0..size {
        let f = r.resolve(false, PID, BASE + addr + d);
        assert_eq!(f.symbol.as_deref(), Some("ns::outer(int)"), "{what} +{d}");
        if let Some((name, l)) = f.inlined.first() {
            inlined_seen = true;
            // A static function has no linkage name in DWARF: its DW_AT_name.
            assert!(
                name == "inner" || name == "ns::inner(int)",
                "{what}: {name}"
            );
            // The call site in outer, and the line in inner.
            let call = f.srcline.as_ref().unwrap();
            assert!(call.file.ends_with("inline.cc"), "{call}");
            assert_eq!(call.line, line_of("CALL-LINE"), "{what}");
            let l = l.as_ref().unwrap();
            assert!(
                (line_of("for (int i")..=line_of("INNER-LINE")).contains(&l.line),
                "{what}: {l}"
            );
            assert_eq!(f.names_inner_first(), [name.as_str(), "ns::outer(int)"]);
        } else if let Some(l) = &f.srcline {
            assert!(
                (line_of("void outer")..=line_of("sink ^= 9") + 1).contains(&l.line),
                "{what}: {l}"
            );
        }
    }
    assert!(inlined_seen, "{what}: no address of outer is in inner");
    let (t, _) = sym(elf_with_syms, "_ZN2ns5twiceIiEET_S1_");
    let f = r.resolve(false, PID, BASE + t);
    assert_eq!(
        f.symbol.as_deref(),
        Some("int ns::twice<int>(int)"),
        "{what}"
    );
}

#[test]
fn dwarf_lines_inlined_functions_and_cpp_names() {
    let dir = tempfile::tempdir().unwrap();
    let elf = build(dir.path());
    let p = elf.to_str().unwrap();
    let r = resolver(&maps_for(&elf, p), ResolverOptions::default());
    check_outer(&r, &elf, "embedded DWARF");
    // The previous implementation: names (demangled now), no lines.
    let r = resolver(
        &maps_for(&elf, p),
        ResolverOptions {
            kind: SymbolizerKind::Symtab,
            ..Default::default()
        },
    );
    let (a, _) = sym(&elf, "_ZN2ns5outerEi");
    let f = r.resolve(false, PID, BASE + a + 1);
    assert_eq!(f.symbol.as_deref(), Some("ns::outer(int)"));
    assert!(f.srcline.is_none() && f.inlined.is_empty());
}

#[test]
fn separate_debug_file_through_debuglink() {
    let dir = tempfile::tempdir().unwrap();
    let elf = build(dir.path());
    let debug_dir = dir.path().join("debug");
    std::fs::create_dir(&debug_dir).unwrap();
    let dbg = debug_dir.join("inline.debug");
    sh(Command::new("objcopy")
        .arg("--only-keep-debug")
        .arg(&elf)
        .arg(&dbg));
    let bin_dir = dir.path().join("bin");
    std::fs::create_dir(&bin_dir).unwrap();
    let stripped = bin_dir.join("inline");
    sh(Command::new("strip")
        .args(["--strip-all", "-o"])
        .arg(&stripped)
        .arg(&elf));
    sh(Command::new("objcopy")
        .arg(format!("--add-gnu-debuglink={}", dbg.display()))
        .arg(&stripped));
    let maps = maps_for(&stripped, stripped.to_str().unwrap());
    // Without the debug directory: no symbols at all (stripped).
    let r = resolver(
        &maps,
        ResolverOptions {
            debug_dirs: vec![],
            ..Default::default()
        },
    );
    let (a, _) = sym(&elf, "_ZN2ns5outerEi");
    assert_eq!(r.resolve(false, PID, BASE + a).symbol, None);
    let r = resolver(
        &maps,
        ResolverOptions {
            debug_dirs: vec![debug_dir],
            ..Default::default()
        },
    );
    check_outer(&r, &elf, "debuglink");
}

#[test]
fn separate_debug_file_by_build_id() {
    let dir = tempfile::tempdir().unwrap();
    let elf = build(dir.path());
    let data = std::fs::read(&elf).unwrap();
    let id = oprofile_tool::buildid::build_id(&data).expect("built with --build-id");
    let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
    // /usr/lib/debug layout: .build-id/ab/cdef....debug, no debug link.
    let root = dir.path().join("usr/lib/debug");
    let sub = root.join(".build-id").join(&hex[..2]);
    std::fs::create_dir_all(&sub).unwrap();
    sh(Command::new("objcopy")
        .arg("--only-keep-debug")
        .arg(&elf)
        .arg(sub.join(format!("{}.debug", &hex[2..]))));
    let stripped = dir.path().join("inline-stripped");
    sh(Command::new("strip")
        .args(["--strip-all", "-o"])
        .arg(&stripped)
        .arg(&elf));
    let maps = maps_for(&stripped, stripped.to_str().unwrap());
    let r = resolver(
        &maps,
        ResolverOptions {
            debug_dirs: vec![root],
            ..Default::default()
        },
    );
    check_outer(&r, &elf, "build-id");

    // Through the command line: --debug-dir, and file:line in `script`.
    let (a, _) = sym(&elf, "_ZN2ns5outerEi");
    let mut e = oprofile_stream::Encoder::new(&oprofile_stream::Header::default());
    e.record(&oprofile_stream::Record::Sample(oprofile_stream::Sample {
        cpu: 0,
        kernel: false,
        time: 5,
        pc: BASE + a,
        pid: PID,
        tgid: PID,
        callchain: vec![],
        ..Default::default()
    }));
    let file = write_recording(dir.path(), &e.finish(), &maps);
    let out = assert_cmd::Command::cargo_bin("oprofile-rs")
        .unwrap()
        .args(["script", "-q", "-i", file.to_str().unwrap(), "--debug-dir"])
        .arg(dir.path().join("usr/lib/debug"))
        .output()
        .unwrap();
    let out = String::from_utf8(out.stdout).unwrap();
    let (_, line) = out
        .trim_end()
        .split_once("ns::outer(int) (inline-stripped) ")
        .unwrap_or_else(|| panic!("{out}"));
    // FILE:LINE, then the event and the period.
    let line = line.rsplitn(3, ' ').nth(2).unwrap();
    let (file, n) = line.rsplit_once(':').unwrap();
    assert!(file.ends_with("inline.cc"), "{out}");
    let n: u32 = n.parse().unwrap();
    assert!(
        (line_of("void outer")..=line_of("sink ^= 9")).contains(&n),
        "{out}"
    );
}

#[test]
fn jit_perf_maps() {
    let dir = tempfile::tempdir().unwrap();
    let elf = build(dir.path());
    let maps = maps_for(&elf, elf.to_str().unwrap());
    // Captured by record (side-car), in the anonymous mapping.
    let r = resolver(
        &maps,
        ResolverOptions {
            perf_maps: HashMap::from([(
                PID,
                "7f0000001000 100 jitted_one\n7f0000001100 80 _ZN2ns3jitEv\n7f0000001000 40 replaced\n"
                    .into(),
            )]),
            perf_map_dir: None,
            ..Default::default()
        },
    );
    let f = r.resolve(false, PID, 0x7f0000001010);
    assert_eq!(
        (f.symbol.as_deref(), f.dso.as_str()),
        (Some("replaced"), "perf-4242.map")
    );
    assert_eq!(
        r.resolve(false, PID, 0x7f0000001050).symbol.as_deref(),
        Some("jitted_one")
    );
    assert_eq!(
        r.resolve(false, PID, 0x7f0000001120).symbol.as_deref(),
        Some("ns::jit()")
    );
    assert_eq!(r.resolve(false, PID, 0x7f0000002000).symbol, None);
    // Not captured: DIR/perf-PID.map, as perf reads /tmp/perf-PID.map.
    std::fs::write(
        dir.path().join(format!("perf-{PID}.map")),
        "7f0000001000 100 from_tmp\n",
    )
    .unwrap();
    let r = resolver(
        &maps,
        ResolverOptions {
            perf_map_dir: Some(dir.path().into()),
            ..Default::default()
        },
    );
    assert_eq!(
        r.resolve(false, PID, 0x7f0000001010).symbol.as_deref(),
        Some("from_tmp")
    );
}

#[test]
fn other_mount_namespace_binaries_are_read_under_its_root() {
    let dir = tempfile::tempdir().unwrap();
    // The process sees the binary as /opt/app/inline; from here it is only
    // under its root.
    let root = dir.path().join("root");
    std::fs::create_dir_all(root.join("opt/app")).unwrap();
    let elf = build(&root.join("opt/app"));
    let maps = maps_for(&elf, "/opt/app/inline");
    let r = resolver(&maps, ResolverOptions::default());
    let (a, _) = sym(&elf, "_ZN2ns5outerEi");
    assert_eq!(r.resolve(false, PID, BASE + a).symbol, None);
    let r = resolver(
        &maps,
        ResolverOptions {
            roots: HashMap::from([(PID, root.clone())]),
            ..Default::default()
        },
    );
    check_outer(&r, &elf, "namespace root");
    // A root that is gone: read from here, with a warning.
    let r = resolver(
        &maps,
        ResolverOptions {
            roots: HashMap::from([(PID, dir.path().join("gone"))]),
            ..Default::default()
        },
    );
    assert_eq!(r.resolve(false, PID, BASE + a).symbol, None);
    assert!(r
        .take_warnings()
        .iter()
        .any(|w| w.contains("another mount namespace")));
}

#[test]
fn cpp_and_rust_demangling() {
    assert_eq!(demangle("_ZN2ns5outerEi"), "ns::outer(int)");
    assert_eq!(
        demangle("_ZNSt6vectorIiSaIiEE9push_backERKi"),
        "std::vector<int, std::allocator<int> >::push_back(int const&)"
    );
    assert_eq!(
        demangle("_ZN4core3fmt5write17h0123456789abcdefE"),
        "core::fmt::write"
    );
    assert_eq!(demangle("_Znot valid"), "_Znot valid");
    assert_eq!(demangle("main"), "main");
}

/// `script` names a sample in `outer` at an address of the inlined `inner`
/// with outer's own line (the call), and, with `--callchain`, inner with
/// its line above it; it printed `ns::outer(int)` with inner's line (issue
/// 35: pprof had it right). Also at a return address of the callchain.
#[test]
fn script_gives_each_function_its_own_line() {
    use oprofile_stream::{Comm, Encoder, Header, Record, Sample};
    let dir = tempfile::tempdir().unwrap();
    let elf = build(dir.path());
    let maps = maps_for(&elf, elf.to_str().unwrap());
    let r = resolver(&maps, ResolverOptions::default());
    let (outer, size) = sym(&elf, "_ZN2ns5outerEi");
    let inl = (0..size)
        .map(|d| BASE + outer + d)
        .find(|&a| !r.resolve(false, PID, a).inlined.is_empty())
        .expect("an inlined address");
    let mut e = Encoder::new(&Header::default());
    e.record(&Record::Comm(Comm::new(0, 1, PID, PID, "inline")));
    e.record(&Record::Sample(Sample {
        time: 10,
        pc: inl,
        pid: PID,
        tgid: PID,
        user_callchain: vec![inl + 1],
        ..Default::default()
    }));
    let file = write_recording(dir.path(), &e.finish(), &maps);
    let out = Command::new(assert_cmd::cargo::cargo_bin("oprofile-rs"))
        .args(["script", "-q", "--callchain", "-i", file.to_str().unwrap()])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&out.stdout).into_owned();
    let call = format!("inline.cc:{} ", line_of("CALL-LINE"));
    // inner's body: its loop (the line before INNER-LINE) and INNER-LINE.
    let inner_lines: Vec<String> = [line_of("INNER-LINE") - 1, line_of("INNER-LINE")]
        .iter()
        .map(|n| format!("inline.cc:{n}"))
        .collect();
    let in_inner = |l: &str| {
        inner_lines
            .iter()
            .any(|x| l.ends_with(x.as_str()) || l.contains(&format!("{x} ")))
    };
    let lines: Vec<&str> = out.lines().filter(|l| !l.is_empty()).collect();
    assert!(
        lines[0].contains("ns::outer(int)") && lines[0].contains(&call),
        "{out}"
    );
    assert!(!in_inner(lines[0]), "{out}");
    let inlined: Vec<&&str> = lines.iter().filter(|l| l.contains("(inlined)")).collect();
    assert_eq!(inlined.len(), 2, "{out}");
    for l in inlined {
        assert!(l.contains("inner") && in_inner(l), "{out}");
    }
    let caller = lines
        .iter()
        .find(|l| l.starts_with('\t') && l.contains("ns::outer(int)"));
    let call_at_end = call.trim_end();
    assert!(caller.is_some_and(|l| l.ends_with(call_at_end)), "{out}");
}

/// `report --sort srcline`: a row per source line of the sampled
/// addresses (the innermost inlined function's line, as perf's srcline),
/// the file's name in the text and its path in the JSON; without lines
/// (`--symbolizer symtab`), a row per binary and offset.
#[test]
fn report_sorts_by_source_line() {
    use oprofile_stream::{Comm, Encoder, Header, Record, Sample};
    let dir = tempfile::tempdir().unwrap();
    let elf = build(dir.path());
    let maps = maps_for(&elf, elf.to_str().unwrap());
    let r = resolver(&maps, ResolverOptions::default());
    let (outer, size) = sym(&elf, "_ZN2ns5outerEi");
    // A sample at every address of outer: the lines they resolve to.
    let mut e = Encoder::new(&Header::default());
    e.record(&Record::Comm(Comm::new(0, 1, PID, PID, "inline")));
    let mut want: HashMap<String, u64> = HashMap::new();
    for d in 0..size {
        let pc = BASE + outer + d;
        e.record(&Record::Sample(Sample {
            time: 10 + d,
            pc,
            pid: PID,
            tgid: PID,
            ..Default::default()
        }));
        let f = r.resolve(false, PID, pc);
        let l = f
            .leaf_srcline()
            .unwrap_or_else(|| panic!("no line at outer+{d}"));
        *want.entry(l.to_string()).or_default() += 1;
    }
    let inner = format!("inline.cc:{}", line_of("INNER-LINE"));
    assert!(want.keys().any(|k| k.ends_with(&inner)), "{want:?}");
    let file = write_recording(dir.path(), &e.finish(), &maps);
    let f = file.to_str().unwrap();
    let report = |args: &[&str]| {
        let out = Command::new(assert_cmd::cargo::cargo_bin("oprofile-rs"))
            .args(["report", "-q", "-i", f])
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let v: serde_json::Value =
        serde_json::from_str(&report(&["--sort", "srcline", "--json"])).unwrap();
    let got: HashMap<String, u64> = v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["srcline"].as_str().unwrap().to_string(),
                r["weight"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(got, want);
    assert!(got.keys().all(|k| k.starts_with('/')), "{got:?}");
    // The text: a Source:Line column with the file's name.
    let out = report(&["--sort", "symbol,srcline"]);
    assert!(out.contains("Source:Line"), "{out}");
    let row = out
        .lines()
        .find(|l| l.contains(&format!("  {inner}  ")))
        .unwrap_or_else(|| panic!("no row of {inner}: {out}"));
    assert!(row.contains("ns::outer(int)"), "{row}");
    assert!(!out.contains(&format!("/{inner}")), "{out}");
    // No lines: binary and file offset.
    let v: serde_json::Value = serde_json::from_str(&report(&[
        "--sort",
        "srcline",
        "--json",
        "--symbolizer",
        "symtab",
    ]))
    .unwrap();
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len() as u64, size, "{v}");
    assert!(
        rows.iter()
            .all(|r| r["srcline"].as_str().unwrap().starts_with("inline+0x")),
        "{v}"
    );
}
