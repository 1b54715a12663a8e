//! Off-CPU time (`record --off-cpu`): where threads wait when they do not
//! run, made of the module's SWITCH records.
//!
//! `record --off-cpu` samples the `context-switches` event with a period
//! of 1 besides the on-CPU event: at every switch-out of a sampled task the
//! module writes a SWITCH record (the time, why the task leaves, the ns it
//! has run and, where the kernel keeps it, has waited on run queues since
//! it was created), then the SAMPLE of that overflow, with the same CPU,
//! time and pid, whose stacks say where the task leaves its CPU.
//!
//! Between two consecutive switch-outs of one thread at `t1` and `t2`, the
//! thread ran `Δexec` (its run time gone up) and was off its CPU for
//! `t2 - t1 - Δexec`, from `t1` on: one interval, as the thread switched
//! in once between them. Of that, the run-queue wait is `Δrun_delay`
//! where the kernel counts it (`CONFIG_SCHED_INFO`, Debian's kernels), else
//! the whole interval for a preempted thread and nothing for a blocked one
//! (whose time then includes the wait after its wakeup); the rest is the
//! thread's *blocked* time, with the reason and the stacks of the switch at
//! `t1`. A thread's last block ends at its exit (a switch-out with reason
//! `exit`) or, if it has not run again, at the end of the recording.

use crate::mapevents::MapEvent;
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;

use anyhow::{bail, Result};
use oprofile_stream::{Switch, SwitchReason};

use crate::profile::{Event, EventInfo, Profile, ResolvedSample};

/// The event `record --off-cpu` adds.
pub const SWITCH_EVENT: &str = "context-switches";
/// The on-CPU event `record --off-cpu` samples without `-e`: a clock, so
/// that its samples are time too (samples × period) for the wall-clock
/// view, and so on every machine (virtual machines often lack a PMU).
pub const DEFAULT_ON_CPU_EVENT: &str = "cpu-clock";
/// The name of the event of the off-CPU profile [`as_profile`] makes.
pub const OFF_CPU_EVENT: &str = "off-cpu";
/// `--off-cpu-thresh`'s default, in µs: blocks shorter than this are left
/// out of the off-CPU views (counted). A wakeup and a switch cost a few µs
/// on hardware: below 10 µs a "block" is mostly that cost, not a wait worth
/// naming. (In the emulated guest a pipe ping-pong's blocks are all longer:
/// none of 40,000 under 10 µs, 25 under 100 µs; `tests/guest/offcpu.sh`.)
pub const DEFAULT_THRESH_US: u64 = 10;

/// `record --off-cpu`'s events and their periods and frequencies: the
/// events asked (`-e`; [`DEFAULT_ON_CPU_EVENT`] without) and
/// `context-switches` with a period of 1 (no frequency), each of `-c` and
/// `-F` extended to the longer list (one value given stands for every
/// event asked).
pub fn record_events(
    events: Vec<String>,
    count: Vec<u64>,
    freq: Vec<u64>,
) -> Result<(Vec<String>, Vec<u64>, Vec<u64>)> {
    let mut events = events;
    if events.is_empty() || events == ["default"] {
        if events.is_empty() && (count.len() > 1 || freq.len() > 1) {
            bail!("--off-cpu: -c and -F give one value per event of -e, and there is no -e");
        }
        events = vec![DEFAULT_ON_CPU_EVENT.to_string()];
    }
    if events.iter().any(|e| e == SWITCH_EVENT) {
        bail!("--off-cpu samples {SWITCH_EVENT} itself (every switch): leave it out of -e");
    }
    let n = events.len();
    let widen = |list: Vec<u64>, what: &str, last: u64| -> Result<Vec<u64>> {
        Ok(match list.len() {
            0 if last == 0 => Vec::new(),
            0 => {
                let mut v = vec![0; n];
                v.push(last);
                v
            }
            1 => {
                let mut v = vec![list[0]; n];
                v.push(last);
                v
            }
            k if k == n => {
                let mut v = list;
                v.push(last);
                v
            }
            k => bail!("{what}: {k} values for {n} events"),
        })
    };
    let count = widen(count, "-c", 1)?;
    let freq = if freq.is_empty() {
        Vec::new()
    } else {
        widen(freq, "-F", 0)?
    };
    events.push(SWITCH_EVENT.to_string());
    Ok((events, count, freq))
}

/// When each thread exited (its first EXIT event), by thread id.
pub fn thread_exits(events: &[MapEvent]) -> HashMap<u32, u64> {
    first_by_thread(events, |e| match *e {
        MapEvent::Exit { time, tid, .. } => Some((tid, time)),
        _ => None,
    })
}

/// When each thread was created (its first FORK event), by thread id.
pub fn thread_starts(events: &[MapEvent]) -> HashMap<u32, u64> {
    first_by_thread(events, |e| match *e {
        MapEvent::Fork { time, tid, .. } => Some((tid, time)),
        _ => None,
    })
}

/// The time of the first of `events` that `pick` takes, by thread id.
fn first_by_thread(
    events: &[MapEvent],
    pick: impl Fn(&MapEvent) -> Option<(u32, u64)>,
) -> HashMap<u32, u64> {
    let mut first = HashMap::new();
    for (tid, time) in events.iter().filter_map(pick) {
        first.entry(tid).or_insert(time);
    }
    first
}

/// A SWITCH record and the SAMPLE that followed it (its stacks), if that
/// was recorded.
#[derive(Debug, Clone)]
pub struct SwitchOut {
    pub switch: Switch,
    pub sample: Option<ResolvedSample>,
}

/// Pairs SWITCH records with their SAMPLEs while a stream is read: the
/// module writes the SAMPLE right after its SWITCH on the same CPU, with
/// the same time and pid (an interrupt's sample may come between them).
#[derive(Debug, Default)]
pub struct Pairing {
    pending: HashMap<u16, Switch>,
    out: Vec<SwitchOut>,
}

impl Pairing {
    /// A SWITCH record read.
    pub fn switch(&mut self, sw: Switch) {
        if let Some(old) = self.pending.insert(sw.cpu, sw) {
            // Its SAMPLE was lost.
            self.out.push(SwitchOut {
                switch: old,
                sample: None,
            });
        }
    }

    /// A SAMPLE read (resolved).
    pub fn sample(&mut self, s: &ResolvedSample) {
        let matches = self
            .pending
            .get(&s.cpu)
            .is_some_and(|sw| sw.time == s.time && sw.pid == s.pid);
        if matches {
            if let Some(sw) = self.pending.remove(&s.cpu) {
                self.out.push(SwitchOut {
                    switch: sw,
                    sample: Some(s.clone()),
                });
            }
        }
    }

    /// The switches read, in stream order (those whose SAMPLE never came
    /// last).
    pub fn finish(mut self) -> Vec<SwitchOut> {
        let mut rest: Vec<Switch> = self.pending.into_values().collect();
        rest.sort_by_key(|s| s.time);
        self.out.extend(rest.into_iter().map(|switch| SwitchOut {
            switch,
            sample: None,
        }));
        self.out
    }
}

/// How a block ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockEnd {
    /// The thread's next switch-out: it ran again in between.
    NextSwitch,
    /// The thread's first on-CPU sample after it (the block ended before).
    SampledAgain,
    /// The thread's exit (the side-car's EXIT event): it was not sampled
    /// again before.
    Exit,
    /// The end of the recording: the thread had not run again (as far as
    /// the recording tells).
    RecordingEnd,
}

/// One interval a thread spent off its CPU.
#[derive(Debug, Clone)]
pub struct Block {
    pub pid: u32,
    pub tgid: u32,
    pub comm: Rc<str>,
    /// When it left its CPU.
    pub start: u64,
    /// ns off its CPU.
    pub off_ns: u64,
    /// Of `off_ns`: ns waiting on a run queue (see the module's doc).
    pub runq_ns: u64,
    /// Why it left.
    pub reason: SwitchReason,
    /// The stacks where it left (`None`: the SAMPLE was lost).
    pub sample: Option<ResolvedSample>,
    pub end: BlockEnd,
}

impl Block {
    /// ns blocked (off its CPU and not waiting on a run queue).
    pub fn blocked_ns(&self) -> u64 {
        self.off_ns.saturating_sub(self.runq_ns)
    }
}

/// One thread's time between its first and its last switch-out (or the
/// end of the recording, for a thread still off its CPU then).
#[derive(Debug, Clone, Default)]
pub struct ThreadTime {
    pub tgid: u32,
    pub comm: String,
    /// ns from its first switch-out recorded to its last (or the end).
    pub span_ns: u64,
    /// ns it ran in that span (its run time gone up).
    pub on_cpu_ns: u64,
    /// ns it waited on run queues in that span.
    pub runq_ns: u64,
    /// ns blocked, per reason.
    pub blocked_ns: BTreeMap<SwitchReason, u64>,
    /// Switch-outs recorded.
    pub switches: u64,
    /// ns its on-CPU samples of a clock stand for (samples × period), in
    /// the span: `on_cpu_ns` as sampling sees it.
    pub sampled_ns: u64,
    /// It exited in the recording.
    pub exited: bool,
    /// It was created in the recording (the side-car's FORK event): its
    /// span starts there.
    pub created: bool,
}

/// The off-CPU analysis of a recording.
#[derive(Debug, Clone, Default)]
pub struct OffCpu {
    /// Blocks at or above the threshold, in order of their threads and
    /// times.
    pub blocks: Vec<Block>,
    /// The threshold: blocked time under it leaves a block out.
    pub thresh_ns: u64,
    /// Blocks the threshold left out, and their blocked ns.
    pub below: (u64, u64),
    /// SWITCH records whose SAMPLE (stacks) was lost.
    pub without_stack: u64,
    /// Run-queue waits measured by the kernel (`CONFIG_SCHED_INFO`), not
    /// inferred.
    pub run_delay_known: bool,
    /// Per thread.
    pub threads: BTreeMap<u32, ThreadTime>,
}

impl OffCpu {
    /// ns blocked in the blocks kept.
    pub fn blocked_ns(&self) -> u64 {
        self.blocks.iter().map(Block::blocked_ns).sum()
    }
}

/// The off-CPU time of `p`'s switches; blocks blocked less than `thresh_ns`
/// are left out (counted).
pub fn analyse(p: &Profile, thresh_ns: u64) -> OffCpu {
    let mut by_thread: BTreeMap<u32, Vec<&SwitchOut>> = BTreeMap::new();
    for w in &p.switches {
        by_thread.entry(w.switch.pid).or_default().push(w);
    }
    // On-CPU sample times per thread (other events than the switches'): a
    // thread sampled after its last switch-out ran again by then.
    let switch_event = p
        .event_list
        .iter()
        .position(|e| e.name == SWITCH_EVENT)
        .map(|i| i as u16);
    let mut first_on_cpu_after: HashMap<u32, Vec<u64>> = HashMap::new();
    // Samples of a clock: (time, ns) per thread.
    let mut clock: HashMap<u32, Vec<(u64, u64)>> = HashMap::new();
    for s in &p.samples {
        if Some(s.event) != switch_event {
            first_on_cpu_after.entry(s.pid).or_default().push(s.time);
            if p.event_list
                .get(usize::from(s.event))
                .is_some_and(|e| e.unit == "ns")
            {
                clock.entry(s.pid).or_default().push((s.time, s.period));
            }
        }
    }
    for v in first_on_cpu_after.values_mut() {
        v.sort_unstable();
    }
    let mut oc = OffCpu {
        thresh_ns,
        run_delay_known: !p.switches.is_empty()
            && p.switches.iter().all(|w| w.switch.run_delay.is_some()),
        ..OffCpu::default()
    };
    for (pid, mut list) in by_thread {
        list.sort_by_key(|w| w.switch.time);
        let first = list[0];
        // Its latest name (a command's first switches are before its exec).
        let comm = list
            .iter()
            .rev()
            .find_map(|w| w.sample.as_ref().map(|s| s.comm.clone()))
            .unwrap_or_else(|| Rc::from(format!(":{pid}").as_str()));
        let mut tt = ThreadTime {
            tgid: first.switch.tgid,
            comm: comm.to_string(),
            switches: list.len() as u64,
            ..ThreadTime::default()
        };
        oc.without_stack += list.iter().filter(|w| w.sample.is_none()).count() as u64;
        // Created in the recording: from then to its first switch-out it
        // ran (its run time since it was created) or waited on a run queue
        // (a task cannot block without switching out), if every switch-out
        // since its creation was recorded: no configuration change and no
        // `tracing_on` switch between the two (`record -- CMD` forks the
        // command before it binds the module to it).
        let born = p
            .starts
            .get(&pid)
            .copied()
            .filter(|&t| t < first.switch.time)
            .filter(|&t| {
                !p.events.iter().any(|e| match e {
                    Event::Config { time, .. } | Event::Tracing { time, .. } => {
                        (t..=first.switch.time).contains(time)
                    }
                    _ => false,
                })
            });
        if let Some(t) = born {
            let lead = first.switch.time - t;
            let ran = first.switch.exec_runtime.min(lead);
            tt.span_ns += lead;
            tt.on_cpu_ns += ran;
            tt.runq_ns += lead - ran;
            tt.created = true;
        }
        let span_start = born.unwrap_or(first.switch.time);
        let push = |oc: &mut OffCpu, tt: &mut ThreadTime, b: Block| {
            tt.runq_ns += b.runq_ns;
            if b.blocked_ns() > 0 {
                *tt.blocked_ns.entry(b.reason).or_default() += b.blocked_ns();
            }
            if b.blocked_ns() < thresh_ns || b.reason == SwitchReason::Preempted {
                if b.reason != SwitchReason::Preempted {
                    oc.below.0 += 1;
                    oc.below.1 += b.blocked_ns();
                }
            } else {
                oc.blocks.push(b);
            }
        };
        for pair in list.windows(2) {
            let (a, b) = (&pair[0].switch, &pair[1].switch);
            let span = b.time.saturating_sub(a.time);
            let ran = b.exec_runtime.saturating_sub(a.exec_runtime).min(span);
            let off = span - ran;
            // A preempted thread waits on a run queue throughout.
            let runq = match (a.run_delay, b.run_delay) {
                _ if a.reason == SwitchReason::Preempted => off,
                (Some(x), Some(y)) => y.saturating_sub(x).min(off),
                _ => 0,
            };
            tt.span_ns += span;
            tt.on_cpu_ns += ran;
            push(
                &mut oc,
                &mut tt,
                Block {
                    pid,
                    tgid: a.tgid,
                    comm: comm.clone(),
                    start: a.time,
                    off_ns: off,
                    runq_ns: runq,
                    reason: a.reason,
                    sample: pair[0].sample.clone(),
                    end: BlockEnd::NextSwitch,
                },
            );
        }
        let last = list[list.len() - 1];
        let exit = p.exits.get(&pid).copied().filter(|&t| t > last.switch.time);
        // Where the thread was seen on a CPU again after its last switch-out.
        let again = first_on_cpu_after
            .get(&pid)
            .and_then(|v| v.iter().copied().find(|&t| t > last.switch.time));
        if last.switch.reason == SwitchReason::Exit {
            tt.exited = true;
        } else if let Some(end) = again
            .or(exit)
            .or(Some(p.last_time))
            .filter(|&t| t > last.switch.time)
        {
            // Off its CPU until it was sampled again, or it exited, or the
            // recording ended; from then to its exit, on it.
            let off = end - last.switch.time;
            tt.span_ns += off;
            if let Some(x) = exit.filter(|&x| x > end) {
                tt.span_ns += x - end;
                tt.on_cpu_ns += x - end;
            }
            tt.exited = exit.is_some();
            push(
                &mut oc,
                &mut tt,
                Block {
                    pid,
                    tgid: last.switch.tgid,
                    comm: comm.clone(),
                    start: last.switch.time,
                    off_ns: off,
                    runq_ns: if last.switch.reason == SwitchReason::Preempted {
                        off
                    } else {
                        0
                    },
                    reason: last.switch.reason,
                    sample: last.sample.clone(),
                    end: match (again, exit) {
                        (Some(_), _) => BlockEnd::SampledAgain,
                        (None, Some(_)) => BlockEnd::Exit,
                        (None, None) => BlockEnd::RecordingEnd,
                    },
                },
            );
        }
        // The span: from the first switch-out to the last, its exit or the
        // block that ends it.
        let span_end = span_start + tt.span_ns;
        tt.sampled_ns = clock.get(&pid).map_or(0, |v| {
            v.iter()
                .filter(|(t, _)| *t > span_start && *t <= span_end)
                .map(|(_, ns)| ns)
                .sum()
        });
        oc.threads.insert(pid, tt);
    }
    oc
}

/// `p` with its samples replaced by one per off-CPU block, weighing its
/// blocked ns (event [`OFF_CPU_EVENT`], unit ns), with the stacks where the
/// thread left its CPU: what `report`, `folded` and `flamegraph` show with
/// `--off-cpu`. Blocks whose stacks were lost are left out.
pub fn as_profile(p: &Profile, oc: &OffCpu) -> Profile {
    let mut q = p.clone();
    let mut info = EventInfo::new(OFF_CPU_EVENT.to_string());
    info.unit = "ns";
    info.weighted = true;
    q.samples = oc
        .blocks
        .iter()
        .filter_map(|b| {
            let mut s = b.sample.clone()?;
            s.weight = b.blocked_ns();
            s.period = b.blocked_ns();
            s.event = 0;
            Some(s)
        })
        .collect();
    info.samples = q.samples.len() as u64;
    q.event_list = vec![info];
    q.filter.event = None;
    q
}

/// The off-CPU profile `q` ([`as_profile`]) for the Firefox Profiler: its
/// samples weigh the µs blocked (the JSON says ms, `firefox::to_json`) and
/// stand for no CPU time (`firefox.rs` gives [`OFF_CPU_EVENT`]'s samples
/// none).
pub fn for_firefox(mut q: Profile) -> Profile {
    for s in &mut q.samples {
        s.weight = s.weight.div_ceil(1000);
    }
    q
}

/// `p`'s on-CPU samples weighing the ns they stand for (`--weight time`):
/// samples of the clocks weigh their period; the switches' samples are left
/// out. `Err` if an event sampled is no clock (its period is events, not
/// time).
pub fn on_cpu_time(p: &Profile) -> Result<Profile> {
    let mut q = p.clone();
    let switch_event = p.event_list.iter().position(|e| e.name == SWITCH_EVENT);
    q.samples
        .retain(|s| Some(usize::from(s.event)) != switch_event);
    for s in &mut q.samples {
        let e = &p.event_list[usize::from(s.event)];
        if e.unit != "ns" {
            bail!(
                "--weight time: event {} counts events, not time (record with -e cpu-clock)",
                e.name
            );
        }
        s.weight = s.period;
    }
    Ok(q)
}

/// The innermost user frame of a block's stacks (where the program
/// called into the kernel); for a kernel thread the innermost kernel frame
/// outside the scheduler (`schedule`, `schedule_timeout`, ...), else its
/// innermost frame.
pub fn where_blocked(s: &ResolvedSample) -> String {
    let frames = || std::iter::once(&s.pc).chain(s.callchain.iter());
    frames()
        .find(|f| !f.kernel && !f.is_truncated())
        .or_else(|| frames().find(|f| f.kernel && !f.function_name().contains("schedule")))
        .unwrap_or(&s.pc)
        .function_name()
}

fn ms(ns: u64) -> String {
    format!("{:.1}", ns as f64 / 1e6)
}

fn pct(part: u64, whole: u64) -> String {
    if whole == 0 {
        "-".into()
    } else {
        format!("{:.1}%", 100.0 * part as f64 / whole as f64)
    }
}

/// The off-CPU report: blocked time per reason, per function where the
/// threads blocked (their innermost user frame), per stack, and the run
/// queue waits apart.
pub fn write_report(oc: &OffCpu, top: usize, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    let total = oc.blocked_ns();
    let runq: u64 = oc.threads.values().map(|t| t.runq_ns).sum();
    writeln!(
        out,
        "# Off-CPU time: {} ms blocked in {} blocks of {} threads; {} ms waiting on run queues ({})",
        ms(total),
        oc.blocks.len(),
        oc.threads.len(),
        ms(runq),
        if oc.run_delay_known {
            "measured by the kernel"
        } else {
            "inferred: preemptions only; the kernel keeps no run_delay (CONFIG_SCHED_INFO)"
        }
    )?;
    writeln!(
        out,
        "# Threshold {} us: {} blocks ({} ms) left out; {} switches without stacks (lost)",
        oc.thresh_ns / 1000,
        oc.below.0,
        ms(oc.below.1),
        oc.without_stack
    )?;
    writeln!(
        out,
        "\n# By reason\n{:>12} {:>7} {:>8}  Reason",
        "Blocked ms", "Share", "Blocks"
    )?;
    let mut by_reason: BTreeMap<SwitchReason, (u64, u64)> = BTreeMap::new();
    for b in &oc.blocks {
        let e = by_reason.entry(b.reason).or_default();
        e.0 += b.blocked_ns();
        e.1 += 1;
    }
    for (r, (ns, n)) in &by_reason {
        writeln!(
            out,
            "{:>12} {:>7} {:>8}  {}",
            ms(*ns),
            pct(*ns, total),
            n,
            r.name()
        )?;
    }
    let mut by_fn: HashMap<String, (u64, u64)> = HashMap::new();
    let mut by_stack: HashMap<String, (u64, u64)> = HashMap::new();
    for b in &oc.blocks {
        let (f, stack) = match &b.sample {
            Some(s) => (
                where_blocked(s),
                s.stack_root_first()
                    .map(|f| f.function_name())
                    .collect::<Vec<_>>()
                    .join(";"),
            ),
            None => ("[stack lost]".to_string(), "[stack lost]".to_string()),
        };
        let e = by_fn
            .entry(format!("{} {}", b.reason.name(), f))
            .or_default();
        e.0 += b.blocked_ns();
        e.1 += 1;
        let e = by_stack
            .entry(format!("{};{};[{}]", b.comm, stack, b.reason.name()))
            .or_default();
        e.0 += b.blocked_ns();
        e.1 += 1;
    }
    let sorted = |m: HashMap<String, (u64, u64)>| {
        let mut v: Vec<(String, (u64, u64))> = m.into_iter().collect();
        v.sort_by(|a, b| b.1 .0.cmp(&a.1 .0).then_with(|| a.0.cmp(&b.0)));
        if top > 0 {
            v.truncate(top);
        }
        v
    };
    writeln!(
        out,
        "\n# By function where blocked\n{:>12} {:>7} {:>8}  {:<10} Function",
        "Blocked ms", "Share", "Blocks", "Reason"
    )?;
    for (k, (ns, n)) in sorted(by_fn) {
        let (reason, f) = k.split_once(' ').unwrap_or(("", &k));
        writeln!(
            out,
            "{:>12} {:>7} {:>8}  {:<10} {}",
            ms(ns),
            pct(ns, total),
            n,
            reason,
            f
        )?;
    }
    writeln!(
        out,
        "\n# By stack (root first)\n{:>12} {:>7} {:>8}  Stack",
        "Blocked ms", "Share", "Blocks"
    )?;
    for (k, (ns, n)) in sorted(by_stack) {
        writeln!(out, "{:>12} {:>7} {:>8}  {}", ms(ns), pct(ns, total), n, k)?;
    }
    Ok(())
}

/// The wall-clock view: per thread, its span between its first and last
/// switch-out (or the end) split into on-CPU time, run-queue waits and
/// blocked time per reason, which add up to the span.
pub fn write_wall_clock(oc: &OffCpu, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    writeln!(
        out,
        "# Wall clock per thread: its span (from its creation or first switch-out to its exit or \
         last switch-out) = on-CPU + run queue + blocked; on-CPU is its run time, Sampled its clock \
         samples x period"
    )?;
    writeln!(
        out,
        "{:>8} {:>8} {:<16} {:>10} {:>16} {:>16} {:>16} {:>11}  Blocked by reason",
        "Pid", "Tid", "Command", "Span ms", "On-CPU ms", "Run queue ms", "Blocked ms", "Sampled ms"
    )?;
    for (tid, t) in &oc.threads {
        let blocked: u64 = t.blocked_ns.values().sum();
        let reasons: Vec<String> = t
            .blocked_ns
            .iter()
            .map(|(r, ns)| format!("{} {} ({})", r.name(), ms(*ns), pct(*ns, t.span_ns)))
            .collect();
        writeln!(
            out,
            "{:>8} {:>8} {:<16} {:>10} {:>9} {:>6} {:>9} {:>6} {:>9} {:>6} {:>11}  {}",
            t.tgid,
            tid,
            t.comm,
            ms(t.span_ns),
            ms(t.on_cpu_ns),
            pct(t.on_cpu_ns, t.span_ns),
            ms(t.runq_ns),
            pct(t.runq_ns, t.span_ns),
            ms(blocked),
            pct(blocked, t.span_ns),
            ms(t.sampled_ns),
            reasons.join(", ")
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::LoadOptions;
    use crate::sidecar::Sidecar;
    use oprofile_stream::{Encoder, Header, Record, Sample};

    const MS: u64 = 1_000_000;

    fn switch(cpu: u16, time: u64, pid: u32, reason: SwitchReason, exec: u64) -> Record {
        Record::Switch(Switch {
            cpu,
            time,
            pid,
            tgid: 100,
            reason,
            state: 1,
            exec_runtime: exec,
            run_delay: None,
        })
    }

    fn sample(cpu: u16, time: u64, pid: u32, pc: u64) -> Record {
        Record::Sample(Sample {
            cpu,
            kernel: false,
            time,
            pc,
            pid,
            tgid: 100,
            period: 1,
            ..Default::default()
        })
    }

    fn profile(records: &[Record]) -> Profile {
        let h = Header::default();
        let mut e = Encoder::new(&h);
        for r in records {
            e.record(r);
        }
        Profile::from_bytes(&e.finish(), &Sidecar::default(), &LoadOptions::default()).unwrap()
    }

    #[test]
    fn blocks_are_the_time_off_cpu_between_switch_outs() {
        use SwitchReason::*;
        // Thread 7: runs 1 ms, sleeps at 0x1000 until 101 ms (switched in),
        // runs 1 ms, blocks (D) at 0x2000 until 402 ms, runs 1 ms, exits.
        // An interrupt's sample comes between a SWITCH and its SAMPLE.
        let p = profile(&[
            switch(0, 10 * MS, 7, Sleep, MS),
            sample(0, 10 * MS + 5, 7, 0x9000),
            sample(0, 10 * MS, 7, 0x1000),
            switch(1, 102 * MS, 7, Blocked, 2 * MS),
            sample(1, 102 * MS, 7, 0x2000),
            switch(0, 403 * MS, 7, Exit, 3 * MS),
            sample(0, 403 * MS, 7, 0x3000),
            // Thread 8: a switch whose SAMPLE was lost, then preempted.
            switch(2, 10 * MS, 8, Sleep, 0),
            switch(2, 20 * MS, 8, Preempted, 5 * MS),
            sample(2, 20 * MS, 8, 0x4000),
            switch(2, 30 * MS, 8, Exit, 9 * MS),
            sample(2, 30 * MS, 8, 0x5000),
        ]);
        assert_eq!(p.switches.len(), 6);
        let oc = analyse(&p, 10_000);
        let t7: Vec<(u64, SwitchReason, u64)> = oc
            .blocks
            .iter()
            .filter(|b| b.pid == 7)
            .map(|b| (b.blocked_ns(), b.reason, b.sample.as_ref().unwrap().pc.addr))
            .collect();
        assert_eq!(
            t7,
            vec![(91 * MS, Sleep, 0x1000), (300 * MS, Blocked, 0x2000)]
        );
        // Thread 8's sleep has no stack; its preemption is run-queue time.
        let t8: Vec<&Block> = oc.blocks.iter().filter(|b| b.pid == 8).collect();
        assert_eq!(t8.len(), 1);
        assert!(t8[0].sample.is_none());
        assert_eq!(t8[0].blocked_ns(), 5 * MS);
        assert_eq!(oc.without_stack, 1);
        let w = &oc.threads[&8];
        assert_eq!(
            (w.span_ns, w.on_cpu_ns, w.runq_ns),
            (20 * MS, 9 * MS, 6 * MS)
        );
        // The wall clock adds up.
        for t in oc.threads.values() {
            let blocked: u64 = t.blocked_ns.values().sum();
            assert_eq!(t.on_cpu_ns + t.runq_ns + blocked, t.span_ns);
            assert!(t.exited);
        }
        // The threshold leaves short blocks out, counted.
        let oc = analyse(&p, 100 * MS);
        assert_eq!(oc.blocks.len(), 1);
        assert_eq!(oc.below, (2, 96 * MS));
        // The off-CPU profile weighs each block's ns.
        let q = as_profile(&p, &analyse(&p, 0));
        let weights: Vec<u64> = q.samples.iter().map(|s| s.weight).collect();
        assert_eq!(weights, vec![91 * MS, 300 * MS]);
        // pprof: off-cpu/nanoseconds, the blocked ns summed.
        let pb = crate::pprof::build(&q);
        let types: Vec<(&str, &str)> = pb
            .sample_type
            .iter()
            .map(|t| {
                (
                    pb.string_table[t.r#type as usize].as_str(),
                    pb.string_table[t.unit as usize].as_str(),
                )
            })
            .collect();
        assert_eq!(types, [("samples", "count"), ("off-cpu", "nanoseconds")]);
        let ns: i64 = pb.sample.iter().map(|s| s.value[1]).sum();
        assert_eq!(ns, (391 * MS) as i64);
        // Firefox: the blocks' ms as weights ("tracing-ms": the call tree
        // shows time, not a count of samples), no CPU time.
        let ff = crate::firefox::to_json(&for_firefox(q), None).unwrap();
        let samples = &ff["threads"][0]["samples"];
        assert_eq!(samples["weightType"], "tracing-ms", "{samples}");
        let weights: Vec<f64> = samples["weight"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w.as_f64().unwrap())
            .collect();
        assert_eq!(weights, vec![91.0, 300.0], "{samples}");
        assert!(
            samples["threadCPUDelta"]
                .as_array()
                .is_none_or(|d| d.iter().all(|v| v.as_u64().unwrap_or(0) == 0)),
            "{samples}"
        );
    }

    /// A block longer than a 32-bit count of µs (35 minutes) weighs its
    /// whole time in the Firefox Profiler's JSON (it weighed 35 minutes).
    #[test]
    fn firefox_weighs_blocks_of_hours() {
        const HOUR: u64 = 3600 * 1000 * MS;
        let p = profile(&[
            switch(0, 10 * MS, 7, SwitchReason::Sleep, MS),
            sample(0, 10 * MS, 7, 0x1000),
            switch(0, 10 * MS + 3 * HOUR + MS, 7, SwitchReason::Sleep, 2 * MS),
            sample(0, 10 * MS + 3 * HOUR + MS, 7, 0x2000),
            switch(0, 20 * MS + 3 * HOUR, 7, SwitchReason::Exit, 3 * MS),
            sample(0, 20 * MS + 3 * HOUR, 7, 0x3000),
        ]);
        let q = as_profile(&p, &analyse(&p, 0));
        let ff = crate::firefox::to_json(&for_firefox(q), None).unwrap();
        let weights: Vec<f64> = ff["threads"][0]["samples"]["weight"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w.as_f64().unwrap())
            .collect();
        assert_eq!(weights, vec![3.0 * 3600.0 * 1000.0, 8.0]);
    }

    #[test]
    fn a_thread_off_cpu_at_the_end_is_blocked_to_the_end() {
        let p = profile(&[
            switch(0, 10 * MS, 7, SwitchReason::Sleep, MS),
            sample(0, 10 * MS, 7, 0x1000),
            // Another thread's record ends the recording at 50 ms.
            switch(1, 50 * MS, 8, SwitchReason::Exit, MS),
        ]);
        let oc = analyse(&p, 0);
        let b = oc.blocks.iter().find(|b| b.pid == 7).unwrap();
        assert_eq!((b.blocked_ns(), b.end), (40 * MS, BlockEnd::RecordingEnd));
    }

    #[test]
    fn a_last_block_ends_at_the_next_sample_or_the_exit() {
        let records = [
            switch(0, 10 * MS, 7, SwitchReason::Sleep, MS),
            sample(0, 10 * MS, 7, 0x1000),
            switch(1, 50 * MS, 8, SwitchReason::Exit, MS),
        ];
        // Exited at 30 ms (the side-car's EXIT), not sampled again.
        let mut p = profile(&records);
        p.exits.insert(7, 30 * MS);
        let oc = analyse(&p, 0);
        let b = oc.blocks.iter().find(|b| b.pid == 7).unwrap();
        assert_eq!((b.blocked_ns(), b.end), (20 * MS, BlockEnd::Exit));
        assert!(oc.threads[&7].exited);
        // Sampled on its CPU at 25 ms: blocked until then, on it to 30 ms.
        let mut r = records.to_vec();
        r.push(Record::Sample(Sample {
            event: 0,
            ..match sample(0, 25 * MS, 7, 0x9000) {
                Record::Sample(s) => s,
                _ => unreachable!(),
            }
        }));
        let mut p = profile(&r);
        p.exits.insert(7, 30 * MS);
        let oc = analyse(&p, 0);
        let b = oc.blocks.iter().find(|b| b.pid == 7).unwrap();
        assert_eq!((b.blocked_ns(), b.end), (15 * MS, BlockEnd::SampledAgain));
        let t = &oc.threads[&7];
        assert_eq!((t.span_ns, t.on_cpu_ns), (20 * MS, 5 * MS));
        // Its one clock sample in the span (period 1 ns here).
        assert_eq!(t.sampled_ns, 1);
        // Created at 5 ms: it ran its 1 ms before its first switch-out,
        // and waited the rest on a run queue.
        p.starts.insert(7, 5 * MS);
        let t = analyse(&p, 0).threads[&7].clone();
        assert!(t.created);
        assert_eq!(
            (t.span_ns, t.on_cpu_ns, t.runq_ns),
            (25 * MS, 6 * MS, 4 * MS)
        );
        // Unless recording was switched between its creation and its first
        // switch-out recorded: switch-outs may be missing there.
        p.events.push(Event::Tracing {
            time: 8 * MS,
            cpu: 0,
            on: true,
            segment: 1,
        });
        let t = analyse(&p, 0).threads[&7].clone();
        assert!(!t.created);
        assert_eq!(t.span_ns, 20 * MS);
    }

    #[test]
    fn record_events_add_the_switches() {
        let (e, c, f) = record_events(vec![], vec![], vec![]).unwrap();
        assert_eq!(e, ["cpu-clock", "context-switches"]);
        assert_eq!((c, f), (vec![0, 1], vec![]));
        let (e, c, f) = record_events(
            vec!["cycles".into(), "page-faults".into()],
            vec![5000],
            vec![],
        )
        .unwrap();
        assert_eq!(e, ["cycles", "page-faults", "context-switches"]);
        assert_eq!((c, f), (vec![5000, 5000, 1], vec![]));
        let (_, c, f) = record_events(vec!["cycles".into()], vec![], vec![99]).unwrap();
        assert_eq!((c, f), (vec![0, 1], vec![99, 0]));
        assert!(record_events(vec!["context-switches".into()], vec![], vec![]).is_err());
        assert!(record_events(vec!["cycles".into()], vec![1, 2], vec![]).is_err());
    }
}
