//! `annotate SYMBOL`: samples per instruction over the disassembly of a user
//! function (x86 and x86-64 binaries, disassembled with iced-x86), of a
//! kernel function given the kernel's image (`--vmlinux`), or of a module's
//! function from its object file (`--modules`, else the recording kernel's
//! `/lib/modules/RELEASE`).

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use anyhow::{bail, Context, Result};

use crate::debug_file::debug_file;
use crate::kernel_module::{read_module, search_module};
use crate::profile::Profile;
use crate::symbols::ElfSymbols;
use crate::text::esc;

/// One annotated function of one binary.
#[derive(Debug, Clone, PartialEq)]
pub struct Annotated {
    pub path: String,
    pub symbol: String,
    pub start: u64,
    /// (address, text, weight of the samples at it), in address order.
    pub lines: Vec<(u64, String, u64)>,
    /// Weight of the samples of the symbol (all of them, lines or not).
    pub total: u64,
    /// Weight of samples that fell on no instruction start (outside the
    /// disassembled range, or in the middle of an instruction).
    pub unplaced: u64,
    /// What the weights are: `samples`, or for an event whose periods
    /// differ, their unit (`ns`, `events`).
    pub unit: &'static str,
    /// The source line of each instruction DWARF places (address →
    /// index in `files`, line): the line of the innermost function inlined
    /// there, as `addr2line` and `objdump -S` give it.
    pub source: BTreeMap<u64, (usize, u32)>,
    /// The source files of `source`.
    pub files: Vec<SourceFile>,
    /// The separate debug file the symbols and lines came from, if any.
    pub debug_file: Option<String>,
}

/// A source file of an annotated function.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceFile {
    /// As DWARF names it (its directory joined with its name).
    pub path: String,
    /// Its lines, if it could be read where DWARF says it is.
    pub text: Option<Vec<String>>,
    /// Whether it was modified after the file its lines come from (the
    /// binary, its debug file, the kernel's image): its lines may have
    /// moved since.
    pub newer: bool,
}

/// Where the kernel's code comes from, for kernel and module functions.
#[derive(Debug, Clone, Default)]
pub struct KernelCode {
    /// `--vmlinux`: the kernel's image, with symbols.
    pub vmlinux: Option<PathBuf>,
    /// `--modules`: a module's object file (`.ko`, `.ko.xz`), or a directory
    /// searched for `NAME.ko` and `NAME.ko.xz`.
    pub modules: Option<PathBuf>,
    /// The recording kernel's release (side-car `info`): without
    /// `--modules`, modules are looked for in `/lib/modules/RELEASE`.
    pub release: Option<String>,
}

/// Disassembles `code` (the bytes at `start`) and places the `hits` (vaddr →
/// weight) on its instructions. `notes` (address → text) are appended to
/// the instruction holding the address (a module's relocations: what a call
/// or a load refers to, which the object file's bytes do not say yet).
/// Direct branch and call targets are shown with the symbol `names` gives
/// them (`call 1139 <callee>`, `jne 11aa <hot+0x5e>`), RIP-relative memory
/// operands with their address and symbol after the instruction
/// (`lea rax,[rip+0x2ec1]  ; 4040 <table>`), as objdump and perf show
/// them; not where a note says what the field refers to.
pub fn disassemble(
    code: &[u8],
    start: u64,
    bitness: u32,
    hits: &BTreeMap<u64, u64>,
    notes: &BTreeMap<u64, String>,
    names: &Rc<Names>,
) -> (Vec<(u64, String, u64)>, u64) {
    use iced_x86::{Decoder, DecoderOptions, Formatter, Instruction, IntelFormatter};
    let mut dec = Decoder::with_ip(bitness, code, start, DecoderOptions::NONE);
    let mut fmt = IntelFormatter::with_options(
        Some(Box::new(BranchTargets {
            names: names.clone(),
            notes: notes.clone(),
        })),
        None,
    );
    let o = fmt.options_mut();
    o.set_hex_prefix("0x");
    o.set_hex_suffix("");
    o.set_uppercase_hex(false);
    o.set_show_branch_size(false);
    o.set_branch_leading_zeros(false);
    o.set_rip_relative_addresses(true);
    let mut ins = Instruction::default();
    let mut lines = Vec::new();
    let mut placed = 0;
    while dec.can_decode() {
        dec.decode_out(&mut ins);
        let mut text = String::new();
        let noted = notes.range(ins.ip()..ins.next_ip()).next().is_some();
        if ins.is_invalid() {
            text.push_str("(bad)");
        } else {
            fmt.format(&ins, &mut text);
            if ins.is_ip_rel_memory_operand() && !noted {
                let target = ins.ip_rel_memory_address();
                text.push_str(&format!("  ; {target:x}"));
                if let Some(n) = names.name(target) {
                    text.push_str(&format!(" <{n}>"));
                }
            }
        }
        for (_, n) in notes.range(ins.ip()..ins.next_ip()) {
            text.push_str("  ; ");
            text.push_str(n);
        }
        let w = hits.get(&ins.ip()).copied().unwrap_or(0);
        placed += w;
        lines.push((ins.ip(), text, w));
    }
    let total: u64 = hits.values().sum();
    (lines, total - placed)
}

/// The symbols that name addresses in a disassembly: functions, data
/// objects and labels of an ELF file, `NAME@plt` for its PLT entries and
/// `NAME@got` for its GOT slots, else sections, at the addresses the code
/// ran at (the file's plus `bias`).
#[derive(Debug, Default)]
pub struct Names {
    /// (address in the file, size, name), by address; of symbols at one
    /// address, the one with the largest size.
    syms: Vec<(u64, u64, String)>,
    /// (address, size, name) of the file's allocated sections.
    sections: Vec<(u64, u64, String)>,
    /// `.got` slots holding the address of a function of the file itself
    /// (slot → function): `FUNCTION@got`.
    got: HashMap<u64, u64>,
    bias: u64,
}

impl Names {
    /// The symbols of `file` (every one, or those of the section `only`:
    /// a relocatable object's, whose addresses are offsets in their
    /// sections), for code that ran `bias` from the file's addresses.
    pub fn of(file: &object::File<'_>, only: Option<object::SectionIndex>, bias: u64) -> Names {
        use object::{Object, ObjectSection, ObjectSymbol, SymbolKind};
        let mut syms: Vec<(u64, u64, String)> = Vec::new();
        for s in file.symbols().chain(file.dynamic_symbols()) {
            if !matches!(
                s.kind(),
                SymbolKind::Text | SymbolKind::Data | SymbolKind::Unknown
            ) || s.is_undefined()
                || s.section_index().is_none()
                || (only.is_some() && s.section_index() != only)
            {
                continue;
            }
            let Ok(name) = s.name() else { continue };
            // Local labels and ARM-style mapping symbols name nothing.
            if name.is_empty() || name.starts_with(".L") || name.starts_with('$') {
                continue;
            }
            syms.push((s.address(), s.size(), crate::symbols::demangle(name)));
        }
        let mut sections = Vec::new();
        let mut relative = Vec::new();
        if only.is_none() {
            syms.extend(plt_names(file, &mut relative));
            for sec in file.sections() {
                let alloc = match sec.flags() {
                    object::SectionFlags::Elf { sh_flags } => {
                        sh_flags & u64::from(object::elf::SHF_ALLOC) != 0
                    }
                    _ => true,
                };
                if let (true, Ok(n)) = (alloc && sec.address() != 0, sec.name()) {
                    sections.push((sec.address(), sec.size(), n.to_string()));
                }
            }
            sections.sort();
        }
        syms.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
        syms.dedup_by_key(|s| s.0);
        Names {
            syms,
            sections,
            got: relative.into_iter().collect(),
            bias,
        }
    }

    /// Adds the symbols of `other`, a file of the same addresses (its
    /// separate debug file, its mini-debuginfo).
    pub fn add_symbols(&mut self, other: &object::File<'_>) {
        let theirs = Names::of(other, None, self.bias);
        self.syms.extend(theirs.syms);
        self.syms.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
        self.syms.dedup_by_key(|s| s.0);
    }

    /// `SYMBOL` or `SYMBOL+0xOFF` for address `addr` (as the code ran): the
    /// symbol holding it (within its size; a symbol without a size, up to
    /// the next one), else its section.
    pub fn name(&self, addr: u64) -> Option<String> {
        let a = addr.wrapping_sub(self.bias);
        let with_offset = |base: u64, name: &str| match a - base {
            0 => name.to_string(),
            d => format!("{name}+{d:#x}"),
        };
        let exact = |to: u64| {
            let i = self.syms.binary_search_by_key(&to, |s| s.0).ok()?;
            Some(self.syms[i].2.as_str())
        };
        if let Some(f) = self.got.get(&a).and_then(|&to| exact(to)) {
            return Some(format!("{f}@got"));
        }
        let i = self.syms.partition_point(|s| s.0 <= a);
        if let Some((at, size, name)) = i.checked_sub(1).map(|i| &self.syms[i]) {
            if a - at < *size || (*size == 0 && self.syms.get(i).is_some_and(|n| a < n.0)) {
                return Some(with_offset(*at, name));
            }
        }
        let i = self.sections.partition_point(|s| s.0 <= a);
        let (at, size, name) = &self.sections[i.checked_sub(1)?];
        (a - at < *size).then(|| with_offset(*at, name))
    }
}

/// `NAME@plt` for each PLT entry of a dynamically linked x86 `file` (where
/// its `jmp [rip+SLOT]` starts, or the `endbr64` before it) and `NAME@got`
/// for each GOT slot, of the dynamic relocations' symbols, as objdump
/// names them; the `.got` slots that hold an address of the file itself
/// are added to `relative` (slot, address).
fn plt_names(file: &object::File<'_>, relative: &mut Vec<(u64, u64)>) -> Vec<(u64, u64, String)> {
    use iced_x86::{Decoder, DecoderOptions, Mnemonic};
    use object::{Object, ObjectSection, ObjectSymbol, ObjectSymbolTable};
    let Some(relocs) = file.dynamic_relocations() else {
        return Vec::new();
    };
    let dynsyms = file.dynamic_symbol_table();
    let mut slots: HashMap<u64, String> = HashMap::new();
    let got = file
        .section_by_name(".got")
        .map_or(0..0, |s| s.address()..s.address() + s.size());
    for (at, r) in relocs {
        // R_X86_64_RELATIVE (R_386_RELATIVE): a slot of .got holding the
        // address of a function of the file itself (a call through the GOT
        // of Rust or -fno-plt code).
        if matches!(r.flags(), object::RelocationFlags::Elf { r_type: 8 }) {
            if got.contains(&at) && !r.has_implicit_addend() {
                relative.push((at, r.addend() as u64));
            }
            continue;
        }
        // R_X86_64_GLOB_DAT and R_X86_64_JUMP_SLOT (R_386_GLOB_DAT and
        // R_386_JMP_SLOT have the same numbers): GOT slots.
        if !matches!(r.flags(), object::RelocationFlags::Elf { r_type: 6 | 7 }) {
            continue;
        }
        if let object::RelocationTarget::Symbol(i) = r.target() {
            let sym = dynsyms.as_ref().and_then(|d| d.symbol_by_index(i).ok());
            if let Some(n) = sym.and_then(|s| s.name().ok()) {
                if !n.is_empty() {
                    slots.insert(at, crate::symbols::demangle(n));
                }
            }
        }
    }
    let Ok(bitness) = bitness(file) else {
        return Vec::new();
    };
    let mut out: Vec<(u64, u64, String)> = slots
        .iter()
        .map(|(at, n)| (*at, u64::from(bitness / 8), format!("{n}@got")))
        .collect();
    for sec in file.sections() {
        if !sec.name().is_ok_and(|n| n.starts_with(".plt")) {
            continue;
        }
        let Ok(code) = sec.data() else { continue };
        let mut dec = Decoder::with_ip(bitness, code, sec.address(), DecoderOptions::NONE);
        let mut entry = None;
        for ins in &mut dec {
            match ins.mnemonic() {
                Mnemonic::Endbr64 | Mnemonic::Endbr32 => entry = Some(ins.ip()),
                Mnemonic::Jmp if ins.is_ip_rel_memory_operand() => {
                    if let Some(n) = slots.get(&ins.ip_rel_memory_address()) {
                        let at = entry.filter(|e| ins.ip() - e <= 4).unwrap_or(ins.ip());
                        out.push((at, 0, format!("{n}@plt")));
                    }
                    entry = None;
                }
                _ => entry = None,
            }
        }
    }
    out
}

/// Names direct branch and call targets for iced's formatter as objdump
/// does: the address, then the symbol (`1139 <callee>`).
struct BranchTargets {
    names: Rc<Names>,
    notes: BTreeMap<u64, String>,
}

impl iced_x86::SymbolResolver for BranchTargets {
    fn symbol(
        &mut self,
        ins: &iced_x86::Instruction,
        operand: u32,
        _: Option<u32>,
        address: u64,
        _: u32,
    ) -> Option<iced_x86::SymbolResult<'_>> {
        use iced_x86::OpKind;
        if !matches!(
            ins.op_kind(operand),
            OpKind::NearBranch16 | OpKind::NearBranch32 | OpKind::NearBranch64
        ) || self.notes.range(ins.ip()..ins.next_ip()).next().is_some()
        {
            return None;
        }
        let text = match self.names.name(address) {
            Some(n) => format!("{address:x} <{n}>"),
            None => format!("{address:x}"),
        };
        Some(iced_x86::SymbolResult::with_string(address, text))
    }
}

/// The samples of function `name` (the sampled pc's function, as `report`
/// names it), per binary, annotated: user functions from their mapped
/// files, a kernel function from `vmlinux`, an ELF image of the kernel
/// recorded with its symbols (a distribution's debug package, or the build
/// tree's), matched through the recording's kallsyms.
pub fn annotate(
    p: &Profile,
    name: &str,
    symfs: Option<&Path>,
    debug_dirs: &[PathBuf],
    code: &KernelCode,
) -> Result<Vec<Annotated>> {
    let vmlinux = code.vmlinux.as_deref();
    // (mapped path) → file offset → weight
    let mut per_path: BTreeMap<String, BTreeMap<u64, u64>> = BTreeMap::new();
    // (mapped path) → the build-id its frames carry.
    let mut ids: HashMap<String, Rc<str>> = HashMap::new();
    let mut kernel = 0u64;
    // Core kernel samples: address → weight; and per module.
    let mut kernel_hits: BTreeMap<u64, u64> = BTreeMap::new();
    let mut module_hits: BTreeMap<String, BTreeMap<u64, u64>> = BTreeMap::new();
    for s in &p.samples {
        if s.pc.symbol.as_deref() != Some(name) {
            continue;
        }
        if s.pc.kernel {
            if s.pc.dso == crate::symbols::KERNEL_DSO {
                kernel += s.weight;
                *kernel_hits.entry(s.pc.addr).or_default() += s.weight;
            } else {
                let m = s.pc.dso.trim_start_matches('[').trim_end_matches(']');
                *module_hits
                    .entry(m.to_string())
                    .or_default()
                    .entry(s.pc.addr)
                    .or_default() += s.weight;
            }
            continue;
        }
        if let (Some(path), Some(off)) = (&s.pc.path, s.pc.file_offset) {
            if let Some(id) = &s.pc.build_id {
                ids.entry(path.clone()).or_insert_with(|| id.clone());
            }
            *per_path
                .entry(path.clone())
                .or_default()
                .entry(off)
                .or_default() += s.weight;
        }
    }
    let mut out = Vec::new();
    if kernel > 0 {
        match vmlinux {
            Some(v) => out.push(annotate_kernel(p, name, &kernel_hits, v)?),
            None if per_path.is_empty() && module_hits.is_empty() => bail!(
                "{name} is a kernel function: annotate needs the kernel's code, and the recording has only \
                 its symbols; give the image it ran with --vmlinux PATH (with symbols: a distribution's \
                 debug package, e.g. /usr/lib/debug/boot/vmlinux-RELEASE, or the build tree's vmlinux)"
            ),
            None => {}
        }
    }
    for (module, hits) in &module_hits {
        // An archive's copy of the module recorded comes first.
        let archived = p
            .locator
            .kernel
            .get(module)
            .and_then(|id| p.locator.in_archive(id, false));
        let ko = match (archived, &code.modules) {
            (Some(k), None) => k,
            _ => find_module(module, code, symfs)?,
        };
        out.push(annotate_module(p, name, module, hits, &ko)?);
    }
    if per_path.is_empty() && out.is_empty() {
        let mut similar: Vec<String> = p
            .samples
            .iter()
            .filter_map(|s| s.pc.symbol.clone())
            .filter(|n| n.contains(name))
            .collect();
        similar.sort();
        similar.dedup();
        similar.truncate(10);
        if similar.is_empty() {
            bail!("no sample in a function named {name}");
        }
        bail!(
            "no sample in a function named exactly {name}; did you mean: {}",
            similar.join(", ")
        );
    }
    for (path, offsets) in per_path {
        let local: PathBuf = match symfs {
            Some(root) => root.join(path.trim_start_matches('/')),
            None => PathBuf::from(&path),
        };
        // The file symbolisation read: an archive's copy, the local file
        // of the recording's build, debuginfod's.
        let mut why = Vec::new();
        let found = p
            .locator
            .executable(&local, ids.get(&path).map(|id| &**id), &mut |_, t| {
                why.push(t)
            });
        let Some((real, data)) = found else {
            bail!("{}", why.join("; "));
        };
        let bitness = elf_bitness(&data)
            .with_context(|| format!("{}: cannot disassemble", real.display()))?;
        let own = object::File::parse(&*data)
            .map_err(|e| anyhow::anyhow!("{}: not an ELF file: {e}", real.display()))?;
        let mut elf = ElfSymbols::parse(&data)
            .map_err(|e| anyhow::anyhow!(e))
            .with_context(|| real.display().to_string())?;
        let mut names = Names::of(&own, None, 0);
        // The symbols (and lines) a stripped binary lacks: its separate
        // debug file's, else its mini-debuginfo's.
        let (debug, extra) = match debug_file(&real, &own, debug_dirs) {
            Some((path, data)) => (Some(path), Some(data)),
            None if object::Object::section_by_name(&own, ".symtab").is_none() => {
                (None, crate::symbols::mini_debuginfo(&data).ok().flatten())
            }
            None => (None, None),
        };
        if let Some(extra) = &extra {
            if let (Ok(syms), Ok(f)) = (ElfSymbols::parse(extra), object::File::parse(&**extra)) {
                elf.merge(syms);
                names.add_symbols(&f);
            }
        }
        let mut hits: BTreeMap<u64, u64> = BTreeMap::new();
        let mut unplaced = 0;
        for (off, w) in &offsets {
            match elf.offset_to_vaddr(*off) {
                Some(va) => *hits.entry(va).or_default() += w,
                None => unplaced += w,
            }
        }
        // The function: the ELF symbol holding most of the samples.
        let mut by_sym: HashMap<(u64, u64), u64> = HashMap::new();
        for (va, w) in &hits {
            if let Some((a, e, _)) = elf.containing(*va) {
                *by_sym.entry((a, e)).or_default() += w;
            }
        }
        let Some(((start, extent), _)) = by_sym.into_iter().max_by_key(|(k, w)| (*w, k.0)) else {
            bail!(
                "{}: no symbol table entry holds the samples of {name}",
                real.display()
            );
        };
        let extent = extent.min(1 << 20);
        let code = elf
            .vaddr_to_offset(start)
            .and_then(|o| data.get(o as usize..(o + extent) as usize))
            .with_context(|| {
                format!("{}: the code of {name} is not in the file", real.display())
            })?;
        let total: u64 = offsets.values().sum();
        let names = Rc::new(names);
        let (lines, outside) = disassemble(code, start, bitness, &hits, &BTreeMap::new(), &names);
        let (source, files) = source_lines(debug.as_deref().unwrap_or(&real), &lines, 0);
        out.push(Annotated {
            path,
            symbol: name.to_string(),
            start,
            lines,
            total,
            unplaced: unplaced + outside,
            unit: crate::report::shown_event(p).map_or("samples", |e| e.weight_unit()),
            source,
            files,
            debug_file: debug.map(|d| d.display().to_string()),
        });
    }
    Ok(out)
}

/// The addresses of the symbols named `name` in the ELF file `f` (any kind:
/// `_stext` is a plain label), in address order.
fn elf_addresses(f: &object::File<'_>, name: &str) -> Vec<(u64, u64)> {
    use object::{Object, ObjectSymbol};
    let mut v: Vec<(u64, u64)> = f
        .symbols()
        .filter(|s| !s.is_undefined() && s.name() == Ok(name))
        .map(|s| (s.address(), s.size()))
        .collect();
    v.sort_unstable();
    v.dedup_by_key(|s| s.0);
    v
}

/// Kernel function `name`, sampled at `hits` (addresses as it ran → weight),
/// disassembled from `vmlinux` at the addresses it ran at: the image's link
/// addresses moved by the offset KASLR gave the kernel (the recording's
/// kallsyms address of the function less the image's), which `_stext` must
/// confirm.
fn annotate_kernel(
    p: &Profile,
    name: &str,
    hits: &BTreeMap<u64, u64>,
    vmlinux: &Path,
) -> Result<Annotated> {
    let shown = vmlinux.display();
    let Some(kallsyms) = p.kallsyms.as_deref() else {
        bail!("the recording has no kallsyms: its kernel addresses cannot be matched with {shown}");
    };
    let data = std::fs::read(vmlinux).with_context(|| format!("cannot read {shown}"))?;
    let file = object::File::parse(&*data)
        .map_err(|e| anyhow::anyhow!("{shown}: not an ELF file: {e}"))?;
    let bitness = bitness(&file).with_context(|| format!("{shown}: cannot disassemble"))?;
    let elf = ElfSymbols::parse(&data)
        .map_err(|e| anyhow::anyhow!(e))
        .with_context(|| shown.to_string())?;
    // The function as it ran: the kallsyms entry of that name holding most
    // of the samples (static functions may share a name), and the image's
    // symbol of the same rank among those of the name.
    let ran = kallsyms.core_text_addresses(name);
    let Some(rank) = hottest(&ran, hits) else {
        bail!("the recording's kallsyms has no kernel function {name}");
    };
    let linked = elf_addresses(&file, name);
    let Some(&(link, size)) = linked.get(rank).or(linked.first()) else {
        bail!(
            "{shown} has no symbol {name}: is it the image of the kernel recorded (with symbols)?"
        );
    };
    let slide = ran[rank].wrapping_sub(link);
    // The same offset for the kernel's start, or the image is another
    // kernel's.
    if let (Some(&text_ran), Some(&(text_link, _))) = (
        kallsyms.core_text_addresses("_stext").first(),
        elf_addresses(&file, "_stext").first(),
    ) {
        let text_slide = text_ran.wrapping_sub(text_link);
        if text_slide != slide {
            bail!(
                "{shown} is not the image of the kernel recorded: {name} ran {:#x} from its \
                 address in the image, _stext {:#x}",
                slide,
                text_slide
            );
        }
    }
    // Its size, else up to the next function.
    let extent = elf
        .containing(link)
        .map_or(size, |(_, e, _)| e)
        .min(1 << 20);
    let code = elf
        .vaddr_to_offset(link)
        .and_then(|o| data.get(o as usize..(o + extent) as usize))
        .with_context(|| format!("{shown}: the code of {name} is not in the file"))?;
    let start = ran[rank];
    let names = Rc::new(Names::of(&file, None, slide));
    let lines = disassemble(code, start, bitness, hits, &BTreeMap::new(), &names);
    let source = source_lines(vmlinux, &lines.0, slide);
    Ok(placed(
        p,
        name,
        shown.to_string(),
        start,
        hits,
        lines,
        source,
    ))
}

/// Of the addresses `ran` where functions of one name ran (static functions
/// may share a name), the index of the one whose code (up to the next of
/// them) holds the most weight of `hits`; the first among equals.
fn hottest(ran: &[u64], hits: &BTreeMap<u64, u64>) -> Option<usize> {
    let mut weight_at = vec![0u64; ran.len()];
    for (addr, w) in hits {
        if let Some(i) = ran.iter().rposition(|a| a <= addr) {
            weight_at[i] += w;
        }
    }
    (0..ran.len()).max_by_key(|&i| (weight_at[i], std::cmp::Reverse(i)))
}

/// The kernel or module function `name` of `path`, which ran at `start`:
/// its disassembly with `hits` placed (from [`disassemble`]).
fn placed(
    p: &Profile,
    name: &str,
    path: String,
    start: u64,
    hits: &BTreeMap<u64, u64>,
    (lines, unplaced): (Vec<(u64, String, u64)>, u64),
    (source, files): (BTreeMap<u64, (usize, u32)>, Vec<SourceFile>),
) -> Annotated {
    Annotated {
        path,
        symbol: name.to_string(),
        start,
        lines,
        total: hits.values().sum(),
        unplaced,
        unit: crate::report::shown_event(p).map_or("samples", |e| e.weight_unit()),
        source,
        files,
        debug_file: None,
    }
}

/// Largest source file read.
const MAX_SOURCE: u64 = 64 << 20;

/// The source line DWARF gives each instruction of `lines` (addresses as
/// the code ran, `bias` from the ELF file `elf`'s), and the source files,
/// read where DWARF says they are. Nothing where the file has no DWARF
/// line table (or blazesym cannot read it).
fn source_lines(
    elf: &Path,
    lines: &[(u64, String, u64)],
    bias: u64,
) -> (BTreeMap<u64, (usize, u32)>, Vec<SourceFile>) {
    use blazesym::symbolize::{source, Input, Symbolized, Symbolizer};
    let mut source = BTreeMap::new();
    let mut files: Vec<SourceFile> = Vec::new();
    let addrs: Vec<u64> = lines.iter().map(|l| l.0.wrapping_sub(bias)).collect();
    let symbolizer = Symbolizer::builder()
        .enable_code_info(true)
        .enable_inlined_fns(true)
        .enable_demangling(false)
        .build();
    let src = source::Source::Elf(source::Elf::new(elf));
    let Ok(syms) = symbolizer.symbolize(&src, Input::VirtOffset(&addrs)) else {
        return (source, files);
    };
    let mut index: HashMap<String, usize> = HashMap::new();
    let built = std::fs::metadata(elf).and_then(|m| m.modified()).ok();
    for (l, sym) in lines.iter().zip(&syms) {
        let Symbolized::Sym(sym) = sym else { continue };
        // The innermost inlined function's line, else the function's.
        let info = match sym.inlined.last() {
            Some(i) => i.code_info.as_ref(),
            None => sym.code_info.as_deref(),
        };
        let Some((path, line)) = info.and_then(|c| {
            Some((
                crate::text::from_bytes(c.to_path().as_os_str().as_encoded_bytes()).into_owned(),
                c.line.filter(|&l| l > 0)?,
            ))
        }) else {
            continue;
        };
        let i = *index.entry(path.clone()).or_insert_with(|| {
            let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
            files.push(SourceFile {
                text: read_source(Path::new(&path)),
                newer: matches!(
                    (modified(Path::new(&path)), &built),
                    (Some(s), Some(b)) if s > *b
                ),
                path,
            });
            files.len() - 1
        });
        source.insert(l.0, (i, line));
    }
    (source, files)
}

/// The lines of a source file, if it can be read (and is not huge).
fn read_source(path: &Path) -> Option<Vec<String>> {
    // A regular file only: opening a FIFO would wait for a writer.
    if !std::fs::metadata(path).ok()?.is_file() {
        return None;
    }
    let f = std::fs::File::open(path).ok()?;
    let mut data = Vec::new();
    std::io::Read::read_to_end(&mut std::io::Read::take(f, MAX_SOURCE + 1), &mut data).ok()?;
    if data.len() as u64 > MAX_SOURCE {
        return None;
    }
    Some(
        data.split(|&b| b == b'\n')
            .map(|l| crate::text::from_bytes(l.strip_suffix(b"\r").unwrap_or(l)).into_owned())
            .collect(),
    )
}

/// The object file of module `module`: `--modules` (a file, or a directory
/// searched), else the recording kernel's module tree.
fn find_module(module: &str, code: &KernelCode, symfs: Option<&Path>) -> Result<PathBuf> {
    let how = format!(
        "{module}.ko: give the module's object file (or a directory holding it) with --modules PATH"
    );
    let root = match (&code.modules, &code.release) {
        (Some(m), _) if m.is_file() => return Ok(m.clone()),
        (Some(m), _) if m.is_dir() => m.clone(),
        (Some(m), _) => bail!("--modules {}: no such file or directory", m.display()),
        (None, Some(r)) => {
            let d = PathBuf::from(format!("/lib/modules/{r}"));
            match symfs {
                Some(s) => s.join(d.strip_prefix("/").unwrap_or(&d)),
                None => d,
            }
        }
        (None, None) => bail!(
            "the function is in the module {module} and the recording does not say which kernel \
             ran (no kernel-release in its side-car): {how}"
        ),
    };
    match search_module(&root, module, 0) {
        Ok(Some(p)) => Ok(p),
        Ok(None) => bail!(
            "the function is in the module {module}, and {} has no {module}.ko or {module}.ko.xz: {how}",
            root.display()
        ),
        Err(e) => bail!(
            "the function is in the module {module}, and {} cannot be read ({e}): {how}",
            root.display()
        ),
    }
}

/// Module function `name`, sampled at `hits` (addresses as it ran →
/// weight), disassembled from the module's object file `ko` (relocatable:
/// each symbol's value is its offset in its section). The section's load
/// address comes from the recording's kallsyms address of the function,
/// and every other function of that section kallsyms lists must be where
/// the same address puts it, or the file is another build of the module.
/// The relocations of the function's code are shown as notes (the file's
/// bytes leave call and data targets unresolved).
fn annotate_module(
    p: &Profile,
    name: &str,
    module: &str,
    hits: &BTreeMap<u64, u64>,
    ko: &Path,
) -> Result<Annotated> {
    use object::{Object, ObjectSection, ObjectSymbol};
    let shown = ko.display();
    let Some(kallsyms) = p.kallsyms.as_deref() else {
        bail!("the recording has no kallsyms: its module addresses cannot be matched with {shown}");
    };
    let data = read_module(ko)?;
    let file = object::File::parse(&*data)
        .map_err(|e| anyhow::anyhow!("{shown}: not an ELF file: {e}"))?;
    if file.kind() != object::ObjectKind::Relocatable {
        bail!("{shown} is not a kernel module (a relocatable object)");
    }
    let bitness = bitness(&file).with_context(|| format!("{shown}: cannot disassemble"))?;
    // The function as it ran: the kallsyms entry of that name holding most
    // of the samples, and the file's symbol of the same rank.
    let ran = kallsyms.text_addresses(Some(module), name);
    let Some(rank) = hottest(&ran, hits) else {
        bail!("the recording's kallsyms has no function {name} of the module {module}");
    };
    let named = |s: &object::Symbol<'_, '_>| {
        s.name()
            .is_ok_and(|n| n == name || crate::symbols::demangle(n) == name)
    };
    let mut funcs: Vec<object::Symbol<'_, '_>> = file
        .symbols()
        .filter(|s| s.kind() == object::SymbolKind::Text && s.section_index().is_some())
        .collect();
    funcs.sort_by_key(|s| (s.section_index().map(|i| i.0), s.address()));
    let candidates: Vec<&object::Symbol<'_, '_>> = funcs.iter().filter(|s| named(s)).collect();
    let Some(sym) = candidates.get(rank).or(candidates.first()) else {
        bail!("{shown} has no function {name}: is it the object file of the module {module} recorded?");
    };
    let section_index = sym.section_index().context("no section")?;
    let section = file
        .section_by_index(section_index)
        .with_context(|| format!("{shown}: {name}'s section is missing"))?;
    let base = ran[rank].wrapping_sub(sym.address());
    // Every other function of the section that kallsyms names once must be
    // at base + its offset.
    for f in funcs
        .iter()
        .filter(|f| f.section_index() == Some(section_index))
    {
        let Ok(raw) = f.name() else { continue };
        let fname = crate::symbols::demangle(raw);
        if fname.is_empty() || fname == name {
            continue;
        }
        if let [at] = kallsyms.text_addresses(Some(module), &fname)[..] {
            if at != base.wrapping_add(f.address()) {
                bail!(
                    "{shown} is not the object file of the module {module} recorded: {fname} ran at \
                     {at:#x}, where this file would put it at {:#x}",
                    base.wrapping_add(f.address())
                );
            }
        }
    }
    // Its size, else up to the next function of its section.
    let next = funcs
        .iter()
        .filter(|f| f.section_index() == Some(section_index))
        .map(|f| f.address())
        .find(|&a| a > sym.address());
    let extent = match (sym.size(), next) {
        (0, Some(n)) => n - sym.address(),
        (0, None) => section.size().saturating_sub(sym.address()),
        (s, _) => s,
    }
    .min(1 << 20);
    let bytes = section
        .data()
        .map_err(|e| anyhow::anyhow!("{shown}: {e}"))?
        .get(sym.address() as usize..(sym.address() + extent) as usize)
        .with_context(|| format!("{shown}: the code of {name} is not in the file"))?;
    let start = ran[rank];
    let mut notes = BTreeMap::new();
    for (off, r) in section.relocations() {
        if off < sym.address() || off >= sym.address() + extent {
            continue;
        }
        let target = match r.target() {
            object::RelocationTarget::Symbol(i) => file.symbol_by_index(i).ok().map(|t| {
                let n = t.name().unwrap_or("");
                if n.is_empty() {
                    // A section symbol: the section's name.
                    t.section_index()
                        .and_then(|i| file.section_by_index(i).ok())
                        .and_then(|s| s.name().ok().map(str::to_string))
                        .unwrap_or_default()
                } else {
                    crate::symbols::demangle(n)
                }
            }),
            _ => None,
        };
        let Some(target) = target.filter(|t| !t.is_empty()) else {
            continue;
        };
        // PC-relative fields count from the end of their 4 bytes.
        let addend = if r.kind() == object::RelocationKind::Relative
            || r.kind() == object::RelocationKind::PltRelative
        {
            r.addend() + 4
        } else {
            r.addend()
        };
        let note = match addend {
            0 => target,
            a if a > 0 => format!("{target}+{a:#x}"),
            a => format!("{target}-{:#x}", a.unsigned_abs()),
        };
        notes.insert(start + (off - sym.address()), note);
    }
    // Calls and jumps within the section that the assembler resolved have
    // no relocation: the section's symbols name them.
    let names = Rc::new(Names::of(&file, Some(section_index), base));
    let lines = disassemble(bytes, start, bitness, hits, &notes, &names);
    // The DWARF of a relocatable object needs its relocations applied to
    // give addresses: no source lines.
    Ok(placed(
        p,
        name,
        shown.to_string(),
        start,
        hits,
        lines,
        Default::default(),
    ))
}

fn elf_bitness(data: &[u8]) -> Result<u32> {
    let f = object::File::parse(data).map_err(|e| anyhow::anyhow!("not an ELF file: {e}"))?;
    bitness(&f)
}

/// 64 or 32 for x86 code, else an error.
fn bitness(f: &object::File<'_>) -> Result<u32> {
    use object::Object;
    match f.architecture() {
        object::Architecture::X86_64 => Ok(64),
        object::Architecture::X86_64_X32 | object::Architecture::I386 => Ok(32),
        a => bail!("only x86 code can be disassembled, not {a:?}"),
    }
}

/// Source lines listed in the summary of the hottest ones.
const SUMMARY_LINES: usize = 10;

/// Writes `perf annotate`-like text: percent and samples per instruction,
/// where DWARF has them the source lines between the instructions (and
/// first, the hottest source lines).
pub fn write(a: &[Annotated], out: &mut dyn Write) -> std::io::Result<()> {
    for f in a {
        writeln!(
            out,
            "# {} ({}), {} {}{}",
            esc(&f.symbol),
            esc(&f.path),
            f.total,
            f.unit,
            if f.unplaced > 0 {
                format!(", {} not on an instruction start", f.unplaced)
            } else {
                String::new()
            }
        )?;
        if let Some(d) = &f.debug_file {
            writeln!(out, "# debug file: {}", esc(d))?;
        }
        let short = short_names(&f.files);
        let located = |file: usize, line: u32| format!("{}:{line}", esc(&short[file]));
        let text = |file: usize, line: u32| -> Option<String> {
            let t = f.files[file].text.as_ref()?.get(line as usize - 1)?;
            Some(esc(&expand_tabs(t)).trim_end().to_string())
        };
        // file:line, then the line's text in a column.
        let width = f
            .source
            .values()
            .map(|&(file, line)| located(file, line).chars().count())
            .max()
            .unwrap_or(0);
        let source_line = |file: usize, line: u32, trim: bool| match text(file, line) {
            Some(t) if !t.is_empty() => format!(
                "{:<width$}  {}",
                located(file, line),
                if trim { t.trim_start() } else { &t }
            ),
            _ => located(file, line),
        };
        if !f.files.is_empty() {
            for s in &f.files {
                writeln!(
                    out,
                    "# source: {}{}",
                    esc(&s.path),
                    match (&s.text, s.newer) {
                        (None, _) => " (not readable: file:line only)",
                        (Some(_), true) => {
                            " (modified after the binary was built: its lines may not match)"
                        }
                        (Some(_), false) => "",
                    }
                )?;
            }
            // Weight per source line, hottest first.
            let mut per_line: HashMap<(usize, u32), u64> = HashMap::new();
            for (addr, _, w) in &f.lines {
                if let (Some(loc), true) = (f.source.get(addr), *w > 0) {
                    *per_line.entry(*loc).or_default() += w;
                }
            }
            let mut hot: Vec<((usize, u32), u64)> = per_line.into_iter().collect();
            hot.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
            if !hot.is_empty() {
                writeln!(out, "# hottest source lines:")?;
                writeln!(out, "# {:>7} {:>8}  source line", "percent", f.unit)?;
                for ((file, line), w) in hot.iter().take(SUMMARY_LINES) {
                    writeln!(
                        out,
                        "  {:>7.2} {:>8}  {}",
                        100.0 * *w as f64 / f.total.max(1) as f64,
                        w,
                        source_line(*file, *line, true)
                    )?;
                }
                if hot.len() > SUMMARY_LINES {
                    let rest: u64 = hot[SUMMARY_LINES..].iter().map(|h| h.1).sum();
                    writeln!(
                        out,
                        "# ... {} more lines, {} {}",
                        hot.len() - SUMMARY_LINES,
                        rest,
                        f.unit
                    )?;
                }
                writeln!(out, "#")?;
            }
        }
        writeln!(
            out,
            "# {:>7} {:>8}  {:>16}  instruction",
            "percent", f.unit, "address"
        )?;
        let mut last = None;
        for (addr, text_of, w) in &f.lines {
            // An instruction of no line (line 0: code the compiler made)
            // continues the previous line, as objdump -S shows it.
            let loc = f.source.get(addr).copied().or(last);
            if let Some((file, line)) = loc.filter(|_| loc != last) {
                writeln!(
                    out,
                    "  {:>7} {:>8}  {:>16}  {}",
                    "",
                    "",
                    "",
                    source_line(file, line, false)
                )?;
            }
            last = loc;
            if *w > 0 {
                writeln!(
                    out,
                    "  {:>7.2} {:>8}  {:>16x}  {}",
                    100.0 * *w as f64 / f.total.max(1) as f64,
                    w,
                    addr,
                    text_of
                )?;
            } else {
                writeln!(out, "  {:>7} {:>8}  {:>16x}  {}", "", "", addr, text_of)?;
            }
        }
        writeln!(out)?;
    }
    Ok(())
}

/// What the listing calls each source file: its file name, or its path
/// where another file of the function has the same name.
fn short_names(files: &[SourceFile]) -> Vec<String> {
    let base = |p: &str| p.rsplit('/').next().unwrap_or(p).to_string();
    files
        .iter()
        .map(|f| {
            let b = base(&f.path);
            if files.iter().filter(|g| base(&g.path) == b).count() > 1 {
                f.path.clone()
            } else {
                b
            }
        })
        .collect()
}

/// `line` with its tabs expanded to 8-column stops.
fn expand_tabs(line: &str) -> String {
    let mut s = String::with_capacity(line.len());
    let mut col = 0;
    for c in line.chars() {
        if c == '\t' {
            let n = 8 - col % 8;
            s.extend(std::iter::repeat_n(' ', n));
            col += n;
        } else {
            s.push(c);
            col += 1;
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_land_on_their_instructions() {
        // push rbp; mov rbp,rsp; nop; pop rbp; ret
        let code = [0x55, 0x48, 0x89, 0xe5, 0x90, 0x5d, 0xc3];
        let hits = BTreeMap::from([(0x1001, 3), (0x1004, 1), (0x1002, 5), (0x2000, 2)]);
        let (lines, unplaced) =
            disassemble(&code, 0x1000, 64, &hits, &BTreeMap::new(), &Rc::default());
        let got: Vec<(u64, &str, u64)> =
            lines.iter().map(|(a, t, w)| (*a, t.as_str(), *w)).collect();
        assert_eq!(
            got,
            [
                (0x1000, "push rbp", 0),
                (0x1001, "mov rbp,rsp", 3),
                (0x1004, "nop", 1),
                (0x1005, "pop rbp", 0),
                (0x1006, "ret", 0),
            ]
        );
        // In the middle of an instruction (0x1002) or beyond the code (0x2000).
        assert_eq!(unplaced, 7);
        // Garbage decodes as (bad) lines, never a panic.
        let (lines, _) = disassemble(
            &[0xff, 0xff, 0x0f],
            0,
            64,
            &BTreeMap::new(),
            &BTreeMap::new(),
            &Rc::default(),
        );
        assert!(lines.iter().any(|l| l.1 == "(bad)"), "{lines:?}");
    }

    #[test]
    fn the_summary_lists_the_ten_hottest_lines_and_says_what_is_left() {
        // 12 instructions on 12 lines of two files named alike: weights
        // 1..=12, the one at line 5 of b/x.c beyond its end.
        let files = vec![
            SourceFile {
                path: "/a/x.c".into(),
                text: Some((1..=12).map(|i| format!("\tline {i}\x1b")).collect()),
                newer: false,
            },
            SourceFile {
                path: "/b/x.c".into(),
                text: Some(vec!["only".into()]),
                newer: true,
            },
        ];
        let mut source = BTreeMap::new();
        let mut lines = Vec::new();
        for i in 1..=12u64 {
            lines.push((0x100 + i, format!("nop{i}"), i));
            source.insert(0x100 + i, (usize::from(i == 5), i as u32));
        }
        let a = Annotated {
            path: "/bin/x".into(),
            symbol: "f".into(),
            start: 0x101,
            lines,
            total: 78,
            unplaced: 0,
            unit: "samples",
            source,
            files,
            debug_file: None,
        };
        let mut out = Vec::new();
        write(&[a], &mut out).unwrap();
        let out = String::from_utf8(out).unwrap();
        assert!(
            out.contains(
                "\n# source: /a/x.c\n# source: /b/x.c (modified after the binary was built: \
                 its lines may not match)\n"
            ),
            "{out}"
        );
        let rows: Vec<&str> = out
            .lines()
            .skip_while(|l| !l.starts_with("# hottest"))
            .skip(2)
            .take(11)
            .collect();
        // Hottest first, text trimmed and escaped; the file's path where
        // another has the same name; the line beyond the file: no text.
        assert_eq!(
            rows[0], "    15.38       12  /a/x.c:12  line 12\\e",
            "{out}"
        );
        assert_eq!(rows[7], "     6.41        5  /b/x.c:5", "{out}");
        assert_eq!(rows[9], "     3.85        3  /a/x.c:3   line 3\\e", "{out}");
        assert_eq!(rows[10], "# ... 2 more lines, 3 samples", "{out}");
        // In the listing, the text in a column, its tabs expanded.
        let row = format!("\n{:38}{:<9}  {:8}line 1\\e\n", "", "/a/x.c:1", "");
        assert!(out.contains(&row), "{out}");
    }

    #[test]
    fn an_instruction_of_no_line_continues_the_previous_one() {
        // Lines 3, none (line 0), 3, 4: one row for line 3, one for 4.
        let source = BTreeMap::from([(0x10, (0, 3)), (0x12, (0, 3)), (0x13, (0, 4))]);
        let a = Annotated {
            path: "/bin/x".into(),
            symbol: "f".into(),
            start: 0x10,
            lines: [0x10, 0x11, 0x12, 0x13]
                .map(|a| (a, "nop".to_string(), 0))
                .to_vec(),
            total: 0,
            unplaced: 0,
            unit: "samples",
            source,
            files: vec![SourceFile {
                path: "x.c".into(),
                text: None,
                newer: false,
            }],
            debug_file: None,
        };
        let mut out = Vec::new();
        write(&[a], &mut out).unwrap();
        let out = String::from_utf8(out).unwrap();
        let rows: Vec<&str> = out
            .lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
            .map(str::trim)
            .collect();
        assert_eq!(
            rows,
            ["x.c:3", "10  nop", "11  nop", "12  nop", "x.c:4", "13  nop"],
            "{out}"
        );
    }
}
