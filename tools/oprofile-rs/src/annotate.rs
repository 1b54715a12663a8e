//! `annotate SYMBOL`: samples per instruction over the disassembly of a user
//! function (x86 and x86-64 binaries, disassembled with iced-x86), of a
//! kernel function given the kernel's image (`--vmlinux`), or of a module's
//! function from its object file (`--modules`, else the recording kernel's
//! `/lib/modules/RELEASE`).

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

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
pub fn disassemble(
    code: &[u8],
    start: u64,
    bitness: u32,
    hits: &BTreeMap<u64, u64>,
    notes: &BTreeMap<u64, String>,
) -> (Vec<(u64, String, u64)>, u64) {
    use iced_x86::{Decoder, DecoderOptions, Formatter, Instruction, IntelFormatter};
    let mut dec = Decoder::with_ip(bitness, code, start, DecoderOptions::NONE);
    let mut fmt = IntelFormatter::new();
    let mut ins = Instruction::default();
    let mut lines = Vec::new();
    let mut placed = 0;
    while dec.can_decode() {
        dec.decode_out(&mut ins);
        let mut text = String::new();
        if ins.is_invalid() {
            text.push_str("(bad)");
        } else {
            fmt.format(&ins, &mut text);
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

/// The samples of function `name` (the sampled pc's function, as `report`
/// names it), per binary, annotated: user functions from their mapped
/// files, a kernel function from `vmlinux`, an ELF image of the kernel
/// recorded with its symbols (a distribution's debug package, or the build
/// tree's), matched through the recording's kallsyms.
pub fn annotate(
    p: &Profile,
    name: &str,
    symfs: Option<&Path>,
    code: &KernelCode,
) -> Result<Vec<Annotated>> {
    let vmlinux = code.vmlinux.as_deref();
    // (mapped path) → file offset → weight
    let mut per_path: BTreeMap<String, BTreeMap<u64, u64>> = BTreeMap::new();
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
        let ko = find_module(module, code, symfs)?;
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
        let real: PathBuf = match symfs {
            Some(root) => root.join(path.trim_start_matches('/')),
            None => PathBuf::from(&path),
        };
        let data =
            std::fs::read(&real).with_context(|| format!("cannot read {}", real.display()))?;
        let bitness = elf_bitness(&data)
            .with_context(|| format!("{}: cannot disassemble", real.display()))?;
        let elf = ElfSymbols::parse(&data)
            .map_err(|e| anyhow::anyhow!(e))
            .with_context(|| real.display().to_string())?;
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
        let (lines, outside) = disassemble(code, start, bitness, &hits, &BTreeMap::new());
        out.push(Annotated {
            path,
            symbol: name.to_string(),
            start,
            lines,
            total,
            unplaced: unplaced + outside,
            unit: crate::report::shown_event(p).map_or("samples", |e| e.weight_unit()),
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
    let lines = disassemble(code, start, bitness, hits, &BTreeMap::new());
    Ok(placed(p, name, shown.to_string(), start, hits, lines))
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
) -> Annotated {
    Annotated {
        path,
        symbol: name.to_string(),
        start,
        lines,
        total: hits.values().sum(),
        unplaced,
        unit: crate::report::shown_event(p).map_or("samples", |e| e.weight_unit()),
    }
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

/// `NAME.ko` or `NAME.ko.xz` under `dir` (module names use `_` where file
/// names may use `-`), searched depth first; symbolic links to directories
/// (`/lib/modules/R/build`, `source`) are not followed.
fn search_module(dir: &Path, module: &str, depth: u32) -> std::io::Result<Option<PathBuf>> {
    if depth > 8 {
        return Ok(None);
    }
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if depth == 0 => return Err(e),
        Err(_) => return Ok(None),
    };
    let mut subdirs = Vec::new();
    for e in rd.flatten() {
        let Ok(ty) = e.file_type() else { continue };
        let name = e.file_name().to_string_lossy().replace('-', "_");
        if ty.is_dir() {
            subdirs.push(e.path());
        } else if name == format!("{module}.ko") || name == format!("{module}.ko.xz") {
            return Ok(Some(e.path()));
        }
    }
    subdirs.sort();
    for d in subdirs {
        if let Some(p) = search_module(&d, module, depth + 1)? {
            return Ok(Some(p));
        }
    }
    Ok(None)
}

/// Largest module accepted (decompressed).
const MAX_MODULE: usize = 512 << 20;

/// A module's object file, decompressed if it is `.ko.xz`.
fn read_module(path: &Path) -> Result<Vec<u8>> {
    let data = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    match data.get(..6) {
        Some(b"\xfd7zXZ\0") => crate::symbols::xz_decompress(&data, MAX_MODULE)
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display())),
        Some([0x1f, 0x8b, ..]) | Some([0x28, 0xb5, 0x2f, 0xfd, ..]) => bail!(
            "{}: compressed with gzip or zstd, which annotate does not read: decompress it \
             (gunzip, zstd -d) and give the .ko with --modules",
            path.display()
        ),
        _ => Ok(data),
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
    let lines = disassemble(bytes, start, bitness, hits, &notes);
    Ok(placed(p, name, shown.to_string(), start, hits, lines))
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

/// Writes `perf annotate`-like text: percent and samples per instruction.
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
        writeln!(
            out,
            "# {:>7} {:>8}  {:>16}  instruction",
            "percent", f.unit, "address"
        )?;
        for (addr, text, w) in &f.lines {
            if *w > 0 {
                writeln!(
                    out,
                    "  {:>7.2} {:>8}  {:>16x}  {}",
                    100.0 * *w as f64 / f.total.max(1) as f64,
                    w,
                    addr,
                    text
                )?;
            } else {
                writeln!(out, "  {:>7} {:>8}  {:>16x}  {}", "", "", addr, text)?;
            }
        }
        writeln!(out)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_land_on_their_instructions() {
        // push rbp; mov rbp,rsp; nop; pop rbp; ret
        let code = [0x55, 0x48, 0x89, 0xe5, 0x90, 0x5d, 0xc3];
        let hits = BTreeMap::from([(0x1001, 3), (0x1004, 1), (0x1002, 5), (0x2000, 2)]);
        let (lines, unplaced) = disassemble(&code, 0x1000, 64, &hits, &BTreeMap::new());
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
        );
        assert!(lines.iter().any(|l| l.1 == "(bad)"), "{lines:?}");
    }
}
