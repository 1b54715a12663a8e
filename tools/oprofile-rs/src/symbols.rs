//! Symbolisation: kernel addresses through a captured `/proc/kallsyms` (+
//! `/proc/modules`), user addresses through a captured `/proc/<tgid>/maps`
//! and the ELF symbol tables of the mapped files.

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;

/// Name used for the core kernel image.
pub const KERNEL_DSO: &str = "[kernel.kallsyms]";

/// A resolved address.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Frame {
    pub addr: u64,
    /// The symbol, or `None` if the address could not be attributed.
    pub symbol: Option<String>,
    /// Binary or module: `[kernel.kallsyms]`, `[ext4]`, `libc.so.6`, `[vdso]`,
    /// `[unknown]`.
    pub dso: String,
    /// Full path of the mapped file (user frames from a file mapping).
    pub path: Option<String>,
    /// File offset (user frames from a file mapping).
    pub file_offset: Option<u64>,
    pub kernel: bool,
}

impl Frame {
    /// What reports print in the symbol column: the symbol, `[binary]+0xoffset`
    /// for a file mapping without a symbol, or `[unknown] 0xaddr`.
    pub fn name(&self) -> String {
        match (&self.symbol, self.file_offset) {
            (Some(s), _) => s.clone(),
            (None, Some(off)) if self.dso != "[unknown]" => format!("[{}]+{:#x}", self.dso, off),
            _ => format!("[unknown] {:#x}", self.addr),
        }
    }

    /// The function names of this address from the innermost inlined one
    /// to the function that holds the code; `[unknown]` without a symbol.
    pub fn names_inner_first(&self) -> Vec<String> {
        vec![self.symbol.clone().unwrap_or_else(|| "[unknown]".into())]
    }

    fn unknown(addr: u64, kernel: bool) -> Frame {
        Frame {
            addr,
            symbol: None,
            dso: "[unknown]".into(),
            path: None,
            file_offset: None,
            kernel,
        }
    }
}

// ------------------------------------------------------------------ kallsyms

#[derive(Debug, Clone)]
struct KSym {
    addr: u64,
    name: String,
    /// Index into `Kallsyms::modules_names`, `None` for the core kernel.
    module: Option<usize>,
    /// Text symbol (`t T w W`); other symbols only bound text extents.
    text: bool,
}

/// Kernel text symbols from `/proc/kallsyms`, bounded by `/proc/modules`.
#[derive(Debug, Default, Clone)]
pub struct Kallsyms {
    syms: Vec<KSym>,
    module_names: Vec<String>,
    /// Loaded module ranges [start, end) from /proc/modules, by name.
    module_ranges: Vec<(u64, u64, String)>,
    text_count: usize,
}

impl Kallsyms {
    /// Parses `/proc/kallsyms` text (and optionally `/proc/modules` text).
    /// Addresses resolve to text symbols (`t`, `T`, `w`, `W`) only; every
    /// symbol with a non-zero address bounds the extent of the one before it.
    /// Rust names (v0 and legacy) are demangled like ELF symbols ([`demangle`]).
    pub fn parse(kallsyms: &str, modules: Option<&str>) -> Kallsyms {
        let mut k = Kallsyms::default();
        let mut mod_index: HashMap<String, usize> = HashMap::new();
        for line in kallsyms.lines() {
            let mut it = line.split_whitespace();
            let (Some(addr), Some(ty), Some(name)) = (it.next(), it.next(), it.next()) else {
                continue;
            };
            let Ok(addr) = u64::from_str_radix(addr, 16) else {
                continue;
            };
            if addr == 0 {
                continue;
            }
            let module = it
                .next()
                .map(|m| m.trim_start_matches('[').trim_end_matches(']').to_string())
                .map(|m| {
                    let n = mod_index.len();
                    *mod_index.entry(m.clone()).or_insert_with(|| {
                        k.module_names.push(m);
                        n
                    })
                });
            // End markers (`_etext`, `__entry_text_end`...) bound, never attract.
            let marker = name == "_etext"
                || name == "_einittext"
                || (name.starts_with("__") && name.ends_with("_text_end"));
            let text = matches!(ty, "t" | "T" | "w" | "W") && !marker;
            k.syms.push(KSym {
                addr,
                // Rust symbols (the module's own, Rust-for-Linux's) read as in ELF files.
                name: demangle(name),
                module,
                text,
            });
        }
        // Aliases: keep one symbol per address, a text one if there is one.
        k.syms.sort_by_key(|s| (s.addr, !s.text));
        k.syms.dedup_by_key(|s| s.addr);
        k.text_count = k.syms.iter().filter(|s| s.text).count();
        if let Some(m) = modules {
            for line in m.lines() {
                let f: Vec<&str> = line.split_whitespace().collect();
                if f.len() < 6 {
                    continue;
                }
                let (Ok(size), Ok(base)) = (
                    f[1].parse::<u64>(),
                    u64::from_str_radix(f[5].trim_start_matches("0x"), 16),
                ) else {
                    continue;
                };
                if base != 0 && size != 0 {
                    k.module_ranges
                        .push((base, base.saturating_add(size), f[0].to_string()));
                }
            }
        }
        k
    }

    /// Number of usable symbols (0 if kallsyms was restricted: all addresses 0).
    pub fn len(&self) -> usize {
        self.text_count
    }

    pub fn is_empty(&self) -> bool {
        self.text_count == 0
    }

    fn module_range_of(&self, addr: u64) -> Option<&(u64, u64, String)> {
        self.module_ranges
            .iter()
            .find(|(s, e, _)| addr >= *s && addr < *e)
    }

    /// Nearest lower symbol whose extent (up to the next symbol, and within
    /// its module's range when known) contains `addr`.
    pub fn resolve(&self, addr: u64) -> Frame {
        let idx = self.syms.partition_point(|s| s.addr <= addr);
        if idx == 0 {
            return self.unknown_in_module(addr);
        }
        let sym = &self.syms[idx - 1];
        if !sym.text {
            return self.unknown_in_module(addr);
        }
        // Extent: up to the next symbol with a higher address.
        let next = self.syms[idx..].iter().find(|s| s.addr > sym.addr);
        let sym_mod = sym.module.map(|m| self.module_names[m].as_str());
        let mod_end = sym_mod.and_then(|name| {
            self.module_ranges
                .iter()
                .find(|(_, _, n)| n == name)
                .map(|r| r.1)
        });
        // The extent ends at the next symbol of the same image; the last
        // symbol of the core kernel (or of a module without a known range)
        // has no extent, so addresses beyond it are never guessed.
        let end = match next {
            Some(n) if n.module == sym.module => mod_end.map_or(n.addr, |e| e.min(n.addr)),
            _ => match mod_end {
                Some(e) => e,
                None => return self.unknown_in_module(addr),
            },
        };
        // An address inside a loaded module must be attributed to that module.
        if let Some((_, _, m)) = self.module_range_of(addr) {
            if sym_mod != Some(m.as_str()) {
                return self.unknown_in_module(addr);
            }
        }
        if addr >= end {
            return self.unknown_in_module(addr);
        }
        Frame {
            addr,
            symbol: Some(sym.name.clone()),
            dso: match sym_mod {
                Some(m) => format!("[{m}]"),
                None => KERNEL_DSO.to_string(),
            },
            path: None,
            file_offset: None,
            kernel: true,
        }
    }

    fn unknown_in_module(&self, addr: u64) -> Frame {
        let mut f = Frame::unknown(addr, true);
        if let Some((_, _, m)) = self.module_range_of(addr) {
            f.dso = format!("[{m}]");
        }
        f
    }
}

// ------------------------------------------------------------------ maps

/// One line of `/proc/<pid>/maps`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapEntry {
    pub start: u64,
    pub end: u64,
    pub perms: String,
    pub offset: u64,
    pub inode: u64,
    /// Path or pseudo-name (`[vdso]`, `[heap]`), empty for anonymous memory.
    pub path: String,
}

impl MapEntry {
    pub fn is_file(&self) -> bool {
        self.path.starts_with('/')
    }
}

/// Parses `/proc/<pid>/maps` text; malformed lines are ignored.
pub fn parse_maps(text: &str) -> Vec<MapEntry> {
    let mut out = Vec::new();
    for line in text.lines() {
        let mut it = line.splitn(6, ' ');
        let (Some(range), Some(perms), Some(off), Some(_dev), Some(inode)) =
            (it.next(), it.next(), it.next(), it.next(), it.next())
        else {
            continue;
        };
        let path = it.next().unwrap_or("").trim_start().to_string();
        let Some((s, e)) = range.split_once('-') else {
            continue;
        };
        let (Ok(start), Ok(end), Ok(offset)) = (
            u64::from_str_radix(s, 16),
            u64::from_str_radix(e, 16),
            u64::from_str_radix(off, 16),
        ) else {
            continue;
        };
        out.push(MapEntry {
            start,
            end,
            perms: perms.to_string(),
            offset,
            inode: inode.parse().unwrap_or(0),
            path,
        });
    }
    out.sort_by_key(|m| m.start);
    out
}

// ------------------------------------------------------------------ ELF

#[derive(Debug, Clone)]
struct ESym {
    addr: u64,
    size: u64,
    name: String,
}

/// Function symbols of one ELF file plus its loadable segments.
#[derive(Debug, Default)]
pub struct ElfSymbols {
    syms: Vec<ESym>,
    /// (file offset, file size, vaddr) of PT_LOAD segments.
    segments: Vec<(u64, u64, u64)>,
}

impl ElfSymbols {
    /// Parses an ELF image (`.symtab` and `.dynsym`).
    pub fn parse(data: &[u8]) -> Result<ElfSymbols, String> {
        use object::{Object, ObjectSegment, ObjectSymbol, SymbolKind};
        let file = object::File::parse(data).map_err(|e| format!("not an ELF file: {e}"))?;
        let mut syms = Vec::new();
        for s in file.symbols().chain(file.dynamic_symbols()) {
            if s.kind() != SymbolKind::Text || s.is_undefined() || s.address() == 0 {
                continue;
            }
            let Ok(name) = s.name() else { continue };
            if name.is_empty() {
                continue;
            }
            syms.push(ESym {
                addr: s.address(),
                size: s.size(),
                name: demangle(name),
            });
        }
        // Sort by address, larger size first so that the best name of aliases wins.
        syms.sort_by(|a, b| a.addr.cmp(&b.addr).then(b.size.cmp(&a.size)));
        syms.dedup_by_key(|s| s.addr);
        let mut segments = Vec::new();
        for seg in file.segments() {
            let (off, size) = seg.file_range();
            segments.push((off, size, seg.address()));
        }
        Ok(ElfSymbols { syms, segments })
    }

    pub fn len(&self) -> usize {
        self.syms.len()
    }

    pub fn is_empty(&self) -> bool {
        self.syms.is_empty()
    }

    /// File offset → virtual address (through the program headers).
    pub fn offset_to_vaddr(&self, off: u64) -> Option<u64> {
        self.segments
            .iter()
            .find(|(o, sz, _)| off >= *o && off - *o < *sz)
            .map(|(o, _, va)| (off - o).wrapping_add(*va))
    }

    /// Symbol containing the virtual address `vaddr`: within its size when it
    /// has one, else up to the next symbol.
    pub fn lookup(&self, vaddr: u64) -> Option<&str> {
        let idx = self.syms.partition_point(|s| s.addr <= vaddr);
        let s = self.syms.get(idx.checked_sub(1)?)?;
        let inside = if s.size > 0 {
            vaddr - s.addr < s.size
        } else {
            self.syms.get(idx).is_some_and(|n| vaddr < n.addr)
        };
        inside.then_some(s.name.as_str())
    }
}

/// Demangles Rust (legacy and v0) symbols; other names are returned as-is.
pub fn demangle(name: &str) -> String {
    match rustc_demangle::try_demangle(name) {
        Ok(d) => format!("{d:#}"),
        Err(_) => name.to_string(),
    }
}

// ------------------------------------------------------------------ resolver

/// Resolves sample addresses with the captured side-car data.
pub struct Resolver {
    kallsyms: Option<Kallsyms>,
    maps: HashMap<u32, Vec<MapEntry>>,
    /// Prefix for ELF paths (like perf's `--symfs`).
    symfs: Option<PathBuf>,
    elf_cache: RefCell<HashMap<String, Option<Rc<ElfSymbols>>>>,
    cache: RefCell<HashMap<(bool, u32, u64), Rc<Frame>>>,
    warnings: RefCell<Vec<String>>,
    warned_tgids: RefCell<std::collections::HashSet<u32>>,
}

impl Resolver {
    pub fn new(
        kallsyms: Option<Kallsyms>,
        maps: HashMap<u32, Vec<MapEntry>>,
        symfs: Option<PathBuf>,
    ) -> Resolver {
        Resolver {
            kallsyms,
            maps,
            symfs,
            elf_cache: RefCell::default(),
            cache: RefCell::default(),
            warnings: RefCell::default(),
            warned_tgids: RefCell::default(),
        }
    }

    /// Warnings about missing data (unreadable binaries, missing maps), once each.
    pub fn take_warnings(&self) -> Vec<String> {
        std::mem::take(&mut self.warnings.borrow_mut())
    }

    /// Resolves a kernel (`kernel == true`) or user address of process `tgid`.
    pub fn resolve(&self, kernel: bool, tgid: u32, addr: u64) -> Rc<Frame> {
        let key = (kernel, if kernel { 0 } else { tgid }, addr);
        if let Some(f) = self.cache.borrow().get(&key) {
            return f.clone();
        }
        let f = Rc::new(if kernel {
            self.resolve_kernel(addr)
        } else {
            self.resolve_user(tgid, addr)
        });
        self.cache.borrow_mut().insert(key, f.clone());
        f
    }

    fn resolve_kernel(&self, addr: u64) -> Frame {
        match &self.kallsyms {
            Some(k) => k.resolve(addr),
            None => Frame::unknown(addr, true),
        }
    }

    fn resolve_user(&self, tgid: u32, addr: u64) -> Frame {
        let Some(maps) = self.maps.get(&tgid) else {
            if self.warned_tgids.borrow_mut().insert(tgid) {
                self.warnings.borrow_mut().push(format!(
                    "no maps captured for pid {tgid}: its user addresses are [unknown]"
                ));
            }
            return Frame::unknown(addr, false);
        };
        let idx = maps.partition_point(|m| m.start <= addr);
        let Some(m) = idx
            .checked_sub(1)
            .map(|i| &maps[i])
            .filter(|m| addr < m.end)
        else {
            return Frame::unknown(addr, false);
        };
        if !m.is_file() {
            let dso = if m.path.is_empty() {
                "[anon]".to_string()
            } else {
                m.path.clone()
            };
            return Frame {
                addr,
                symbol: None,
                dso,
                path: None,
                file_offset: None,
                kernel: false,
            };
        }
        let path = m.path.trim_end_matches(" (deleted)").to_string();
        let off = (addr - m.start).wrapping_add(m.offset);
        let dso = Path::new(&path)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| path.clone());
        let symbol = self.elf(&path).and_then(|elf| {
            elf.offset_to_vaddr(off)
                .and_then(|va| elf.lookup(va).map(str::to_string))
        });
        Frame {
            addr,
            symbol,
            dso,
            path: Some(path),
            file_offset: Some(off),
            kernel: false,
        }
    }

    fn elf(&self, path: &str) -> Option<Rc<ElfSymbols>> {
        if let Some(e) = self.elf_cache.borrow().get(path) {
            return e.clone();
        }
        let real = match &self.symfs {
            Some(root) => root.join(path.trim_start_matches('/')),
            None => PathBuf::from(path),
        };
        let e = match std::fs::read(&real) {
            Ok(data) => match ElfSymbols::parse(&data) {
                Ok(e) => Some(Rc::new(e)),
                Err(err) => {
                    self.warnings
                        .borrow_mut()
                        .push(format!("{}: {err}", real.display()));
                    None
                }
            },
            Err(err) => {
                self.warnings.borrow_mut().push(format!(
                    "cannot read {}: {err}: its addresses are shown as [binary]+offset",
                    real.display()
                ));
                None
            }
        };
        self.elf_cache
            .borrow_mut()
            .insert(path.to_string(), e.clone());
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KALLSYMS: &str = "\
ffffffff81000000 T _text
ffffffff81000000 T startup_64
ffffffff81001000 t do_one
ffffffff81002000 T do_two
ffffffff81002800 D some_data
ffffffff81003000 T _etext
ffffffffc0001000 t mod_fn_a\t[mymod]
ffffffffc0001100 t mod_fn_b\t[mymod]
";
    const MODULES: &str = "mymod 8192 0 - Live 0xffffffffc0001000 (O)\n";

    #[test]
    fn kallsyms_nearest_lower_within_extent() {
        let k = Kallsyms::parse(KALLSYMS, Some(MODULES));
        assert_eq!(
            k.resolve(0xffffffff81001234).symbol.as_deref(),
            Some("do_one")
        );
        assert_eq!(
            k.resolve(0xffffffff81001000).symbol.as_deref(),
            Some("do_one")
        );
        assert_eq!(
            k.resolve(0xffffffff81002100).symbol.as_deref(),
            Some("do_two")
        );
        assert_eq!(k.resolve(0xffffffff81002100).dso, KERNEL_DSO);
        // A data symbol ends the extent of the text symbol before it.
        assert_eq!(k.resolve(0xffffffff81002900).symbol, None);
        assert_eq!(k.len(), 5);
        // Before the first symbol, beyond _etext (the last core symbol) → unknown.
        assert_eq!(k.resolve(0xffffffff80000000).symbol, None);
        let f = k.resolve(0xffffffff81003010);
        assert_eq!(f.symbol, None);
        assert_eq!(f.name(), "[unknown] 0xffffffff81003010");
        // Module symbols; the last one is bounded by the module's size.
        let f = k.resolve(0xffffffffc0001050);
        assert_eq!(
            (f.symbol.as_deref(), f.dso.as_str()),
            (Some("mod_fn_a"), "[mymod]")
        );
        // The last symbol of a module extends to the module's end (/proc/modules).
        assert_eq!(
            k.resolve(0xffffffffc0001200).symbol.as_deref(),
            Some("mod_fn_b")
        );
        assert_eq!(k.resolve(0xffffffffc0003000).symbol, None);
        assert_eq!(k.resolve(0xffffffffc0009000).symbol, None);
        // Without /proc/modules, the last module symbol has no extent.
        let k = Kallsyms::parse(KALLSYMS, None);
        assert_eq!(k.resolve(0xffffffffc0001200).symbol, None);
        assert_eq!(
            k.resolve(0xffffffffc0001050).symbol.as_deref(),
            Some("mod_fn_a")
        );
    }

    #[test]
    fn kallsyms_rust_symbols_are_demangled() {
        let k = Kallsyms::parse(
            "\
ffffffff81000000 T _text
ffffffff81001000 T _RNvMNtCseXaqAx3fgx2_8oprofile4taskNtB2_4Task7current
ffffffff81002000 t _ZN4core3fmt5write17h0123456789abcdefE
ffffffff81003000 T do_syscall_64
ffffffff81004000 T _etext
ffffffffc0001000 t _RNvNtCseXaqAx3fgx2_8oprofile13ringbuf_kunit13writer_thread\t[oprofile_rs]
ffffffffc0001100 t _RINvNtCseXaqAx3fgx2_8oprofile7ringbuf5drainNtB2_6SampleEB4_\t[oprofile_rs]
ffffffffc0001200 t _RNotvalid\t[oprofile_rs]
",
            Some("oprofile_rs 8192 0 - Live 0xffffffffc0001000 (O)\n"),
        );
        let name = |addr| k.resolve(addr).symbol.unwrap();
        // v0, hash-free form.
        assert_eq!(
            name(0xffffffffc0001010),
            "oprofile::ringbuf_kunit::writer_thread"
        );
        assert_eq!(k.resolve(0xffffffffc0001010).dso, "[oprofile_rs]");
        assert_eq!(
            name(0xffffffffc0001110),
            "oprofile::ringbuf::drain::<oprofile::ringbuf::Sample>"
        );
        assert_eq!(name(0xffffffff81001010), "<oprofile::task::Task>::current");
        // Legacy mangling, without the hash.
        assert_eq!(name(0xffffffff81002010), "core::fmt::write");
        // C names and names that only look mangled are kept as they are.
        assert_eq!(name(0xffffffff81003010), "do_syscall_64");
        assert_eq!(name(0xffffffffc0001210), "_RNotvalid");
        // The `_etext` marker is still recognised (it is not mangled).
        assert_eq!(k.resolve(0xffffffff81004010).symbol, None);
    }

    #[test]
    fn kallsyms_restricted_has_no_symbols() {
        let k = Kallsyms::parse("0000000000000000 T _text\n0000000000000000 T foo\n", None);
        assert!(k.is_empty());
        assert_eq!(k.resolve(0xffffffff81000000).symbol, None);
    }

    #[test]
    fn maps_parsing() {
        let m = parse_maps(
            "55d0c0000000-55d0c0001000 r--p 00000000 08:01 1234     /usr/bin/my prog\n\
             55d0c0001000-55d0c0002000 r-xp 00001000 08:01 1234     /usr/bin/my prog\n\
             7ffd1000-7ffd3000 r-xp 00000000 00:00 0                  [vdso]\n\
             7f0000000000-7f0000001000 rw-p 00000000 00:00 0 \n\
             garbage\n",
        );
        assert_eq!(m.len(), 4);
        let prog = m.iter().find(|e| e.offset == 0x1000).unwrap();
        assert_eq!(prog.path, "/usr/bin/my prog");
        assert!(m.iter().any(|e| e.path == "[vdso]"));
        assert!(m.iter().any(|e| e.path.is_empty()));
    }

    #[test]
    fn rust_demangling() {
        assert_eq!(
            demangle("_ZN4core3fmt5write17h0123456789abcdefE"),
            "core::fmt::write"
        );
        assert_eq!(
            demangle("_RNvNtCseXaqAx3fgx2_8oprofile13ringbuf_kunit13writer_thread"),
            "oprofile::ringbuf_kunit::writer_thread"
        );
        assert_eq!(demangle("main"), "main");
    }
}
