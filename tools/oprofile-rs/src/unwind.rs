//! DWARF unwinding of the user stacks samples carry (`record --call-graph
//! dwarf`): the module copies the sampled task's user registers and the top
//! of its stack into each SAMPLE; here the binaries' `.eh_frame` (through
//! `framehop`) turns them into the task's user callchain, where the
//! frame-pointer chain of code built without frame pointers stops after a
//! frame or two.
//!
//! Each binary is read once (its unwind sections, by the path symbolisation
//! reads it at: `--symfs`, another mount namespace's root); each process
//! gets an unwinder whose modules follow its mappings at the sample's time
//! ([`Resolver::user_mapping`], the mappings symbolisation uses): before
//! each step the module of the address about to be unwound is put in place
//! at that mapping's load bias. Stack reads are served from the copied
//! bytes only: a read outside them ends the unwind, as do a return address
//! outside every executable mapping of the process and
//! [`MAX_FRAMES`] frames. Only x86-64 (little-endian) stacks are unwound.
//!
//! The hybrid (`--call-graph dwarf` with a small SIZE, e.g. `dwarf,1K`: a
//! small copy beside the frame-pointer chain, which `dwarf` records too):
//! where the copy ends before the outermost frame, the unwind goes
//! on along the sample's frame-pointer chain from the frame it reached,
//! found by its frame pointer ([`splice`]): the copy gives the frames
//! nearest the sampled address (a leaf without a frame, code built without
//! frame pointers), the chain those beyond it. A stack that can be followed
//! neither way is cut there ([`Unwound::cut`]) and marked, not padded.

use std::collections::{BTreeMap, HashMap};
use std::ops::Range;
use std::path::PathBuf;
use std::rc::Rc;

use framehop::x86_64::{CacheX86_64, UnwindRegsX86_64, UnwinderX86_64};
use framehop::{ExplicitModuleSectionInfo, FrameAddress, Module, Unwinder};
use oprofile_stream::{Endian, UserStack};

use crate::symbols::Resolver;

/// The most frames one unwind yields (callers of the sampled address).
pub const MAX_FRAMES: usize = 128;

/// Section bytes shared by the modules of every process mapping a file.
type Bytes = Rc<[u8]>;

/// How the samples with a user stack fared, for the report's header.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UnwindStats {
    /// Samples carrying a user stack copy.
    pub with_stack: u64,
    /// Of them: those whose callers came from the DWARF unwind.
    pub dwarf: u64,
    /// Of them: those the unwind found no caller for, which kept their
    /// frame-pointer chain.
    pub fallback: u64,
    /// Of the unwound: those continued along the frame-pointer chain past
    /// the end of the copy.
    pub spliced: u64,
    /// Of the unwound: those cut where the copy ended (neither the copy nor
    /// the frame-pointer chain reached further).
    pub cut: u64,
}

impl UnwindStats {
    /// `N samples with a user stack: M unwound with .eh_frame, K fell back
    /// to the frame-pointer chain`, or `None` without such samples.
    pub fn describe(&self) -> Option<String> {
        (self.with_stack > 0).then(|| {
            let mut d = format!(
                "{} samples with a user stack copy: {} unwound with .eh_frame (DWARF), {} fell back to the frame-pointer chain",
                self.with_stack, self.dwarf, self.fallback
            );
            if self.spliced > 0 || self.cut > 0 {
                d.push_str(&format!(
                    "; past the copy's end {} went on along the frame-pointer chain, {} were cut",
                    self.spliced, self.cut
                ));
            }
            d
        })
    }
}

/// The unwind sections of one ELF file, as its program headers place them.
struct UnwindFile {
    /// `(file offset, file size, vaddr)` of its PT_LOAD segments.
    segments: Vec<(u64, u64, u64)>,
    text: Option<Range<u64>>,
    got: Option<Range<u64>>,
    eh_frame: Option<(Range<u64>, Bytes)>,
    eh_frame_hdr: Option<(Range<u64>, Bytes)>,
    debug_frame: Option<Bytes>,
}

impl UnwindFile {
    /// Reads the sections of the ELF image `data`; an error for anything
    /// that is not an x86-64 ELF file.
    fn parse(data: &[u8]) -> Result<UnwindFile, String> {
        use object::{Object, ObjectSection};
        let file = object::File::parse(data).map_err(|e| format!("not an ELF file: {e}"))?;
        if file.architecture() != object::Architecture::X86_64 {
            return Err(format!(
                "{:?} code: only x86-64 stacks are unwound",
                file.architecture()
            ));
        }
        let segments = crate::symbols::load_segments(&file);
        let range = |name: &str| {
            file.section_by_name(name)
                .map(|s| s.address()..s.address().saturating_add(s.size()))
        };
        let bytes = |name: &str| -> Option<(Range<u64>, Bytes)> {
            let s = file.section_by_name(name)?;
            let d = s.uncompressed_data().ok()?;
            let r = s.address()..s.address().saturating_add(s.size());
            Some((r, Rc::from(&*d)))
        };
        Ok(UnwindFile {
            segments,
            text: range(".text"),
            got: range(".got"),
            eh_frame: bytes(".eh_frame"),
            eh_frame_hdr: bytes(".eh_frame_hdr"),
            debug_frame: bytes(".debug_frame").map(|(_, b)| b),
        })
    }

    /// The load bias of a mapping of the file at `start` from file offset
    /// `offset` (page-aligned): `start` minus the vaddr of that offset.
    fn bias(&self, start: u64, offset: u64) -> Option<u64> {
        self.segments
            .iter()
            .find(|(off, size, _)| (off & !0xfff) <= offset && offset < off.saturating_add(*size))
            .map(|(off, _, va)| start.wrapping_sub(va.wrapping_sub(off.wrapping_sub(offset))))
    }

    /// A framehop module of the file mapped over `avma` at load bias `bias`.
    fn module(&self, name: String, avma: Range<u64>, bias: u64) -> Module<Bytes> {
        let (eh_frame_svma, eh_frame) = self.eh_frame.clone().unzip();
        let (eh_frame_hdr_svma, eh_frame_hdr) = self.eh_frame_hdr.clone().unzip();
        Module::new(
            name,
            avma,
            bias,
            ExplicitModuleSectionInfo {
                base_svma: 0,
                text_svma: self.text.clone(),
                got_svma: self.got.clone(),
                eh_frame_svma,
                eh_frame,
                eh_frame_hdr_svma,
                eh_frame_hdr,
                debug_frame: self.debug_frame.clone(),
                ..Default::default()
            },
        )
    }
}

/// A process's unwinder and the mappings its modules stand for.
#[derive(Default)]
struct Process {
    unwinder: UnwinderX86_64<Bytes>,
    /// Module start → (end, the mapping's id in the process's timeline).
    modules: BTreeMap<u64, (u64, usize)>,
}

/// Unwinds the user stacks of a recording's samples (see the module
/// documentation).
pub struct DwarfUnwinder {
    /// Files by the path they are read at (`None`: unreadable, or no
    /// x86-64 ELF file).
    files: HashMap<PathBuf, Option<Rc<UnwindFile>>>,
    /// The recording machine's vDSO image (`[vdso]` mappings).
    vdso: Option<Rc<UnwindFile>>,
    /// Modules built, by (file, mapping range, bias): shared by every
    /// process that maps a file at the same place.
    modules: HashMap<(PathBuf, u64, u64, u64), Module<Bytes>>,
    procs: HashMap<u32, Process>,
    cache: CacheX86_64,
    /// The stream's byte order is the stacks' (only little-endian x86-64
    /// stacks are unwound).
    little: bool,
    /// Warnings for the user (unreadable binaries), once each.
    warnings: Vec<String>,
    pub stats: UnwindStats,
}

impl Default for DwarfUnwinder {
    fn default() -> Self {
        DwarfUnwinder::new(None, Endian::Little)
    }
}

impl DwarfUnwinder {
    /// An unwinder of the stacks of a stream of byte order `endian`;
    /// `vdso` is the captured vDSO image, if any.
    pub fn new(vdso: Option<&[u8]>, endian: Endian) -> DwarfUnwinder {
        DwarfUnwinder {
            files: HashMap::new(),
            vdso: vdso.and_then(|v| UnwindFile::parse(v).ok()).map(Rc::new),
            modules: HashMap::new(),
            procs: HashMap::new(),
            cache: CacheX86_64::new(),
            little: endian == Endian::Little,
            warnings: Vec::new(),
            stats: UnwindStats::default(),
        }
    }

    /// Warnings collected so far (given up).
    pub fn take_warnings(&mut self) -> Vec<String> {
        std::mem::take(&mut self.warnings)
    }

    /// The user callchain of a sample of process `tgid` at `time` whose
    /// user stack is `stack` and whose frame-pointer chain is `fp_chain`
    /// (the stream's user callchain), read as that chain reads: for a
    /// kernel-mode sample the address where the task entered the kernel
    /// first, then the return addresses of its callers, innermost first;
    /// past the copy's end it goes on along `fp_chain` where it can
    /// ([`splice`]). `None` when the unwind found no caller but for the
    /// copy's end (the sample keeps its frame-pointer chain). Counts the
    /// sample in [`DwarfUnwinder::stats`].
    pub fn callchain(
        &mut self,
        resolver: &Resolver,
        tgid: u32,
        time: u64,
        kernel: bool,
        stack: &UserStack,
        fp_chain: &[u64],
    ) -> Option<Unwound> {
        self.stats.with_stack += 1;
        let (callers, end) = self.unwind_to(resolver, tgid, time, stack);
        // No caller found, and not for want of a longer copy.
        if callers.is_empty() && end == End::Other {
            self.stats.fallback += 1;
            return None;
        }
        self.stats.dwarf += 1;
        let mut chain = Vec::with_capacity(callers.len() + 1);
        if kernel {
            chain.push(stack.ip);
        }
        chain.extend(callers);
        let mut cut = false;
        if let End::CopyEnd { sp, bp, at } = end {
            // The frame-pointer chain's return addresses (without the entry
            // address of a kernel-mode sample).
            let fp_rets = fp_chain.get(usize::from(kernel)..).unwrap_or(&[]);
            match splice(stack, fp_rets, sp, bp, at) {
                Some(rest) if !rest.is_empty() => {
                    self.stats.spliced += 1;
                    chain.extend_from_slice(rest);
                }
                _ => {
                    self.stats.cut += 1;
                    cut = true;
                }
            }
        }
        Some(Unwound { chain, cut })
    }

    /// The return addresses of the callers of `stack.ip`, innermost first
    /// (empty when none could be found).
    pub fn unwind(
        &mut self,
        resolver: &Resolver,
        tgid: u32,
        time: u64,
        stack: &UserStack,
    ) -> Vec<u64> {
        self.unwind_to(resolver, tgid, time, stack).0
    }

    /// [`DwarfUnwinder::unwind`], and why it ended.
    fn unwind_to(
        &mut self,
        resolver: &Resolver,
        tgid: u32,
        time: u64,
        stack: &UserStack,
    ) -> (Vec<u64>, End) {
        let mut out = Vec::new();
        if !self.little || stack.ip == 0 || !resolver.has_maps(tgid) {
            return (out, End::Other);
        }
        let sp = stack.sp;
        let data = &stack.data[..];
        // The copy filled its whole area: it may have ended before the
        // outermost frame (a shorter copy reached the top of the stack).
        let full = data.len() >= usize::from(stack.size) && !data.is_empty();
        let copy_end = sp.saturating_add(data.len() as u64);
        // The first read just past a full copy (within 1 MiB, the largest
        // frame taken for a frame: farther is garbage, not the stack going
        // on): its address.
        let beyond = std::cell::Cell::new(None);
        // Only the copied bytes: anything else ends the unwind.
        let mut read_stack = |addr: u64| -> Result<u64, ()> {
            if full
                && addr >= copy_end
                && addr < copy_end.saturating_add(1 << 20)
                && beyond.get().is_none()
            {
                beyond.set(Some(addr));
            }
            let off = usize::try_from(addr.checked_sub(sp).ok_or(())?).map_err(|_| ())?;
            let word = data.get(off..off.checked_add(8).ok_or(())?).ok_or(())?;
            Ok(u64::from_le_bytes(word.try_into().map_err(|_| ())?))
        };
        let mut regs = UnwindRegsX86_64::new(stack.ip, stack.sp, stack.bp);
        let mut frame = FrameAddress::from_instruction_pointer(stack.ip);
        let mut end = End::Other;
        while out.len() < MAX_FRAMES {
            self.place_module(resolver, tgid, time, frame.address_for_lookup());
            let Some(p) = self.procs.get(&tgid) else {
                break;
            };
            let before = regs;
            beyond.set(None);
            let ra =
                match p
                    .unwinder
                    .unwind_frame(frame, &mut regs, &mut self.cache, &mut read_stack)
                {
                    Ok(Some(ra)) => ra,
                    // A read past the end of a full copy: the stack goes
                    // on beyond what was copied, from this frame.
                    Err(_) if beyond.get().is_some() => {
                        if let Some(at) = beyond.get() {
                            end = End::CopyEnd {
                                sp: before.sp(),
                                bp: before.bp(),
                                at,
                            };
                        }
                        break;
                    }
                    // The root (`_start`, a thread's start), or a read outside
                    // the copy, or a rule that makes no sense.
                    Ok(None) | Err(_) => break,
                };
            // A return address points just past a call into code the
            // process had mapped then; anything else is garbage.
            let executable = ra > 0
                && resolver
                    .user_mapping(tgid, time, ra - 1)
                    .is_some_and(|(_, m)| m.map.perms.contains('x'));
            let Some(next) = FrameAddress::from_return_address(ra).filter(|_| executable) else {
                break;
            };
            out.push(ra);
            frame = next;
        }
        (out, end)
    }

    /// Makes the module of the mapping that holds `addr` (in process `tgid`
    /// at `time`) part of the process's unwinder, in place of any module it
    /// overlaps. An address outside every file mapping gets no module
    /// (framehop then follows the frame pointer).
    fn place_module(&mut self, resolver: &Resolver, tgid: u32, time: u64, addr: u64) {
        let Some((id, tm)) = resolver.user_mapping(tgid, time, addr) else {
            return;
        };
        let m = &*tm.map;
        let p = self.procs.entry(tgid).or_default();
        if p.modules.get(&m.start) == Some(&(m.end, id)) {
            return;
        }
        // Mappings replaced since (or a later one over the same addresses).
        let stale: Vec<u64> = p
            .modules
            .range(..m.end)
            .filter(|(_, (end, _))| *end > m.start)
            .map(|(start, _)| *start)
            .collect();
        for s in stale {
            p.unwinder.remove_module(s);
            p.modules.remove(&s);
        }
        let (key_path, file) = if m.path == "[vdso]" {
            (PathBuf::from("[vdso]"), self.vdso.clone())
        } else if m.is_file() {
            let path = m.path.trim_end_matches(" (deleted)");
            let real = resolver.binary_path(tgid, path, tm.build_id.as_deref());
            let file = match self.files.get(&real) {
                Some(f) => f.clone(),
                None => {
                    let f = load(&real, &mut self.warnings);
                    self.files.insert(real.clone(), f.clone());
                    f
                }
            };
            (real, file)
        } else {
            (PathBuf::new(), None)
        };
        let Some(file) = file else {
            return;
        };
        let Some(bias) = file.bias(m.start, m.offset) else {
            return;
        };
        let key = (key_path, m.start, m.end, bias);
        let module = match self.modules.get(&key) {
            Some(module) => module.clone(),
            None => {
                let name = key.0.to_string_lossy().into_owned();
                let module = file.module(name, m.start..m.end, bias);
                self.modules.insert(key, module.clone());
                module
            }
        };
        let p = self.procs.entry(tgid).or_default();
        p.unwinder.add_module(module);
        p.modules.insert(m.start, (m.end, id));
    }
}

/// A sample's user callchain from its stack copy ([`DwarfUnwinder::callchain`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unwound {
    /// As the stream's user callchain reads.
    pub chain: Vec<u64>,
    /// The copy ended before the outermost frame, and the frame-pointer
    /// chain did not go on from where it ended: the stack is cut there.
    pub cut: bool,
}

/// Why an unwind of a stack copy ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    /// It needed the stack past the end of a full copy, to unwind the
    /// frame whose registers were `sp` and `bp`: first at address `at`.
    CopyEnd { sp: u64, bp: u64, at: u64 },
    /// The root, garbage, no unwind information, or the frame limit.
    Other,
}

/// The frame-pointer chain's return addresses `fp_rets` from the frame the
/// unwind of `stack` reached at the end of its copy (its registers `sp`,
/// `bp`; the unwind's first read past the copy at `at`) on: the chain's
/// walk is replayed on the copy (its frame records at `stack.bp`, then at
/// each saved `rbp`); the frame whose record lies at `bp` continues with
/// the chain's entry for that record. Only a frame that keeps a frame
/// pointer has its record there: its unwind reads its return address at
/// `bp + 8` and the caller's frame pointer at `bp`, so `at` must be one of
/// them. A frame whose `rbp` only holds a stack address (code built without
/// frame pointers), or one the chain skips (its return address below the
/// record at `bp`), reads elsewhere: its callers are not the chain's.
/// `None` when no record of the chain lies at `bp` above `sp`, the frame
/// does not read its record there, or the chain disagrees with the copy
/// (then it is not the same walk).
pub fn splice<'a>(
    stack: &UserStack,
    fp_rets: &'a [u64],
    sp: u64,
    bp: u64,
    at: u64,
) -> Option<&'a [u64]> {
    if bp < sp || !bp.is_multiple_of(8) || (at != bp && Some(at) != bp.checked_add(8)) {
        return None;
    }
    let read = |addr: u64| -> Option<u64> {
        let off = usize::try_from(addr.checked_sub(stack.sp)?).ok()?;
        let word = stack.data.get(off..off.checked_add(8)?)?;
        Some(u64::from_le_bytes(word.try_into().ok()?))
    };
    let mut fp = stack.bp;
    for (i, &ret) in fp_rets.iter().enumerate() {
        if fp == bp {
            return Some(&fp_rets[i..]);
        }
        // The chain went on from this record: it lay above the last one.
        // Where the copy holds it, it must say what the chain says.
        match (read(fp), read(fp.checked_add(8)?)) {
            (Some(next), Some(copied_ret)) => {
                if copied_ret != ret || next <= fp {
                    return None;
                }
                fp = next;
            }
            // Past the copy: only the record at `bp` can be known.
            _ => return None,
        }
    }
    None
}

/// The unwind sections of the binary at `real`; `None` (with a warning)
/// when it cannot be read or is no x86-64 ELF file.
fn load(real: &std::path::Path, warnings: &mut Vec<String>) -> Option<Rc<UnwindFile>> {
    let data = match std::fs::read(real) {
        Ok(d) => d,
        Err(e) => {
            warnings.push(format!(
                "cannot read {} to unwind user stacks: {e}",
                real.display()
            ));
            return None;
        }
    };
    match UnwindFile::parse(&data) {
        Ok(f) => Some(Rc::new(f)),
        Err(e) => {
            warnings.push(format!(
                "{}: {e}: user stacks through it are not unwound",
                real.display()
            ));
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn describe_counts() {
        assert_eq!(UnwindStats::default().describe(), None);
        let s = UnwindStats {
            with_stack: 5,
            dwarf: 4,
            fallback: 1,
            ..Default::default()
        };
        assert_eq!(
            s.describe().unwrap(),
            "5 samples with a user stack copy: 4 unwound with .eh_frame (DWARF), 1 fell back to the frame-pointer chain"
        );
    }

    #[test]
    fn splice_only_from_a_frame_that_reads_its_record() {
        // A copy of 0x30 bytes: at sp + 0x20 a frame record (saved rbp
        // beyond the copy, return address 0x40_2222), as the chain read it.
        let sp = 0x7ffc_0000_1000u64;
        let bp = sp + 0x20;
        let next = sp + 0x80;
        let mut data = vec![0u8; 0x30];
        data[0x20..0x28].copy_from_slice(&next.to_le_bytes());
        data[0x28..0x30].copy_from_slice(&0x40_2222u64.to_le_bytes());
        let st = UserStack {
            ip: 0x40_1000,
            sp,
            bp,
            size: 0x30,
            data,
        };
        let chain = [0x40_2222u64, 0x40_3333, 0x40_4444];
        // The next frame keeps a frame pointer: its record at `next`, its
        // return address read at `next + 8` (or its saved rbp at `next`).
        assert_eq!(
            splice(&st, &chain, sp + 0x30, next, next + 8),
            Some(&chain[1..])
        );
        assert_eq!(
            splice(&st, &chain, sp + 0x30, next, next),
            Some(&chain[1..])
        );
        // A frame without one whose rbp holds the record's address (code
        // built without frame pointers): it reads its return address
        // elsewhere, and the chain's entries are not its callers.
        assert_eq!(splice(&st, &chain, sp + 0x30, next, next + 0x40), None);
        assert_eq!(splice(&st, &chain, sp + 0x30, next, next - 8), None);
        // The first record itself, from a frame below it that reads its
        // own return address below it (a chain that would skip a frame).
        assert_eq!(splice(&st, &chain, sp, bp, bp + 8), Some(&chain[..]));
        assert_eq!(splice(&st, &chain, sp, bp, sp + 0x18), None);
    }

    #[test]
    fn bias_of_mappings() {
        let f = UnwindFile {
            // A PIE: text at file offset 0x1000, vaddr 0x1000; data at
            // file offset 0x2e10, vaddr 0x3e10.
            segments: vec![
                (0, 0x1000, 0),
                (0x1000, 0x500, 0x1000),
                (0x2e10, 0x200, 0x3e10),
            ],
            text: None,
            got: None,
            eh_frame: None,
            eh_frame_hdr: None,
            debug_frame: None,
        };
        assert_eq!(f.bias(0x5555_5555_5000, 0x1000), Some(0x5555_5555_4000));
        assert_eq!(f.bias(0x5555_5555_4000, 0), Some(0x5555_5555_4000));
        // The data segment's page: offset 0x2000 is vaddr 0x3000.
        assert_eq!(f.bias(0x5555_5555_7000, 0x2000), Some(0x5555_5555_4000));
        assert_eq!(f.bias(0x5555_5555_9000, 0x9000), None);
    }

    #[test]
    fn nothing_to_unwind_without_maps_or_with_garbage() {
        let r = Resolver::new(None, HashMap::new(), None);
        let mut u = DwarfUnwinder::default();
        let st = UserStack {
            ip: 0x40_1000,
            sp: 0x7ffc_0000_0000,
            bp: 0,
            size: 64,
            data: vec![0xff; 64],
        };
        assert_eq!(u.callchain(&r, 1, 0, false, &st, &[]), None);
        assert_eq!(
            u.stats,
            UnwindStats {
                with_stack: 1,
                dwarf: 0,
                fallback: 1,
                ..Default::default()
            }
        );
        // Garbage everywhere: no panic, nothing found.
        let maps = crate::maps::parse_maps(
            "400000-401000 r-xp 00000000 08:01 1 /nonexistent/bin\n\
             7ffc00000000-7ffc00001000 rw-p 00000000 00:00 0 [stack]\n",
        );
        let r = Resolver::new(None, HashMap::from([(1, maps)]), None);
        for sp in [0, u64::MAX - 3, 0x7ffc_0000_0000] {
            for bp in [0, u64::MAX, 0x7ffc_0000_0008] {
                let st = UserStack {
                    ip: 0x40_0010,
                    sp,
                    bp,
                    size: 64,
                    data: (0..64).collect(),
                };
                assert!(u.unwind(&r, 1, 0, &st).len() <= MAX_FRAMES);
            }
        }
        assert!(u.take_warnings()[0].contains("/nonexistent/bin"));
    }
}
