//! Symbolisation: kernel addresses through a captured `/proc/kallsyms` (+
//! `/proc/modules`), user addresses through a captured `/proc/<tgid>/maps`
//! and the ELF symbol tables of the mapped files.

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use crate::mapevents::{TimedMap, Timeline};
use crate::maps::MapEntry;

/// Name used for the core kernel image.
pub const KERNEL_DSO: &str = "[kernel.kallsyms]";

/// Name (symbol and binary) of the frame that ends a user call stack cut
/// where an address lies in no executable mapping of the process
/// ([`Frame::truncated`]).
pub const TRUNCATED: &str = "[truncated]";

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
    /// Source location in `symbol` (DWARF): of the address, or with inlined
    /// functions, of the call to the outermost of them.
    pub srcline: Option<SrcLine>,
    /// Functions inlined at this address, outermost first, each with the
    /// source location in it (the last one's is the address's own).
    pub inlined: Vec<(String, Option<SrcLine>)>,
    /// The mapping the address is in (user frames): start, end, file offset.
    pub mapping: Option<(u64, u64, u64)>,
    /// Build-id of the mapped file (hex), where it has one.
    pub build_id: Option<Rc<str>>,
    /// The address relative to its image, as Breakpad, samply and the
    /// Firefox Profiler count them: for an ELF file its virtual address
    /// less its first loadable segment's, for the vDSO the offset in its
    /// mapping, for the core kernel the address less `_text`'s, for a
    /// module less the module's start. Of the address the frame is named
    /// after: a user return address's call (`addr - 1`). `None` where the
    /// image is not known (the binary could not be read, anonymous memory).
    pub rel_addr: Option<u64>,
    /// The symbol naming the frame, relative to the image as
    /// [`Frame::rel_addr`]: its start and its size (its extent up to the
    /// next symbol where it has none).
    pub symbol_rel: Option<(u64, u64)>,
}

/// A DWARF source location.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SrcLine {
    pub file: String,
    pub line: u32,
}

impl std::fmt::Display for SrcLine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.file, self.line)
    }
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

    /// Whether this is a kernel address without a symbol (no kallsyms, or
    /// outside every symbol of its image).
    pub fn is_unknown_kernel(&self) -> bool {
        self.kernel && self.symbol.is_none()
    }

    /// The function this frame is in for the views that sum the samples of
    /// each function (folded stacks, flame graphs, pprof's functions): as
    /// [`Frame::name`], except that kernel addresses without a symbol are
    /// one function per image, as perf's flame graphs have them, not one
    /// per address: `[unknown]` in the core kernel (or where no module
    /// holds the address), `[unknown] [NAME]` in module NAME. The views of
    /// addresses keep them (`script`, `annotate`, pprof's locations).
    pub fn function_name(&self) -> String {
        if self.is_unknown_kernel() {
            return match self.dso.as_str() {
                "[unknown]" | KERNEL_DSO => "[unknown]".into(),
                m => format!("[unknown] {m}"),
            };
        }
        self.name()
    }

    /// The function names of this address from the innermost inlined one
    /// to the function that holds the code; `[unknown]` without a symbol.
    pub fn names_inner_first(&self) -> Vec<String> {
        let mut v: Vec<String> = self.inlined.iter().rev().map(|(n, _)| n.clone()).collect();
        v.push(self.symbol.clone().unwrap_or_else(|| "[unknown]".into()));
        v
    }

    /// The source location of the address itself (innermost inlined
    /// function's, else the function's).
    pub fn leaf_srcline(&self) -> Option<&SrcLine> {
        match self.inlined.last() {
            Some((_, l)) => l.as_ref(),
            None => self.srcline.as_ref(),
        }
    }

    /// The frame that ends a user call stack at `addr`, a "return
    /// address" in no executable mapping of the process at the sample's
    /// time: what a frame-pointer walk through code built without frame
    /// pointers reads (a saved `rbp` used as a general register). The stack
    /// is cut there rather than padded with the garbage beyond. At `addr`
    /// 0: the stack copy ended before the outermost frame, and no
    /// frame-pointer chain went on from there.
    pub fn truncated(addr: u64) -> Frame {
        let mut f = Frame::unknown(addr, false);
        f.symbol = Some(TRUNCATED.into());
        f.dso = TRUNCATED.into();
        f
    }

    /// Whether this is the frame that ends a cut user call stack.
    pub fn is_truncated(&self) -> bool {
        !self.kernel && self.dso == TRUNCATED
    }

    fn unknown(addr: u64, kernel: bool) -> Frame {
        Frame {
            addr,
            symbol: None,
            dso: "[unknown]".into(),
            path: None,
            file_offset: None,
            kernel,
            srcline: None,
            inlined: Vec::new(),
            mapping: None,
            build_id: None,
            rel_addr: None,
            symbol_rel: None,
        }
    }
}

// ------------------------------------------------------------------ kallsyms

/// The module index of a core kernel symbol ([`KSym::module`]).
const CORE: u32 = u32::MAX;

/// A symbol of `/proc/kallsyms`: 24 bytes, its name in [`Kallsyms::names`]
/// (a capture of a distribution kernel has 200,000 of them, and is parsed
/// by every command that reads a recording).
#[derive(Debug, Clone, Copy)]
struct KSym {
    addr: u64,
    /// The name as captured (mangled), at `names[start..start + len]`; empty
    /// for other symbols than text ones, which are never named.
    name: (u32, u32),
    /// Index into `Kallsyms::module_names`, [`CORE`] for the core kernel.
    module: u32,
    /// Text symbol (`t T w W`); other symbols only bound text extents.
    text: bool,
}

/// Kernel text symbols from `/proc/kallsyms`, bounded by `/proc/modules`.
#[derive(Debug, Default, Clone)]
pub struct Kallsyms {
    syms: Vec<KSym>,
    /// The text symbols' names as captured, one after the other: one
    /// allocation, not one per symbol. Demangled where they are looked up.
    names: String,
    module_names: Vec<String>,
    /// Loaded module ranges [start, end) from /proc/modules, by name.
    module_ranges: Vec<(u64, u64, String)>,
    /// The core kernel's image: from `_text` (else its lowest text
    /// symbol) to its last symbol.
    core_image: Option<(u64, u64)>,
    text_count: usize,
    /// Build-ids (hex) of the core kernel (key `kernel`) and of modules (by
    /// name), from the side-car's `build-ids`.
    build_ids: HashMap<String, Rc<str>>,
}

/// A hexadecimal number of 1 to 16 digits (kallsyms' addresses), without
/// `u64::from_str_radix`'s per-digit checks of a radix and a sign.
fn parse_hex(s: &str) -> Option<u64> {
    if s.is_empty() || s.len() > 16 {
        return None;
    }
    s.bytes().try_fold(0u64, |n, c| {
        let d = match c {
            b'0'..=b'9' => c - b'0',
            b'a'..=b'f' => c - b'a' + 10,
            b'A'..=b'F' => c - b'A' + 10,
            _ => return None,
        };
        Some(n << 4 | u64::from(d))
    })
}

/// Whether [`demangle`] may change `name`: the prefixes of Rust's legacy
/// and v0 manglings (`rustc_demangle`) and of C++'s.
fn may_be_mangled(name: &str) -> bool {
    ["_Z", "ZN", "__Z", "_R", "R", "__R"]
        .iter()
        .any(|p| name.starts_with(p))
}

impl Kallsyms {
    /// Parses `/proc/kallsyms` text (and optionally `/proc/modules` text).
    /// Addresses resolve to text symbols (`t`, `T`, `w`, `W`) only; every
    /// symbol with a non-zero address bounds the extent of the one before it.
    /// Rust names (v0 and legacy) are demangled like ELF symbols ([`demangle`]).
    pub fn parse(kallsyms: &str, modules: Option<&str>) -> Kallsyms {
        let mut k = Kallsyms::default();
        let mut mod_index: HashMap<&str, u32> = HashMap::new();
        k.syms.reserve(kallsyms.len() / 40);
        for line in kallsyms.split('\n') {
            let mut it = line.split_ascii_whitespace();
            let (Some(addr), Some(ty), Some(name)) = (it.next(), it.next(), it.next()) else {
                continue;
            };
            let Some(addr) = parse_hex(addr) else {
                continue;
            };
            if addr == 0 {
                continue;
            }
            let module = match it.next() {
                None => CORE,
                Some(m) => {
                    let m = m.trim_start_matches('[').trim_end_matches(']');
                    match mod_index.get(m) {
                        Some(&i) => i,
                        None => {
                            let i = u32::try_from(k.module_names.len()).unwrap_or(CORE - 1);
                            k.module_names.push(m.to_string());
                            mod_index.insert(m, i);
                            i
                        }
                    }
                }
            };
            // End markers (`_etext`, `__entry_text_end`...) bound, never attract.
            let marker = name == "_etext"
                || name == "_einittext"
                || (name.starts_with("__") && name.ends_with("_text_end"));
            let text = matches!(ty, "t" | "T" | "w" | "W") && !marker;
            let name = if text { k.push_name(name) } else { (0, 0) };
            k.syms.push(KSym {
                addr,
                name,
                module,
                text,
            });
        }
        k.sort_dedup();
        k.core_image = k.find_core_image();
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
            k.cap_module_ranges();
        }
        k
    }

    /// The core kernel's addresses: from `_text` (the base samply and
    /// perf count its relative addresses from), else from its lowest text
    /// symbol, to its last symbol of any kind.
    fn find_core_image(&self) -> Option<(u64, u64)> {
        let core = || self.syms.iter().filter(|s| s.module == CORE);
        let base = core()
            .find(|s| s.text && self.raw_name(s) == "_text")
            .or_else(|| core().find(|s| s.text))?
            .addr;
        let last = core().map(|s| s.addr).max()?;
        Some((base, last))
    }

    /// `addr` relative to the image holding it: the module whose range
    /// holds it, else the core kernel when within its symbols.
    fn rel_addr(&self, addr: u64) -> Option<u64> {
        if let Some((s, _, _)) = self.module_range_of(addr) {
            return Some(addr - s);
        }
        let (base, last) = self.core_image?;
        (addr >= base && addr <= last).then(|| addr - base)
    }

    /// Appends `name` to `names`: its place there (empty past 4 GiB of names).
    fn push_name(&mut self, name: &str) -> (u32, u32) {
        match (u32::try_from(self.names.len()), u32::try_from(name.len())) {
            (Ok(start), Ok(len)) if start.checked_add(len).is_some() => {
                self.names.push_str(name);
                (start, len)
            }
            _ => (0, 0),
        }
    }

    /// The name of `s` as captured (mangled).
    fn raw_name(&self, s: &KSym) -> &str {
        let (start, len) = (s.name.0 as usize, s.name.1 as usize);
        self.names.get(start..start + len).unwrap_or("")
    }

    /// The name of module index `m` (`None` for the core kernel).
    fn module_name(&self, m: u32) -> Option<&str> {
        if m == CORE {
            None
        } else {
            self.module_names.get(m as usize).map(String::as_str)
        }
    }

    /// Sorts by address and keeps one symbol per address, a text one if
    /// there is one (aliases), the first captured among equals.
    fn sort_dedup(&mut self) {
        self.syms.sort_by_key(|s| (s.addr, !s.text));
        self.syms.dedup_by_key(|s| s.addr);
        self.text_count = self.syms.iter().filter(|s| s.text).count();
    }

    /// Ends every module range at the next module's start: `/proc/modules`
    /// gives a module's text address and its whole size, and since Linux
    /// 6.4 its data lies elsewhere (a region per memory type), so the text
    /// of the module loaded after it can start within that size.
    fn cap_module_ranges(&mut self) {
        self.module_ranges.sort_by_key(|r| r.0);
        let starts: Vec<u64> = self.module_ranges.iter().map(|r| r.0).collect();
        for (i, r) in self.module_ranges.iter_mut().enumerate() {
            if let Some(&next) = starts
                .get(i + 1..)
                .and_then(|n| n.iter().find(|&&n| n > r.0))
            {
                r.1 = r.1.min(next);
            }
        }
    }

    /// The addresses from `start` to the last symbol of `module` in
    /// [`start`, `end`): the part of a module range its symbols show.
    fn symbol_span(&self, start: u64, end: u64, module: &str) -> (u64, u64) {
        let last = self
            .syms
            .iter()
            .filter(|k| {
                k.addr >= start && k.addr < end && self.module_name(k.module) == Some(module)
            })
            .map(|k| k.addr)
            .max()
            .unwrap_or(start);
        (start, last)
    }

    /// The addresses of the core kernel's (not a module's) text symbols
    /// named `name`, in address order (static functions may share a name).
    pub fn core_text_addresses(&self, name: &str) -> Vec<u64> {
        self.text_addresses(None, name)
    }

    /// The addresses of the text symbols named `name` of `module` (`None`:
    /// the core kernel), in address order.
    pub fn text_addresses(&self, module: Option<&str>, name: &str) -> Vec<u64> {
        self.syms
            .iter()
            .filter(|s| {
                s.text && s.addr != 0 && self.module_name(s.module) == module && {
                    let raw = self.raw_name(s);
                    raw == name || (may_be_mangled(raw) && demangle(raw) == name)
                }
            })
            .map(|s| s.addr)
            .collect()
    }

    /// Adds the modules of `later` (kallsyms and modules captured at the
    /// end of the recording) that `self` (the start's) lacks: those loaded
    /// while recording (and those reloaded elsewhere), so that their
    /// samples are named. A module is added with its symbols only where the
    /// addresses its symbols span overlap those of no module `self` knows:
    /// an address both a module unloaded while recording and one loaded
    /// after it used keeps the earlier one's name. Returns the names of the
    /// modules added and of those left out for an overlap.
    pub fn add_later_modules(&mut self, later: &Kallsyms) -> (Vec<String>, Vec<String>) {
        let (mut added, mut overlapping) = (Vec::new(), Vec::new());
        let known: Vec<(u64, u64)> = self
            .module_ranges
            .iter()
            .map(|(a, b, n)| self.symbol_span(*a, *b, n))
            .collect();
        for (s, e, name) in &later.module_ranges {
            if self
                .module_ranges
                .iter()
                .any(|(a, _, n)| a == s && n == name)
            {
                continue;
            }
            let (s0, s1) = later.symbol_span(*s, *e, name);
            if known.iter().any(|(a, b)| s0 <= *b && *a <= s1) {
                overlapping.push(name.clone());
                continue;
            }
            let index = match self.module_names.iter().position(|n| n == name) {
                Some(i) => u32::try_from(i).unwrap_or(CORE - 1),
                None => {
                    self.module_names.push(name.clone());
                    u32::try_from(self.module_names.len() - 1).unwrap_or(CORE - 1)
                }
            };
            for k in &later.syms {
                let of_it = later.module_name(k.module) == Some(name.as_str());
                if of_it && k.addr >= *s && k.addr < *e {
                    let name = if k.text {
                        self.push_name(later.raw_name(k))
                    } else {
                        (0, 0)
                    };
                    self.syms.push(KSym {
                        name,
                        module: index,
                        ..*k
                    });
                }
            }
            self.module_ranges.push((*s, *e, name.clone()));
            added.push(name.clone());
        }
        self.cap_module_ranges();
        self.sort_dedup();
        (added, overlapping)
    }

    /// Sets the build-ids of the kernel (`kernel`) and of its modules (by
    /// name) that frames of them carry.
    pub fn set_build_ids(&mut self, ids: &HashMap<String, String>) {
        self.build_ids = ids
            .iter()
            .map(|(k, v)| (k.clone(), Rc::from(v.as_str())))
            .collect();
    }

    /// The build-id of the image named `module` (`None`: the core kernel).
    fn build_id_of(&self, module: Option<&str>) -> Option<Rc<str>> {
        self.build_ids.get(module.unwrap_or("kernel")).cloned()
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
        let sym_mod = self.module_name(sym.module);
        // The range of the module holding the symbol (a module reloaded
        // while recording has two).
        let mod_end = sym_mod.and_then(|name| {
            self.module_ranges
                .iter()
                .find(|(s, e, n)| n == name && sym.addr >= *s && sym.addr < *e)
                .or_else(|| self.module_ranges.iter().find(|(_, _, n)| n == name))
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
        let rel_addr = self.rel_addr(addr);
        Frame {
            addr,
            rel_addr,
            symbol_rel: rel_addr
                .and_then(|r| Some((r.checked_sub(addr - sym.addr)?, end - sym.addr))),
            symbol: Some(demangle(self.raw_name(sym))),
            dso: match sym_mod {
                Some(m) => format!("[{m}]"),
                None => KERNEL_DSO.to_string(),
            },
            path: None,
            file_offset: None,
            kernel: true,
            srcline: None,
            inlined: Vec::new(),
            mapping: None,
            build_id: self.build_id_of(sym_mod),
        }
    }

    fn unknown_in_module(&self, addr: u64) -> Frame {
        let mut f = Frame::unknown(addr, true);
        f.rel_addr = self.rel_addr(addr);
        if let Some((_, _, m)) = self.module_range_of(addr) {
            f.dso = format!("[{m}]");
            f.build_id = self.build_id_of(Some(m));
        }
        f
    }
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

    /// Adds the function symbols of `other` (same addresses: e.g. the
    /// mini-debuginfo of this file, or its separate debug file).
    pub fn merge(&mut self, other: ElfSymbols) {
        self.syms.extend(other.syms);
        self.syms
            .sort_by(|a, b| a.addr.cmp(&b.addr).then(b.size.cmp(&a.size)));
        self.syms.dedup_by_key(|s| s.addr);
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

    /// Virtual address → file offset (through the program headers).
    pub fn vaddr_to_offset(&self, vaddr: u64) -> Option<u64> {
        self.segments
            .iter()
            .find(|(_, sz, va)| vaddr >= *va && vaddr - *va < *sz)
            .map(|(o, _, va)| o + (vaddr - va))
    }

    /// The symbol containing `vaddr`: its start, its extent (its size, else up
    /// to the next symbol, 0 for the last one without a size) and its name.
    pub fn containing(&self, vaddr: u64) -> Option<(u64, u64, &str)> {
        let idx = self.syms.partition_point(|s| s.addr <= vaddr);
        let s = self.syms.get(idx.checked_sub(1)?)?;
        let next = self.syms.get(idx).map(|n| n.addr - s.addr);
        let extent = if s.size > 0 {
            s.size
        } else {
            next.unwrap_or(0)
        };
        (vaddr - s.addr < extent).then_some((s.addr, extent, s.name.as_str()))
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

/// Demangles Rust (legacy and v0, without the hash) and C++ (Itanium ABI)
/// symbols; other names are returned as they are.
pub fn demangle(name: &str) -> String {
    if let Ok(d) = rustc_demangle::try_demangle(name) {
        return format!("{d:#}");
    }
    if name.starts_with("_Z") {
        if let Some(d) = cpp_demangle::Symbol::new(name)
            .ok()
            .and_then(|s| s.demangle().ok())
        {
            return d;
        }
    }
    name.to_string()
}

// ------------------------------------------------------------------ perf maps

/// A JIT's `/tmp/perf-PID.map`: `START SIZE NAME` lines (hex), as perf reads
/// them. A later line wins where ranges overlap (code was replaced).
#[derive(Debug, Default, Clone)]
pub struct PerfMap {
    entries: Vec<(u64, u64, String)>,
}

impl PerfMap {
    pub fn parse(text: &str) -> PerfMap {
        let hex = |v: &str| u64::from_str_radix(v.trim_start_matches("0x"), 16).ok();
        let entries = text
            .lines()
            .filter_map(|l| {
                let mut it = l.splitn(3, ' ');
                let (start, size, name) = (hex(it.next()?)?, hex(it.next()?)?, it.next()?);
                Some((
                    start,
                    start.saturating_add(size),
                    name.trim_end().to_string(),
                ))
            })
            .collect();
        PerfMap { entries }
    }

    pub fn lookup(&self, addr: u64) -> Option<&str> {
        self.entries
            .iter()
            .rev()
            .find(|(s, e, _)| addr >= *s && addr < *e)
            .map(|(_, _, n)| n.as_str())
    }
}

// ------------------------------------------------------------------ resolver

/// How user-space addresses are symbolised.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum SymbolizerKind {
    /// blazesym: DWARF (file:line, inlined functions) where the binary or its
    /// separate debug file has it, else the ELF symbol tables.
    #[default]
    Dwarf,
    /// The ELF symbol tables (`.symtab`, `.dynsym`) of the mapped file only:
    /// the tool's first implementation (faster, no lines, no debug files).
    Symtab,
}

/// Where and how the [`Resolver`] looks for symbols beyond the maps.
#[derive(Debug, Clone)]
pub struct ResolverOptions {
    pub kind: SymbolizerKind,
    /// Directories of separate debug files (`.gnu_debuglink` targets, and
    /// `.build-id/xx/yyyy.debug`), after `--symfs` is applied.
    pub debug_dirs: Vec<PathBuf>,
    /// tgid → its JIT perf map text, as captured by `record`.
    pub perf_maps: HashMap<u32, String>,
    /// Where perf maps not captured are looked for (`DIR/perf-PID.map`):
    /// `/tmp`, as perf; `None` for none.
    pub perf_map_dir: Option<PathBuf>,
    /// tgid → root directory its binaries are read under (`/proc/PID/root`
    /// for processes of another mount namespace).
    pub roots: HashMap<u32, PathBuf>,
    /// Where binaries and debug files are found by build-id (an archive,
    /// debuginfod) besides their paths.
    pub locator: Rc<crate::locate::Locator>,
}

impl Default for ResolverOptions {
    fn default() -> Self {
        ResolverOptions {
            kind: SymbolizerKind::Dwarf,
            debug_dirs: vec!["/usr/lib/debug".into(), "/lib/debug".into()],
            perf_maps: HashMap::new(),
            perf_map_dir: Some("/tmp".into()),
            roots: HashMap::new(),
            locator: Rc::default(),
        }
    }
}

/// A binary the resolver looked for: for `archive`, which files the
/// analyses read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsedBinary {
    /// The path it was mapped at.
    pub mapped: String,
    /// The build-id the recording gives it (the kernel's record, an
    /// archive's manifest), if any.
    pub recorded: Option<String>,
    /// The file read, if one was found.
    pub file: Option<PathBuf>,
    /// That file's build-id.
    pub build_id: Option<String>,
}

/// What the resolver knows about one binary (by the path it is read at).
struct Binary {
    real: PathBuf,
    /// (file offset, file size, vaddr) of PT_LOAD segments.
    segments: Vec<(u64, u64, u64)>,
    /// A separate debug file found by build-id where the binary has neither
    /// DWARF nor a `.gnu_debuglink` (blazesym follows debug links itself).
    debug_file: Option<PathBuf>,
    /// `Symtab` mode: the symbol tables.
    symtab: Option<ElfSymbols>,
    /// When it has no `.symtab` but a `.gnu_debugdata`: its own `.dynsym`
    /// plus the symbols of that mini-debuginfo (if it decompresses), for
    /// addresses nothing else names. blazesym 0.2 fails on such a file (its
    /// `xz` feature, C liblzma, is not enabled), `.dynsym` included.
    mini: Option<ElfSymbols>,
    /// Hex build-id.
    build_id: Option<Rc<str>>,
}

impl Binary {
    fn offset_to_vaddr(&self, off: u64) -> Option<u64> {
        self.segments
            .iter()
            .find(|(o, sz, _)| off >= *o && off - *o < *sz)
            .map(|(o, _, va)| (off - o).wrapping_add(*va))
    }
}

/// Largest `.gnu_debugdata` section read (xz-compressed).
const MINI_DEBUGINFO_MAX_XZ: u64 = 64 << 20;
/// Largest mini-debuginfo ELF decompressed from it (Fedora's are a few
/// hundred KiB, libc's included).
const MINI_DEBUGINFO_MAX_ELF: usize = 256 << 20;

/// A `Write` that refuses to hold more than `limit` bytes.
struct Bounded {
    buf: Vec<u8>,
    limit: usize,
}

impl std::io::Write for Bounded {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        if self.buf.len().saturating_add(data.len()) > self.limit {
            return Err(std::io::Error::other(format!(
                "more than {} MiB decompressed",
                self.limit >> 20
            )));
        }
        self.buf.extend_from_slice(data);
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The mini-debuginfo of an ELF image, as Fedora and RHEL ship it: the
/// xz-compressed ELF in its `.gnu_debugdata` section, whose `.symtab` holds
/// the function symbols the stripped binary lacks. `Ok(None)` when it has
/// no such section; an error when the section is too large, not xz, or
/// does not decompress (never a panic on garbage).
pub fn mini_debuginfo(data: &[u8]) -> Result<Option<Vec<u8>>, String> {
    use object::{Object, ObjectSection};
    let file = object::File::parse(data).map_err(|e| format!("not an ELF file: {e}"))?;
    let Some(sec) = file.section_by_name(".gnu_debugdata") else {
        return Ok(None);
    };
    if sec.size() > MINI_DEBUGINFO_MAX_XZ {
        return Err(format!(
            ".gnu_debugdata of {} bytes: larger than {} MiB, not read",
            sec.size(),
            MINI_DEBUGINFO_MAX_XZ >> 20
        ));
    }
    let xz = sec
        .data()
        .map_err(|e| format!(".gnu_debugdata: cannot be read: {e}"))?;
    xz_decompress(xz, MINI_DEBUGINFO_MAX_ELF)
        .map(Some)
        .map_err(|e| format!(".gnu_debugdata: {e}"))
}

/// `xz` decompressed, at most `limit` bytes of it; an error (never a panic)
/// for data that is not xz, is corrupt, or decompresses to more.
pub fn xz_decompress(xz: &[u8], limit: usize) -> Result<Vec<u8>, String> {
    let mut out = Bounded {
        buf: Vec::new(),
        limit,
    };
    // lzma-rs returns errors on corrupt input; the unwind guard is a second
    // line of defence so that a bad file can only cost what it holds.
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        lzma_rs::xz_decompress(&mut std::io::BufReader::new(xz), &mut out)
    }));
    match r {
        Ok(Ok(())) => Ok(out.buf),
        Ok(Err(e)) => Err(format!("not valid xz: {e}")),
        Err(_) => Err("the xz decoder failed".to_string()),
    }
}

/// Symbol, source line and inlined functions of one address.
/// What a binary's address resolves to: the symbol, its source line, the
/// functions inlined there, the symbol's start (virtual address) and size.
type Symbolised = (
    Option<String>,
    Option<SrcLine>,
    Vec<(String, Option<SrcLine>)>,
    Option<(u64, u64)>,
);

/// A binary looked for: the path it is read at locally, the build-id known.
type BinaryKey = (PathBuf, Option<Rc<str>>);

/// Resolves sample addresses with the captured side-car data.
pub struct Resolver {
    kallsyms: Option<Kallsyms>,
    maps: Timeline,
    /// Prefix for ELF paths (like perf's `--symfs`).
    symfs: Option<PathBuf>,
    opts: ResolverOptions,
    perf_maps: RefCell<HashMap<u32, Option<Rc<PerfMap>>>>,
    symbolizer: blazesym::symbolize::Symbolizer,
    /// (path read at, build-id known) → the binary found for it.
    binaries: RefCell<HashMap<BinaryKey, Option<Rc<Binary>>>>,
    /// (binary read, file offset) → what it resolves to: shared by every
    /// process mapping the binary.
    by_offset: RefCell<HashMap<(PathBuf, u64), Rc<Symbolised>>>,
    /// (tgid, mapping id, address) → frame; tgid and id 0 for kernel addresses.
    cache: RefCell<HashMap<(u32, usize, u64), Rc<Frame>>>,
    /// The same for return addresses of user stacks ([`Resolver::resolve_return`]).
    return_cache: RefCell<HashMap<(u32, usize, u64), Rc<Frame>>>,
    /// The captured vDSO image's symbols (`[vdso]` mappings).
    vdso: Option<ElfSymbols>,
    warnings: RefCell<Vec<String>>,
    warned: RefCell<std::collections::HashSet<String>>,
    /// Every binary looked for, in order.
    used: RefCell<Vec<UsedBinary>>,
}

impl Resolver {
    pub fn new(
        kallsyms: Option<Kallsyms>,
        maps: HashMap<u32, Vec<MapEntry>>,
        symfs: Option<PathBuf>,
    ) -> Resolver {
        Resolver::with_options(kallsyms, maps, symfs, ResolverOptions::default())
    }

    pub fn with_options(
        kallsyms: Option<Kallsyms>,
        maps: HashMap<u32, Vec<MapEntry>>,
        symfs: Option<PathBuf>,
        opts: ResolverOptions,
    ) -> Resolver {
        Resolver::with_timeline(kallsyms, Timeline::from_snapshot(maps), symfs, opts)
    }

    /// With maps over time ([`Timeline`]: the kernel's MMAP2 records).
    pub fn with_timeline(
        kallsyms: Option<Kallsyms>,
        maps: Timeline,
        symfs: Option<PathBuf>,
        mut opts: ResolverOptions,
    ) -> Resolver {
        if let Some(root) = &symfs {
            opts.debug_dirs = opts
                .debug_dirs
                .iter()
                .map(|d| root.join(d.strip_prefix("/").unwrap_or(d)))
                .collect();
        }
        let symbolizer = blazesym::symbolize::Symbolizer::builder()
            .enable_code_info(true)
            .enable_inlined_fns(true)
            // Names are demangled by `demangle` (Rust without hashes, C++),
            // like kernel symbols.
            .enable_demangling(false)
            .set_debug_dirs(Some(&opts.debug_dirs))
            .build();
        let perf_maps = opts
            .perf_maps
            .iter()
            .map(|(t, m)| (*t, Some(Rc::new(PerfMap::parse(m)))))
            .collect();
        Resolver {
            kallsyms,
            maps,
            symfs,
            opts,
            perf_maps: RefCell::new(perf_maps),
            symbolizer,
            binaries: RefCell::default(),
            by_offset: RefCell::default(),
            cache: RefCell::default(),
            return_cache: RefCell::default(),
            vdso: None,
            warnings: RefCell::default(),
            warned: RefCell::default(),
            used: RefCell::default(),
        }
    }

    /// The binaries looked for so far ([`UsedBinary`]).
    pub fn used(&self) -> Vec<UsedBinary> {
        self.used.borrow().clone()
    }

    /// Warnings about missing data (unreadable binaries, missing maps), once each.
    /// The kernel symbols it resolves with, given up when resolving is done
    /// (`annotate --vmlinux` matches them with the kernel's image).
    pub fn into_kallsyms(self) -> Option<Kallsyms> {
        self.kallsyms
    }

    pub fn take_warnings(&self) -> Vec<String> {
        std::mem::take(&mut self.warnings.borrow_mut())
    }

    fn warn_once(&self, key: String, text: String) {
        if self.warned.borrow_mut().insert(key) {
            self.warnings.borrow_mut().push(text);
        }
    }

    /// Symbolises `[vdso]` mappings with this image (the vDSO captured by
    /// `record`; its symbols' addresses are offsets in the mapping).
    pub fn set_vdso(&mut self, image: &[u8]) -> Result<(), String> {
        self.vdso = Some(ElfSymbols::parse(image)?);
        Ok(())
    }

    /// Resolves a kernel (`kernel == true`) or user address of process
    /// `tgid`, with the latest maps recorded.
    pub fn resolve(&self, kernel: bool, tgid: u32, addr: u64) -> Rc<Frame> {
        self.resolve_at(kernel, tgid, u64::MAX, addr)
    }

    /// Resolves an address of process `tgid` taken at `time` (the stream's
    /// clock): user addresses through the mapping in force then.
    pub fn resolve_at(&self, kernel: bool, tgid: u32, time: u64, addr: u64) -> Rc<Frame> {
        let key = if kernel {
            (0, 0, addr)
        } else {
            match self.maps.lookup(tgid, time, addr) {
                Some((id, _)) => (tgid, id + 1, addr),
                None => (tgid, 0, addr),
            }
        };
        if let Some(f) = self.cache.borrow().get(&key) {
            return f.clone();
        }
        let f = Rc::new(if kernel {
            self.resolve_kernel(addr)
        } else {
            self.resolve_user(tgid, time, addr)
        });
        self.cache.borrow_mut().insert(key, f.clone());
        f
    }

    /// Resolves a return address found on process `tgid`'s user stack at
    /// `time`: named after the instruction before it, `addr - 1` (the call),
    /// as perf does, so that a call ending a function (to a `noreturn` one)
    /// names that function and its source line is the call's. The frame
    /// keeps `addr` (and its file offset).
    pub fn resolve_return(&self, tgid: u32, time: u64, addr: u64) -> Rc<Frame> {
        if addr == 0 {
            return self.resolve_at(false, tgid, time, addr);
        }
        let key = match self.maps.lookup(tgid, time, addr - 1) {
            Some((id, _)) => (tgid, id + 1, addr),
            None => (tgid, 0, addr),
        };
        if let Some(f) = self.return_cache.borrow().get(&key) {
            return f.clone();
        }
        let call = self.resolve_at(false, tgid, time, addr - 1);
        let mut f = (*call).clone();
        f.addr = addr;
        f.file_offset = f.file_offset.map(|o| o.wrapping_add(1));
        let f = Rc::new(f);
        self.return_cache.borrow_mut().insert(key, f.clone());
        f
    }

    /// The mapping of process `tgid` that holds user address `addr` at
    /// `time`, with its id in the process's timeline (the mapping
    /// symbolisation uses; the DWARF unwinder's modules follow it).
    pub fn user_mapping(&self, tgid: u32, time: u64, addr: u64) -> Option<(usize, &TimedMap)> {
        self.maps.lookup(tgid, time, addr)
    }

    /// Whether user address `addr` of process `tgid` may be code at `time`:
    /// it lies in an executable mapping in force then (the one
    /// symbolisation uses), or without any mapping, in the process's JIT
    /// perf map. True where it cannot be told (no maps captured for the
    /// process). The timeline holds every executable mapping the kernel
    /// reported and the `/proc` snapshot's mappings of every kind, so an
    /// address the snapshot puts in the stack or the heap is not code.
    pub fn user_code_at(&self, tgid: u32, time: u64, addr: u64) -> bool {
        if !self.maps.has(tgid) {
            return true;
        }
        match self.maps.lookup(tgid, time, addr) {
            Some((_, tm)) => tm.map.perms.as_bytes().get(2) == Some(&b'x'),
            None => self.jit(tgid, addr).is_some(),
        }
    }

    /// Whether maps of process `tgid` were captured.
    pub fn has_maps(&self, tgid: u32) -> bool {
        self.maps.has(tgid)
    }

    /// The file read for a binary mapped by process `tgid` at `path`, of
    /// build-id `id` where the mapping's record gives one: the one
    /// symbolisation reads (the archive's copy, the local file under
    /// `--symfs` or the process's root in another mount namespace,
    /// debuginfod's).
    pub fn binary_path(&self, tgid: u32, path: &str, id: Option<&str>) -> PathBuf {
        match self.binary(tgid, path, id) {
            Some(b) => b.real.clone(),
            None => self.real_path(tgid, path),
        }
    }

    fn resolve_kernel(&self, addr: u64) -> Frame {
        match &self.kallsyms {
            Some(k) => k.resolve(addr),
            None => Frame::unknown(addr, true),
        }
    }

    /// A JIT symbol from the process's perf map, if it has one covering `addr`.
    fn jit(&self, tgid: u32, addr: u64) -> Option<Frame> {
        let map = self
            .perf_maps
            .borrow_mut()
            .entry(tgid)
            .or_insert_with(|| {
                let dir = self.opts.perf_map_dir.as_ref()?;
                let text = std::fs::read(dir.join(format!("perf-{tgid}.map"))).ok()?;
                Some(Rc::new(PerfMap::parse(&String::from_utf8_lossy(&text))))
            })
            .clone()?;
        let name = map.lookup(addr)?;
        let mut f = Frame::unknown(addr, false);
        f.symbol = Some(demangle(name));
        f.dso = format!("perf-{tgid}.map");
        Some(f)
    }

    fn resolve_user(&self, tgid: u32, time: u64, addr: u64) -> Frame {
        if !self.maps.has(tgid) {
            if let Some(f) = self.jit(tgid, addr) {
                return f;
            }
            self.warn_once(
                format!("maps {tgid}"),
                format!("no maps captured for pid {tgid}: its user addresses are [unknown]"),
            );
            return Frame::unknown(addr, false);
        }
        let Some((_, tm)) = self.maps.lookup(tgid, time, addr) else {
            return self
                .jit(tgid, addr)
                .unwrap_or_else(|| Frame::unknown(addr, false));
        };
        let m = &*tm.map;
        if m.path == "[vdso]" {
            if let Some(v) = &self.vdso {
                let mut f = Frame::unknown(addr, false);
                let off = addr - m.start;
                // The image's addresses start at 0: offsets in the mapping.
                if let Some((start, size, name)) = v.containing(off) {
                    f.symbol = Some(name.to_string());
                    f.symbol_rel = Some((start, size));
                }
                f.dso = "[vdso]".into();
                f.file_offset = Some(off);
                f.rel_addr = Some(off);
                f.mapping = Some((m.start, m.end, m.offset));
                return f;
            }
        }
        if !m.is_file() {
            if let Some(f) = self.jit(tgid, addr) {
                return f;
            }
            let mut f = Frame::unknown(addr, false);
            f.mapping = Some((m.start, m.end, m.offset));
            f.dso = if m.path.is_empty() {
                "[anon]".to_string()
            } else {
                m.path.clone()
            };
            return f;
        }
        let path = m.path.trim_end_matches(" (deleted)").to_string();
        let off = (addr - m.start).wrapping_add(m.offset);
        let dso = Path::new(&path)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| path.clone());
        let bin = self.binary(tgid, &path, tm.build_id.as_deref());
        let (symbol, srcline, inlined, span) = match &bin {
            Some(bin) => (*self.symbolise(bin, off)).clone(),
            None => (None, None, Vec::new(), None),
        };
        let build_id = bin.as_ref().and_then(|b| b.build_id.clone()).or_else(|| {
            self.opts
                .locator
                .known_id(&path, tm.build_id.as_deref())
                .map(Rc::from)
        });
        // Relative to the first loadable segment, as samply counts.
        let base = bin
            .as_ref()
            .and_then(|b| b.segments.iter().map(|s| s.2).min());
        let rel = |va: u64| base.and_then(|b| va.checked_sub(b));
        let rel_addr = bin
            .as_ref()
            .and_then(|b| b.offset_to_vaddr(off))
            .and_then(rel);
        Frame {
            addr,
            rel_addr,
            symbol_rel: span.and_then(|(start, size)| Some((rel(start)?, size))),
            symbol,
            dso,
            path: Some(path),
            file_offset: Some(off),
            kernel: false,
            srcline,
            inlined,
            mapping: Some((m.start, m.end, m.offset)),
            build_id,
        }
    }

    fn symbolise(&self, bin: &Binary, off: u64) -> Rc<Symbolised> {
        let key = (bin.real.clone(), off);
        if let Some(s) = self.by_offset.borrow().get(&key) {
            return s.clone();
        }
        let r = Rc::new(match bin.offset_to_vaddr(off) {
            None => (None, None, Vec::new(), None),
            Some(va) => {
                let elf_sym = |st: &ElfSymbols| {
                    st.containing(va)
                        .map(|(start, size, name)| (name.to_string(), (start, size)))
                };
                let mut r = match &bin.symtab {
                    Some(st) => {
                        let (name, span) = elf_sym(st).unzip();
                        (name, None, Vec::new(), span)
                    }
                    None => self.symbolise_dwarf(bin, va),
                };
                // Mini-debuginfo last, as perf and gdb: it has no lines and
                // only function symbols.
                if r.0.is_none() {
                    if let Some((name, span)) = bin.mini.as_ref().and_then(elf_sym) {
                        (r.0, r.3) = (Some(name), Some(span));
                    }
                }
                r
            }
        });
        self.by_offset.borrow_mut().insert(key, r.clone());
        r
    }

    fn symbolise_dwarf(&self, bin: &Binary, va: u64) -> Symbolised {
        use blazesym::symbolize::{source, Input, Symbolized};
        let line = |c: Option<&blazesym::symbolize::CodeInfo>| {
            c.and_then(|c| {
                Some(SrcLine {
                    file: crate::text::from_bytes(c.to_path().as_os_str().as_encoded_bytes())
                        .into_owned(),
                    line: c.line?,
                })
            })
        };
        for file in bin.debug_file.iter().chain(std::iter::once(&bin.real)) {
            let src = source::Source::Elf(source::Elf::new(file));
            match self
                .symbolizer
                .symbolize_single(&src, Input::VirtOffset(va))
            {
                Ok(Symbolized::Sym(sym)) => {
                    let inlined = sym
                        .inlined
                        .iter()
                        .map(|i| (demangle(&i.name), line(i.code_info.as_ref())))
                        .collect();
                    let start = va.wrapping_sub(sym.offset as u64);
                    let size = sym.size.map_or(sym.offset as u64 + 1, |s| s as u64);
                    return (
                        Some(demangle(&sym.name)),
                        line(sym.code_info.as_deref()),
                        inlined,
                        Some((start, size)),
                    );
                }
                Ok(Symbolized::Unknown(_)) => {}
                // blazesym without its `xz` feature fails on a file with
                // `.gnu_debugdata`: `symbolise` names it from `bin.mini`.
                Err(_) if bin.mini.is_some() && *file == bin.real => {}
                Err(e) => self.warn_once(
                    format!("sym {}", file.display()),
                    format!("{}: {e}", file.display()),
                ),
            }
        }
        (None, None, Vec::new(), None)
    }

    /// The path a binary of process `tgid` is read at: under `--symfs`, or
    /// under the process's root when it runs in another mount namespace.
    fn real_path(&self, tgid: u32, path: &str) -> PathBuf {
        let rel = path.trim_start_matches('/');
        match (&self.symfs, self.opts.roots.get(&tgid)) {
            (Some(root), _) => root.join(rel),
            (None, Some(root)) if root.is_dir() => root.join(rel),
            (None, Some(root)) => {
                self.warn_once(
                    format!("root {tgid}"),
                    format!(
                        "pid {tgid} ran in another mount namespace and {} is gone: \
                         its binaries are read from this namespace",
                        root.display()
                    ),
                );
                PathBuf::from(path)
            }
            (None, None) => PathBuf::from(path),
        }
    }

    /// The binary mapped at `path` by process `tgid`, of build-id
    /// `recorded` where the mapping's record gives one
    /// ([`crate::locate::Locator::executable`]: the archive's, the local
    /// file, debuginfod's).
    fn binary(&self, tgid: u32, path: &str, recorded: Option<&str>) -> Option<Rc<Binary>> {
        let real = self.real_path(tgid, path);
        let id: Option<Rc<str>> = self.opts.locator.known_id(path, recorded).map(Rc::from);
        let key = (real, id);
        if let Some(b) = self.binaries.borrow().get(&key) {
            return b.clone();
        }
        let (real, id) = &key;
        let found = self
            .opts
            .locator
            .executable(real, id.as_deref(), &mut |k, t| self.warn_once(k, t));
        let b = found.and_then(|(file, data)| match self.load_binary(&file, &data) {
            Ok(b) => Some(Rc::new(b)),
            Err(err) => {
                self.warn_once(
                    format!("load {}", file.display()),
                    format!("{}: {err}", file.display()),
                );
                None
            }
        });
        self.used.borrow_mut().push(UsedBinary {
            mapped: path.to_string(),
            recorded: key.1.as_deref().map(str::to_string),
            file: b.as_ref().map(|b| b.real.clone()),
            build_id: b
                .as_ref()
                .and_then(|b| b.build_id.as_deref().map(str::to_string)),
        });
        self.binaries.borrow_mut().insert(key, b.clone());
        b
    }

    fn load_binary(&self, real: &Path, data: &[u8]) -> Result<Binary, String> {
        use object::Object;
        let file = object::File::parse(data).map_err(|e| format!("not an ELF file: {e}"))?;
        let segments = load_segments(&file);
        let raw_id = file.build_id().ok().flatten();
        let build_id: Option<Rc<str>> = raw_id.map(|id| {
            id.iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>()
                .into()
        });
        let mini = if file.section_by_name(".symtab").is_some()
            || file.section_by_name(".gnu_debugdata").is_none()
        {
            None
        } else {
            let mut own = ElfSymbols::parse(data)?;
            match mini_debuginfo(data).and_then(|m| m.map(|m| ElfSymbols::parse(&m)).transpose()) {
                Ok(Some(m)) => own.merge(m),
                Ok(None) => {}
                Err(err) => self.warn_once(
                    format!("mini {}", real.display()),
                    format!("{}: {err}", real.display()),
                ),
            }
            Some(own)
        };
        if self.opts.kind == SymbolizerKind::Symtab {
            return Ok(Binary {
                real: real.to_path_buf(),
                segments,
                debug_file: None,
                symtab: Some(ElfSymbols::parse(data)?),
                mini,
                build_id,
            });
        }
        let has_dwarf = file.section_by_name(".debug_info").is_some();
        // By build-id: the archive's, then each debug directory's, then
        // debuginfod's (blazesym follows a debug link itself).
        let locator = &self.opts.locator;
        let debug_file = if has_dwarf {
            None
        } else {
            build_id.as_deref().and_then(|id| {
                let local = || {
                    let rel = crate::buildid::build_id_path(id, true)?;
                    self.opts
                        .debug_dirs
                        .iter()
                        .map(|d| d.join(&rel))
                        .find(|p| p.is_file())
                };
                locator.in_archive(id, true).or_else(local).or_else(|| {
                    match locator.debuginfo(id) {
                        Ok(p) => p,
                        Err(why) => {
                            // A note: the binary's own symbols and its
                            // debug link may still name its addresses.
                            self.warn_once(format!("debuginfod {id} debuginfo"), why);
                            None
                        }
                    }
                })
            })
        };
        Ok(Binary {
            real: real.to_path_buf(),
            segments,
            debug_file,
            symtab: None,
            mini,
            build_id,
        })
    }
}

/// `(file offset, file size, vaddr)` of each segment of an ELF file: what
/// turns a mapping's file offset into its load bias.
pub(crate) fn load_segments(file: &object::File<'_>) -> Vec<(u64, u64, u64)> {
    use object::{Object, ObjectSegment};
    file.segments()
        .map(|seg| {
            let (off, size) = seg.file_range();
            (off, size, seg.address())
        })
        .collect()
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
    fn kallsyms_module_ranges_end_at_the_next_module() {
        // /proc/modules gives mymod 8 KiB from its text (data included, kept
        // elsewhere since 6.4); near2's text starts 4 KiB in.
        let ks = format!("{KALLSYMS}ffffffffc0002000 t near_fn\t[near2]\n");
        let mods = format!("{MODULES}near2 4096 0 - Live 0xffffffffc0002000\n");
        let k = Kallsyms::parse(&ks, Some(&mods));
        let f = k.resolve(0xffffffffc0002100);
        assert_eq!(
            (f.symbol.as_deref(), f.dso.as_str()),
            (Some("near_fn"), "[near2]")
        );
        assert_eq!(
            k.resolve(0xffffffffc0001f00).symbol.as_deref(),
            Some("mod_fn_b")
        );
        assert_eq!(k.resolve(0xffffffffc0003100).symbol, None);
    }

    #[test]
    fn kallsyms_of_modules_loaded_while_recording_are_added() {
        let mut k = Kallsyms::parse(KALLSYMS, Some(MODULES));
        let before = k.resolve(0xffffffffc0005010);
        assert_eq!(before.symbol, None, "newmod is not loaded at the start");
        // At the end: mymod unloaded, mymod2 loaded where mymod's symbols
        // were (its addresses keep mymod's names), newmod loaded elsewhere,
        // and near2 loaded right after mymod's last symbol, within the size
        // /proc/modules gives mymod (since 6.4 a module's data lies
        // elsewhere, so its size is no bound of its text); the core
        // kernel's symbols are the start's.
        let core: String = KALLSYMS.lines().take(6).map(|l| format!("{l}\n")).collect();
        let end = format!(
            "{core}ffffffffc0005000 t new_fn\t[newmod]\nffffffffc0005100 t new_fn2\t[newmod]\n\
             ffffffffc0001000 t other_fn\t[mymod2]\nffffffffc0001080 t other_fn2\t[mymod2]\n\
             ffffffffc0002000 t near_fn\t[near2]\nffffffff81001000 t renamed\n"
        );
        let modules =
            "newmod 4096 0 - Live 0xffffffffc0005000\nmymod2 4096 0 - Live 0xffffffffc0001000\n\
                       near2 4096 0 - Live 0xffffffffc0002000\n";
        let later = Kallsyms::parse(&end, Some(modules));
        let (mut added, overlapping) = k.add_later_modules(&later);
        added.sort();
        assert_eq!(
            (added, overlapping),
            (
                vec!["near2".to_string(), "newmod".to_string()],
                vec!["mymod2".to_string()]
            )
        );
        let f = k.resolve(0xffffffffc0005010);
        assert_eq!(
            (f.symbol.as_deref(), f.dso.as_str()),
            (Some("new_fn"), "[newmod]")
        );
        // Its last symbol extends to its own range's end.
        assert_eq!(
            k.resolve(0xffffffffc0005f00).symbol.as_deref(),
            Some("new_fn2")
        );
        assert_eq!(k.resolve(0xffffffffc0006000).symbol, None);
        // mymod's range ends where near2 starts.
        assert_eq!(
            k.resolve(0xffffffffc0001f00).symbol.as_deref(),
            Some("mod_fn_b")
        );
        let f = k.resolve(0xffffffffc0002100);
        assert_eq!(
            (f.symbol.as_deref(), f.dso.as_str()),
            (Some("near_fn"), "[near2]")
        );
        // The start's names stay.
        assert_eq!(
            k.resolve(0xffffffffc0001050).symbol.as_deref(),
            Some("mod_fn_a")
        );
        assert_eq!(
            k.resolve(0xffffffff81001010).symbol.as_deref(),
            Some("do_one")
        );
        assert_eq!(
            k.text_addresses(Some("newmod"), "new_fn"),
            [0xffffffffc0005000]
        );
        // A module reloaded at another address: both of its ranges resolve,
        // each symbol bounded by its own range.
        let mut k = Kallsyms::parse(KALLSYMS, Some(MODULES));
        let moved = "ffffffffc0009000 t mod_fn_a\t[mymod]\nffffffffc0009100 t mod_fn_b\t[mymod]\n";
        let later = Kallsyms::parse(moved, Some("mymod 8192 0 - Live 0xffffffffc0009000\n"));
        assert_eq!(k.add_later_modules(&later).0, ["mymod"]);
        assert_eq!(
            k.resolve(0xffffffffc0001200).symbol.as_deref(),
            Some("mod_fn_b")
        );
        assert_eq!(
            k.resolve(0xffffffffc0009200).symbol.as_deref(),
            Some("mod_fn_b")
        );
        assert_eq!(k.resolve(0xffffffffc000b000).symbol, None);
        assert_eq!(
            k.text_addresses(Some("mymod"), "mod_fn_a"),
            [0xffffffffc0001000, 0xffffffffc0009000]
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
        // Looked up by the names shown (the names are kept mangled, and
        // demangled where they are read).
        assert_eq!(
            k.core_text_addresses("core::fmt::write"),
            vec![0xffffffff81002000]
        );
        assert_eq!(
            k.text_addresses(
                Some("oprofile_rs"),
                "oprofile::ringbuf_kunit::writer_thread"
            ),
            vec![0xffffffffc0001000]
        );
        assert_eq!(
            k.text_addresses(Some("oprofile_rs"), "_RNotvalid"),
            vec![0xffffffffc0001200]
        );
        assert_eq!(
            k.core_text_addresses("do_syscall_64"),
            vec![0xffffffff81003000]
        );
        assert!(k.core_text_addresses("_etext").is_empty());
    }

    #[test]
    fn kallsyms_restricted_has_no_symbols() {
        let k = Kallsyms::parse("0000000000000000 T _text\n0000000000000000 T foo\n", None);
        assert!(k.is_empty());
        assert_eq!(k.resolve(0xffffffff81000000).symbol, None);
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
