//! `pprof`: a gzipped `perftools.profiles.Profile` (profile.proto), written
//! with hand-made prost structs (field numbers exactly as profile.proto).

use std::collections::HashMap;
use std::io::Write;

use oprofile_stream::HeaderExt;

use anyhow::Result;
use prost::Message;

use crate::profile::Profile as Prof;
use crate::symbols::{Frame, SrcLine};

#[derive(Clone, PartialEq, Message)]
pub struct Profile {
    #[prost(message, repeated, tag = "1")]
    pub sample_type: Vec<ValueType>,
    #[prost(message, repeated, tag = "2")]
    pub sample: Vec<Sample>,
    #[prost(message, repeated, tag = "3")]
    pub mapping: Vec<Mapping>,
    #[prost(message, repeated, tag = "4")]
    pub location: Vec<Location>,
    #[prost(message, repeated, tag = "5")]
    pub function: Vec<Function>,
    #[prost(string, repeated, tag = "6")]
    pub string_table: Vec<String>,
    #[prost(int64, tag = "7")]
    pub drop_frames: i64,
    #[prost(int64, tag = "8")]
    pub keep_frames: i64,
    #[prost(int64, tag = "9")]
    pub time_nanos: i64,
    #[prost(int64, tag = "10")]
    pub duration_nanos: i64,
    #[prost(message, optional, tag = "11")]
    pub period_type: Option<ValueType>,
    #[prost(int64, tag = "12")]
    pub period: i64,
    #[prost(int64, repeated, tag = "13")]
    pub comment: Vec<i64>,
    #[prost(int64, tag = "14")]
    pub default_sample_type: i64,
}

#[derive(Clone, PartialEq, Message)]
pub struct ValueType {
    #[prost(int64, tag = "1")]
    pub r#type: i64,
    #[prost(int64, tag = "2")]
    pub unit: i64,
}

#[derive(Clone, PartialEq, Message)]
pub struct Sample {
    #[prost(uint64, repeated, tag = "1")]
    pub location_id: Vec<u64>,
    #[prost(int64, repeated, tag = "2")]
    pub value: Vec<i64>,
    #[prost(message, repeated, tag = "3")]
    pub label: Vec<Label>,
}

#[derive(Clone, PartialEq, Message)]
pub struct Label {
    #[prost(int64, tag = "1")]
    pub key: i64,
    #[prost(int64, tag = "2")]
    pub str: i64,
    #[prost(int64, tag = "3")]
    pub num: i64,
    #[prost(int64, tag = "4")]
    pub num_unit: i64,
}

#[derive(Clone, PartialEq, Message)]
pub struct Mapping {
    #[prost(uint64, tag = "1")]
    pub id: u64,
    #[prost(uint64, tag = "2")]
    pub memory_start: u64,
    #[prost(uint64, tag = "3")]
    pub memory_limit: u64,
    #[prost(uint64, tag = "4")]
    pub file_offset: u64,
    #[prost(int64, tag = "5")]
    pub filename: i64,
    #[prost(int64, tag = "6")]
    pub build_id: i64,
    #[prost(bool, tag = "7")]
    pub has_functions: bool,
    #[prost(bool, tag = "8")]
    pub has_filenames: bool,
    #[prost(bool, tag = "9")]
    pub has_line_numbers: bool,
    #[prost(bool, tag = "10")]
    pub has_inline_frames: bool,
}

#[derive(Clone, PartialEq, Message)]
pub struct Location {
    #[prost(uint64, tag = "1")]
    pub id: u64,
    #[prost(uint64, tag = "2")]
    pub mapping_id: u64,
    #[prost(uint64, tag = "3")]
    pub address: u64,
    #[prost(message, repeated, tag = "4")]
    pub line: Vec<Line>,
    #[prost(bool, tag = "5")]
    pub is_folded: bool,
}

#[derive(Clone, PartialEq, Message)]
pub struct Line {
    #[prost(uint64, tag = "1")]
    pub function_id: u64,
    #[prost(int64, tag = "2")]
    pub line: i64,
    #[prost(int64, tag = "3")]
    pub column: i64,
}

#[derive(Clone, PartialEq, Message)]
pub struct Function {
    #[prost(uint64, tag = "1")]
    pub id: u64,
    #[prost(int64, tag = "2")]
    pub name: i64,
    #[prost(int64, tag = "3")]
    pub system_name: i64,
    #[prost(int64, tag = "4")]
    pub filename: i64,
    #[prost(int64, tag = "5")]
    pub start_line: i64,
}

/// Mapping key: user frames by file (or pseudo-name) and address range;
/// kernel images by name.
type MappingKey = (String, Option<(u64, u64, u64)>);

#[derive(Default)]
struct Builder {
    p: Profile,
    strings: HashMap<String, i64>,
    mappings: HashMap<MappingKey, u64>,
    functions: HashMap<(String, String), u64>,
    locations: HashMap<(u64, u64, String), u64>,
}

impl Builder {
    fn s(&mut self, v: &str) -> i64 {
        if let Some(&i) = self.strings.get(v) {
            return i;
        }
        let i = self.p.string_table.len() as i64;
        self.p.string_table.push(v.to_string());
        self.strings.insert(v.to_string(), i);
        i
    }

    /// The mapping of a frame: for user frames the mapping of the maps
    /// (start, limit, file offset, build-id); for kernel images (and frames
    /// without a mapping) the span of the addresses seen in them.
    fn mapping(&mut self, f: &Frame) -> u64 {
        let name = f.path.clone().unwrap_or_else(|| f.dso.clone());
        let key = (name.clone(), if f.kernel { None } else { f.mapping });
        let id = match self.mappings.get(&key) {
            Some(&id) => id,
            None => {
                let id = self.p.mapping.len() as u64 + 1;
                let filename = self.s(&name);
                let build_id = f.build_id.as_deref().map_or(0, |b| self.s(b));
                let (start, limit, offset) = match key.1 {
                    Some(r) => r,
                    None => (f.addr, f.addr.saturating_add(1), 0),
                };
                self.p.mapping.push(Mapping {
                    id,
                    memory_start: start,
                    memory_limit: limit,
                    file_offset: offset,
                    filename,
                    build_id,
                    ..Default::default()
                });
                self.mappings.insert(key.clone(), id);
                id
            }
        };
        let m = &mut self.p.mapping[id as usize - 1];
        if key.1.is_none() {
            m.memory_start = m.memory_start.min(f.addr);
            m.memory_limit = m.memory_limit.max(f.addr.saturating_add(1));
        }
        m.has_functions |= f.symbol.is_some();
        m.has_filenames |= f.srcline.is_some();
        m.has_line_numbers |= f.srcline.is_some();
        m.has_inline_frames |= !f.inlined.is_empty();
        id
    }

    fn function(&mut self, name: &str, file: &str) -> u64 {
        let key = (name.to_string(), file.to_string());
        if let Some(&id) = self.functions.get(&key) {
            return id;
        }
        let id = self.p.function.len() as u64 + 1;
        let n = self.s(name);
        let file = self.s(file);
        self.p.function.push(Function {
            id,
            name: n,
            system_name: n,
            filename: file,
            start_line: 0,
        });
        self.functions.insert(key, id);
        id
    }

    /// A location per (mapping, address): its lines are the functions
    /// inlined there, innermost first, then the function holding the code
    /// (profile.proto: the last line is the caller the others were inlined
    /// into), with source files and lines where DWARF gave them. Kernel
    /// addresses without a symbol keep their locations, in one function
    /// per image ([`Frame::function_name`]): `pprof -top` and the flame
    /// graphs of pprof viewers show them as one entry, as `folded` does.
    fn location(&mut self, f: &Frame) -> u64 {
        let mapping_id = self.mapping(f);
        let name = f.function_name();
        let key = (mapping_id, f.addr, name.clone());
        if let Some(&id) = self.locations.get(&key) {
            return id;
        }
        let mut line = Vec::new();
        let file_of = |l: Option<&SrcLine>| l.map_or(f.dso.clone(), |l| l.file.clone());
        for (n, l) in f.inlined.iter().rev() {
            line.push(Line {
                function_id: self.function(n, &file_of(l.as_ref())),
                line: l.as_ref().map_or(0, |l| l.line as i64),
                column: 0,
            });
        }
        line.push(Line {
            function_id: self.function(&name, &file_of(f.srcline.as_ref())),
            line: f.srcline.as_ref().map_or(0, |l| l.line as i64),
            column: 0,
        });
        let id = self.p.location.len() as u64 + 1;
        self.p.location.push(Location {
            id,
            mapping_id,
            address: f.addr,
            line,
            is_folded: false,
        });
        self.locations.insert(key, id);
        id
    }
}

/// The second sample value: what a sample stands for in the unit of the
/// event, per unit of weight. `cpu/nanoseconds` for cpu-clock (its period
/// in ns, or 1 s / frequency), `<event>/count` for a PMU event in period
/// mode; none for a PMU event in frequency mode (the period varies and the
/// stream does not carry it).
pub fn second_value(h: &oprofile_stream::Header) -> Option<(String, &'static str, f64)> {
    let cpu_clock = h.sample_source == 2 || h.event_name() == "cpu-clock";
    match (cpu_clock, h.sample_period, h.sample_freq) {
        (true, p, _) if p != 0 => Some(("cpu".into(), "nanoseconds", p as f64)),
        (true, _, f) if f != 0 => Some(("cpu".into(), "nanoseconds", 1e9 / f as f64)),
        (false, p, _) if p != 0 => Some((h.event_name(), "count", p as f64)),
        _ => None,
    }
}

/// The sample types of one event: its sample count, then what the samples
/// stand for, summed from their periods: `cpu/nanoseconds` for cpu-clock,
/// `<event>/count` for others (`<event>/nanoseconds` for task-clock); none
/// when some sample's period is not known (an old stream in frequency
/// mode). With several events (`multi`) the count is `<event>_samples`,
/// the second `<event>`.
fn event_types(
    name: &str,
    unit: &str,
    header_name: &str,
    multi: bool,
    with_second: bool,
) -> Vec<(String, &'static str)> {
    let ns = unit == "ns";
    let mut v = Vec::new();
    if multi {
        v.push((format!("{name}_samples"), "count"));
    } else {
        v.push(("samples".to_string(), "count"));
    }
    if with_second {
        let t = if !multi && ns && name == header_name && name == "cpu-clock" {
            "cpu".to_string()
        } else {
            name.to_string()
        };
        v.push((t, if ns { "nanoseconds" } else { "count" }));
    }
    v
}

/// Builds the Profile message: one sample per distinct (stack, process,
/// thread, cpu), values = [samples, cpu/nanoseconds or event count] for a
/// profile of one event; for a recording of several events (without
/// `--event`) that pair for each event in turn (`<event>_samples/count`,
/// `<event>/count|nanoseconds`), each sample having values only in its own
/// event's pair. Labels `pid`, `tid`, `cpu`, `comm`.
pub fn build(prof: &Prof) -> Profile {
    let mut b = Builder::default();
    b.s(""); // string_table[0] must be ""
    let h = &prof.header;
    // The events shown, and the slot of each (index in event_list → slot).
    let shown: Vec<u16> = match &prof.filter.event {
        Some((i, _)) => vec![*i],
        None => (0..prof.event_list.len().max(1) as u16).collect(),
    };
    let multi = shown.len() > 1;
    let mut slot: HashMap<u16, (usize, usize)> = HashMap::new();
    let mut ntypes = 0usize;
    let mut first_second: Option<(i64, i64)> = None;
    for &i in &shown {
        let (name, unit) = prof
            .event_list
            .get(usize::from(i))
            .map_or((h.event_name(), "events"), |e| (e.name.clone(), e.unit));
        let known = prof
            .samples
            .iter()
            .filter(|s| s.event == i)
            .all(|s| s.period != 0);
        let types = event_types(&name, unit, &h.event_name(), multi, known);
        slot.insert(i, (ntypes, types.len()));
        for (k, (t, u)) in types.iter().enumerate() {
            let (t, u) = (b.s(t), b.s(u));
            b.p.sample_type.push(ValueType { r#type: t, unit: u });
            if k == 1 && first_second.is_none() {
                first_second = Some((t, u));
            }
        }
        ntypes += types.len();
    }
    if let Some((t, _)) = first_second {
        b.p.default_sample_type = t;
    }
    let first = prof.event_list.get(usize::from(shown[0]));
    let (pt, pu, period) = match first {
        Some(e) if e.unit == "ns" => (
            if e.name == "cpu-clock" {
                "cpu".to_string()
            } else {
                e.name.clone()
            },
            "nanoseconds",
            typical_period(prof, shown[0]),
        ),
        Some(e) => (e.name.clone(), "count", typical_period(prof, shown[0])),
        None if h.sample_source == 2 => ("cpu".into(), "nanoseconds", h.sample_period),
        None => (h.event_name(), "count", h.sample_period),
    };
    let (pt, pu) = (b.s(&pt), b.s(pu));
    b.p.period_type = Some(ValueType {
        r#type: pt,
        unit: pu,
    });
    b.p.period = period as i64;
    let (k_pid, k_tid, k_cpu, k_comm) = (b.s("pid"), b.s("tid"), b.s("cpu"), b.s("comm"));
    let names: Vec<String> = shown
        .iter()
        .map(|&i| {
            prof.event_list
                .get(usize::from(i))
                .map_or_else(|| h.event_name(), |e| e.name.clone())
        })
        .collect();
    let c = b.s(&format!(
        "oprofile-rs: event{} {}",
        if multi { "s" } else { "" },
        names.join(", ")
    ));
    b.p.comment.push(c);

    // The main binary first: pprof names the first mapping the profile's
    // file ("File:" in `go tool pprof`). It is the mapping of the outermost
    // user frame (`_start`, the program's own) of the first sample that
    // has user frames; the first frame seen would be the kernel's for an
    // off-CPU profile or one of kernel-mode samples.
    if let Some(root) = prof.samples.iter().find_map(|s| {
        std::iter::once(&s.pc)
            .chain(s.callchain.iter())
            .rfind(|f| !f.kernel && f.mapping.is_some())
    }) {
        b.mapping(root);
    }
    // (locations, tgid, pid, cpu, comm) → values.
    type Key = (Vec<u64>, u32, u32, u16, i64);
    let mut agg: HashMap<Key, Vec<i64>> = HashMap::new();
    let mut order = Vec::new();
    for s in &prof.samples {
        let Some(&(at, n)) = slot.get(&s.event) else {
            continue;
        };
        // location_id[0] is the leaf.
        let mut locs = vec![b.location(&s.pc)];
        for f in &s.callchain {
            locs.push(b.location(f));
        }
        let comm = b.s(&s.comm);
        let key = (locs, s.tgid, s.pid, s.cpu, comm);
        let e = agg.entry(key.clone()).or_insert_with(|| {
            order.push(key);
            vec![0; ntypes]
        });
        e[at] += 1;
        if n > 1 {
            e[at + 1] = e[at + 1].saturating_add(s.period.min(i64::MAX as u64) as i64);
        }
    }
    for key in order {
        let value = agg.remove(&key).unwrap_or_default();
        let (locs, tgid, pid, cpu, comm) = key;
        b.p.sample.push(Sample {
            location_id: locs,
            value,
            label: vec![
                Label {
                    key: k_pid,
                    num: tgid as i64,
                    ..Default::default()
                },
                Label {
                    key: k_tid,
                    num: pid as i64,
                    ..Default::default()
                },
                Label {
                    key: k_cpu,
                    num: cpu as i64,
                    ..Default::default()
                },
                Label {
                    key: k_comm,
                    str: comm,
                    ..Default::default()
                },
            ],
        });
    }
    b.p.duration_nanos = prof.recording_ns() as i64;
    b.p
}

/// The period the event's samples stand for most often (pprof's `period`).
fn typical_period(prof: &Prof, event: u16) -> u64 {
    let mut n: HashMap<u64, u64> = HashMap::new();
    for s in prof.samples.iter().filter(|s| s.event == event) {
        *n.entry(s.period).or_default() += 1;
    }
    n.into_iter()
        .max_by_key(|&(p, c)| (c, std::cmp::Reverse(p)))
        .map_or(prof.header.sample_period, |(p, _)| p)
}

/// Writes the gzipped profile.
pub fn write(prof: &Prof, out: &mut dyn Write) -> Result<()> {
    let p = build(prof);
    let mut gz = flate2::write::GzEncoder::new(out, flate2::Compression::default());
    gz.write_all(&p.encode_to_vec())?;
    gz.finish()?;
    Ok(())
}

/// The stacks of profile `p` as folded lines, `root;...;leaf COUNT`
/// (functions inlined at a location after the function holding them),
/// with the first sample value summed per stack, sorted: what a viewer's
/// flame graph of the profile shows. Names are looked up defensively: a
/// dangling id reads `?`.
pub fn folded(p: &Profile) -> Vec<String> {
    let string = |i: i64| -> &str {
        usize::try_from(i)
            .ok()
            .and_then(|i| p.string_table.get(i))
            .map_or("?", String::as_str)
    };
    let function = |id: u64| -> &str {
        p.function
            .iter()
            .find(|f| f.id == id)
            .map_or("?", |f| string(f.name))
    };
    let mut stacks: std::collections::BTreeMap<String, i64> = Default::default();
    for s in &p.sample {
        let mut names: Vec<&str> = Vec::new();
        for id in s.location_id.iter().rev() {
            match p.location.iter().find(|l| l.id == *id) {
                // Lines: innermost inlined first, the holding function last.
                Some(l) => names.extend(l.line.iter().rev().map(|l| function(l.function_id))),
                None => names.push("?"),
            }
        }
        *stacks.entry(names.join(";")).or_default() += s.value.first().copied().unwrap_or(0);
    }
    stacks
        .into_iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect()
}

/// Reads a (gzipped or plain) profile back, for tests and tooling.
pub fn read(data: &[u8]) -> Result<Profile> {
    let raw = if data.starts_with(&[0x1f, 0x8b]) {
        let mut v = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(data), &mut v)?;
        v
    } else {
        data.to_vec()
    };
    Ok(Profile::decode(raw.as_slice())?)
}
