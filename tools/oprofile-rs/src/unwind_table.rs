//! The module's in-kernel CFI unwind tables (`oprofile_format::unwind`),
//! built from an x86-64 ELF file's `.eh_frame` (or its `.debug_frame` when
//! it has no `.eh_frame`).
//!
//! The overflow handler walks a sampled task's user stack with one table
//! per executable mapping instead of copying the stack out: it cannot run a
//! DWARF expression interpreter or a CFA program in NMI context, so each
//! CFI row is flattened here into the one form it evaluates in constant
//! time, `CFA = sp|bp + offset`, return address at `CFA - 8`, caller's
//! frame pointer at `CFA + 8 * bp` or unchanged. Anything the CFI says that
//! this form cannot say becomes an [`UNKNOWN`] row (the walk is cut there:
//! a short stack is better than a wrong one), and [`Stats`] says why, so
//! that a poor table can be traced to its binary's CFI.
//!
//! The table's addresses are the file's own (as its FDEs give them; the
//! module adds the mapping's bias). Rows are sorted and strictly
//! increasing; a row holds from its address up to the next row's. Between
//! FDEs (code without CFI: padding, hand-written stubs, PLT entries of
//! binaries without their CFI) an [`UNKNOWN`] row stops the previous FDE's
//! last rule from reaching over code it does not describe, and the table
//! ends with one (the module's `check` insists).
//!
//! Speed: libc has thousands of FDEs and the tool may run in a slow
//! emulator, so the section is read once (CIEs cached as they come, one
//! gimli [`UnwindContext`] for every FDE), rows go straight into one vector
//! (merged as they are pushed), and nothing is allocated per row.

use std::borrow::Cow;
use std::fmt;

use gimli::{
    BaseAddresses, CfaRule, CieOrFde, CommonInformationEntry, DebugFrame, EhFrame, EndianSlice,
    FrameDescriptionEntry, LittleEndian, Register, RegisterRule, UnwindContext, UnwindOffset,
    UnwindSection, UnwindTableRow, X86_64,
};
use object::{Object, ObjectSection};
use oprofile_stream::oprofile_format::unwind::{self, Row, CFA_BP, CFA_SP, END, UNKNOWN};

/// The reader every section is parsed with (x86-64 is little-endian).
type R<'a> = EndianSlice<'a, LittleEndian>;

/// The exclusive bound of the addresses rows may cover: a row's address is
/// a `u32`, and the table's closing [`UNKNOWN`] row must still fit, so the
/// last byte, `u32::MAX`, is never covered by a rule.
const LIMIT: u64 = u32::MAX as u64;

/// DWARF register numbers of x86-64 (System V psABI, figure 3.36).
const RSP: Register = X86_64::RSP;
const RBP: Register = X86_64::RBP;
const RA: Register = X86_64::RA;

/// The deepest saved frame pointer a row can point at: `bp` is an `i8` of
/// words from the CFA, at least [`unwind::MIN_BP`].
const MIN_BP_BYTES: i64 = unwind::MIN_BP as i64 * 8;

/// What [`build`] met: FDEs, rows, and why rows could not be expressed.
///
/// The reasons count CFI rows (the rows gimli's CFA programs give, before
/// merging), each under the first reason that applies, in the order of
/// the fields.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// FDEs in the section.
    pub fdes: u64,
    /// FDEs dropped because their range overlaps one kept before them (in
    /// address order): the unwinder cannot pick between two descriptions
    /// of the same code, so the first wins.
    pub fdes_overlapping: u64,
    /// FDEs whose CFA program gimli refused, or whose range wraps around:
    /// their whole range is [`UNKNOWN`].
    pub fdes_bad: u64,
    /// CFI rows read (of the FDEs kept; empty rows not counted).
    pub cfi_rows: u64,
    /// Rows of the table (after merging), the closing one included.
    pub rows: u64,
    /// Of them, [`END`] rows (outermost frames: `_start`, thread starts).
    pub end_rows: u64,
    /// Of them, [`UNKNOWN`] rows (gaps between FDEs and the reasons below,
    /// merged).
    pub unknown_rows: u64,
    /// CFI rows whose CFA is a DWARF expression (PLT entries, signal
    /// frames, stack realignment).
    pub cfa_expression: u64,
    /// CFI rows whose CFA is based on a register other than rsp or rbp
    /// (e.g. r10 or r13 in functions that realign the stack).
    pub cfa_register: u64,
    /// CFI rows whose CFA offset is not in `0..=65535`.
    pub cfa_offset: u64,
    /// CFI rows whose return address is not at `CFA - 8` (and not
    /// undefined).
    pub ra_rule: u64,
    /// CFI rows whose rbp rule is neither unchanged nor a save at `CFA - 8k`
    /// for `1 <= k <= 128` (rbp in another register, an expression, ...).
    pub bp_rule: u64,
    /// CFI rows at or above `u32::MAX`, skipped (their range is not in the
    /// table: lookups there find the row before or nothing).
    pub above_u32: u64,
}

impl fmt::Display for Stats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} FDEs ({} overlapping, {} bad), {} CFI rows -> {} rows ({} END, {} UNKNOWN); \
             unexpressible CFI rows: {} CFA expression, {} CFA register, {} CFA offset, \
             {} RA rule, {} rbp rule, {} above u32",
            self.fdes,
            self.fdes_overlapping,
            self.fdes_bad,
            self.cfi_rows,
            self.rows,
            self.end_rows,
            self.unknown_rows,
            self.cfa_expression,
            self.cfa_register,
            self.cfa_offset,
            self.ra_rule,
            self.bp_rule,
            self.above_u32
        )
    }
}

/// A table built from one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Table {
    /// The rows, strictly increasing by address, the last [`UNKNOWN`].
    pub rows: Vec<Row>,
    pub stats: Stats,
    /// The section the rows come from: `.eh_frame` or `.debug_frame`.
    pub section: &'static str,
}

impl Table {
    /// The table as the module takes it: head, then the rows,
    /// native-endian (`oprofile_format::unwind::check` accepts the bytes
    /// of every table [`build`] returns).
    pub fn bytes(&self) -> Vec<u8> {
        let mut out =
            Vec::with_capacity(unwind::TABLE_HEAD_LEN + self.rows.len() * unwind::ROW_LEN);
        // `build` refuses more than MAX_ROWS rows, so the count fits.
        let n = u32::try_from(self.rows.len()).unwrap_or(u32::MAX);
        out.extend_from_slice(&unwind::head(n));
        for r in &self.rows {
            out.extend_from_slice(&r.encoded());
        }
        out
    }
}

/// Builds the table of the x86-64 ELF file `elf` from its `.eh_frame`, or
/// its `.debug_frame` without one (a separate debug file's `.eh_frame` is
/// `NOBITS`, empty, and also falls back). An error for anything else: not
/// an x86-64 ELF file, no CFI, a section gimli cannot walk (a malformed
/// CFA program of one FDE only makes that FDE's range [`UNKNOWN`]), or a
/// table over [`unwind::MAX_ROWS`] rows.
pub fn build(elf: &[u8]) -> Result<Table, String> {
    let file = object::File::parse(elf).map_err(|e| format!("not an ELF file: {e}"))?;
    if file.format() != object::BinaryFormat::Elf
        || file.architecture() != object::Architecture::X86_64
        || !file.is_little_endian()
    {
        return Err(format!(
            "{:?} {:?} file: only x86-64 ELF files have tables",
            file.format(),
            file.architecture()
        ));
    }
    let start = |name: &str| file.section_by_name(name).map_or(0, |s| s.address());
    let data = |name: &str| -> Result<Option<Cow<'_, [u8]>>, String> {
        let Some(s) = file.section_by_name(name) else {
            return Ok(None);
        };
        let d = s.uncompressed_data().map_err(|e| format!("{name}: {e}"))?;
        Ok((!d.is_empty()).then_some(d))
    };
    // pc-relative, text-relative and data-relative pointers in the CIEs and
    // FDEs are resolved against these (the linker uses pc-relative ones).
    let bases = BaseAddresses::default()
        .set_eh_frame(start(".eh_frame"))
        .set_eh_frame_hdr(start(".eh_frame_hdr"))
        .set_text(start(".text"))
        .set_got(start(".got"));
    let table = if let Some(d) = data(".eh_frame")? {
        let mut s = EhFrame::new(&d, LittleEndian);
        s.set_address_size(8);
        from_section(&s, &bases, ".eh_frame")?
    } else if let Some(d) = data(".debug_frame")? {
        let mut s = DebugFrame::new(&d, LittleEndian);
        s.set_address_size(8);
        from_section(&s, &bases, ".debug_frame")?
    } else {
        return Err("no .eh_frame or .debug_frame: no CFI to build a table from".into());
    };
    Ok(table)
}

/// Why a CFI row is [`UNKNOWN`]: an index into [`Reasons`].
#[derive(Clone, Copy)]
enum Reason {
    CfaExpression,
    CfaRegister,
    CfaOffset,
    RaRule,
    BpRule,
}

/// Counts by [`Reason`], kept per FDE until the FDE is known good (a bad
/// FDE's rows are dropped, and so are their counts).
type Reasons = [u64; 5];

/// The table of an unwind section `section` (`.eh_frame` or
/// `.debug_frame`, named `name`).
fn from_section<'a, S: UnwindSection<R<'a>>>(
    section: &S,
    bases: &BaseAddresses,
    name: &'static str,
) -> Result<Table, String> {
    let mut stats = Stats::default();
    let fdes = read_fdes(section, bases, name)?;
    if fdes.is_empty() {
        return Err(format!("{name}: no FDE"));
    }
    stats.fdes = fdes.len() as u64;
    let mut ctx = UnwindContext::new();
    let mut out = Rows::with_capacity(fdes.len() * 4);
    // Rows of the FDE at hand: a bad FDE is only known at its CFA program's
    // error, and its rows must then not be in the table.
    let mut scratch: Vec<Row> = Vec::new();
    let mut covered_to = 0u64;
    for fde in &fdes {
        let (start, end) = (fde.initial_address(), fde.end_address());
        if end < start {
            stats.fdes_bad += 1;
            continue;
        }
        if start == end {
            continue;
        }
        if start < covered_to {
            stats.fdes_overlapping += 1;
            continue;
        }
        covered_to = end;
        let stop = end.min(LIMIT);
        let mut reasons: Reasons = [0; 5];
        let mut cfi_rows = 0u64;
        let mut above = 0u64;
        scratch.clear();
        let walked = (|| -> gimli::Result<()> {
            let mut rows = fde.rows(section, bases, &mut ctx)?;
            while let Some(r) = rows.next_row()? {
                // A row may claim addresses past its FDE (an advance beyond
                // the end): the FDE's range is what the CFI describes.
                let (a, b) = (r.start_address(), r.end_address().min(end));
                if a >= b {
                    continue;
                }
                cfi_rows += 1;
                if a >= LIMIT {
                    above += 1;
                    continue;
                }
                let row = match convert(r) {
                    Ok(row) => row,
                    Err(why) => {
                        reasons[why as usize] += 1;
                        unknown(0)
                    }
                };
                // `a` fits: it is below LIMIT.
                scratch.push(Row {
                    addr: a as u32,
                    ..row
                });
            }
            Ok(())
        })();
        if walked.is_err() {
            stats.fdes_bad += 1;
            if start < LIMIT {
                out.push(unknown(start as u32));
            }
        } else {
            stats.cfi_rows += cfi_rows;
            stats.above_u32 += above;
            stats.cfa_expression += reasons[Reason::CfaExpression as usize];
            stats.cfa_register += reasons[Reason::CfaRegister as usize];
            stats.cfa_offset += reasons[Reason::CfaOffset as usize];
            stats.ra_rule += reasons[Reason::RaRule as usize];
            stats.bp_rule += reasons[Reason::BpRule as usize];
            for r in &scratch {
                out.push(*r);
            }
        }
        // The end of the FDE's range: replaced if the next FDE starts here.
        if start < LIMIT {
            out.push(unknown(stop as u32));
        }
    }
    let mut rows = out.0;
    if rows.last().is_none_or(|r| r.rule != UNKNOWN) {
        // Nothing below LIMIT: a table of one UNKNOWN row is still a table.
        rows.push(unknown(0));
    }
    if rows.len() > unwind::MAX_ROWS as usize {
        return Err(format!(
            "{name}: {} rows, more than a table may have ({})",
            rows.len(),
            unwind::MAX_ROWS
        ));
    }
    stats.rows = rows.len() as u64;
    stats.end_rows = rows.iter().filter(|r| r.rule == END).count() as u64;
    stats.unknown_rows = rows.iter().filter(|r| r.rule == UNKNOWN).count() as u64;
    Ok(Table {
        rows,
        stats,
        section: name,
    })
}

/// The FDEs of `section`, sorted by their first address (stably: of FDEs
/// at one address, the section's first comes first). Each CIE is parsed
/// once while the FDEs that follow it use it (the linker's order), not
/// once per FDE.
fn read_fdes<'a, S: UnwindSection<R<'a>>>(
    section: &S,
    bases: &BaseAddresses,
    name: &str,
) -> Result<Vec<FrameDescriptionEntry<R<'a>>>, String> {
    let mut fdes = Vec::new();
    let mut cie: Option<CommonInformationEntry<R<'a>>> = None;
    let mut entries = section.entries(bases);
    loop {
        let entry = entries
            .next()
            .map_err(|e| format!("{name}: {e} (after {} FDEs)", fdes.len()))?;
        let partial = match entry {
            None => break,
            Some(CieOrFde::Cie(c)) => {
                cie = Some(c);
                continue;
            }
            Some(CieOrFde::Fde(p)) => p,
        };
        let fde = partial
            .parse(|s, b, off| {
                let at = <S::Offset as UnwindOffset<usize>>::into(off);
                if let Some(c) = cie.as_ref().filter(|c| c.offset() == at) {
                    return Ok(c.clone());
                }
                let c = s.cie_from_offset(b, off)?;
                cie = Some(c.clone());
                Ok(c)
            })
            .map_err(|e| format!("{name}: FDE at {:#x}: {e}", partial.offset()))?;
        fdes.push(fde);
    }
    fdes.sort_by_key(|f| f.initial_address());
    Ok(fdes)
}

/// An [`UNKNOWN`] row at `addr` (its other fields 0, so that unknown rows
/// merge).
fn unknown(addr: u32) -> Row {
    Row {
        addr,
        rule: UNKNOWN,
        bp: 0,
        cfa: 0,
    }
}

/// The row (its address left 0) for the CFI row `r`, or why it cannot be
/// expressed.
fn convert(r: &UnwindTableRow<usize>) -> Result<Row, Reason> {
    let ra = r.register(RA);
    // Where the CFI says there is no caller, there is none: the walk ends
    // cleanly (glibc's `_start` and `clone3` mark themselves so).
    if ra == Some(RegisterRule::Undefined) {
        return Ok(Row {
            addr: 0,
            rule: END,
            bp: 0,
            cfa: 0,
        });
    }
    let (rule, offset) = match *r.cfa() {
        CfaRule::Expression(_) => return Err(Reason::CfaExpression),
        CfaRule::RegisterAndOffset { register, offset } => match register {
            RSP => (CFA_SP, offset),
            RBP => (CFA_BP, offset),
            _ => return Err(Reason::CfaRegister),
        },
    };
    let cfa = u16::try_from(offset).map_err(|_| Reason::CfaOffset)?;
    // The call pushed the return address just below the CFA; a rule
    // saying otherwise (a trampoline keeping it elsewhere) cannot be
    // followed by a walk that only reads `CFA - 8`. No rule at all is not
    // "the same value" for the return address: nothing says where it is.
    if ra != Some(RegisterRule::Offset(-8)) {
        return Err(Reason::RaRule);
    }
    let bp = match r.register(RBP) {
        None | Some(RegisterRule::Undefined) | Some(RegisterRule::SameValue) => 0,
        Some(RegisterRule::Offset(n)) if n % 8 == 0 && (MIN_BP_BYTES..=-8).contains(&n) => {
            i8::try_from(n / 8).map_err(|_| Reason::BpRule)?
        }
        Some(_) => return Err(Reason::BpRule),
    };
    Ok(Row {
        addr: 0,
        rule,
        bp,
        cfa,
    })
}

/// The table's rows as they are pushed in address order: a row at the
/// address of the last replaces it (the last held for no address: the
/// closing row of an FDE the next one starts at), and a row with the
/// last's rule is dropped (the last already holds on).
struct Rows(Vec<Row>);

impl Rows {
    fn with_capacity(n: usize) -> Rows {
        Rows(Vec::with_capacity(n))
    }

    /// Pushes `r`, whose address is not below the last's.
    fn push(&mut self, r: Row) {
        if self.0.last().is_some_and(|l| l.addr == r.addr) {
            self.0.pop();
        }
        if self
            .0
            .last()
            .is_some_and(|l| (l.rule, l.bp, l.cfa) == (r.rule, r.bp, r.cfa))
        {
            return;
        }
        self.0.push(r);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use object::ObjectSymbol;
    use std::collections::HashMap;
    use std::process::Command;

    fn row(addr: u32, rule: u8, bp: i8, cfa: u16) -> Row {
        Row {
            addr,
            rule,
            bp,
            cfa,
        }
    }

    fn sp(addr: u32, cfa: u16, bp: i8) -> Row {
        row(addr, CFA_SP, bp, cfa)
    }

    fn fp(addr: u32, cfa: u16, bp: i8) -> Row {
        row(addr, CFA_BP, bp, cfa)
    }

    /// Every table built must be one the module takes.
    fn checked(t: &Table) -> &Table {
        let bytes = t.bytes();
        let body = unwind::check(&bytes).unwrap_or_else(|e| panic!("check: {e:?}: {t:?}"));
        assert_eq!(body.len(), t.rows.len() * unwind::ROW_LEN);
        assert_eq!(t.stats.rows, t.rows.len() as u64);
        t
    }

    /// `cc` or a skip: like tests/unwind.rs, a missing compiler fails the
    /// test unless `OPROFILE_RS_ALLOW_SKIP=1`.
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

    /// Assembles and links `asm` (no libc, static: `.text` at 0x401000)
    /// with `extra` flags; the file's bytes and its symbols.
    fn assemble(asm: &str, extra: &[&str]) -> (Vec<u8>, HashMap<String, u64>) {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("t.s");
        let bin = dir.path().join("t");
        std::fs::write(&src, asm).unwrap();
        let st = Command::new("cc")
            .args(["-nostdlib", "-static", "-Wl,--build-id=none"])
            .args(extra)
            .arg("-o")
            .arg(&bin)
            .arg(&src)
            .status()
            .unwrap();
        assert!(st.success(), "cc {extra:?} failed");
        let data = std::fs::read(&bin).unwrap();
        let f = object::File::parse(&*data).unwrap();
        let syms = f
            .symbols()
            .filter_map(|s| Some((s.name().ok()?.to_string(), s.address())))
            .collect();
        (data, syms)
    }

    /// CFI patterns one each: the labels mark where a row starts.
    const PATTERNS: &str = r#"
	.text
	.globl _start
	.type _start, @function
_start:
	.cfi_startproc
	.cfi_undefined rip
	xor %ebp, %ebp
	call fp_fn
	hlt
	.cfi_endproc

	# push rbp; mov rbp,rsp: the frame-pointer frame.
fp_fn:
	.cfi_startproc
	push %rbp
fp_fn_1:
	.cfi_def_cfa_offset 16
	.cfi_offset %rbp, -16
	mov %rsp, %rbp
fp_fn_2:
	.cfi_def_cfa_register %rbp
	call leaf_a
	.cfi_remember_state
	pop %rbp
fp_fn_3:
	.cfi_def_cfa %rsp, 8
	ret
fp_fn_4:
	.cfi_restore_state
	nop
	leave
fp_fn_5:
	.cfi_def_cfa %rsp, 8
	.cfi_restore %rbp
	ret
	.cfi_endproc

	# Two frameless leaves back to back: one row for both.
leaf_a:
	.cfi_startproc
	mov $1, %eax
	ret
	.cfi_endproc
leaf_b:
	.cfi_startproc
	mov $2, %eax
	ret
	.cfi_endproc

	# Code without CFI: a gap.
no_cfi:
	nop
	ret

	# A frameless function with a stack frame: CFA_SP with rbp saved.
sp_frame:
	.cfi_startproc
	push %rbp
sp_frame_1:
	.cfi_def_cfa_offset 16
	.cfi_offset %rbp, -16
	sub $65519, %rsp
sp_frame_2:
	.cfi_def_cfa_offset 65535
	nop
sp_frame_3:
	.cfi_def_cfa_offset 65536
	nop
sp_frame_4:
	.cfi_def_cfa_offset -8
	nop
sp_frame_5:
	.cfi_def_cfa_offset 65535
	.cfi_offset %rbp, -1024
	nop
sp_frame_6:
	.cfi_offset %rbp, -1032
	nop
sp_frame_7:
	.cfi_offset %rbp, 16
	nop
sp_frame_8:
	.cfi_register %rbp, %rbx
	nop
sp_frame_9:
	.cfi_same_value %rbp
	nop
sp_frame_10:
	.cfi_undefined %rbp
	nop
sp_frame_11:
	.cfi_offset %rip, -16
	nop
sp_frame_11b:
	.cfi_register %rip, %rdi
	nop
sp_frame_12:
	.cfi_offset %rip, -8
	.cfi_def_cfa %r12, 8
	nop
sp_frame_13:
	.cfi_escape 0x0f, 0x02, 0x77, 0x10
	nop
sp_frame_14:
	.cfi_def_cfa %rsp, 8
	.cfi_escape 0x10, 0x06, 0x02, 0x77, 0x00
	nop
sp_frame_15:
	.cfi_same_value %rbp
	ret
	.cfi_endproc
sp_frame_end:
"#;

    /// The rows of [`PATTERNS`] (`.eh_frame` or `.debug_frame` alike).
    fn pattern_rows(s: &HashMap<String, u64>) -> Vec<Row> {
        let a = |name: &str| u32::try_from(s[name]).unwrap();
        vec![
            // _start: the CFI's undefined return address.
            row(a("_start"), END, 0, 0),
            sp(a("fp_fn"), 8, 0),
            sp(a("fp_fn_1"), 16, -2),
            fp(a("fp_fn_2"), 16, -2),
            // After `pop %rbp` the saved value is still at CFA-16.
            sp(a("fp_fn_3"), 8, -2),
            fp(a("fp_fn_4"), 16, -2),
            // `.cfi_restore %rbp`: back to the CIE's (no rule).
            sp(a("fp_fn_5"), 8, 0),
            // leaf_a and leaf_b (same rule) merged into fp_fn_5's row.
            row(a("no_cfi"), UNKNOWN, 0, 0),
            sp(a("sp_frame"), 8, 0),
            sp(a("sp_frame_1"), 16, -2),
            sp(a("sp_frame_2"), 65535, -2),
            // 65536 and -8: offset out of range (merged).
            row(a("sp_frame_3"), UNKNOWN, 0, 0),
            sp(a("sp_frame_5"), 65535, -128),
            // rbp at CFA-1032, CFA+16, in rbx: not expressible (merged).
            row(a("sp_frame_6"), UNKNOWN, 0, 0),
            sp(a("sp_frame_9"), 65535, 0),
            // Undefined rbp: the same row (merged).
            // RA at CFA-16, RA in rdi (vfork's), CFA from r12, a CFA
            // expression, rbp by an expression (merged).
            row(a("sp_frame_11"), UNKNOWN, 0, 0),
            sp(a("sp_frame_15"), 8, 0),
            row(a("sp_frame_end"), UNKNOWN, 0, 0),
        ]
    }

    #[test]
    fn patterns_eh_frame() {
        if !have_cc() {
            return;
        }
        let (elf, syms) = assemble(PATTERNS, &[]);
        let t = build(&elf).unwrap();
        checked(&t);
        assert_eq!(t.section, ".eh_frame");
        assert_eq!(t.rows, pattern_rows(&syms));
        let s = t.stats;
        assert_eq!((s.fdes, s.fdes_overlapping, s.fdes_bad), (5, 0, 0), "{s}");
        assert_eq!(
            (
                s.cfa_expression,
                s.cfa_register,
                s.cfa_offset,
                s.ra_rule,
                s.bp_rule,
                s.above_u32
            ),
            (1, 1, 2, 2, 4, 0),
            "{s}"
        );
        assert_eq!((s.end_rows, s.unknown_rows), (1, 5), "{s}");
    }

    /// `.cfi_sections .debug_frame`: no `.eh_frame`, the same rows from
    /// `.debug_frame` (absolute addresses, CIE id 0xffffffff).
    #[test]
    fn patterns_debug_frame() {
        if !have_cc() {
            return;
        }
        let asm = format!("\t.cfi_sections .debug_frame\n{PATTERNS}");
        let (elf, syms) = assemble(&asm, &[]);
        let f = object::File::parse(&*elf).unwrap();
        assert!(f.section_by_name(".eh_frame").is_none());
        assert!(f.section_by_name(".debug_frame").is_some());
        let t = build(&elf).unwrap();
        checked(&t);
        assert_eq!(t.section, ".debug_frame");
        assert_eq!(t.rows, pattern_rows(&syms));
    }

    /// Code linked above 4 GiB: its rows cannot be addressed; a table of
    /// one UNKNOWN row, every CFI row counted.
    #[test]
    fn above_u32_skipped() {
        if !have_cc() {
            return;
        }
        let (elf, syms) = assemble(PATTERNS, &["-Wl,-Ttext-segment=0x100000000"]);
        assert!(syms["_start"] > u64::from(u32::MAX));
        let t = build(&elf).unwrap();
        checked(&t);
        assert_eq!(t.rows, vec![unknown(0)]);
        assert!(t.stats.above_u32 > 10, "{}", t.stats);
        assert_eq!(t.stats.above_u32, t.stats.cfi_rows);
    }

    #[test]
    fn no_cfi_is_an_error() {
        if !have_cc() {
            return;
        }
        let asm = "\t.text\n\t.globl _start\n_start:\n\tnop\n\thlt\n";
        let (elf, _) = assemble(asm, &[]);
        let e = build(&elf).unwrap_err();
        assert!(e.contains("no .eh_frame or .debug_frame"), "{e}");
    }

    /// Offsets and size of section `name` in an ELF64 file: (offset of
    /// its `sh_size` field, its data's file offset, its size).
    fn section_header(elf: &[u8], name: &str) -> (usize, usize, usize) {
        let f = object::File::parse(elf).unwrap();
        let s = f.section_by_name(name).unwrap();
        let word = |at: usize, n: usize| {
            let mut b = [0u8; 8];
            b[..n].copy_from_slice(&elf[at..at + n]);
            u64::from_le_bytes(b) as usize
        };
        let (shoff, shentsize) = (word(0x28, 8), word(0x3a, 2));
        let size_at = shoff + s.index().0 * shentsize + 0x20;
        let (off, size) = s.file_range().unwrap();
        assert_eq!(word(size_at, 8), size as usize);
        (size_at, off as usize, size as usize)
    }

    #[test]
    fn hostile_files() {
        for bad in [
            &b""[..],
            b"not an ELF file at all",
            b"\x7fELF",
            &[0u8; 64][..],
        ] {
            let e = build(bad).unwrap_err();
            assert!(e.contains("not an ELF file"), "{e}");
        }
        if !have_cc() {
            return;
        }
        let (elf, _) = assemble(PATTERNS, &[]);
        // Every prefix: errors or checked tables, no panic.
        for n in (0..elf.len()).step_by(61) {
            if let Ok(t) = build(&elf[..n]) {
                checked(&t);
            }
        }
        let (size_at, off, size) = section_header(&elf, ".eh_frame");
        // .eh_frame cut inside its first FDE (bytes 24..44).
        let mut cut = elf.clone();
        cut[size_at..size_at + 8].copy_from_slice(&40u64.to_le_bytes());
        let e = build(&cut).unwrap_err();
        assert!(e.starts_with(".eh_frame: "), "{e}");
        // Cut after its first FDE: the FDEs it has make a table.
        let mut cut = elf.clone();
        let first = 4 + u32::from_le_bytes(elf[off..off + 4].try_into().unwrap()) as usize;
        let second =
            first + 4 + u32::from_le_bytes(elf[off + first..][..4].try_into().unwrap()) as usize;
        cut[size_at..size_at + 8].copy_from_slice(&(second as u64).to_le_bytes());
        let t = build(&cut).unwrap();
        assert_eq!(t.stats.fdes, 1);
        assert_eq!(t.rows.len(), 2);
        // Cut after the CIE only: no FDE.
        let mut cut = elf.clone();
        cut[size_at..size_at + 8].copy_from_slice(&(first as u64).to_le_bytes());
        assert!(build(&cut).unwrap_err().contains("no FDE"));
        // All 0xff: a 64-bit DWARF length past the end.
        let mut junk = elf.clone();
        junk[off..off + size].fill(0xff);
        assert!(build(&junk).unwrap_err().starts_with(".eh_frame: "));
        // Pseudo-random garbage: errors or checked tables, no panic.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..300 {
            let mut junk = elf.clone();
            for b in &mut junk[off..off + size] {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                *b = x as u8;
            }
            if let Ok(t) = build(&junk) {
                checked(&t);
            }
        }
        // Garbage after a valid CIE and FDE: the lengths still walk.
        for _ in 0..300 {
            let mut junk = elf.clone();
            for b in &mut junk[off + second..off + size] {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                *b = x as u8;
            }
            if let Ok(t) = build(&junk) {
                checked(&t);
            }
        }
    }

    /// A hand-made `.eh_frame`: CIEs (augmentation "", absolute 8-byte
    /// addresses, code alignment 1, data alignment `daf`, return address
    /// register 16; CFA = rsp+8 and, if `ra`, RA at CFA-8), FDEs of the
    /// last CIE (or of one given), then the terminator.
    struct Cfi {
        bytes: Vec<u8>,
        /// The offset of the last CIE.
        cie_at: usize,
    }

    fn uleb(out: &mut Vec<u8>, mut v: u64) {
        loop {
            let b = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                out.push(b);
                return;
            }
            out.push(b | 0x80);
        }
    }

    fn sleb(out: &mut Vec<u8>, mut v: i64) {
        loop {
            let b = (v & 0x7f) as u8;
            v >>= 7;
            if (v == 0 && b & 0x40 == 0) || (v == -1 && b & 0x40 != 0) {
                out.push(b);
                return;
            }
            out.push(b | 0x80);
        }
    }

    /// CFA instructions.
    fn adv(n: u8) -> Vec<u8> {
        vec![0x02, n]
    }
    fn def_cfa(reg: u8, off: u64) -> Vec<u8> {
        let mut v = vec![0x0c, reg];
        uleb(&mut v, off);
        v
    }
    fn def_cfa_offset(off: u64) -> Vec<u8> {
        let mut v = vec![0x0e];
        uleb(&mut v, off);
        v
    }
    /// `DW_CFA_offset_extended_sf`: `reg` at CFA + `factored` * daf.
    fn offset_sf(reg: u8, factored: i64) -> Vec<u8> {
        let mut v = vec![0x11, reg];
        sleb(&mut v, factored);
        v
    }
    fn undefined(reg: u8) -> Vec<u8> {
        vec![0x07, reg]
    }

    impl Cfi {
        fn new(daf: i8, ra: bool) -> Cfi {
            Cfi {
                bytes: Vec::new(),
                cie_at: 0,
            }
            .cie(daf, ra)
        }

        /// Another CIE, the FDEs' from here on.
        fn cie(mut self, daf: i8, ra: bool) -> Cfi {
            let mut body = vec![0, 0, 0, 0, 1, 0, 1];
            sleb(&mut body, daf.into());
            body.push(16);
            body.extend(def_cfa(7, 8));
            if ra {
                body.extend(offset_sf(16, -8 / i64::from(daf)));
            }
            self.cie_at = self.bytes.len();
            self.bytes.extend((body.len() as u32).to_le_bytes());
            self.bytes.extend(body);
            self
        }

        fn fde(self, start: u64, len: u64, ins: &[&[u8]]) -> Cfi {
            let cie = self.cie_at;
            self.fde_of(cie, start, len, ins)
        }

        /// An FDE of the CIE at `cie`.
        fn fde_of(mut self, cie: usize, start: u64, len: u64, ins: &[&[u8]]) -> Cfi {
            let at = self.bytes.len();
            let mut body = ((at + 4 - cie) as u32).to_le_bytes().to_vec();
            body.extend(start.to_le_bytes());
            body.extend(len.to_le_bytes());
            for i in ins {
                body.extend_from_slice(i);
            }
            self.bytes.extend((body.len() as u32).to_le_bytes());
            self.bytes.extend(body);
            self
        }

        fn finish(mut self) -> Vec<u8> {
            self.bytes.extend([0, 0, 0, 0]);
            self.bytes
        }
    }

    fn table_of(eh_frame: &[u8]) -> Result<Table, String> {
        let mut s = EhFrame::new(eh_frame, LittleEndian);
        s.set_address_size(8);
        let t = from_section(&s, &BaseAddresses::default(), ".eh_frame")?;
        checked(&t);
        Ok(t)
    }

    /// FDEs out of order, adjacent, overlapping, at one address twice.
    #[test]
    fn order_gaps_overlaps() {
        let bytes = Cfi::new(-8, true)
            .fde(0x2000, 0x10, &[&adv(4), &def_cfa_offset(16)])
            .fde(0x1000, 0x10, &[])
            .fde(0x1010, 0x10, &[])
            // Overlaps 0x1000..0x1010 (kept first by address): dropped.
            .fde(0x1008, 0x28, &[&def_cfa_offset(24)])
            // At 0x2000 too, after the first in the section: dropped.
            .fde(0x2000, 0x4, &[&def_cfa_offset(24)])
            // Empty: nothing, and no overlap.
            .fde(0x2004, 0, &[&def_cfa_offset(24)])
            // Right after an UNKNOWN gap row's address: replaces it.
            .fde(0x2010, 0x8, &[&def_cfa_offset(32)])
            .finish();
        let t = table_of(&bytes).unwrap();
        assert_eq!(
            t.rows,
            vec![
                sp(0x1000, 8, 0),
                unknown(0x1020),
                sp(0x2000, 8, 0),
                sp(0x2004, 16, 0),
                sp(0x2010, 32, 0),
                unknown(0x2018),
            ]
        );
        let s = t.stats;
        assert_eq!((s.fdes, s.fdes_overlapping, s.fdes_bad), (7, 2, 0), "{s}");
        assert_eq!(s.cfi_rows, 5, "{s}");
        // Lookups: below the first row nothing; in the gap UNKNOWN.
        let bytes = t.bytes();
        let body = unwind::check(&bytes).unwrap();
        assert_eq!(unwind::find(body, 0xfff), None);
        assert_eq!(unwind::find(body, 0x101f).unwrap().addr, 0x1000);
        assert_eq!(unwind::find(body, 0x1fff).unwrap().rule, UNKNOWN);
        assert_eq!(unwind::find(body, 0x2017).unwrap().cfa, 32);
        assert_eq!(unwind::find(body, u64::MAX).unwrap().rule, UNKNOWN);
    }

    /// Empty rows, and rows advanced past their FDE's end.
    #[test]
    fn empty_and_overlong_rows() {
        let bytes = Cfi::new(-8, true)
            .fde(
                0x3000,
                0x8,
                &[
                    &def_cfa_offset(16),
                    &adv(0),
                    &def_cfa_offset(24),
                    &adv(20),
                    &def_cfa_offset(32),
                    &adv(20),
                    &def_cfa_offset(40),
                ],
            )
            .finish();
        let t = table_of(&bytes).unwrap();
        assert_eq!(t.rows, vec![sp(0x3000, 24, 0), unknown(0x3008)]);
        // Only the row that holds for an address counts.
        assert_eq!(t.stats.cfi_rows, 1, "{}", t.stats);
    }

    /// Rows and FDEs at and above `u32::MAX`, and an FDE whose range wraps.
    #[test]
    fn u32_limit() {
        let bytes = Cfi::new(-8, true)
            .fde(
                0xffff_fff0,
                0x20,
                &[
                    &adv(8),
                    &def_cfa_offset(16),
                    &adv(7),
                    &def_cfa_offset(24),
                    &adv(9),
                    &def_cfa_offset(32),
                ],
            )
            .fde(0x1_0000_1000, 0x10, &[])
            .fde(0xffff_ffff_ffff_fff0, 0x20, &[])
            .finish();
        let t = table_of(&bytes).unwrap();
        assert_eq!(
            t.rows,
            vec![
                sp(0xffff_fff0, 8, 0),
                sp(0xffff_fff8, 16, 0),
                unknown(u32::MAX)
            ]
        );
        let s = t.stats;
        // Rows at 0xffffffff and 0x1_0000_0008, and the second FDE's.
        assert_eq!(
            (s.fdes, s.fdes_bad, s.above_u32, s.cfi_rows),
            (3, 1, 3, 5),
            "{s}"
        );
        // Only above: one UNKNOWN row.
        let bytes = Cfi::new(-8, true).fde(0x1_0000_0000, 0x10, &[]).finish();
        assert_eq!(table_of(&bytes).unwrap().rows, vec![unknown(0)]);
    }

    /// The rbp rule's bounds: saved 1..=128 words below the CFA.
    #[test]
    fn bp_bounds() {
        // Data alignment -4: offsets in 4-byte steps.
        let bytes = Cfi::new(-4, true)
            .fde(
                0x1000,
                0x100,
                &[
                    &offset_sf(6, 2),
                    &adv(1),
                    &offset_sf(6, 3),
                    &adv(1),
                    &offset_sf(6, 256),
                    &adv(1),
                    &offset_sf(6, 258),
                    &adv(1),
                    &offset_sf(6, -2),
                    &adv(1),
                    &offset_sf(6, 0),
                    &adv(1),
                    &undefined(6),
                ],
            )
            .finish();
        let t = table_of(&bytes).unwrap();
        assert_eq!(
            t.rows,
            vec![
                sp(0x1000, 8, -1),
                unknown(0x1001),
                sp(0x1002, 8, -128),
                unknown(0x1003),
                sp(0x1006, 8, 0),
                unknown(0x1100),
            ]
        );
        assert_eq!(t.stats.bp_rule, 4, "{}", t.stats);
    }

    /// The return address: no rule is UNKNOWN, undefined is END; CFA
    /// offsets' bounds.
    #[test]
    fn ra_and_cfa_bounds() {
        let bytes = Cfi::new(-8, false)
            .fde(
                0x1000,
                0x10,
                &[&adv(4), &offset_sf(16, 1), &adv(4), &undefined(16)],
            )
            .finish();
        let t = table_of(&bytes).unwrap();
        assert_eq!(
            t.rows,
            vec![
                unknown(0x1000),
                sp(0x1004, 8, 0),
                row(0x1008, END, 0, 0),
                unknown(0x1010)
            ]
        );
        assert_eq!(t.stats.ra_rule, 1);
        let bytes = Cfi::new(-8, true)
            .fde(
                0x1000,
                0x10,
                &[
                    &def_cfa(7, 0),
                    &adv(1),
                    &def_cfa(6, 65535),
                    &adv(1),
                    &def_cfa(6, 65536),
                    &adv(1),
                    // DW_CFA_def_cfa_sf rsp: -1 * -8 = 8, then 1 * -8.
                    &[0x12, 7, 0x7f],
                    &adv(1),
                    &[0x12, 7, 0x01],
                    &adv(1),
                    &def_cfa(16, 8),
                ],
            )
            .finish();
        let t = table_of(&bytes).unwrap();
        assert_eq!(
            t.rows,
            vec![
                sp(0x1000, 0, 0),
                fp(0x1001, 65535, 0),
                // 65536.
                unknown(0x1002),
                sp(0x1003, 8, 0),
                // -8, then CFA from register 16: merged, and with the
                // closing row.
                unknown(0x1004),
            ]
        );
        let s = t.stats;
        assert_eq!((s.cfa_offset, s.cfa_register), (2, 1), "{s}");
    }

    /// FDEs of two CIEs, interleaved: each gets its own CIE's rules.
    #[test]
    fn cies_interleaved() {
        let cfi = Cfi::new(-8, true);
        let first = cfi.cie_at;
        let bytes = cfi
            .fde(0x1000, 0x10, &[])
            .cie(-8, false)
            .fde(0x1010, 0x10, &[])
            .fde_of(first, 0x1020, 0x10, &[])
            .fde(0x1030, 0x10, &[&adv(1), &offset_sf(16, 1)])
            .finish();
        let t = table_of(&bytes).unwrap();
        assert_eq!(
            t.rows,
            vec![
                sp(0x1000, 8, 0),
                unknown(0x1010),
                sp(0x1020, 8, 0),
                unknown(0x1030),
                sp(0x1031, 8, 0),
                unknown(0x1040),
            ]
        );
        assert_eq!(t.stats.ra_rule, 2, "{}", t.stats);
    }

    /// A CFA program gimli refuses: that FDE's range is UNKNOWN, its
    /// neighbours stand.
    #[test]
    fn bad_program() {
        let bytes = Cfi::new(-8, true)
            .fde(0x4ff0, 0x10, &[])
            .fde(
                0x5000,
                0x10,
                &[&adv(4), &def_cfa_offset(16), &adv(4), &[0x3c]],
            )
            .fde(0x5010, 0x10, &[])
            .finish();
        let t = table_of(&bytes).unwrap();
        assert_eq!(
            t.rows,
            vec![
                sp(0x4ff0, 8, 0),
                unknown(0x5000),
                sp(0x5010, 8, 0),
                unknown(0x5020)
            ]
        );
        let s = t.stats;
        assert_eq!((s.fdes, s.fdes_bad, s.cfi_rows), (3, 1, 2), "{s}");
        // The first FDE bad: UNKNOWN from its start (not "no row").
        let bytes = Cfi::new(-8, true)
            .fde(0x5000, 0x10, &[&[0x3c]])
            .fde(0x5010, 0x10, &[])
            .finish();
        let t = table_of(&bytes).unwrap();
        assert_eq!(
            t.rows,
            vec![unknown(0x5000), sp(0x5010, 8, 0), unknown(0x5020)]
        );
    }

    #[test]
    fn hostile_sections() {
        // Only the terminator, or nothing.
        assert!(table_of(&Cfi::new(-8, true).finish())
            .unwrap_err()
            .contains("no FDE"));
        assert!(table_of(&[0, 0, 0, 0]).unwrap_err().contains("no FDE"));
        assert!(table_of(&[]).unwrap_err().contains("no FDE"));
        let good = Cfi::new(-8, true)
            .fde(0x1000, 0x10, &[&adv(4), &def_cfa_offset(16)])
            .fde(0x1010, 0x10, &[])
            .finish();
        // Truncated anywhere: an error or a table of what was whole.
        for n in 0..good.len() {
            match table_of(&good[..n]) {
                Ok(t) => assert!(t.stats.fdes >= 1),
                Err(e) => assert!(e.starts_with(".eh_frame: "), "{e}"),
            }
        }
        // An FDE pointing at no CIE.
        let mut bad = good.clone();
        let fde = 4 + u32::from_le_bytes(good[..4].try_into().unwrap()) as usize;
        bad[fde + 4..fde + 8].copy_from_slice(&0x7777u32.to_le_bytes());
        assert!(table_of(&bad).is_err());
        // Every byte flipped in turn: no panic.
        for i in 0..good.len() {
            for v in [0u8, 0x7f, 0x80, 0xff] {
                let mut b = good.clone();
                b[i] = v;
                let _ = table_of(&b);
            }
        }
    }
}
