//! `report`: a flat profile, with `--children` (inclusive weight, as
//! `perf report --children`), `-g` (call trees under the rows, as `perf
//! report -g`: [`crate::calltree`]) and `--callers` (each function's direct
//! callers and callees, as `opreport -c`), in text or JSON. Every figure is a sum of
//! sample weights ([`crate::profile::ResolvedSample::weight`]).

use std::collections::{HashMap, HashSet};
use std::io::Write;

use oprofile_stream::HeaderExt;

use serde::Serialize;

use crate::calltree::{self, CallGraph, Tree};
use crate::profile::{lost_share, EventInfo, Profile, ResolvedSample};
use crate::symbols::Frame;
use crate::text::esc;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SortKey {
    /// The function (and its binary).
    #[default]
    #[value(alias = "sym")]
    Symbol,
    /// The binary (executable, library, `[kernel.kallsyms]`, `[NAME]` of
    /// module NAME).
    Dso,
    /// The process (tgid, with its name).
    #[value(alias = "tgid")]
    Pid,
    /// The task name.
    Comm,
    /// The CPU.
    Cpu,
    /// The source line of the address (DWARF; the innermost inlined
    /// function's), `FILE:LINE`; `BINARY+0xOFFSET` where there is none.
    Srcline,
}

impl SortKey {
    /// Whether the key is of a frame (the stack's frames have their own
    /// value) rather than of the sample.
    fn of_frame(self) -> bool {
        matches!(self, SortKey::Symbol | SortKey::Dso | SortKey::Srcline)
    }
}

#[derive(Debug, Clone, Default)]
pub struct ReportOptions {
    /// Row keys, combined (`--sort symbol,pid`); empty = symbol.
    pub sort: Vec<SortKey>,
    /// Split rows by CPU (adds the cpu key first).
    pub per_cpu: bool,
    /// Split rows by process (adds the pid key).
    pub per_process: bool,
    /// Show only the first N rows (0 = all).
    pub top: usize,
    /// Leave out the rows whose share (inclusive with `children`) is
    /// under this percentage (0: none).
    pub percent_limit: f64,
    /// Add the inclusive weight (the function anywhere in the stack) and
    /// sort by it.
    pub children: bool,
    /// Print each row's direct callers and callees.
    pub callers: bool,
    /// Draw each row's call tree (`-g`).
    pub graph: Option<CallGraph>,
    /// Only rows of these functions (exact names).
    pub symbols: Vec<String>,
}

impl ReportOptions {
    /// The row keys in column order.
    pub fn keys(&self) -> Vec<SortKey> {
        let mut k = Vec::new();
        if self.per_cpu {
            k.push(SortKey::Cpu);
        }
        for s in &self.sort {
            if !k.contains(s) {
                k.push(*s);
            }
        }
        if self.sort.is_empty() && !k.contains(&SortKey::Symbol) {
            k.push(SortKey::Symbol);
        }
        if self.per_process && !k.contains(&SortKey::Pid) {
            k.push(SortKey::Pid);
        }
        k
    }
}

/// The values of a row's keys (`None` for keys the report does not use).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, Serialize)]
pub struct RowKey {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub symbol: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dso: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub comm: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub srcline: Option<String>,
}

/// A caller or callee of a row's function, with the weight of the samples
/// whose stacks have that call.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Edge {
    /// Function name, `[self]` for the samples taken in the function itself,
    /// `[root]` where it is the outermost frame of the stack.
    pub symbol: String,
    pub dso: String,
    pub weight: u64,
    /// Of the row's inclusive weight.
    pub percent: f64,
}

/// One row of the report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    #[serde(flatten)]
    pub key: RowKey,
    /// Samples taken in the row (leaf frame).
    pub samples: u64,
    /// Their summed weight (= samples while the stream has no periods).
    pub weight: u64,
    /// `weight` as a share of all weight kept.
    pub percent: f64,
    /// With `--children`: weight of the samples with the row's function
    /// anywhere in their stack, and its share.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub children_weight: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub children_percent: Option<f64>,
    /// For rows not keyed by process: the process with the most weight in
    /// the row, its name and how many other processes share the row.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top_process: Option<TopProcess>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub callers: Vec<Edge>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub callees: Vec<Edge>,
    /// With `-g`: the row's call tree ([`crate::calltree`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub call_tree: Option<Tree>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TopProcess {
    pub pid: u32,
    pub comm: String,
    pub others: usize,
}

fn pct(part: u64, total: u64) -> f64 {
    if total == 0 {
        0.0
    } else {
        100.0 * part as f64 / total as f64
    }
}

/// The key of frame `f` of sample `s`.
fn key_of(keys: &[SortKey], s: &ResolvedSample, f: &Frame) -> RowKey {
    let mut k = RowKey::default();
    for key in keys {
        match key {
            SortKey::Symbol => {
                k.symbol = Some(f.name());
                k.dso = Some(f.dso.clone());
            }
            SortKey::Dso => k.dso = Some(f.dso.clone()),
            SortKey::Pid => {
                k.pid = Some(s.tgid);
                k.comm = Some(s.comm.to_string());
            }
            SortKey::Comm => k.comm = Some(s.comm.to_string()),
            SortKey::Cpu => k.cpu = Some(s.cpu),
            SortKey::Srcline => k.srcline = Some(srcline(f)),
        }
    }
    k
}

/// The `srcline` key of `f`: its source line (of the innermost function
/// inlined there), else its binary and the address (the file offset in a
/// file mapping), as perf's `srcline` falls back to `BINARY[+OFFSET]`.
fn srcline(f: &Frame) -> String {
    match (f.leaf_srcline(), f.file_offset) {
        (Some(l), _) => l.to_string(),
        (None, Some(off)) => format!("{}+{off:#x}", f.dso),
        (None, None) => format!("{}+{:#x}", f.dso, f.addr),
    }
}

#[derive(Default)]
struct Acc {
    samples: u64,
    weight: u64,
    children: u64,
    procs: HashMap<(u32, String), u64>,
    callers: HashMap<(String, String), u64>,
    callees: HashMap<(String, String), u64>,
}

fn edges(m: HashMap<(String, String), u64>, total: u64) -> Vec<Edge> {
    let mut v: Vec<Edge> = m
        .into_iter()
        .map(|((symbol, dso), weight)| Edge {
            symbol,
            dso,
            weight,
            percent: pct(weight, total),
        })
        .collect();
    v.sort_by(|a, b| {
        b.weight
            .cmp(&a.weight)
            .then_with(|| a.symbol.cmp(&b.symbol))
    });
    v
}

/// Computes the rows, most weight first (inclusive weight with
/// `--children`), ties by key.
pub fn rows(p: &Profile, o: &ReportOptions) -> Vec<Row> {
    let keys = o.keys();
    let total = p.total_weight();
    let stack_keys = keys.iter().any(|k| k.of_frame());
    let mut acc: HashMap<RowKey, Acc> = HashMap::new();
    let mut seen: HashSet<RowKey> = HashSet::new();
    let mut seen_edges: HashSet<(RowKey, bool, (String, String))> = HashSet::new();
    for s in &p.samples {
        let w = s.weight;
        let leaf = key_of(&keys, s, &s.pc);
        let a = acc.entry(leaf).or_default();
        a.samples += 1;
        a.weight += w;
        *a.procs.entry((s.tgid, s.comm.to_string())).or_default() += w;
        if !(o.children || o.callers) {
            continue;
        }
        // Frames from the leaf outwards; each key counts once per sample
        // (recursion), and so does each of its caller and callee edges.
        let frames: Vec<&Frame> = std::iter::once(&*s.pc)
            .chain(s.callchain.iter().map(|f| &**f))
            .collect();
        seen.clear();
        seen_edges.clear();
        for (i, f) in frames.iter().enumerate() {
            let k = key_of(&keys, s, f);
            if !stack_keys && i > 0 {
                break;
            }
            if seen.insert(k.clone()) {
                let a = acc.entry(k.clone()).or_default();
                a.children += w;
                if i > 0 {
                    a.procs.entry((s.tgid, s.comm.to_string())).or_default();
                }
            }
            if o.callers {
                let caller = frames
                    .get(i + 1)
                    .map(|c| (c.name(), c.dso.clone()))
                    .unwrap_or_else(|| ("[root]".into(), String::new()));
                let callee = match i {
                    0 => ("[self]".into(), String::new()),
                    _ => (frames[i - 1].name(), frames[i - 1].dso.clone()),
                };
                let a = acc.entry(k.clone()).or_default();
                if seen_edges.insert((k.clone(), true, caller.clone())) {
                    *a.callers.entry(caller).or_default() += w;
                }
                if seen_edges.insert((k.clone(), false, callee.clone())) {
                    *a.callees.entry(callee).or_default() += w;
                }
            }
        }
    }
    let by_process = keys
        .iter()
        .any(|k| matches!(k, SortKey::Pid | SortKey::Comm));
    let cpu_only = keys == [SortKey::Cpu];
    let mut rows: Vec<Row> = acc
        .into_iter()
        .filter(|(k, _)| {
            o.symbols.is_empty()
                || k.symbol
                    .as_ref()
                    .is_some_and(|s| o.symbols.iter().any(|x| x == s))
        })
        .map(|(key, a)| {
            let top_process = (!by_process && !cpu_only)
                .then(|| {
                    let mut v: Vec<_> = a.procs.into_iter().collect();
                    v.sort_by(|x, y| y.1.cmp(&x.1).then(x.0.cmp(&y.0)));
                    let others = v.len().saturating_sub(1);
                    v.into_iter()
                        .next()
                        .map(|((pid, comm), _)| TopProcess { pid, comm, others })
                })
                .flatten();
            let inclusive = a.children.max(a.weight);
            Row {
                key,
                samples: a.samples,
                weight: a.weight,
                percent: pct(a.weight, total),
                children_weight: o.children.then_some(inclusive),
                children_percent: o.children.then(|| pct(inclusive, total)),
                top_process,
                callers: edges(a.callers, inclusive),
                callees: edges(a.callees, inclusive),
                call_tree: None,
            }
        })
        .filter(|r| r.weight > 0 || r.children_weight.is_some_and(|c| c > 0))
        .filter(|r| r.children_percent.unwrap_or(r.percent) >= o.percent_limit)
        .collect();
    rows.sort_by(|a, b| {
        b.children_weight
            .cmp(&a.children_weight)
            .then(b.weight.cmp(&a.weight))
            .then_with(|| a.key.symbol.cmp(&b.key.symbol))
            .then_with(|| a.key.dso.cmp(&b.key.dso))
            .then_with(|| a.key.cpu.cmp(&b.key.cpu))
            .then_with(|| a.key.pid.cmp(&b.key.pid))
            .then_with(|| a.key.comm.cmp(&b.key.comm))
            .then_with(|| a.key.srcline.cmp(&b.key.srcline))
    });
    if o.top > 0 {
        rows.truncate(o.top);
    }
    if let Some(g) = o.graph {
        add_trees(p, o, &keys, g, &mut rows);
    }
    rows
}

/// Draws the call trees of `rows` ([`crate::calltree`]): each sample's path
/// is added to the tree of every row it stands for (its leaf's row, and
/// with `--children` the row of every function in its stack, once).
fn add_trees(p: &Profile, o: &ReportOptions, keys: &[SortKey], g: CallGraph, rows: &mut [Row]) {
    let index: HashMap<&RowKey, usize> =
        rows.iter().enumerate().map(|(i, r)| (&r.key, i)).collect();
    let stack_keys = keys.iter().any(|k| k.of_frame());
    let mut names = calltree::Interner::default();
    let mut trees: Vec<calltree::Builder> = (0..rows.len()).map(|_| Default::default()).collect();
    // With --children, a sample is in the trees of the rows of all its
    // frames: its stack goes into a trie that splits into them.
    let mut trie = calltree::Trie::default();
    let mut path: Vec<u32> = Vec::new();
    let mut framed: Vec<(u32, Option<usize>)> = Vec::new();
    // Frames are shared (`Rc`) among the samples: their function ids, and
    // their rows where the rows are keyed by frames only, once a frame.
    let frame_keys_only = keys.iter().all(|k| k.of_frame());
    let mut ids: HashMap<*const Frame, u32> = HashMap::new();
    let mut rows_of_frames: HashMap<*const Frame, Option<usize>> = HashMap::new();
    for s in &p.samples {
        let frames: Vec<&Frame> = std::iter::once(&*s.pc)
            .chain(s.callchain.iter().map(|f| &**f))
            .collect();
        let leaf_row = index.get(&key_of(keys, s, &s.pc)).copied();
        if o.children {
            framed.clear();
            for f in &frames {
                let row = if !stack_keys {
                    leaf_row
                } else if frame_keys_only {
                    *rows_of_frames
                        .entry(*f as *const Frame)
                        .or_insert_with(|| index.get(&key_of(keys, s, f)).copied())
                } else {
                    index.get(&key_of(keys, s, f)).copied()
                };
                let id = *ids.entry(*f as *const Frame).or_insert_with(|| names.id(f));
                framed.push((id, row));
            }
            match g.order {
                // From the row's outermost frame down to the sampled one.
                calltree::Order::Caller => trie.add(framed.iter().rev().copied(), s.weight),
                // From the row's innermost frame up to the outermost.
                calltree::Order::Callee => trie.add(framed.iter().copied(), s.weight),
            }
            continue;
        }
        let Some(r) = leaf_row else {
            continue;
        };
        path.clear();
        path.extend(
            frames
                .iter()
                .map(|f| *ids.entry(*f as *const Frame).or_insert_with(|| names.id(f))),
        );
        // The row's own samples: from the sampled frame up (callee), or
        // from the outermost frame down to it (caller).
        if g.order == calltree::Order::Caller {
            path.reverse();
        }
        trees[r].add(&path, s.weight);
    }
    trie.split(&mut trees);
    let total = p.total_weight();
    for (r, t) in rows.iter_mut().zip(trees) {
        r.call_tree = Some(t.finish(&names, total, g.threshold));
    }
}

/// The event a profile shows: the one `--event` (or a report section)
/// chose, or the recording's only one.
pub fn shown_event(p: &Profile) -> Option<&EventInfo> {
    match &p.filter.event {
        Some((i, _)) => p.event_list.get(usize::from(*i)),
        None if p.event_list.len() == 1 => p.event_list.first(),
        None => None,
    }
}

/// The header lines (event, samples, filter, recording, per-CPU totals).
fn write_header(p: &Profile, o: &ReportOptions, out: &mut dyn Write) -> std::io::Result<()> {
    let h = &p.header;
    match shown_event(p) {
        // The header's event: as the header says it.
        Some(e) if e.name == h.event_name() && e.settings.len() < 2 => {
            let mode = if h.sample_freq != 0 {
                format!("{} Hz", h.sample_freq)
            } else {
                format!("period {}", h.sample_period)
            };
            writeln!(
                out,
                "# event: {} ({}), {}, {} CPUs",
                esc(&h.event_name()),
                h.sample_source_name(),
                e.settings.first().unwrap_or(&mode),
                h.nr_cpus
            )?
        }
        Some(e) => writeln!(
            out,
            "# event: {}, {}, {} CPUs",
            esc(&e.name),
            esc(&e.describe()),
            h.nr_cpus
        )?,
        None => writeln!(
            out,
            "# events: {}, {} CPUs",
            esc(&crate::profile::event_names(&p.event_list)),
            h.nr_cpus
        )?,
    }
    if p.event_list.len() > 1 {
        writeln!(
            out,
            "# the recording has {} events: {}",
            p.event_list.len(),
            esc(&crate::profile::event_names(&p.event_list))
        )?;
    }
    if let Some(e) = shown_event(p).filter(|e| e.weighted) {
        writeln!(
            out,
            "# weights: each sample's period ({}): the periods differ",
            e.unit
        )?;
    }
    let recorded = p.recorded_samples();
    let throttled = p.total_throttled();
    write!(out, "# samples: {}, lost: {}", recorded, p.total_lost())?;
    if p.total_lost() > 0 {
        write!(
            out,
            " ({} of the samples taken)",
            lost_share(recorded, p.total_lost())
        )?;
    }
    if throttled > 0 {
        write!(out, ", throttled by perf: {throttled}")?;
    }
    writeln!(out)?;
    if let Some(u) = p.unwind.describe() {
        writeln!(out, "# call graph: {u}")?;
    }
    let stacks = samples_with_stacks(p);
    match o.graph {
        Some(g) => writeln!(out, "# {}", tree_note(o, g))?,
        None if stacks > 0 && !o.callers => {
            let cut = truncated_samples(p);
            if cut * 2 > stacks {
                // Most stacks are cut: -g would show wrong or missing
                // callers, so the note points at the cause first.
                writeln!(
                    out,
                    "# call stacks recorded ({stacks} of {} samples), but {cut} of them are cut \
                     short (\"call stacks cut\" below says why and what fixes it): -g would \
                     show callers for few samples",
                    p.samples.len()
                )?
            } else {
                writeln!(
                    out,
                    "# call stacks recorded ({stacks} of {} samples): -g shows who calls each \
                     function, --children -g what each one calls",
                    p.samples.len()
                )?
            }
        }
        None => {}
    }
    let cgroups = p.cgroup_filters();
    if !cgroups.is_empty() {
        let ids: Vec<String> = cgroups.iter().map(u64::to_string).collect();
        writeln!(
            out,
            "# recorded with the module's cgroup filter: only the tasks of cgroup {} and below",
            ids.join(", then ")
        )?;
    }
    if let Some(w) = p.profiled_words() {
        writeln!(out, "# profiled: {w}")?;
    }
    if !p.filter.is_empty() {
        writeln!(
            out,
            "# filter: {}: {} of {} samples",
            esc(&p.filter.describe()),
            p.total_samples(),
            p.recorded_samples()
        )?;
    }
    if let Some(t) = truncated_note(p) {
        writeln!(out, "# {t}")?;
    }
    let secs = p.recording_ns() as f64 / 1e9;
    write!(out, "# recording: {secs:.2} s")?;
    if let Some(rate) = p.requested_rate() {
        write!(out, ", {rate:.0} samples/s per CPU asked for")?;
    }
    writeln!(out)?;
    // The throttled column only where perf throttled (the header stays
    // as it was otherwise).
    let column = |v: &dyn std::fmt::Display| {
        if throttled > 0 {
            format!(" {:>10}", v.to_string())
        } else {
            String::new()
        }
    };
    writeln!(
        out,
        "# {:>4} {:>10} {:>10} {:>10}{}",
        "cpu",
        "samples",
        "lost",
        "taken/s",
        column(&"throttled")
    )?;
    for (cpu, st) in &p.per_cpu {
        let rate = if secs > 0.0 {
            format!("{:.0}", (st.samples + st.lost) as f64 / secs)
        } else {
            "-".into()
        };
        writeln!(
            out,
            "# {:>4} {:>10} {:>10} {:>10}{}",
            cpu,
            st.samples,
            st.lost,
            rate,
            column(&st.throttled)
        )?;
    }
    writeln!(out, "#")
}

/// A `srcline` key as the text report shows it: the file's name without
/// its directories, as perf's (the JSON has the whole path).
fn short_srcline(l: &str) -> String {
    match l.rsplit_once(':') {
        Some((file, line)) if line.parse::<u32>().is_ok() => {
            let name = file.rsplit('/').next().unwrap_or(file);
            format!("{name}:{line}")
        }
        _ => l.to_string(),
    }
}

/// Kept samples with at least one caller recorded.
pub fn samples_with_stacks(p: &Profile) -> u64 {
    p.samples.iter().filter(|s| !s.callchain.is_empty()).count() as u64
}

/// The header's line on the call trees of `-g`: what they show and what
/// they leave out.
fn tree_note(o: &ReportOptions, g: CallGraph) -> String {
    let what = match (g.order, o.children) {
        (calltree::Order::Caller, true) => {
            "from each function down to the frames sampled under it (total%, self%)"
        }
        (calltree::Order::Caller, false) => {
            "each function's own samples, from the outermost caller down to it (total%, self%)"
        }
        (calltree::Order::Callee, true) => {
            "from each function up to its outermost callers, for every sample it is in"
        }
        (calltree::Order::Callee, false) => {
            "from each function up to its outermost callers, for its own samples"
        }
    };
    let mut note = format!(
        "call trees (-g {}): {what}, in % of all samples kept",
        g.order.name()
    );
    if g.threshold > 0.0 {
        note += &format!(
            "; branches under {:.2}% hidden (-g {},0 shows them)",
            g.threshold,
            g.order.name()
        );
    }
    note
}

/// The sections of a report: one per event of a recording of several
/// (unless `--event` chose one), else the profile itself.
fn sections(p: &Profile) -> Option<Vec<Profile>> {
    if p.filter.event.is_some() || p.event_list.len() < 2 {
        return None;
    }
    let mut v: Vec<Profile> = p
        .events_sampled()
        .into_iter()
        .map(|i| p.for_event(i))
        .collect();
    if v.is_empty() {
        v.push(p.for_event(0));
    }
    Some(v)
}

/// Writes the report: header, per-CPU totals, then the rows (and with
/// `callers`, each row's callers and callees below it). A recording of
/// several events gets one such section per event.
pub fn write(p: &Profile, o: &ReportOptions, out: &mut dyn Write) -> std::io::Result<()> {
    if let Some(sections) = sections(p) {
        for (n, sp) in sections.iter().enumerate() {
            if n > 0 {
                writeln!(out)?;
            }
            write_one(sp, o, out)?;
        }
        return Ok(());
    }
    write_one(p, o, out)
}

fn write_one(p: &Profile, o: &ReportOptions, out: &mut dyn Write) -> std::io::Result<()> {
    write_header(p, o, out)?;
    let keys = o.keys();
    let rows = rows(p, o);
    // Names come from the profiled programs: escaped for the terminal.
    let text = |s: &Option<String>| esc(s.as_deref().unwrap_or("")).into_owned();
    let pid_comm = |r: &Row| format!("{}/{}", r.key.pid.unwrap_or(0), text(&r.key.comm));
    // Periods are shown when some sample weighs more than one.
    let show_weight = p.samples.iter().any(|s| s.weight != 1);
    let mut cols = if o.children {
        vec![
            Column::right("Children", 0, 8),
            Column::right("Self", 1, 8),
            Column::right("Samples", 1, 10),
        ]
    } else {
        vec![Column::right("Samples", 0, 10), Column::right("%", 1, 7)]
    };
    if show_weight {
        cols.push(Column::right("Period", 1, 14));
    }
    let mut shown: Vec<SortKey> = Vec::new();
    for k in &keys {
        cols.push(match k {
            SortKey::Cpu => Column::right("CPU", 2, 4),
            SortKey::Symbol => Column::left("Symbol", 2),
            SortKey::Dso => Column::left("Binary", 2),
            SortKey::Pid => Column::left("Pid/Comm", 2),
            SortKey::Comm if keys.contains(&SortKey::Pid) => continue,
            SortKey::Comm => Column::left("Comm", 2),
            SortKey::Srcline => Column::left("Source:Line", 2),
        });
        shown.push(*k);
        if *k == SortKey::Symbol && !keys.contains(&SortKey::Dso) {
            cols.push(Column::left("Binary", 2));
            shown.push(SortKey::Dso);
        }
    }
    let show_top = keys.iter().any(|k| k.of_frame())
        && !keys
            .iter()
            .any(|k| matches!(k, SortKey::Pid | SortKey::Comm));
    if show_top {
        cols.push(Column::left("Pid/Comm", 2));
    }
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let mut c = Vec::with_capacity(cols.len());
            if o.children {
                c.push(format!("{:.2}%", r.children_percent.unwrap_or(0.0)));
                c.push(format!("{:.2}%", r.percent));
                c.push(r.samples.to_string());
            } else {
                c.push(r.samples.to_string());
                c.push(format!("{:.2}%", r.percent));
            }
            if show_weight {
                c.push(r.weight.to_string());
            }
            for k in &shown {
                c.push(match k {
                    SortKey::Cpu => r.key.cpu.map(|c| c.to_string()).unwrap_or_default(),
                    SortKey::Symbol => text(&r.key.symbol),
                    SortKey::Dso => text(&r.key.dso),
                    SortKey::Pid => pid_comm(r),
                    SortKey::Comm => text(&r.key.comm),
                    SortKey::Srcline => text(&r.key.srcline.as_deref().map(short_srcline)),
                });
            }
            if show_top {
                c.push(r.top_process.as_ref().map_or_else(String::new, |t| {
                    let mut s = format!("{}/{}", t.pid, esc(&t.comm));
                    if t.others > 0 {
                        s += &format!(" (+{} more)", t.others);
                    }
                    s
                }));
            }
            c
        })
        .collect();
    let table = Table::new(cols, &cells);
    writeln!(out, "{}", table.header())?;
    for (r, c) in rows.iter().zip(&cells) {
        writeln!(out, "{}", table.line(c))?;
        if let (Some(t), Some(g)) = (&r.call_tree, o.graph) {
            calltree::write(t, g.order, g.threshold, "  ", out)?;
            // The listing of --callers, if any, ends with the blank line.
            if !o.callers {
                writeln!(out)?;
            }
        }
        if o.callers {
            for (title, list) in [("callers", &r.callers), ("callees", &r.callees)] {
                writeln!(out, "            {title}:")?;
                for e in list {
                    let dso = if e.dso.is_empty() {
                        String::new()
                    } else {
                        format!("  ({})", esc(&e.dso))
                    };
                    writeln!(
                        out,
                        "            {:>10} {:>6.2}%  {}{}",
                        e.weight,
                        e.percent,
                        esc(&e.symbol),
                        dso
                    )?;
                }
            }
            writeln!(out)?;
        }
    }
    Ok(())
}

/// A column of a [`Table`].
struct Column {
    head: &'static str,
    /// Right-aligned (figures), else left-aligned (names).
    right: bool,
    /// Blanks before the column.
    gap: usize,
    /// Its least width.
    min: usize,
}

impl Column {
    fn right(head: &'static str, gap: usize, min: usize) -> Column {
        Column {
            head,
            right: true,
            gap,
            min,
        }
    }

    fn left(head: &'static str, gap: usize) -> Column {
        Column {
            head,
            right: false,
            gap,
            min: 0,
        }
    }
}

/// A text table whose every column is as wide as its widest cell, its
/// header included (and at least its `min`): headers stand over their
/// columns whatever the lengths of the names and figures (a 90-character
/// C++ symbol, a period sum of 12 digits). Widths count characters, as
/// the padding of `format!` does.
struct Table {
    cols: Vec<Column>,
    widths: Vec<usize>,
}

impl Table {
    fn new(cols: Vec<Column>, rows: &[Vec<String>]) -> Table {
        let widths = cols
            .iter()
            .enumerate()
            .map(|(i, c)| {
                rows.iter()
                    .filter_map(|r| r.get(i))
                    .map(|v| v.chars().count())
                    .chain([c.head.chars().count(), c.min])
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        Table { cols, widths }
    }

    /// A row of `cells` (one per column), without trailing blanks.
    fn line<S: AsRef<str>>(&self, cells: &[S]) -> String {
        let mut l = String::new();
        for ((c, &w), v) in self.cols.iter().zip(&self.widths).zip(cells) {
            let v = v.as_ref();
            l.extend(std::iter::repeat_n(' ', c.gap));
            l += &if c.right {
                format!("{v:>w$}")
            } else {
                format!("{v:<w$}")
            };
        }
        l.truncate(l.trim_end().len());
        l
    }

    fn header(&self) -> String {
        let heads: Vec<&str> = self.cols.iter().map(|c| c.head).collect();
        self.line(&heads)
    }
}

/// `--json`: the report as one JSON object (names unescaped: JSON escapes
/// control characters itself).
#[derive(Serialize)]
struct JsonReport<'a> {
    event: String,
    /// How the event was sampled (`period N`, `N Hz`, several if it
    /// changed).
    #[serde(skip_serializing_if = "Option::is_none")]
    event_settings: Option<String>,
    sample_source: &'a str,
    sample_period: u64,
    sample_freq: u64,
    nr_cpus: u32,
    /// Samples in the recording, whatever the filter.
    samples: u64,
    lost: u64,
    /// Samples after which perf throttled their counter (whatever the
    /// filter).
    throttled: u64,
    /// Samples with a user stack copy (`record --call-graph dwarf`), and
    /// how their user callchains were found (absent without such samples).
    #[serde(skip_serializing_if = "Option::is_none")]
    user_stacks: Option<JsonUnwind>,
    /// Kept samples whose user call stack was cut at an address in no
    /// executable mapping (it ends in a `[truncated]` frame).
    truncated_stacks: u64,
    /// Samples and weight the filter kept (the base of every percentage).
    kept_samples: u64,
    kept_weight: u64,
    weight_unit: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    filter: Option<String>,
    /// What the module sampled, from the CONFIG records: `pid N and the
    /// tasks it created` (`record -- CMD`, `record -p PID`) or `every task
    /// (system-wide)`, several joined by `, then ` (absent where no CONFIG
    /// record tells).
    #[serde(skip_serializing_if = "Option::is_none")]
    profiled: Option<String>,
    /// The same as the module's `pid` settings (0: every task).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    profiled_pids: Vec<u32>,
    recording_seconds: f64,
    /// Kept samples with at least one caller recorded.
    samples_with_stacks: u64,
    /// With `-g`: the trees' order and threshold (each row's `call_tree`).
    #[serde(skip_serializing_if = "Option::is_none")]
    call_graph: Option<CallGraph>,
    sort: Vec<SortKey>,
    rows: Vec<Row>,
}

/// Samples (of those the filter kept) whose user call stack was cut at an
/// address in no executable mapping ([`ResolvedSample::truncated`]).
///
/// [`ResolvedSample::truncated`]: crate::profile::ResolvedSample::truncated
pub fn truncated_samples(p: &Profile) -> u64 {
    p.samples.iter().filter(|s| s.truncated()).count() as u64
}

/// The report's note on cut call stacks: how many, why, and what fixes it;
/// `None` if no stack was cut.
pub fn truncated_note(p: &Profile) -> Option<String> {
    let n = truncated_samples(p);
    let at_copy_end = p.samples.iter().filter(|s| s.cut_at_copy_end()).count() as u64;
    let by_tables = p.samples.iter().filter(|s| s.cut_by_tables()).count() as u64;
    let not_code = n - at_copy_end - by_tables;
    (n > 0).then(|| {
        let mut why = Vec::new();
        if not_code > 0 {
            why.push(format!(
                "{not_code} at a user return address in no executable mapping of the process \
                 (a frame-pointer walk through code built without frame pointers reads data as \
                 frames): build the program with -fno-omit-frame-pointer, or record with \
                 --call-graph dwarf"
            ));
        }
        if by_tables > 0 {
            why.push(format!(
                "{by_tables} where the module's walk with the binaries' unwind tables found no \
                 rule for an address or could not read the stack (code without call frame \
                 information, a stack page not in memory): record with --call-graph dwarf for \
                 those stacks"
            ));
        }
        if at_copy_end > 0 {
            why.push(format!(
                "{at_copy_end} where the user stack copy ended (deep stacks in code built \
                 without frame pointers): record with --call-graph dwarf (8 KiB copies), or \
                 --call-graph dwarf,SIZE"
            ));
        }
        format!(
            "call stacks cut: {n} of {} samples ({:.1}%) end in {}: {}",
            p.samples.len(),
            100.0 * n as f64 / p.samples.len().max(1) as f64,
            crate::symbols::TRUNCATED,
            why.join("; ")
        )
    })
}

/// The DWARF unwind's counts in `--json` ([`crate::unwind::UnwindStats`]).
#[derive(Serialize)]
struct JsonUnwind {
    samples: u64,
    dwarf: u64,
    frame_pointer: u64,
    /// Of `dwarf`: went on along the frame-pointer chain past the copy.
    spliced: u64,
    /// Of `dwarf`: cut where the copy ended.
    cut_at_copy_end: u64,
}

/// `--json` for a recording of several events (without `--event`): one
/// report per event.
#[derive(Serialize)]
struct JsonReports<'a> {
    events: Vec<JsonReport<'a>>,
}

/// Writes the report as JSON: one object, or with several events and no
/// `--event`, `{"events": [one object per event]}`.
pub fn write_json(p: &Profile, o: &ReportOptions, out: &mut dyn Write) -> std::io::Result<()> {
    if let Some(sections) = sections(p) {
        let r = JsonReports {
            events: sections.iter().map(|sp| json_report(sp, o)).collect(),
        };
        serde_json::to_writer_pretty(&mut *out, &r)?;
        return writeln!(out);
    }
    serde_json::to_writer_pretty(&mut *out, &json_report(p, o))?;
    writeln!(out)
}

fn json_report<'a>(p: &'a Profile, o: &ReportOptions) -> JsonReport<'a> {
    let h = &p.header;
    let ev = shown_event(p);
    JsonReport {
        event: ev.map_or_else(|| h.event_name(), |e| e.name.clone()),
        event_settings: ev.map(|e| e.describe()),
        sample_source: h.sample_source_name(),
        sample_period: h.sample_period,
        sample_freq: h.sample_freq,
        nr_cpus: h.nr_cpus,
        samples: p.recorded_samples(),
        lost: p.total_lost(),
        throttled: p.total_throttled(),
        user_stacks: (p.unwind.with_stack > 0).then_some(JsonUnwind {
            samples: p.unwind.with_stack,
            dwarf: p.unwind.dwarf,
            frame_pointer: p.unwind.fallback,
            spliced: p.unwind.spliced,
            cut_at_copy_end: p.unwind.cut,
        }),
        truncated_stacks: truncated_samples(p),
        kept_samples: p.total_samples(),
        kept_weight: p.total_weight(),
        weight_unit: ev.map_or("samples", |e| e.weight_unit()),
        filter: (!p.filter.is_empty()).then(|| p.filter.describe()),
        profiled: p.profiled_words(),
        profiled_pids: p.profiled.clone(),
        recording_seconds: p.recording_ns() as f64 / 1e9,
        samples_with_stacks: samples_with_stacks(p),
        call_graph: o.graph,
        sort: o.keys(),
        rows: rows(p, o),
    }
}

// ------------------------------------------------------------------ diff

/// One row of `diff`: a function's share in the old and new recordings.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DiffRow {
    pub symbol: String,
    pub dso: String,
    pub old_weight: u64,
    pub new_weight: u64,
    pub old_percent: f64,
    pub new_percent: f64,
    /// `new_percent - old_percent`, in percentage points.
    pub delta: f64,
}

/// Per-symbol comparison of two recordings, largest change first.
pub fn diff_rows(old: &Profile, new: &Profile) -> Vec<DiffRow> {
    let mut m: HashMap<(String, String), (u64, u64)> = HashMap::new();
    for s in &old.samples {
        m.entry((s.pc.name(), s.pc.dso.clone())).or_default().0 += s.weight;
    }
    for s in &new.samples {
        m.entry((s.pc.name(), s.pc.dso.clone())).or_default().1 += s.weight;
    }
    let (to, tn) = (old.total_weight(), new.total_weight());
    let mut rows: Vec<DiffRow> = m
        .into_iter()
        .map(|((symbol, dso), (a, b))| {
            let (pa, pb) = (pct(a, to), pct(b, tn));
            DiffRow {
                symbol,
                dso,
                old_weight: a,
                new_weight: b,
                old_percent: pa,
                new_percent: pb,
                delta: pb - pa,
            }
        })
        .collect();
    rows.sort_by(|a, b| {
        b.delta
            .abs()
            .total_cmp(&a.delta.abs())
            .then_with(|| a.symbol.cmp(&b.symbol))
            .then_with(|| a.dso.cmp(&b.dso))
    });
    rows
}

pub fn write_diff(
    old: &Profile,
    new: &Profile,
    top: usize,
    json: bool,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let mut rows = diff_rows(old, new);
    if top > 0 {
        rows.truncate(top);
    }
    if json {
        serde_json::to_writer_pretty(&mut *out, &rows)?;
        return writeln!(out);
    }
    let event = match (shown_event(old), shown_event(new)) {
        (Some(a), Some(b)) if a.name == b.name => format!(" of {}", esc(&a.name)),
        _ => String::new(),
    };
    writeln!(
        out,
        "# old: {} samples, new: {} samples{event}; delta = new% - old% (percentage points)",
        old.total_samples(),
        new.total_samples()
    )?;
    let cols = vec![
        Column::right("Old%", 0, 8),
        Column::right("New%", 1, 8),
        Column::right("Delta", 1, 9),
        Column::right("Old", 1, 10),
        Column::right("New", 1, 10),
        Column::left("Symbol", 2),
        Column::left("Binary", 2),
    ];
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                format!("{:.2}%", r.old_percent),
                format!("{:.2}%", r.new_percent),
                format!("{:+.2}%", r.delta),
                r.old_weight.to_string(),
                r.new_weight.to_string(),
                esc(&r.symbol).into_owned(),
                esc(&r.dso).into_owned(),
            ]
        })
        .collect();
    let table = Table::new(cols, &cells);
    writeln!(out, "{}", table.header())?;
    for c in &cells {
        writeln!(out, "{}", table.line(c))?;
    }
    Ok(())
}
