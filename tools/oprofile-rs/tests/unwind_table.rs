//! The module's CFI tables (`oprofile_tool::unwind_table`) against
//! framehop, the DWARF unwinder `--call-graph dwarf` already trusts: for
//! real binaries (the host's libc and dynamic loader, this test binary, C
//! fixtures built with and without frame pointers), one unwind step at
//! many addresses, over a synthetic stack whose every word says where it
//! is, must give the same return address, sp and bp as framehop's
//! wherever the table gives a result.
//!
//! The addresses: every row's first address and the one after it (both
//! frame kinds: the sampled instruction, looked up as is, and a return
//! address, looked up one byte before it as the module does, so a row's
//! first address as a return address tests the row before), and a seeded
//! pseudo-random set inside the FDEs. The seed is printed; set
//! `UNWIND_TABLE_SEED` to replay a run.
//!
//! Cases left out of the comparison (counted and printed):
//! - our row UNKNOWN (the walk is cut: nothing to compare), or no row
//!   (below the table's first address);
//! - framehop not unwinding from CFI there: its `.eh_frame_hdr` lookup
//!   (the FDE with the greatest start at or below the address) finds no
//!   FDE holding the address, and framehop then guesses (return from the
//!   first frame, frame pointer after). With overlapping FDEs that lookup
//!   may pick the later, shorter one where the table keeps the first: a
//!   choice between two descriptions of the same code, not an error.
//!
//! Not testable here: where framehop cannot evaluate the return address's
//! rule (e.g. `vfork`'s, in rdi) it reads `CFA - 8` anyway, a guess the
//! table's UNKNOWN row refuses; the unit tests of `unwind_table` pin those
//! rules down.

use std::path::{Path, PathBuf};
use std::process::Command;

use framehop::x86_64::{CacheX86_64, UnwindRegsX86_64, UnwinderX86_64};
use framehop::{ExplicitModuleSectionInfo, FrameAddress, Module, Unwinder};
use gimli::{BaseAddresses, EhFrame, EhFrameHdr, EndianSlice, LittleEndian, UnwindSection};
use object::{Object, ObjectSection, ObjectSymbol};
use oprofile_stream::oprofile_format::unwind::{self, CFA_BP, CFA_SP, END, UNKNOWN};
use oprofile_tool::unwind_table::{build, Table};

/// The synthetic stack: the word at `addr` is `MARK | addr`, so a value
/// read from the wrong slot shows which slot it came from.
const MARK: u64 = 0x5e00_0000_0000_0000;
/// The registers at the step: bp far above sp (beyond the largest CFA
/// offset a row may have), so that a row taking one for the other shows.
const SP: u64 = 0x7ffe_1234_5000;
const BP: u64 = 0x7ffe_1236_0000;

fn read_stack(addr: u64) -> Result<u64, ()> {
    Ok(MARK | addr)
}

/// Row starts compared per binary at most (the test binary's table has
/// hundreds of thousands: an even spread of them).
const MAX_ROW_STARTS: usize = 40_000;
/// Pseudo-random addresses per binary.
const RANDOM: usize = 20_000;

/// xorshift64*: reproducible from the printed seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

fn seed() -> u64 {
    let seed = match std::env::var("UNWIND_TABLE_SEED") {
        Ok(s) => s.parse().expect("UNWIND_TABLE_SEED: a decimal number"),
        Err(_) => {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
                | 1
        }
    };
    eprintln!("seed {seed} (replay: UNWIND_TABLE_SEED={seed})");
    seed
}

/// One step's result: return address, sp, bp after.
type Step = (u64, u64, u64);

/// What a binary's comparison found.
#[derive(Default, Debug)]
struct Tally {
    /// Steps where both gave a caller, alike.
    agree: u64,
    /// END rows where framehop also found the outermost frame.
    end_agree: u64,
    /// Our row UNKNOWN: where framehop unwound from CFI, and elsewhere.
    unknown_cfi: u64,
    unknown_other: u64,
    /// Below the table's first row.
    no_row: u64,
    /// Our row gives a result but framehop has no FDE there.
    not_cfi: u64,
    /// Disagreements (the first few kept).
    disagree: u64,
    examples: Vec<String>,
}

/// framehop over one binary (mapped at its own addresses), and what its
/// FDE lookup finds.
struct Framehop<'a> {
    unwinder: UnwinderX86_64<Vec<u8>>,
    cache: CacheX86_64,
    eh_frame: EhFrame<EndianSlice<'a, LittleEndian>>,
    hdr: gimli::ParsedEhFrameHdr<EndianSlice<'a, LittleEndian>>,
    bases: BaseAddresses,
    ctx: gimli::UnwindContext<usize>,
}

impl<'a> Framehop<'a> {
    fn new(data: &'a [u8]) -> Framehop<'a> {
        let file = object::File::parse(data).unwrap();
        let section = |name: &str| {
            let s = file.section_by_name(name)?;
            Some((s.address()..s.address() + s.size(), s.data().ok()?))
        };
        let (eh_range, eh) = section(".eh_frame").expect(".eh_frame");
        let (hdr_range, hdr) = section(".eh_frame_hdr").expect(".eh_frame_hdr");
        let text = section(".text").map(|(r, _)| r);
        let got = section(".got").map(|(r, _)| r);
        let module = Module::new(
            "under test".into(),
            0..(1 << 32),
            0,
            ExplicitModuleSectionInfo {
                base_svma: 0,
                text_svma: text.clone(),
                got_svma: got.clone(),
                eh_frame_svma: Some(eh_range.clone()),
                eh_frame: Some(eh.to_vec()),
                eh_frame_hdr_svma: Some(hdr_range.clone()),
                eh_frame_hdr: Some(hdr.to_vec()),
                ..Default::default()
            },
        );
        let mut unwinder = UnwinderX86_64::new();
        unwinder.add_module(module);
        // framehop's own bases (dwarf.rs: base_addresses_for_sections).
        let bases = BaseAddresses::default()
            .set_eh_frame(eh_range.start)
            .set_eh_frame_hdr(hdr_range.start)
            .set_text(text.map_or(0, |r| r.start))
            .set_got(got.map_or(0, |r| r.start));
        let mut eh_frame = EhFrame::new(eh, LittleEndian);
        eh_frame.set_address_size(8);
        let hdr = EhFrameHdr::new(hdr, LittleEndian).parse(&bases, 8).unwrap();
        Framehop {
            unwinder,
            cache: CacheX86_64::new(),
            eh_frame,
            hdr,
            bases,
            ctx: gimli::UnwindContext::new(),
        }
    }

    /// Whether framehop unwinds `lookup` from CFI: its `.eh_frame_hdr`
    /// lookup (framehop's own, dwarf.rs) gives an FDE holding `lookup`
    /// whose rows reach it.
    fn unwinds_from_cfi(&mut self, lookup: u64) -> bool {
        let Some(table) = self.hdr.table() else {
            return false;
        };
        let fde = table
            .lookup(lookup, &self.bases)
            .and_then(|p| table.pointer_to_offset(p))
            .and_then(|off| {
                self.eh_frame
                    .fde_from_offset(&self.bases, off, EhFrame::cie_from_offset)
            });
        fde.is_ok_and(|f| {
            f.unwind_info_for_address(&self.eh_frame, &self.bases, &mut self.ctx, lookup)
                .is_ok()
        })
    }

    /// framehop's step: `Ok(None)` at the outermost frame.
    fn step(&mut self, frame: FrameAddress) -> Result<Option<Step>, String> {
        let ip = match frame {
            FrameAddress::InstructionPointer(a) => a,
            FrameAddress::ReturnAddress(a) => a.get(),
        };
        let mut regs = UnwindRegsX86_64::new(ip, SP, BP);
        match self
            .unwinder
            .unwind_frame(frame, &mut regs, &mut self.cache, &mut read_stack)
        {
            Ok(Some(ra)) => Ok(Some((ra, regs.sp(), regs.bp()))),
            Ok(None) => Ok(None),
            Err(e) => Err(format!("{e:?}")),
        }
    }
}

/// Our step with `row`: `None` for END and UNKNOWN.
fn our_step(row: &unwind::Row) -> Option<Step> {
    let cfa = unwind::cfa(row, SP, BP)?;
    let ra = read_stack(cfa - 8).ok()?;
    let bp = if row.bp == 0 {
        BP
    } else {
        read_stack(cfa.checked_add_signed(8 * i64::from(row.bp))?).ok()?
    };
    Some((ra, cfa, bp))
}

/// The FDE ranges of `.eh_frame` (read with gimli directly), for the
/// random addresses.
fn fde_ranges(data: &[u8]) -> Vec<(u64, u64)> {
    let file = object::File::parse(data).unwrap();
    let s = file.section_by_name(".eh_frame").unwrap();
    let bases = BaseAddresses::default()
        .set_eh_frame(s.address())
        .set_text(file.section_by_name(".text").map_or(0, |t| t.address()))
        .set_got(file.section_by_name(".got").map_or(0, |t| t.address()));
    let mut eh = EhFrame::new(s.data().unwrap(), LittleEndian);
    eh.set_address_size(8);
    let mut out = Vec::new();
    let mut entries = eh.entries(&bases);
    while let Some(e) = entries.next().unwrap() {
        if let gimli::CieOrFde::Fde(p) = e {
            let f = p.parse(EhFrame::cie_from_offset).unwrap();
            if f.len() > 0 {
                out.push((f.initial_address(), f.end_address()));
            }
        }
    }
    out
}

/// Builds the table of `data` and compares it with framehop.
fn compare(name: &str, data: &[u8], rng: &mut Rng) -> (Table, Tally) {
    let t0 = std::time::Instant::now();
    let table = build(data).unwrap_or_else(|e| panic!("{name}: {e}"));
    let built = t0.elapsed();
    let bytes = table.bytes();
    let body = unwind::check(&bytes).unwrap_or_else(|e| panic!("{name}: check: {e:?}"));
    let mut fh = Framehop::new(data);
    let mut addrs: Vec<u64> = Vec::new();
    let stride = table.rows.len().div_ceil(MAX_ROW_STARTS).max(1);
    for r in table.rows.iter().step_by(stride) {
        addrs.extend([u64::from(r.addr), u64::from(r.addr) + 1]);
    }
    let fdes = fde_ranges(data);
    assert!(!fdes.is_empty(), "{name}: no FDE");
    for _ in 0..RANDOM {
        let (s, e) = fdes[(rng.next() % fdes.len() as u64) as usize];
        addrs.push(s + rng.next() % (e - s));
    }
    let mut t = Tally::default();
    for &a in &addrs {
        // The sampled instruction at a, and a return address a (its call
        // at a - 1).
        let frames = [
            (FrameAddress::from_instruction_pointer(a), a),
            match FrameAddress::from_return_address(a) {
                Some(f) => (f, a - 1),
                None => continue,
            },
        ];
        for (frame, lookup) in frames {
            let Some(row) = unwind::find(body, lookup) else {
                t.no_row += 1;
                continue;
            };
            let cfi = fh.unwinds_from_cfi(lookup);
            if row.rule == UNKNOWN {
                if cfi {
                    t.unknown_cfi += 1;
                } else {
                    t.unknown_other += 1;
                }
                continue;
            }
            if !cfi {
                t.not_cfi += 1;
                continue;
            }
            let theirs = fh.step(frame);
            let ours = our_step(&row);
            let same = match (row.rule, &theirs) {
                (END, Ok(None)) => {
                    t.end_agree += 1;
                    continue;
                }
                (CFA_SP | CFA_BP, Ok(Some(s))) => ours.as_ref() == Some(s),
                _ => false,
            };
            if same {
                t.agree += 1;
            } else {
                t.disagree += 1;
                if t.examples.len() < 20 {
                    t.examples.push(format!(
                        "{frame:x?} lookup {lookup:#x}: row {row:?} gives {ours:x?}, framehop {theirs:x?}"
                    ));
                }
            }
        }
    }
    eprintln!(
        "{name}: built in {built:?}: {}\n  {} addresses: {t:?}",
        table.stats,
        addrs.len()
    );
    (table, t)
}

/// Compares, and fails on any disagreement; the tally.
fn check_binary(name: &str, data: &[u8], rng: &mut Rng) -> (Table, Tally) {
    let (table, t) = compare(name, data, rng);
    assert!(
        t.disagree == 0,
        "{name}: {} disagreements with framehop, e.g.:\n{}",
        t.disagree,
        t.examples.join("\n")
    );
    // Not vacuous: most steps compared.
    assert!(t.agree > 1000, "{name}: only {} steps compared", t.agree);
    // Without overlapping FDEs every row with a result lies in an FDE
    // (the gaps between FDEs are UNKNOWN): nothing may be left out.
    if table.stats.fdes_overlapping == 0 {
        assert_eq!(t.not_cfi, 0, "{name}: rows with a result outside every FDE");
    }
    (table, t)
}

/// The first of `paths` that exists; a missing one fails the test unless
/// `OPROFILE_RS_ALLOW_SKIP=1`.
fn host_file(paths: &[&'static str]) -> Option<&'static str> {
    if let Some(p) = paths.iter().find(|p| Path::new(p).exists()) {
        return Some(p);
    }
    if std::env::var("OPROFILE_RS_ALLOW_SKIP").as_deref() == Ok("1") {
        eprintln!("none of {paths:?}: skipped (OPROFILE_RS_ALLOW_SKIP=1)");
        return None;
    }
    panic!("none of {paths:?} (a glibc x86-64 host), or set OPROFILE_RS_ALLOW_SKIP=1");
}

#[test]
fn libc_and_loader_agree_with_framehop() {
    let mut rng = Rng(seed());
    for paths in [
        &["/lib/x86_64-linux-gnu/libc.so.6", "/lib64/libc.so.6"][..],
        &[
            "/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2",
            "/lib64/ld-linux-x86-64.so.2",
        ][..],
    ] {
        let Some(path) = host_file(paths) else {
            continue;
        };
        let data = std::fs::read(path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let (table, t) = check_binary(path, &data, &mut rng);
        assert!(table.stats.fdes > 20, "{path}: {}", table.stats);
        // glibc marks its thread starts (`clone`, `clone3`) outermost
        // (the loader's `_start` has no CFI).
        if path.ends_with("libc.so.6") {
            assert!(table.stats.end_rows > 0, "{path}: {}", table.stats);
            assert!(t.end_agree > 0, "{path}: {t:?}");
        }
    }
}

#[test]
fn this_binary_agrees_with_framehop() {
    let mut rng = Rng(seed());
    let exe = std::env::current_exe().unwrap();
    let data = std::fs::read(&exe).unwrap();
    check_binary(&exe.display().to_string(), &data, &mut rng);
}

/// `cc` or a skip (a missing compiler fails unless
/// `OPROFILE_RS_ALLOW_SKIP=1`, as in tests/unwind.rs).
fn have_cc() -> bool {
    if Command::new("cc").arg("--version").output().is_ok() {
        return true;
    }
    if std::env::var("OPROFILE_RS_ALLOW_SKIP").as_deref() == Ok("1") {
        eprintln!("no C compiler (cc): skipped (OPROFILE_RS_ALLOW_SKIP=1)");
        return false;
    }
    panic!("no C compiler (cc): apt-get install gcc, or set OPROFILE_RS_ALLOW_SKIP=1");
}

fn compile(dir: &Path, name: &str, flags: &[&str]) -> PathBuf {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let bin = dir.join(name);
    let st = Command::new("cc")
        .args(flags)
        .arg("-o")
        .arg(&bin)
        .arg(fixtures.join("unwind.c"))
        .arg(fixtures.join("cfi_mix.c"))
        .status()
        .unwrap();
    assert!(st.success(), "cc {flags:?} failed");
    bin
}

/// C fixtures built without frame pointers (CFA from rsp throughout) and
/// with them (CFA from rbp in the bodies), including a stack-realigning
/// function and a variable-length array.
#[test]
fn fixtures_agree_with_framehop() {
    if !have_cc() {
        return;
    }
    let mut rng = Rng(seed());
    let dir = tempfile::tempdir().unwrap();
    for (name, flags) in [
        (
            "o2",
            &[
                "-O2",
                "-fomit-frame-pointer",
                "-fasynchronous-unwind-tables",
            ][..],
        ),
        ("o1-fp", &["-O1", "-fno-omit-frame-pointer"][..]),
    ] {
        let bin = compile(dir.path(), name, flags);
        let data = std::fs::read(&bin).unwrap();
        let (table, t) = check_binary(name, &data, &mut rng);
        let file = object::File::parse(&*data).unwrap();
        let sym = |n: &str| {
            file.symbols()
                .find(|s| s.name() == Ok(n))
                .unwrap_or_else(|| panic!("{name}: no {n}"))
                .address()
        };
        let bytes = table.bytes();
        let body = unwind::check(&bytes).unwrap();
        // crt1's `_start`: `cfi_undefined rip`, the outermost frame.
        assert_eq!(unwind::find(body, sym("_start")).unwrap().rule, END);
        // The frame-pointer build: beta_fn's body runs on rbp.
        let beta = sym("beta_fn");
        let rules: Vec<u8> = table
            .rows
            .iter()
            .filter(|r| (beta..beta + 64).contains(&u64::from(r.addr)))
            .map(|r| r.rule)
            .collect();
        if name == "o1-fp" {
            assert!(rules.contains(&CFA_BP), "{name}: {rules:?}");
        } else {
            assert!(!rules.contains(&CFA_BP), "{name}: {rules:?}");
        }
        assert!(t.end_agree > 0, "{name}: {t:?}");
    }
}
