//! Mini-debuginfo (`.gnu_debugdata`), as Fedora and RHEL ship it: a stripped
//! binary whose local function symbols are in an xz-compressed ELF in one of
//! its sections.

mod common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{elf_sym as sym, maps_for, sh, BASE, PID};
use oprofile_tool::maps::parse_maps;
use oprofile_tool::symbols::{mini_debuginfo, Resolver, ResolverOptions, SymbolizerKind};

const FUNCS: [&str; 3] = ["mdi_alpha", "mdi_beta", "mdi_gamma"];

const SRC: &str = r#"
volatile unsigned sink;
static __attribute__((noinline)) void mdi_alpha(unsigned n) {
    for (unsigned i = 0; i < n; i++) sink += i * 3;
}
static __attribute__((noinline)) void mdi_beta(unsigned n) {
    for (unsigned i = 0; i < n; i++) sink ^= i + 7;
}
static __attribute__((noinline)) void mdi_gamma(unsigned n) {
    for (unsigned i = 0; i < n; i++) sink -= i << 2;
}
/* Exported (-rdynamic): in .dynsym, so not in the mini-debuginfo. */
__attribute__((noinline)) void mdi_exported(unsigned n) {
    for (unsigned i = 0; i < n; i++) sink += i ^ 5;
}
int main(int argc, char **argv) {
    (void)argv;
    mdi_alpha(argc * 100);
    mdi_beta(argc * 200);
    mdi_gamma(argc * 300);
    mdi_exported(argc * 400);
    return 0;
}
"#;

struct Built {
    /// With its symbol table (where the addresses are read from).
    full: PathBuf,
    /// `strip --strip-all`: no names for the local functions.
    stripped: PathBuf,
    /// The stripped binary plus `.gnu_debugdata`.
    mdi: PathBuf,
    /// The xz-compressed mini ELF.
    xz: PathBuf,
}

/// Builds the program and its mini-debuginfo as Fedora's `find-debuginfo`
/// does: the function symbols that `.dynsym` lacks, kept from the debug
/// file with `objcopy -S --keep-symbols`, compressed with xz, added to the
/// stripped binary as `.gnu_debugdata`.
fn build(dir: &Path) -> Built {
    let src = dir.join("mdi.c");
    std::fs::write(&src, SRC).unwrap();
    let full = dir.join("mdi-full");
    sh(Command::new("gcc")
        .args([
            "-O2",
            "-g",
            "-fPIE",
            "-pie",
            "-rdynamic",
            "-Wl,--build-id",
            "-o",
        ])
        .arg(&full)
        .arg(&src));
    // Function symbols (nm: T/t) of the full binary that are not in its
    // .dynsym (nm -D).
    let funcs = {
        use object::{Object, ObjectSymbol, SymbolKind};
        let data = std::fs::read(&full).unwrap();
        let f = object::File::parse(&*data).unwrap();
        let dynamic: Vec<String> = f
            .dynamic_symbols()
            .filter_map(|s| s.name().ok().map(str::to_string))
            .collect();
        assert!(dynamic.iter().any(|d| d == "mdi_exported"), "{dynamic:?}");
        let mut names: Vec<String> = f
            .symbols()
            .filter(|s| s.kind() == SymbolKind::Text && !s.is_undefined())
            .filter_map(|s| s.name().ok().map(str::to_string))
            .filter(|n| !n.is_empty() && !dynamic.contains(n))
            .collect();
        names.sort();
        names.dedup();
        names.join("\n") + "\n"
    };
    for f in FUNCS {
        assert!(funcs.contains(f), "{f} not in {funcs}");
    }
    assert!(!funcs.contains("mdi_exported"), "{funcs}");
    let keep = dir.join("funcs.txt");
    std::fs::write(&keep, funcs).unwrap();
    let debug = dir.join("mdi.debug");
    sh(Command::new("objcopy")
        .arg("--only-keep-debug")
        .arg(&full)
        .arg(&debug));
    let mini = dir.join("mini");
    sh(Command::new("objcopy")
        .args(["-S", "--remove-section", ".gdb_index"])
        .args(["--remove-section", ".comment"])
        .arg(format!("--keep-symbols={}", keep.display()))
        .arg(&debug)
        .arg(&mini));
    sh(Command::new("xz").arg("-k").arg(&mini));
    let xz = dir.join("mini.xz");
    let stripped = dir.join("mdi-stripped");
    sh(Command::new("strip")
        .args(["--strip-all", "-o"])
        .arg(&stripped)
        .arg(&full));
    let mdi = add_debugdata(&stripped, &xz, &dir.join("mdi"));
    Built {
        full,
        stripped,
        mdi,
        xz,
    }
}

/// A copy of `stripped` at `out` with `data` as its `.gnu_debugdata`.
fn add_debugdata(stripped: &Path, data: &Path, out: &Path) -> PathBuf {
    sh(Command::new("objcopy")
        .arg(format!("--add-section=.gnu_debugdata={}", data.display()))
        .arg(stripped)
        .arg(out));
    out.to_path_buf()
}

fn resolver(elf: &Path, kind: SymbolizerKind) -> Resolver {
    let maps = maps_for(elf, elf.to_str().unwrap());
    Resolver::with_options(
        None,
        HashMap::from([(PID, parse_maps(&maps))]),
        None,
        ResolverOptions {
            kind,
            // No debug directories of the host: only what the file holds.
            debug_dirs: Vec::new(),
            perf_map_dir: None,
            ..Default::default()
        },
    )
}

/// The names of every address of each function in `FUNCS`.
fn names(r: &Resolver, full: &Path) -> Vec<(String, u64, Option<String>)> {
    names_of(r, full, &FUNCS)
}

/// The names of every address of each of `funcs`.
fn names_of(r: &Resolver, full: &Path, funcs: &[&str]) -> Vec<(String, u64, Option<String>)> {
    let mut out = Vec::new();
    for &f in funcs {
        let (addr, size) = sym(full, f);
        assert!(size > 0, "{f}");
        for d in 0..size {
            let fr = r.resolve(false, PID, BASE + addr + d);
            out.push((f.to_string(), d, fr.symbol.clone()));
        }
    }
    out
}

#[test]
fn stripped_binary_is_named_from_its_mini_debuginfo() {
    let dir = tempfile::tempdir().unwrap();
    let b = build(dir.path());
    let decompressed = mini_debuginfo(&std::fs::read(&b.mdi).unwrap())
        .unwrap()
        .unwrap();
    assert_eq!(
        decompressed,
        std::fs::read(dir.path().join("mini")).unwrap(),
        "the decompressed section is the mini ELF"
    );
    assert_eq!(
        mini_debuginfo(&std::fs::read(&b.stripped).unwrap()),
        Ok(None)
    );
    for kind in [SymbolizerKind::Dwarf, SymbolizerKind::Symtab] {
        // Without mini-debuginfo the local functions have no name.
        let r = resolver(&b.stripped, kind);
        for (f, d, name) in names(&r, &b.full) {
            assert_eq!(name, None, "{kind:?}: plain stripped {f}+{d}");
        }
        // With it, every address of each is named.
        let r = resolver(&b.mdi, kind);
        for (f, d, name) in names(&r, &b.full) {
            assert_eq!(name.as_deref(), Some(f.as_str()), "{kind:?}: {f}+{d}");
        }
        // Exported functions are still named from `.dynsym` (blazesym
        // without xz support fails on the whole file).
        for (f, d, name) in names_of(&r, &b.full, &["mdi_exported"]) {
            assert_eq!(name.as_deref(), Some(f.as_str()), "{kind:?}: {f}+{d}");
        }
        assert_eq!(r.take_warnings(), Vec::<String>::new(), "{kind:?}");
    }
    // What already worked comes first: the full binary is named from its
    // DWARF (with lines), not from anything else.
    let r = resolver(&b.full, SymbolizerKind::Dwarf);
    let (a, _) = sym(&b.full, "mdi_beta");
    let f = r.resolve(false, PID, BASE + a);
    assert_eq!(f.symbol.as_deref(), Some("mdi_beta"));
    assert!(f.srcline.is_some(), "{f:?}");
}

#[test]
fn corrupt_mini_debuginfo_names_nothing_and_does_not_panic() {
    let dir = tempfile::tempdir().unwrap();
    let b = build(dir.path());
    let xz = std::fs::read(&b.xz).unwrap();
    let mut garbage = vec![0u8; 4096];
    let mut x = 0x2545_f491_4f6c_dd1du64;
    for g in &mut garbage {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *g = x as u8;
    }
    // An xz header followed by garbage: the decoder goes further in.
    let mut bad_body = xz[..12.min(xz.len())].to_vec();
    bad_body.extend_from_slice(&garbage);
    // The right stream with its middle bytes flipped (check fails).
    let mut flipped = xz.clone();
    let mid = flipped.len() / 2;
    for byte in &mut flipped[mid..mid + 16] {
        *byte ^= 0x5a;
    }
    let cases: [(&str, Vec<u8>); 5] = [
        ("garbage", garbage),
        ("truncated", xz[..xz.len() / 2].to_vec()),
        ("header only", xz[..12].to_vec()),
        ("bad body", bad_body),
        ("flipped", flipped),
    ];
    for (what, bytes) in cases {
        let data = dir.path().join(format!("{}.xz", what.replace(' ', "-")));
        std::fs::write(&data, &bytes).unwrap();
        let elf = add_debugdata(&b.stripped, &data, &dir.path().join(what.replace(' ', "-")));
        assert!(
            mini_debuginfo(&std::fs::read(&elf).unwrap()).is_err(),
            "{what}"
        );
        for kind in [SymbolizerKind::Dwarf, SymbolizerKind::Symtab] {
            let r = resolver(&elf, kind);
            for (f, d, name) in names(&r, &b.full) {
                assert_eq!(name, None, "{what} {kind:?}: {f}+{d}");
            }
            // The file's own `.dynsym` still names what it exports.
            for (f, d, name) in names_of(&r, &b.full, &["mdi_exported"]) {
                assert_eq!(
                    name.as_deref(),
                    Some(f.as_str()),
                    "{what} {kind:?}: {f}+{d}"
                );
            }
            let w = r.take_warnings();
            assert!(
                w.len() == 1 && w[0].contains(".gnu_debugdata"),
                "{what} {kind:?}: {w:?}"
            );
        }
    }
}

/// `annotate` of a function of a binary with mini-debuginfo: its calls to
/// the local functions only `.gnu_debugdata` names are named.
#[test]
fn annotate_names_calls_from_the_mini_debuginfo() {
    use oprofile_stream::{Comm, Encoder, Header, Record, Sample};
    let dir = tempfile::tempdir().unwrap();
    let b = build(dir.path());
    let (main, _) = sym(&b.full, "main");
    let (alpha, _) = sym(&b.full, "mdi_alpha");
    let mut e = Encoder::new(&Header::default());
    e.record(&Record::Comm(Comm::new(0, 1, PID, PID, "mdi")));
    e.record(&Record::Sample(Sample {
        time: 10,
        pc: BASE + main,
        pid: PID,
        tgid: PID,
        ..Default::default()
    }));
    let file = common::write_recording(
        dir.path(),
        &e.finish(),
        &maps_for(&b.mdi, b.mdi.to_str().unwrap()),
    );
    let out = common::run_tool(&["annotate", "main", "-i", file.to_str().unwrap()]);
    assert!(
        out.lines().any(|l| l
            .trim_end()
            .ends_with(&format!("call {alpha:x} <mdi_alpha>"))),
        "{out}"
    );
    // No debug file, no DWARF: no source lines.
    assert!(
        !out.contains("# debug file") && !out.contains("# source"),
        "{out}"
    );
}
