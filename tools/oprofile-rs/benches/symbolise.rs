//! Symbolisation of a 1-million-sample recording: the blazesym resolver
//! (`--symbolizer dwarf`, the default) against the previous ELF symbol
//! table resolver (`--symbolizer symtab`), side by side in one run, on the
//! same stream and side-car. Prints figures; asserts nothing about speed.
//!
//! ```sh
//! cargo bench -p oprofile-rs --bench symbolise [-- SAMPLES [DISTINCT]]
//! ```
//!
//! The stream: SAMPLES samples (default 1,000,000) of 8 processes, 30 % in
//! kernel mode (addresses of the machine's `/proc/kallsyms` text symbols if
//! readable), the rest in the executable text of real binaries: this
//! benchmark's own executable, the C library and the C++ test fixture built
//! with `-O2 -g` (DWARF, inlined functions), drawn from DISTINCT addresses
//! (default 50,000) with a skew (a few hot addresses, a long tail), as
//! profiles are.

use std::path::{Path, PathBuf};
use std::time::Instant;

use oprofile_stream::{Comm, Encoder, Header, Record, Sample};
use oprofile_tool::profile::{LoadOptions, Profile};
use oprofile_tool::sidecar::Sidecar;
use oprofile_tool::symbols::SymbolizerKind;

const BASE: u64 = 0x5555_0000_0000;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Executable PT_LOAD segments of `path` mapped at `base`: (maps text,
/// executable address ranges).
fn map_binary(path: &Path, base: u64) -> (String, Vec<(u64, u64)>) {
    use object::read::elf::ProgramHeader;
    let data = std::fs::read(path).unwrap();
    let f = object::read::elf::ElfFile64::<object::Endianness>::parse(&*data).unwrap();
    let e = f.endian();
    let (mut maps, mut text) = (String::new(), Vec::new());
    for ph in f.elf_program_headers() {
        if ph.p_type(e) != object::elf::PT_LOAD {
            continue;
        }
        let (off, va, sz) = (ph.p_offset(e), ph.p_vaddr(e), ph.p_filesz(e));
        let start = base + (va & !0xfff);
        let end = (base + va + ph.p_memsz(e) + 0xfff) & !0xfff;
        let exec = ph.p_flags(e) & object::elf::PF_X != 0;
        maps += &format!(
            "{start:x}-{end:x} {}p {:08x} 08:01 1 {}\n",
            if exec { "r-x" } else { "r--" },
            off & !0xfff,
            path.display()
        );
        if exec {
            text.push((base + va, base + va + sz));
        }
    }
    (maps, text)
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let n: usize = args
        .first()
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let distinct: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(50_000);

    // The binaries.
    let tmp = tempfile::tempdir().unwrap();
    let fixture = tmp.path().join("inline");
    let src = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/inline.cc");
    let ok = std::process::Command::new("c++")
        .args(["-O2", "-g", "-fPIE", "-pie", "-o"])
        .arg(&fixture)
        .arg(src)
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    let libc = std::fs::read_to_string("/proc/self/maps")
        .unwrap()
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .find(|p| p.contains("libc.so"))
        .map(PathBuf::from);
    let mut bins: Vec<PathBuf> = vec![std::env::current_exe().unwrap()];
    bins.extend(libc);
    if ok {
        bins.push(fixture);
    }
    let mut maps = String::new();
    let mut text = Vec::new();
    for (i, b) in bins.iter().enumerate() {
        let (m, t) = map_binary(b, BASE + ((i as u64) << 32));
        maps += &m;
        text.extend(t);
    }
    let kallsyms = std::fs::read_to_string("/proc/kallsyms").ok();
    let ktext: Vec<u64> = kallsyms
        .as_deref()
        .unwrap_or("")
        .lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            let (a, t) = (it.next()?, it.next()?);
            let a = u64::from_str_radix(a, 16).ok()?;
            (a != 0 && matches!(t, "t" | "T") && it.nth(1).is_none()).then_some(a)
        })
        .collect();

    // The address pool and the stream.
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let text_bytes: u64 = text.iter().map(|(s, e)| e - s).sum();
    let pool: Vec<(bool, u64)> = (0..distinct)
        .map(|i| {
            if i % 10 < 3 && !ktext.is_empty() {
                let a = ktext[(rng.next() % ktext.len() as u64) as usize];
                (true, a + rng.next() % 64)
            } else {
                let mut o = rng.next() % text_bytes;
                let mut addr = 0;
                for (s, e) in &text {
                    if o < e - s {
                        addr = s + o;
                        break;
                    }
                    o -= e - s;
                }
                (false, addr)
            }
        })
        .collect();
    let mut e = Encoder::new(&Header {
        nr_cpus: 4,
        ..Header::default()
    });
    let tgids: Vec<u32> = (0..8).map(|i| 1000 + i).collect();
    for &t in &tgids {
        e.record(&Record::Comm(Comm::new(0, 0, t, t, "bench")));
    }
    for i in 0..n {
        // Skewed: the square of a uniform variable favours low indexes.
        let u = (rng.next() % 1_000_000) as f64 / 1e6;
        let (kernel, pc) = pool[((u * u) * distinct as f64) as usize % distinct];
        let t = tgids[i % tgids.len()];
        e.record(&Record::Sample(Sample {
            cpu: (i % 4) as u16,
            kernel,
            time: i as u64 * 1000,
            pc,
            pid: t,
            tgid: t,
            callchain: vec![],
            ..Default::default()
        }));
    }
    let data = e.finish();
    let sc = Sidecar {
        kallsyms,
        maps: tgids.iter().map(|t| (*t, maps.clone())).collect(),
        ..Sidecar::default()
    };
    println!(
        "stream: {} samples ({} MB), {} distinct addresses, binaries: {}",
        n,
        data.len() / 1_000_000,
        distinct,
        bins.iter()
            .map(|b| b.file_name().unwrap().to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!(
        "{:<34} {:>9} {:>12} {:>14}",
        "resolver", "seconds", "samples/s", "user symbols"
    );
    let mut results = Vec::new();
    for (name, kind) in [
        ("symtab (previous implementation)", SymbolizerKind::Symtab),
        ("dwarf (blazesym, the default)", SymbolizerKind::Dwarf),
    ] {
        let opts = LoadOptions {
            symbolizer: kind,
            ..LoadOptions::default()
        };
        let t = Instant::now();
        let p = Profile::from_bytes(&data, &sc, &opts).unwrap();
        let secs = t.elapsed().as_secs_f64();
        let named = p
            .samples
            .iter()
            .filter(|s| !s.kernel && s.pc.symbol.is_some())
            .count();
        let lines = p.samples.iter().filter(|s| s.pc.srcline.is_some()).count();
        println!(
            "{:<34} {:>9.2} {:>12.0} {:>14}  ({} with file:line)",
            name,
            secs,
            n as f64 / secs,
            named,
            lines
        );
        results.push(p);
    }
    // Where the two disagree on a user address's function (both named).
    let (a, b) = (&results[0], &results[1]);
    let mut differ = std::collections::BTreeMap::new();
    let mut only_dwarf = std::collections::BTreeMap::new();
    for (x, y) in a.samples.iter().zip(&b.samples) {
        match (&x.pc.symbol, &y.pc.symbol) {
            (Some(p), Some(q)) if p != q => {
                *differ
                    .entry((p.clone(), q.clone(), y.pc.dso.clone()))
                    .or_insert(0) += 1
            }
            (None, Some(q)) => *only_dwarf.entry((q.clone(), y.pc.dso.clone())).or_insert(0) += 1,
            _ => {}
        }
    }
    let d: usize = differ.values().sum();
    let o: usize = only_dwarf.values().sum();
    println!("samples named differently: {d}; named by dwarf only: {o}");
    if std::env::var_os("BENCH_SHOW_DIFF").is_some() {
        for (k, v) in differ.iter().take(10) {
            println!("  differ {v}: {k:?}");
        }
        for (k, v) in only_dwarf.iter().take(10) {
            println!("  dwarf only {v}: {k:?}");
        }
    }
}
