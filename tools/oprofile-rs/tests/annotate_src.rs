//! `annotate SYMBOL` of a binary built with `-g`: the hottest source lines
//! first, the source lines between the instructions (their text where the
//! source file is readable, else file:line), and call, jump and
//! RIP-relative targets named as objdump names them. The fixture
//! (`fixtures/annotate_src.c`, `-O0`) marks the only line reading `table`
//! (HOT), the only one calling `callee` (CALL) and the only one calling
//! `puts` (PLT): their instructions, found by objdump (the oracle), are
//! known to be on those lines.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;
use oprofile_stream::{Comm, Encoder, Header, Record, Sample};

const SRC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/annotate_src.c");

/// The 1-based line of the fixture holding `marker`.
fn line_of(marker: &str) -> u32 {
    std::fs::read_to_string(SRC)
        .unwrap()
        .lines()
        .position(|l| l.contains(marker))
        .unwrap_or_else(|| panic!("no {marker} in {SRC}")) as u32
        + 1
}

/// The fixture's text at `marker`'s line, as the listing shows it (tabs
/// expanded, trimmed).
fn text_of(marker: &str) -> String {
    let src = std::fs::read_to_string(SRC).unwrap();
    let l = src.lines().find(|l| l.contains(marker)).unwrap();
    l.replace('\t', "        ").trim().to_string()
}

/// `src` built with `-O0 -g` as a PIE into `dir`.
fn build(dir: &Path, src: &Path) -> PathBuf {
    let out = dir.join("annotate_src");
    sh(Command::new("cc")
        .args(["-O0", "-g", "-fPIE", "-pie", "-o"])
        .arg(&out)
        .arg(src));
    out
}

/// (address, objdump's text) of each instruction of `hot` (Intel syntax).
fn objdump_hot(elf: &Path) -> Vec<(u64, String)> {
    let out = Command::new("objdump")
        .args([
            "-d",
            "-M",
            "intel",
            "--no-show-raw-insn",
            "--disassemble=hot",
        ])
        .arg(elf)
        .output()
        .expect("objdump");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let (a, rest) = l.trim_start().split_once(':')?;
            let a = u64::from_str_radix(a, 16).ok()?;
            (!rest.trim().is_empty()).then(|| (a, rest.trim().to_string()))
        })
        .collect()
}

/// The address of hot's instruction whose objdump text contains `what`.
fn at(ins: &[(u64, String)], what: &str) -> u64 {
    ins.iter()
        .find(|(_, t)| t.contains(what))
        .unwrap_or_else(|| panic!("no {what} in hot: {ins:?}"))
        .0
}

/// A recording of user samples at `pcs` (addresses in `elf`), the binary
/// mapped at BASE.
fn recording(dir: &Path, elf: &Path, pcs: &[u64]) -> PathBuf {
    let mut e = Encoder::new(&Header::default());
    e.record(&Record::Comm(Comm::new(0, 1, PID, PID, "annotate_src")));
    for (i, pc) in pcs.iter().enumerate() {
        e.record(&Record::Sample(Sample {
            time: 10 + i as u64,
            pc: BASE + pc,
            pid: PID,
            tgid: PID,
            ..Default::default()
        }));
    }
    write_recording(dir, &e.finish(), &maps_for(elf, elf.to_str().unwrap()))
}

/// The words of the listing's row at `addr`.
fn row(out: &str, addr: u64) -> Vec<String> {
    let a = format!("{addr:x}");
    out.lines()
        .map(|l| l.split_whitespace().map(str::to_string).collect::<Vec<_>>())
        .find(|l| l.iter().take(3).any(|w| *w == a))
        .unwrap_or_else(|| panic!("no row at {a}: {out}"))
}

#[test]
fn hottest_source_lines_first_then_source_between_instructions_and_targets_named() {
    let dir = tempfile::tempdir().unwrap();
    let elf = build(dir.path(), Path::new(SRC));
    let ins = objdump_hot(&elf);
    let load = at(&ins, "<table>");
    let call = at(&ins, "<callee>");
    let plt = at(&ins, "<puts@plt>");
    // 8 samples on the HOT line's load of table, 2 on the CALL line's call.
    let mut pcs = vec![load; 8];
    pcs.extend([call, call]);
    let file = recording(dir.path(), &elf, &pcs);
    let out = run_tool(&["annotate", "hot", "-i", file.to_str().unwrap()]);
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        lines[0].starts_with("# hot (") && lines[0].ends_with("), 10 samples"),
        "{out}"
    );
    assert_eq!(lines[1], format!("# source: {SRC}"), "{out}");

    // The summary: the HOT line, then the CALL line, with their text.
    let summary = lines
        .iter()
        .position(|l| *l == "# hottest source lines:")
        .unwrap_or_else(|| panic!("no summary: {out}"));
    let hot = format!("annotate_src.c:{}", line_of("/* HOT */"));
    let first: Vec<&str> = lines[summary + 2].split_whitespace().collect();
    assert_eq!(first[..3], ["80.00", "8", &hot[..]], "{out}");
    assert_eq!(
        lines[summary + 2].split_once(&hot).unwrap().1.trim(),
        text_of("/* HOT */"),
        "{out}"
    );
    let second: Vec<&str> = lines[summary + 3].split_whitespace().collect();
    let call_line = format!("annotate_src.c:{}", line_of("/* CALL */"));
    assert_eq!(second[..3], ["20.00", "2", &call_line[..]], "{out}");
    assert!(lines[summary + 4].starts_with('#'), "{out}");
    // The summary comes before the listing.
    let listing = lines
        .iter()
        .position(|l| l.starts_with("# percent") && l.ends_with("instruction"))
        .unwrap();
    assert!(listing > summary + 3, "{out}");

    // The listing: the HOT line's source row is the last before the load
    // of table (lines only change between instructions).
    let load_row = lines
        .iter()
        .position(|l| l.split_whitespace().nth(2) == Some(&format!("{load:x}")[..]))
        .unwrap_or_else(|| panic!("no load at {load:x}: {out}"));
    let src_row = lines[listing..load_row]
        .iter()
        .rev()
        .find(|l| l.trim_start().starts_with("annotate_src.c:"))
        .unwrap_or_else(|| panic!("no source row before the load: {out}"));
    let (loc, text) = src_row.trim().split_once(' ').unwrap();
    assert_eq!(
        (loc, text.trim()),
        (&hot[..], &text_of("/* HOT */")[..]),
        "{out}"
    );
    // Every source row of the listing is a line of the function (from its
    // opening to its closing brace).
    let first_line = line_of("long hot(int n)");
    let last_line = line_of("return s;") + 1;
    for l in &lines[listing..] {
        if let Some(rest) = l.trim_start().strip_prefix("annotate_src.c:") {
            let n: u32 = rest.split_whitespace().next().unwrap().parse().unwrap();
            assert!((first_line..=last_line).contains(&n), "{l}: {out}");
        }
    }

    // Targets named as objdump names them: the call, the RIP-relative
    // load, the call through the PLT, and a jump within the function.
    let (callee, _) = elf_sym(&elf, "callee");
    let (table, _) = elf_sym(&elf, "table");
    let r = row(&out, call);
    assert_eq!(r[..3], ["20.00", "2", &format!("{call:x}")[..]], "{out}");
    assert_eq!(
        r[3..],
        ["call", &format!("{callee:x}")[..], "<callee>"],
        "{out}"
    );
    let r = row(&out, load);
    assert_eq!(r[3], "lea", "{out}");
    assert!(r[4].starts_with("rax,[rip+0x"), "{out}");
    assert_eq!(r[5..], [";", &format!("{table:x}")[..], "<table>"], "{out}");
    let r = row(&out, plt);
    assert_eq!(r[1], "call", "{out}");
    assert_eq!(r[3], "<puts@plt>", "{out}");
    // objdump's own names for the jumps' targets (`<hot+0x5e>`).
    for (a, t) in ins.iter().filter(|(_, t)| t.starts_with('j')) {
        let named = t.split_whitespace().last().unwrap();
        assert!(named.starts_with("<hot+0x"), "{t}");
        assert_eq!(row(&out, *a).last().unwrap(), named, "{out}");
    }
}

#[test]
fn without_the_source_file_the_lines_are_file_and_line_only() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("gone.c");
    std::fs::copy(SRC, &src).unwrap();
    let elf = build(dir.path(), &src);
    std::fs::remove_file(&src).unwrap();
    let ins = objdump_hot(&elf);
    let load = at(&ins, "<table>");
    let file = recording(dir.path(), &elf, &[load, load, ins[0].0]);
    let out = run_tool(&["annotate", "hot", "-i", file.to_str().unwrap()]);
    assert!(
        out.contains(&format!(
            "# source: {} (not readable: file:line only)",
            src.display()
        )),
        "{out}"
    );
    let hot = format!("gone.c:{}", line_of("/* HOT */"));
    // The function's first instruction is on its opening brace's line.
    let opening = format!("gone.c:{}", line_of("long hot(int n)") + 1);
    let summary: Vec<Vec<&str>> = out
        .lines()
        .skip_while(|l| *l != "# hottest source lines:")
        .skip(2)
        .take_while(|l| !l.starts_with('#'))
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        summary,
        [
            vec!["66.67", "2", &hot[..]],
            vec!["33.33", "1", &opening[..]]
        ],
        "{out}"
    );
    // Source rows are file:line alone.
    assert!(out.lines().any(|l| l.trim() == hot), "{out}");

    // A source file changed after the build: its lines may have moved.
    std::fs::copy(SRC, &src).unwrap();
    let later = std::time::SystemTime::now() + std::time::Duration::from_secs(60);
    std::fs::File::options()
        .write(true)
        .open(&src)
        .unwrap()
        .set_modified(later)
        .unwrap();
    let out = run_tool(&["annotate", "hot", "-i", file.to_str().unwrap()]);
    assert!(
        out.contains(&format!(
            "# source: {} (modified after the binary was built: its lines may not match)\n",
            src.display()
        )),
        "{out}"
    );
    assert!(
        out.contains(&format!("{hot}  {}\n", text_of("/* HOT */"))),
        "{out}"
    );

    // Garbage where the source was, shorter than the lines: no panic,
    // its bytes escaped, the lines beyond its end file:line only.
    let garbage = b"\xff\xfe\x1b[31m{\0\x07\r\n".repeat(17);
    std::fs::write(&src, &garbage).unwrap();
    assert!(line_of("/* HOT */") > 17);
    let out = run_tool(&["annotate", "hot", "-i", file.to_str().unwrap()]);
    assert!(!out.contains('\u{1b}') && !out.contains('\0'), "{out:?}");
    assert!(
        out.contains("gone.c:16  \\xff\\xfe\\e[31m{\\x00\\x07\n"),
        "{out}"
    );
    assert!(out.lines().any(|l| l.trim() == hot), "{out}");
}

#[test]
fn without_dwarf_there_is_neither_summary_nor_source() {
    let v = victim();
    let (alpha, _) = v.syms["alpha"];
    let dir = tempfile::tempdir().unwrap();
    let file = recording(dir.path(), &v.path, &[alpha]);
    let out = run_tool(&["annotate", "alpha", "-i", file.to_str().unwrap()]);
    assert!(
        !out.contains("# source") && !out.contains("hottest"),
        "{out}"
    );
    assert_eq!(
        out.lines().nth(1).unwrap().split_whitespace().nth(1),
        Some("percent")
    );
}

/// A stripped binary's symbols and lines are in its separate debug file:
/// annotate finds it as the symbolisation does, by build-id in a debug
/// directory (`--debug-dir`) or by its `.gnu_debuglink` next to it.
#[test]
fn a_stripped_binary_is_annotated_from_its_separate_debug_file() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("annotate_src");
    sh(Command::new("cc")
        .args(["-O0", "-g", "-fPIE", "-pie", "-Wl,--build-id", "-o"])
        .arg(&out)
        .arg(SRC));
    let ins = objdump_hot(&out);
    let (load, call) = (at(&ins, "<table>"), at(&ins, "<callee>"));
    let (callee, _) = elf_sym(&out, "callee");
    let debug = dir.path().join("annotate_src.debug");
    sh(Command::new("objcopy")
        .arg("--only-keep-debug")
        .arg(&out)
        .arg(&debug));
    sh(Command::new("strip").arg("--strip-all").arg(&out));
    let check = |extra: &[&str], debug_file: &Path| {
        let rec = tempfile::tempdir().unwrap();
        let file = recording(rec.path(), &out, &[load, load, load, call]);
        let out = run_tool(&[&["annotate", "hot", "-i", file.to_str().unwrap()], extra].concat());
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            lines[1],
            format!("# debug file: {}", debug_file.display()),
            "{out}"
        );
        assert_eq!(lines[2], format!("# source: {SRC}"), "{out}");
        let hot = format!("annotate_src.c:{}", line_of("/* HOT */"));
        assert_eq!(
            lines[5].split_whitespace().take(3).collect::<Vec<_>>(),
            ["75.00", "3", &hot[..]],
            "{out}"
        );
        // callee is named from the debug file's .symtab.
        assert_eq!(
            row(&out, call)[3..],
            ["call", &format!("{callee:x}")[..], "<callee>"],
            "{out}"
        );
    };
    // By build-id, in --debug-dir.
    let id = Command::new("readelf")
        .args(["-n"])
        .arg(&out)
        .output()
        .unwrap();
    let id = String::from_utf8_lossy(&id.stdout)
        .lines()
        .find_map(|l| l.trim().strip_prefix("Build ID: ").map(str::to_string))
        .expect("a build-id");
    let dbg = dir.path().join("dbg");
    let by_id = dbg
        .join(".build-id")
        .join(&id[..2])
        .join(format!("{}.debug", &id[2..]));
    std::fs::create_dir_all(by_id.parent().unwrap()).unwrap();
    std::fs::rename(&debug, &by_id).unwrap();
    check(&["--debug-dir", dbg.to_str().unwrap()], &by_id);
    // By its debug link, next to it.
    std::fs::rename(&by_id, &debug).unwrap();
    sh(Command::new("objcopy")
        .arg(format!("--add-gnu-debuglink={}", debug.display()))
        .arg(&out));
    check(&[], &debug);
}

/// A call through a `.got` slot that holds the address of a function of
/// the binary itself (`R_X86_64_RELATIVE`: Rust's and `-fno-plt` code's
/// calls): the slot is named after the function, `<g@got>` (objdump says
/// `<_DYNAMIC+0x1b0>`).
#[test]
fn a_got_slot_holding_a_local_function_is_named_after_it() {
    const ASM: &str = r#"
    .text
    .globl main
    .type main,@function
main:
    mov g@GOTPCREL(%rip),%rax
    call *%rax
    ret
    .size main, .-main
    .type g,@function
g:
    ret
    .size g, .-g
    .section .note.GNU-stack,"",@progbits
"#;
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("got.s");
    std::fs::write(&src, ASM).unwrap();
    let elf = dir.path().join("got");
    // No relaxation: the load from the GOT stays (else a lea of g).
    sh(Command::new("cc")
        .args(["-fPIE", "-pie", "-Wl,--no-relax", "-Wl,--build-id", "-o"])
        .arg(&elf)
        .arg(&src));
    let (main, _) = elf_sym(&elf, "main");
    let file = recording(dir.path(), &elf, &[main]);
    let check = |extra: &[&str]| {
        let out = run_tool(&[&["annotate", "main", "-i", file.to_str().unwrap()], extra].concat());
        let load = row(&out, main);
        assert_eq!(load[3], "mov", "{out}");
        assert!(load[4].starts_with("rax,[rip+0x"), "{out}");
        assert_eq!(load[load.len() - 3], ";", "{out}");
        assert_eq!(load.last().unwrap(), "<g@got>", "{out}");
    };
    check(&[]);
    // Stripped, g named by its debug file (found by its debug link).
    let debug = dir.path().join("got.debug");
    sh(Command::new("objcopy")
        .arg("--only-keep-debug")
        .arg(&elf)
        .arg(&debug));
    sh(Command::new("strip").arg("--strip-all").arg(&elf));
    sh(Command::new("objcopy")
        .arg(format!("--add-gnu-debuglink={}", debug.display()))
        .arg(&elf));
    check(&[]);
}
