//! `firefox`: the Firefox Profiler's processed profile format (JSON), written
//! with `fxprof-processed-profile`. Unlike folded stacks and pprof it keeps
//! every sample with its time, thread and CPU: open the file in
//! <https://profiler.firefox.com> ("Load a profile from file").

use std::collections::HashMap;
use std::io::Write;

use oprofile_stream::HeaderExt;
use std::time::{Duration, SystemTime};

use anyhow::Result;
use fxprof_processed_profile::{
    CategoryColor, CategoryPairHandle, CpuDelta, Frame, FrameFlags, FrameInfo, Profile,
    ReferenceTimestamp, SamplingInterval, ThreadHandle, Timestamp,
};

use crate::profile::Profile as Prof;
use crate::symbols::Frame as SFrame;

/// A frame's label: `function (binary)`, inlined functions as frames of
/// their own. Kernel addresses without a symbol are one function per
/// image, `[unknown] (binary)`, as in the flame graphs (a label per
/// address would split the call tree in slivers).
fn labels(f: &SFrame) -> Vec<String> {
    let name = if f.is_unknown_kernel() {
        "[unknown]".to_string()
    } else {
        f.name()
    };
    let mut v = vec![format!("{name} ({})", f.dso)];
    v.extend(f.inlined.iter().map(|(n, _)| format!("{n} ({})", f.dso)));
    v
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
    let mut samples: Vec<&crate::profile::ResolvedSample> = p.samples.iter().collect();
    samples.sort_by_key(|s| (s.segment, s.time));
    for s in samples {
        let process = *processes
            .entry(s.tgid)
            .or_insert_with(|| prof.add_process(&s.comm, s.tgid, ts(s.time)));
        let thread = *threads.entry(s.pid).or_insert_with(|| {
            let t = prof.add_thread(process, s.pid, ts(s.time), s.pid == s.tgid);
            prof.set_thread_name(t, &s.comm);
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
            let names = labels(f);
            let last = names.len() - 1;
            for (j, name) in names.into_iter().enumerate() {
                let category_pair = if i == stack.len() - 1 && j == last {
                    leaf_cat
                } else if f.kernel {
                    kernel.into()
                } else {
                    user.into()
                };
                let label = prof.intern_string(&name);
                frames.push(FrameInfo {
                    frame: Frame::Label(label),
                    category_pair,
                    flags: FrameFlags::empty(),
                });
            }
        }
        let stack = prof.intern_stack_frames(thread, frames.into_iter());
        // A clock's period is the CPU time the sample stands for.
        let clock = p
            .event_list
            .get(usize::from(s.event))
            .is_some_and(|e| e.unit == "ns");
        let cpu = match (clock, s.period) {
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

pub fn write(p: &Prof, end_time: Option<SystemTime>, out: &mut dyn Write) -> Result<()> {
    serde_json::to_writer(&mut *out, &build(p, end_time))?;
    writeln!(out)?;
    Ok(())
}
