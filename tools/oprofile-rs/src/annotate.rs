//! `annotate SYMBOL`: samples per instruction over the disassembly of a user
//! function (x86 and x86-64 binaries, disassembled with iced-x86), or of a
//! kernel function given the kernel's image (`--vmlinux`).

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

/// Disassembles `code` (the bytes at `start`) and places the `hits` (vaddr →
/// weight) on its instructions.
pub fn disassemble(
    code: &[u8],
    start: u64,
    bitness: u32,
    hits: &BTreeMap<u64, u64>,
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
    vmlinux: Option<&Path>,
) -> Result<Vec<Annotated>> {
    // (mapped path) → file offset → weight
    let mut per_path: BTreeMap<String, BTreeMap<u64, u64>> = BTreeMap::new();
    let mut kernel = 0u64;
    // Core kernel samples: address → weight; and those in modules.
    let mut kernel_hits: BTreeMap<u64, u64> = BTreeMap::new();
    let mut module: Option<String> = None;
    for s in &p.samples {
        if s.pc.symbol.as_deref() != Some(name) {
            continue;
        }
        if s.pc.kernel {
            kernel += s.weight;
            if s.pc.dso == crate::symbols::KERNEL_DSO {
                *kernel_hits.entry(s.pc.addr).or_default() += s.weight;
            } else {
                module = Some(s.pc.dso.clone());
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
            Some(v) if !kernel_hits.is_empty() => {
                out.push(annotate_kernel(p, name, &kernel_hits, v)?);
            }
            Some(_) => bail!(
                "{name} is a function of the module {}: annotate reads the core kernel's image only",
                module.as_deref().unwrap_or("?")
            ),
            None if per_path.is_empty() => bail!(
                "{name} is a kernel function: annotate needs the kernel's code, and the recording has only \
                 its symbols; give the image it ran with --vmlinux PATH (with symbols: a distribution's \
                 debug package, e.g. /usr/lib/debug/boot/vmlinux-RELEASE, or the build tree's vmlinux)"
            ),
            None => {}
        }
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
        let (lines, outside) = disassemble(code, start, bitness, &hits);
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
    let mut weight_at = vec![0u64; ran.len()];
    for (addr, w) in hits {
        if let Some(i) = ran.iter().rposition(|a| a <= addr) {
            weight_at[i] += w;
        }
    }
    let Some(rank) = (0..ran.len()).max_by_key(|&i| (weight_at[i], std::cmp::Reverse(i))) else {
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
    let total: u64 = hits.values().sum();
    let (lines, outside) = disassemble(code, start, bitness, hits);
    Ok(Annotated {
        path: shown.to_string(),
        symbol: name.to_string(),
        start,
        lines,
        total,
        unplaced: outside,
        unit: crate::report::shown_event(p).map_or("samples", |e| e.weight_unit()),
    })
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
        let (lines, unplaced) = disassemble(&code, 0x1000, 64, &hits);
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
        let (lines, _) = disassemble(&[0xff, 0xff, 0x0f], 0, 64, &BTreeMap::new());
        assert!(lines.iter().any(|l| l.1 == "(bad)"), "{lines:?}");
    }
}
