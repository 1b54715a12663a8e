#![allow(dead_code)]
//! Shared test helpers: the compiled C fixture and synthetic streams.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use oprofile_stream::{Comm, Encoder, Header, Lost, Record, Sample, Tracing};

/// The fixture compiled with `cc` (PIE, with .symtab), and a stripped copy.
pub struct Victim {
    pub path: PathBuf,
    pub stripped: PathBuf,
    /// name → (vaddr, size) from the ELF symbol table.
    pub syms: std::collections::HashMap<String, (u64, u64)>,
    /// (p_offset, p_vaddr, p_filesz, p_memsz) of PT_LOAD segments.
    pub loads: Vec<(u64, u64, u64, u64)>,
}

pub fn victim() -> &'static Victim {
    static V: OnceLock<Victim> = OnceLock::new();
    V.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("oprofile-rs-fixtures");
        std::fs::create_dir_all(&dir).unwrap();
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/victim.c");
        let path = dir.join(format!("victim-{}", std::process::id()));
        let st = Command::new("cc")
            .args(["-O1", "-fPIE", "-pie", "-o"])
            .arg(&path)
            .arg(&src)
            .status()
            .expect("cc");
        assert!(st.success(), "cc failed");
        let stripped = dir.join(format!("victim-stripped-{}", std::process::id()));
        std::fs::copy(&path, &stripped).unwrap();
        let st = Command::new("strip")
            .arg("--strip-all")
            .arg(&stripped)
            .status()
            .expect("strip");
        assert!(st.success());
        let data = std::fs::read(&path).unwrap();
        use object::{Object, ObjectSymbol};
        let f = object::File::parse(&*data).unwrap();
        let mut syms = std::collections::HashMap::new();
        for s in f.symbols() {
            if let Ok(n) = s.name() {
                syms.insert(n.to_string(), (s.address(), s.size()));
            }
        }
        let mut loads = Vec::new();
        if let object::File::Elf64(e) = &f {
            use object::read::elf::ProgramHeader;
            let endian = e.endian();
            for ph in e.elf_program_headers() {
                if ph.p_type(endian) == object::elf::PT_LOAD {
                    loads.push((
                        ph.p_offset(endian),
                        ph.p_vaddr(endian),
                        ph.p_filesz(endian),
                        ph.p_memsz(endian),
                    ));
                }
            }
        }
        Victim {
            path,
            stripped,
            syms,
            loads,
        }
    })
}

pub const BASE: u64 = 0x5555_5555_4000;

/// A /proc/<pid>/maps text as the kernel would show for `file` loaded at BASE.
pub fn fake_maps(v: &Victim, file: &Path) -> String {
    let mut s = String::new();
    for (off, va, _fsz, msz) in &v.loads {
        let start = BASE + (va & !0xfff);
        let end = (BASE + va + msz + 0xfff) & !0xfff;
        s += &format!(
            "{:x}-{:x} r-xp {:08x} 08:01 4242 {}\n",
            start,
            end,
            off & !0xfff,
            file.display()
        );
    }
    s += "7ffff7fc1000-7ffff7fc3000 r-xp 00000000 00:00 0                          [vdso]\n";
    s
}

pub fn sym_addr(v: &Victim, name: &str, delta: u64) -> u64 {
    BASE + v.syms[name].0 + delta
}

pub const KALLSYMS: &str = "\
ffffffff81000000 T _text
ffffffff81001000 T do_syscall_64
ffffffff81001400 t __schedule
ffffffff81001800 T entry_SYSCALL_64
ffffffff81002000 T _etext
ffffffff82000000 D jiffies
ffffffffc0100000 t opr_handler\t[oprofile]
ffffffffc0100200 t opr_drain\t[oprofile]
";
pub const MODULES: &str = "oprofile 16384 0 - Live 0xffffffffc0100000\n";

pub const PID: u32 = 4242;

/// Stream: 10 samples in alpha, 6 in beta, 3 in kernel __schedule (with a
/// callchain), 1 in an unknown kernel address; CPU 0 and 1; 5 lost on CPU 1.
pub fn synthetic_stream(v: &Victim) -> Vec<u8> {
    let h = Header {
        nr_cpus: 2,
        backtrace_depth: 4,
        start_time: 1_000_000_000,
        ..Header::default()
    };
    let mut e = Encoder::new(&h);
    let mut t = 1_000_000_000u64;
    e.record(&Record::Tracing(Tracing {
        cpu: 0,
        on: true,
        time: t,
    }));
    for cpu in 0..2u16 {
        e.record(&Record::Comm(Comm::new(cpu, t, PID, PID, "victim")));
    }
    let sample =
        |e: &mut Encoder, t: &mut u64, cpu: u16, kernel: bool, pc: u64, chain: Vec<u64>| {
            *t += 1_000_000;
            e.record(&Record::Sample(Sample {
                cpu,
                kernel,
                time: *t,
                pc,
                pid: PID,
                tgid: PID,
                callchain: chain,
                ..Default::default()
            }));
        };
    for i in 0..10 {
        sample(
            &mut e,
            &mut t,
            (i % 2) as u16,
            false,
            sym_addr(v, "alpha", 4),
            vec![],
        );
    }
    for _ in 0..6 {
        sample(&mut e, &mut t, 1, false, sym_addr(v, "beta", 8), vec![]);
    }
    e.record(&Record::Lost(Lost {
        cpu: 1,
        time: t,
        count: 5,
    }));
    for _ in 0..3 {
        sample(
            &mut e,
            &mut t,
            0,
            true,
            0xffffffff81001410,
            vec![0xffffffff81001010, 0xffffffff81001820],
        );
    }
    sample(&mut e, &mut t, 0, true, 0xffffffff81002010, vec![]);
    e.finish()
}

/// Writes the stream and its side-car (kallsyms, modules, maps) in `dir`.
pub fn write_recording(dir: &Path, data: &[u8], maps: &str) -> PathBuf {
    let file = dir.join("oprofile.data");
    std::fs::write(&file, data).unwrap();
    let meta = dir.join("oprofile.data.meta");
    std::fs::create_dir_all(meta.join("maps")).unwrap();
    std::fs::write(meta.join("kallsyms"), KALLSYMS).unwrap();
    std::fs::write(meta.join("modules"), MODULES).unwrap();
    std::fs::write(meta.join("maps").join(PID.to_string()), maps).unwrap();
    file
}

// ------------------------------------------------------------------ the C++ fixture

pub const INLINE_SRC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/inline.cc");

pub fn inline_line_of(marker: &str) -> u32 {
    std::fs::read_to_string(INLINE_SRC)
        .unwrap()
        .lines()
        .position(|l| l.contains(marker))
        .unwrap() as u32
        + 1
}

pub fn sh(cmd: &mut Command) {
    let st = cmd.status().unwrap();
    assert!(st.success(), "{cmd:?}");
}

/// The fixture built with `-O2 -g` and a build-id, in a fresh directory.
pub fn build_inline(dir: &Path) -> PathBuf {
    let out = dir.join("inline");
    sh(Command::new("c++")
        .args(["-O2", "-g", "-fPIE", "-pie", "-Wl,--build-id", "-o"])
        .arg(&out)
        .arg(INLINE_SRC));
    out
}

/// (vaddr, size) of a symbol of the ELF file (mangled name).
pub fn elf_sym(path: &Path, name: &str) -> (u64, u64) {
    use object::{Object, ObjectSymbol};
    let data = std::fs::read(path).unwrap();
    let f = object::File::parse(&*data).unwrap();
    let s = f.symbols().find(|s| s.name() == Ok(name)).unwrap();
    (s.address(), s.size())
}

/// /proc/PID/maps text for `file` (its PT_LOAD segments) mapped at BASE.
pub fn maps_for(elf: &Path, shown_as: &str) -> String {
    use object::read::elf::ProgramHeader;
    let data = std::fs::read(elf).unwrap();
    let f = object::read::elf::ElfFile64::<object::Endianness>::parse(&*data).unwrap();
    let e = f.endian();
    let mut s = String::new();
    for ph in f.elf_program_headers() {
        if ph.p_type(e) != object::elf::PT_LOAD {
            continue;
        }
        let (off, va, msz) = (ph.p_offset(e), ph.p_vaddr(e), ph.p_memsz(e));
        s += &format!(
            "{:x}-{:x} r-xp {:08x} 08:01 77 {shown_as}\n",
            BASE + (va & !0xfff),
            (BASE + va + msz + 0xfff) & !0xfff,
            off & !0xfff
        );
    }
    s += "7f0000000000-7f0000100000 rwxp 00000000 00:00 0 \n";
    s
}

/// Runs the tool with `args`, successful or not: (success, stdout, stderr).
pub fn run_tool_any(args: &[&str]) -> (bool, String, String) {
    let out = assert_cmd::Command::cargo_bin("oprofile-rs")
        .unwrap()
        .args(args)
        // No debuginfod server of the machine's: tests that want one say so.
        .env_remove("DEBUGINFOD_URLS")
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Runs the tool with `args`; its stdout (the run must succeed).
pub fn run_tool(args: &[&str]) -> String {
    let out = assert_cmd::Command::cargo_bin("oprofile-rs")
        .unwrap()
        .args(args)
        // No debuginfod server of the machine's: tests that want one say so.
        .env_remove("DEBUGINFOD_URLS")
        .output()
        .unwrap();
    assert!(out.status.success(), "{args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// `report --children -g`'s note on cut call stacks for recording `f`
/// (it must have one).
pub fn cut_note(f: &str) -> String {
    let out = run_tool(&["report", "-i", f, "--children", "-g"]);
    out.lines()
        .find(|l| l.starts_with("# call stacks cut: "))
        .unwrap_or_else(|| panic!("no note on cut stacks: {out}"))
        .to_string()
}

/// `out` parsed as JSON.
pub fn json(out: &str) -> serde_json::Value {
    serde_json::from_str(out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

/// The row of `symbol` in a `report --json` output.
pub fn report_row(v: &serde_json::Value, symbol: &str) -> serde_json::Value {
    v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["symbol"] == symbol)
        .unwrap_or_else(|| panic!("no row {symbol}: {v}"))
        .clone()
}

/// A debugfs directory as a module without the control ioctls shows it (the
/// "device" is a regular file: its ioctls answer ENOTTY, so `record` falls
/// back to these files). Its `config` is the configuration before.
pub fn fake_debugfs(dir: &Path) -> PathBuf {
    let d = dir.join("debugfs");
    std::fs::create_dir(&d).unwrap();
    let values = [
        ("event", "cpu-clock,page-faults"),
        ("sample_period", "1000000,1000"),
        ("sample_freq", "0,0"),
        ("backtrace_depth", "0"),
        ("user_backtrace_depth", "32"),
        ("cpu_buffer_size", "65536"),
        ("buffer_size", "1048576"),
        ("buffer_watershed", "262144"),
    ];
    let mut config = String::new();
    for (k, v) in values {
        std::fs::write(d.join(k), format!("{v}\n")).unwrap();
        config += &format!("{k}={v}\n");
    }
    std::fs::write(d.join("mode"), "consume\n").unwrap();
    config += "mode=consume\n";
    std::fs::write(d.join("cgroup"), "/\n").unwrap();
    config += "cgroup=/\n";
    std::fs::write(d.join("config"), config).unwrap();
    std::fs::write(d.join("tracing_on"), "1\n").unwrap();
    std::fs::write(d.join("flush"), "").unwrap();
    std::fs::write(d.join("snapshot"), "").unwrap();
    d
}

/// A recording of kernel-mode samples of one task (PID, comm `comm`) at
/// `pcs`, one nanosecond apart, with the victim's maps; the caller writes
/// the side-car's kallsyms (and what else it needs) into
/// `DIR/oprofile.data.meta/`.
pub fn kernel_recording(dir: &Path, comm: &str, pcs: &[u64]) -> PathBuf {
    let mut e = Encoder::new(&Header {
        start_time: 1_000_000_000,
        ..Header::default()
    });
    e.record(&Record::Comm(Comm::new(0, 1_000_000_000, PID, PID, comm)));
    for (i, pc) in pcs.iter().enumerate() {
        e.record(&Record::Sample(Sample {
            kernel: true,
            time: 1_000_000_001 + i as u64,
            pc: *pc,
            pid: PID,
            tgid: PID,
            ..Default::default()
        }));
    }
    let v = victim();
    write_recording(dir, &e.finish(), &fake_maps(v, &v.path))
}

/// The stacks of a pprof file, each `leaf <- caller <- ...` by function name.
#[allow(dead_code)]
pub fn pprof_stacks(path: &Path) -> Vec<String> {
    let p = oprofile_tool::pprof::read(&std::fs::read(path).unwrap()).unwrap();
    let name_of = |loc: u64| -> String {
        let l = &p.location[loc as usize - 1];
        let func = &p.function[l.line.last().unwrap().function_id as usize - 1];
        p.string_table[func.name as usize].clone()
    };
    p.sample
        .iter()
        .map(|s| {
            s.location_id
                .iter()
                .map(|&l| name_of(l))
                .collect::<Vec<_>>()
                .join(" <- ")
        })
        .collect()
}
