//! `firefox`: the Firefox Profiler's processed profile format (JSON), written
//! with `fxprof-processed-profile`. Unlike folded stacks and pprof it keeps
//! every sample with its time, thread and CPU: open the file in
//! <https://profiler.firefox.com> ("Load a profile from file").
//!
//! Frames in an image the tool knows (an ELF file it read, the vDSO, the
//! kernel, a module) are addresses in a library, as samply writes them: the
//! profile's `libs` name each image (path, build-id as `codeId` and as
//! Breakpad id), `frameTable.address` is the address relative to its image
//! (`-1` for other frames), the function's `resource` is its library's and
//! `nativeSymbols` holds the symbols (start and size) the frames are in.
//! The names are the tool's own (`meta.symbolicated`), so the profiler does
//! not look them up again. Functions inlined at an address follow its
//! frame as label frames (the crate writes no inline depth).

use std::collections::HashMap;
use std::io::Write;
use std::rc::Rc;
use std::sync::Arc;

use oprofile_stream::HeaderExt;
use std::time::{Duration, SystemTime};

use anyhow::Result;
use fxprof_processed_profile::debugid::DebugId;
use fxprof_processed_profile::{
    CategoryColor, CategoryPairHandle, CpuDelta, Frame, FrameFlags, FrameInfo, LibraryHandle,
    LibraryInfo, Profile, ReferenceTimestamp, SamplingInterval, Symbol, SymbolTable, ThreadHandle,
    Timestamp, WeightType,
};

use crate::profile::Profile as Prof;
use crate::symbols::Frame as SFrame;

/// A frame's label: `function (binary)`, inlined functions as frames of
/// their own. Kernel addresses without a symbol are one function per
/// image, `[unknown] (binary)`, as in the flame graphs (a label per
/// address would split the call tree in slivers).
fn labels(f: &SFrame) -> Vec<String> {
    let mut v = vec![format!("{} ({})", own_name(f), f.dso)];
    v.extend(inlined_labels(f));
    v
}

fn inlined_labels(f: &SFrame) -> impl Iterator<Item = String> + '_ {
    f.inlined.iter().map(|(n, _)| format!("{n} ({})", f.dso))
}

/// The name of the function holding the address (not of those inlined
/// there).
fn own_name(f: &SFrame) -> String {
    if f.is_unknown_kernel() {
        "[unknown]".to_string()
    } else {
        f.name()
    }
}

/// The bytes of a hex string.
fn hex_bytes(hex: &str) -> Option<Vec<u8>> {
    (0..hex.len() / 2)
        .map(|i| u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok())
        .collect()
}

/// The Breakpad id of a GNU build-id: its first 16 bytes as a GUID with the
/// byte order of a little-endian ELF file, age 0, as samply and Breakpad's
/// `dump_syms` derive it.
fn debug_id(build_id: &[u8]) -> DebugId {
    let mut guid = [0u8; 16];
    let n = build_id.len().min(16);
    guid[..n].copy_from_slice(&build_id[..n]);
    DebugId::from_guid_age(&guid, 0).unwrap_or_default()
}

/// An image of the profile: its name, its path, its build-id.
type LibKey = (String, String, Option<Rc<str>>);

/// The image of a frame, where the tool knows its address in it.
fn lib_key(f: &SFrame) -> Option<LibKey> {
    f.rel_addr?;
    if f.dso == "[unknown]" || f.is_truncated() {
        return None;
    }
    let path = f.path.clone().unwrap_or_else(|| f.dso.clone());
    Some((f.dso.clone(), path, f.build_id.clone()))
}

fn library_info((name, path, build_id): &LibKey) -> LibraryInfo {
    let bytes = build_id.as_deref().and_then(hex_bytes);
    LibraryInfo {
        name: name.clone(),
        debug_name: name.clone(),
        path: path.clone(),
        debug_path: path.clone(),
        debug_id: bytes.as_deref().map(debug_id).unwrap_or_default(),
        code_id: build_id.as_deref().map(str::to_string),
        arch: None,
        symbol_table: None,
    }
}

/// Where the profile places a frame: its library and its address there.
type Placed = Option<(LibraryHandle, u32)>;

/// The libraries of the frames of `p`, with the symbols their frames are
/// in (a frame without a symbol gets one of its own, a byte long, named as
/// the reports name it), then where each frame goes: in its library when
/// the library's symbol table names it as the tool does, else a label.
fn place_frames(prof: &mut Profile, p: &Prof) -> HashMap<*const SFrame, Placed> {
    let mut libs: HashMap<LibKey, (LibraryHandle, Vec<Symbol>)> = HashMap::new();
    let mut seen: HashMap<*const SFrame, (Rc<SFrame>, Placed)> = HashMap::new();
    for s in &p.samples {
        for f in s.stack_root_first() {
            let ptr = Rc::as_ptr(f);
            if seen.contains_key(&ptr) {
                continue;
            }
            let placed = lib_key(f).and_then(|key| {
                let rel = u32::try_from(f.rel_addr?).ok()?;
                let (lib, syms) = libs
                    .entry(key)
                    .or_insert_with_key(|k| (prof.add_lib(library_info(k)), Vec::new()));
                let sym = match (&f.symbol, f.symbol_rel) {
                    (Some(name), Some((start, size))) => Symbol {
                        address: u32::try_from(start).ok()?,
                        size: Some(u32::try_from(size).unwrap_or(u32::MAX)),
                        name: name.clone(),
                    },
                    _ => Symbol {
                        address: rel,
                        size: Some(1),
                        name: own_name(f),
                    },
                };
                syms.push(sym);
                Some((*lib, rel))
            });
            seen.insert(ptr, (f.clone(), placed));
        }
    }
    let mut tables = HashMap::new();
    for (lib, syms) in libs.into_values() {
        let table = Arc::new(SymbolTable::new(syms));
        prof.set_lib_symbol_table(lib, table.clone());
        tables.insert(lib, table);
    }
    // A symbol table keeps one symbol per address, and a symbol overlapping
    // another's start shadows it: such frames stay labels.
    seen.into_iter()
        .map(|(ptr, (f, placed))| {
            let placed = placed.filter(|(lib, rel)| {
                tables[lib]
                    .lookup(*rel)
                    .is_some_and(|s| s.name == f.symbol.clone().unwrap_or_else(|| own_name(&f)))
            });
            (ptr, placed)
        })
        .collect()
}

/// Builds the profile. `end_time` is the wall-clock time of the recording's
/// last record (the file's modification time): the stream's clock counts
/// from boot, so the wall-clock start is that less the recording's span.
pub fn build(p: &Prof, end_time: Option<SystemTime>) -> Profile {
    let h = &p.header;
    let interval = match crate::pprof::second_value(h) {
        Some((_, "nanoseconds", ns)) => SamplingInterval::from_nanos(ns as u64),
        _ => SamplingInterval::from_millis(1),
    };
    let span = Duration::from_nanos(p.last_time.saturating_sub(p.first_time));
    let start = end_time
        .and_then(|t| t.checked_sub(span))
        .unwrap_or(SystemTime::UNIX_EPOCH);
    let mut prof = Profile::new(
        &format!("oprofile-rs ({})", h.event_name()),
        ReferenceTimestamp::from_system_time(start),
        interval,
    );
    prof.set_os_name("Linux");
    let user = prof.add_category("User", CategoryColor::Yellow);
    let kernel = prof.add_category("Kernel", CategoryColor::Orange);
    // The CPU of a sample: the subcategory of its leaf frame.
    let mut cpu_sub: HashMap<(bool, u16), CategoryPairHandle> = HashMap::new();
    let ts = |t: u64| Timestamp::from_nanos_since_reference(t.saturating_sub(p.first_time));
    let mut processes = HashMap::new();
    let mut threads: HashMap<u32, ThreadHandle> = HashMap::new();
    let ns_per_weight = crate::pprof::second_value(h)
        .filter(|(_, unit, _)| *unit == "nanoseconds")
        .map(|(_, _, ns)| ns);
    let placed = place_frames(&mut prof, p);
    let off_cpu_profile = !p.event_list.is_empty()
        && p.event_list
            .iter()
            .all(|e| e.name == crate::off_cpu::OFF_CPU_EVENT);
    for s in in_order(p) {
        let process = *processes
            .entry(s.tgid)
            .or_insert_with(|| prof.add_process(&s.comm, s.tgid, ts(s.time)));
        let thread = *threads.entry(s.pid).or_insert_with(|| {
            let t = prof.add_thread(process, s.pid, ts(s.time), s.pid == s.tgid);
            prof.set_thread_name(t, &s.comm);
            // Off-CPU blocks weigh their time: the call tree then says
            // "ms", not a count of samples (µs here, ms in [`to_json`]).
            if off_cpu_profile {
                prof.set_thread_samples_weight_type(t, WeightType::TracingMs);
            }
            t
        });
        let leaf_cat = *cpu_sub.entry((s.kernel, s.cpu)).or_insert_with(|| {
            prof.add_subcategory(
                if s.kernel { kernel } else { user },
                &format!("cpu {}", s.cpu),
            )
        });
        // Frames from the outermost caller to the leaf.
        let mut frames = Vec::new();
        let stack: Vec<&SFrame> = s.stack_root_first().map(|f| &**f).collect();
        for (i, f) in stack.iter().enumerate() {
            let (first, names): (Frame, Vec<String>) =
                match placed.get(&(*f as *const SFrame)).copied().flatten() {
                    Some((lib, rel)) => (
                        Frame::RelativeAddressFromInstructionPointer(lib, rel),
                        inlined_labels(f).collect(),
                    ),
                    None => {
                        let mut names = labels(f).into_iter();
                        let first = names.next().unwrap_or_default();
                        (Frame::Label(prof.intern_string(&first)), names.collect())
                    }
                };
            let last = names.len();
            let frames_of = std::iter::once(first).chain(
                names
                    .iter()
                    .map(|n| Frame::Label(prof.intern_string(n)))
                    .collect::<Vec<_>>(),
            );
            for (j, frame) in frames_of.enumerate() {
                let category_pair = if i == stack.len() - 1 && j == last {
                    leaf_cat
                } else if f.kernel {
                    kernel.into()
                } else {
                    user.into()
                };
                frames.push(FrameInfo {
                    frame,
                    category_pair,
                    flags: FrameFlags::empty(),
                });
            }
        }
        let stack = prof.intern_stack_frames(thread, frames.into_iter());
        // A clock's period is the CPU time the sample stands for; an
        // off-CPU block's time is none.
        let event = p.event_list.get(usize::from(s.event));
        let clock = event.is_some_and(|e| e.unit == "ns");
        let off_cpu = event.is_some_and(|e| e.name == crate::off_cpu::OFF_CPU_EVENT);
        let cpu = match (clock, s.period) {
            _ if off_cpu => CpuDelta::ZERO,
            (true, ns) if ns != 0 => CpuDelta::from_nanos(ns),
            _ => ns_per_weight.map_or(CpuDelta::ZERO, |ns| {
                CpuDelta::from_nanos((ns * s.weight as f64) as u64)
            }),
        };
        prof.add_sample(
            thread,
            ts(s.time),
            stack,
            cpu,
            s.weight.min(i32::MAX as u64) as i32,
        );
    }
    prof.set_symbolicated(true);
    prof
}

/// The samples in the order [`build`] adds them (each thread's in time
/// order, segment by segment).
fn in_order(p: &Prof) -> Vec<&crate::profile::ResolvedSample> {
    let mut samples: Vec<&crate::profile::ResolvedSample> = p.samples.iter().collect();
    samples.sort_by_key(|s| (s.segment, s.time));
    samples
}

pub fn write(p: &Prof, end_time: Option<SystemTime>, out: &mut dyn Write) -> Result<()> {
    let v = to_json(p, end_time)?;
    serde_json::to_writer(&mut *out, &v)?;
    writeln!(out)?;
    Ok(())
}

/// The profile as the JSON [`write`] writes.
pub fn to_json(p: &Prof, end_time: Option<SystemTime>) -> Result<serde_json::Value> {
    let mut v = serde_json::to_value(build(p, end_time))?;
    // The weights of "tracing-ms" samples (off-CPU blocks): fractional ms
    // as the format says, from the profile's µs (the crate takes 32-bit
    // integers, which hold 35 minutes: a thread idle for an hour would
    // weigh 35). Each thread's samples are in [`in_order`]'s order.
    let mut by_tid: HashMap<u32, Vec<u64>> = HashMap::new();
    for s in in_order(p) {
        by_tid.entry(s.pid).or_default().push(s.weight);
    }
    if let Some(threads) = v.get_mut("threads").and_then(|t| t.as_array_mut()) {
        for t in threads {
            let tid = match t.get("tid") {
                Some(serde_json::Value::Number(n)) => n.as_u64(),
                Some(serde_json::Value::String(s)) => s.parse().ok(),
                _ => None,
            };
            let exact = tid.and_then(|tid| by_tid.get(&(tid as u32)));
            let Some(samples) = t.get_mut("samples").and_then(|s| s.as_object_mut()) else {
                continue;
            };
            if samples.get("weightType").and_then(|w| w.as_str()) != Some("tracing-ms") {
                continue;
            }
            if let Some(w) = samples.get_mut("weight").and_then(|w| w.as_array_mut()) {
                let exact = exact.filter(|e| e.len() == w.len());
                for (i, x) in w.iter_mut().enumerate() {
                    let us = exact.map(|e| e[i]).or_else(|| x.as_u64());
                    if let Some(us) = us {
                        *x = (us as f64 / 1000.0).into();
                    }
                }
            }
        }
    }
    // `meta.stackwalk`, which the format's `ProfileMeta` requires and the
    // crate does not write: whether the samples have call stacks.
    let walked = p.samples.iter().any(|s| !s.callchain.is_empty());
    if let Some(meta) = v.get_mut("meta").and_then(|m| m.as_object_mut()) {
        meta.entry("stackwalk").or_insert(u8::from(walked).into());
    }
    Ok(v)
}
