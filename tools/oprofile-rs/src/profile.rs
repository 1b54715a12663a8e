//! A recorded stream, decoded and symbolised: what every analysis command uses.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use anyhow::{bail, Context, Result};
use oprofile_stream::{Config, DecodeError, Decoder, EventDescExt, Header, HeaderExt, Record};

use crate::locate::Locator;
use crate::sidecar::{sidecar_dir, Sidecar};
use crate::symbols::{Frame, Kallsyms, Resolver, ResolverOptions, SymbolizerKind, UsedBinary};
use crate::text;
use crate::unwind::{DwarfUnwinder, UnwindStats};

/// Addresses at or above this are perf context markers (`PERF_CONTEXT_*`),
/// not code: they are dropped from callchains.
pub const PERF_CONTEXT_MAX: u64 = (-4095i64) as u64;
/// The user chain's entry after a cut walk with unwind tables
/// (`format::unwind::CHAIN_CUT`).
pub const CHAIN_CUT: u64 = oprofile_stream::oprofile_format::unwind::CHAIN_CUT;

#[derive(Debug, Clone, Default)]
pub struct LoadOptions {
    /// Prefix for binaries' paths (like perf's `--symfs`).
    pub symfs: Option<PathBuf>,
    /// Side-car directory (default: `FILE.meta`).
    pub sidecar: Option<PathBuf>,
    /// Use the records before a corruption instead of failing.
    pub allow_corrupt: bool,
    /// How user addresses are symbolised.
    pub symbolizer: SymbolizerKind,
    /// Directories searched for separate debug files before the defaults
    /// (`/usr/lib/debug`, `/lib/debug`).
    pub debug_dirs: Vec<PathBuf>,
    /// Where files missing here are fetched by build-id (`DEBUGINFOD_URLS`).
    pub debuginfod: Option<crate::debuginfod::Debuginfod>,
}

/// One symbolised sample.
#[derive(Debug, Clone)]
pub struct ResolvedSample {
    pub time: u64,
    pub cpu: u16,
    pub pid: u32,
    pub tgid: u32,
    pub comm: Rc<str>,
    /// What every analysis sums instead of counting samples: 1 (a count)
    /// while every sample of its event stands for the same period, else its
    /// [`ResolvedSample::period`] (frequency mode, where perf changes the
    /// period from sample to sample, or a period changed between two
    /// configurations of the recording). Within one event both give the
    /// same shares; see [`EventInfo::weighted`].
    pub weight: u64,
    /// The events (or ns, for the clocks) this sample stands for: the
    /// SAMPLE's own period (stream version 2), else its event's fixed period
    /// (CONFIG record, or the header of an old stream); 0 if not known.
    pub period: u64,
    /// The sampled event: an index into [`Profile::event_list`].
    pub event: u16,
    pub kernel: bool,
    pub pc: Rc<Frame>,
    /// Callers, innermost first: the kernel callchain (kernel-mode
    /// samples), then the user one (stream version 2; for a kernel-mode
    /// sample it starts where the task entered the kernel): the one the
    /// DWARF unwind of the sample's user stack copy found, if it found
    /// callers ([`crate::unwind`]), else the recorded frame-pointer chain.
    /// User return addresses are named after their call
    /// ([`Resolver::resolve_return`]). The user part ends with a
    /// [`Frame::truncated`] frame at the first address in no executable
    /// mapping of the process at the sample's time
    /// ([`Resolver::user_code_at`]; [`ResolvedSample::truncated`]), at
    /// address 0 where the stack copy ended before the outermost frame and
    /// the frame-pointer chain did not go on from there, or at
    /// [`CHAIN_CUT`] where the module's walk with unwind tables was cut.
    ///
    /// [`Resolver::resolve_return`]: crate::symbols::Resolver::resolve_return
    pub callchain: Vec<Rc<Frame>>,
    /// TRACING records before this sample in the stream. The module writes
    /// a TRACING record after every record taken before the switch and
    /// before any taken after it, so stream segments order samples around
    /// the switches exactly, where time stamps of CPUs whose clocks are
    /// skewed may not. A flight-recorder snapshot is a segment of its own.
    pub segment: u32,
    /// The flight-recorder snapshot (its `seq`) this sample came in; 0: none
    /// (a recording in consume mode).
    pub snapshot: u32,
}

impl ResolvedSample {
    /// Frames from the outermost caller to the sampled pc.
    pub fn stack_root_first(&self) -> impl Iterator<Item = &Rc<Frame>> {
        self.callchain.iter().rev().chain(std::iter::once(&self.pc))
    }

    /// Whether the user call stack was cut: at an address that is not
    /// code, or where its copy ended (it ends with a [`Frame::truncated`]
    /// frame).
    pub fn truncated(&self) -> bool {
        self.callchain.last().is_some_and(|f| f.is_truncated())
    }

    /// Whether the module's walk with unwind tables cut the user call stack
    /// (a [`Frame::truncated`] frame at [`CHAIN_CUT`]).
    pub fn cut_by_tables(&self) -> bool {
        self.callchain
            .last()
            .is_some_and(|f| f.is_truncated() && f.addr == CHAIN_CUT)
    }

    /// Whether the user call stack was cut where its copy ended (a
    /// [`Frame::truncated`] frame at address 0).
    pub fn cut_at_copy_end(&self) -> bool {
        self.callchain
            .last()
            .is_some_and(|f| f.is_truncated() && f.addr == 0)
    }
}

/// An event of the recording (the CONFIG records name them; a stream
/// without one has the header's event). Events are told apart by name: an
/// event listed by two configurations (the list changed between two
/// recording phases) is one event here, whatever its index in each.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventInfo {
    pub name: String,
    /// Unit of its periods: `ns` for the clocks (`cpu-clock`, `task-clock`),
    /// `events` for the others.
    pub unit: &'static str,
    /// How it was sampled, each distinct setting once in stream order:
    /// `period N` or `N Hz`.
    pub settings: Vec<String>,
    /// Its samples weigh their period ([`ResolvedSample::weight`]): the
    /// periods differ (frequency mode, or a changed period). Otherwise each
    /// weighs 1 and shares of samples are shares of events.
    pub weighted: bool,
    /// Samples of the event in the recording (whatever the filter).
    pub samples: u64,
    /// Of them: samples after which perf throttled the event's counter
    /// (SAMPLE flag THROTTLED).
    pub throttled: u64,
}

impl EventInfo {
    pub fn new(name: String) -> EventInfo {
        let unit = if matches!(name.as_str(), "cpu-clock" | "task-clock") {
            "ns"
        } else {
            "events"
        };
        EventInfo {
            name,
            unit,
            settings: Vec::new(),
            weighted: false,
            samples: 0,
            throttled: 0,
        }
    }

    fn note_setting(&mut self, freq: bool, value: u64) {
        self.note_setting_in(freq, value, "");
    }

    /// As [`EventInfo::note_setting`], with the modes sampled in words
    /// (`modes_sampled`) after it.
    fn note_setting_in(&mut self, freq: bool, value: u64, modes: &str) {
        let s = if freq {
            format!("{value} Hz{modes}")
        } else {
            format!("period {value}{modes}")
        };
        if !self.settings.contains(&s) {
            self.settings.push(s);
        }
    }

    /// Its settings in words, e.g. `period 1000000` or `4000 Hz, then
    /// period 100000`.
    pub fn describe(&self) -> String {
        self.settings.join(", then ")
    }

    /// What the weight sums are: `samples`, or the unit of the periods.
    pub fn weight_unit(&self) -> &'static str {
        if self.weighted {
            self.unit
        } else {
            "samples"
        }
    }
}

/// The recording's events that a list of names shows, for messages:
/// `cycles, page-faults`.
pub fn event_names(events: &[EventInfo]) -> String {
    events
        .iter()
        .map(|e| e.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Non-sample events, kept for `script`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A CONFIG record: the configuration in force from here on, in words
    /// (generation, events with their settings, depths, buffer sizes).
    Config {
        time: u64,
        generation: u32,
        summary: String,
        segment: u32,
        /// The module's cgroup filter from here on (its id; 0: none).
        cgroup: u64,
        /// The process the module samples from here on (its `pid`: that
        /// process and the tasks it creates; 0: every task).
        pid: u32,
    },
    Lost {
        time: u64,
        cpu: u16,
        count: u64,
        segment: u32,
    },
    /// A TRACING record starts a new segment (its own `segment`).
    Tracing {
        time: u64,
        cpu: u16,
        on: bool,
        segment: u32,
    },
    /// A SNAPSHOT record (flight recorder): the first BEGIN of a snapshot
    /// starts a segment (the snapshot's samples), its END the next one.
    Snapshot {
        time: u64,
        cpu: u16,
        end: bool,
        seq: u32,
        overwritten: u64,
        records: u64,
        segment: u32,
    },
    /// perf throttled the counter of `event` (an index into
    /// [`Profile::event_list`]) on `cpu` right after its sample at `time`:
    /// no sample of it from that CPU until perf's next tick.
    Throttle {
        time: u64,
        cpu: u16,
        event: u16,
        segment: u32,
    },
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuStats {
    pub samples: u64,
    pub lost: u64,
    /// Of `samples`: those after which perf throttled their counter.
    pub throttled: u64,
}

/// `lost` as a share of all samples taken (`kept` + `lost`), e.g. `6.99%`.
pub fn lost_share(kept: u64, lost: u64) -> String {
    let taken = kept + lost;
    if taken == 0 {
        return "0.00%".into();
    }
    format!("{:.2}%", 100.0 * lost as f64 / taken as f64)
}

/// Which samples an analysis keeps (`--pid`, `--tid`, `--comm`, `--cpu`,
/// `--dsos`): a sample is kept when it matches every non-empty list (any
/// entry of a list matches).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Filter {
    /// Process ids (tgid) or thread ids (pid).
    pub pids: Vec<u32>,
    /// Thread ids (pid) only.
    pub tids: Vec<u32>,
    /// Command names, exactly as the COMM records give them.
    pub comms: Vec<String>,
    pub cpus: Vec<u16>,
    /// Binaries of the sampled address: as the Binary column names them
    /// ([`Frame::dso`]), or the mapped file's path.
    ///
    /// [`Frame::dso`]: crate::symbols::Frame::dso
    pub dsos: Vec<String>,
    /// `--time`: only samples in this span (see [`TimeSpan`]).
    pub time: Option<TimeSpan>,
    /// `--snapshot N`: only samples of the flight-recorder snapshot N.
    pub snapshot: Option<u32>,
    /// `--event NAME`: only samples of this event (its index in
    /// [`Profile::event_list`], and its name).
    pub event: Option<(u16, String)>,
}

/// One end of a `--time` span: seconds relative to the recording's start
/// ([`Profile::first_time`]), or absolute seconds of the stream's clock
/// (since boot: what `script` prints) when written with a leading `@`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum TimeBound {
    Relative(f64),
    Absolute(f64),
}

impl TimeBound {
    /// The same number of seconds, read as the clock's.
    fn absolute(self) -> TimeBound {
        match self {
            TimeBound::Relative(s) | TimeBound::Absolute(s) => TimeBound::Absolute(s),
        }
    }
}

/// `--time START,END`: samples with START <= time < END; either end may be
/// left out (`2.5,` or `,10`).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct TimeSpan {
    pub start: Option<TimeBound>,
    pub end: Option<TimeBound>,
}

impl std::str::FromStr for TimeSpan {
    type Err = String;
    fn from_str(s: &str) -> Result<TimeSpan, String> {
        let (a, b) = s
            .split_once(',')
            .ok_or_else(|| format!("--time {s:?}: expected START,END (seconds)"))?;
        let bound = |v: &str| -> Result<Option<TimeBound>, String> {
            let v = v.trim();
            if v.is_empty() {
                return Ok(None);
            }
            let (abs, num) = match v.strip_prefix('@') {
                Some(n) => (true, n),
                None => (false, v),
            };
            let x: f64 = num
                .parse()
                .map_err(|_| format!("--time: {v:?} is not a number of seconds"))?;
            if !x.is_finite() || x < 0.0 {
                return Err(format!("--time: {v:?} must be a non-negative number"));
            }
            Ok(Some(if abs {
                TimeBound::Absolute(x)
            } else {
                TimeBound::Relative(x)
            }))
        };
        let span = TimeSpan {
            start: bound(a)?,
            end: bound(b)?,
        };
        // Ends of the same kind are compared here; a relative and an
        // absolute one against the recording ([`TimeSpan::check`]).
        let order = match (span.start, span.end) {
            (Some(TimeBound::Relative(x)), Some(TimeBound::Relative(y)))
            | (Some(TimeBound::Absolute(x)), Some(TimeBound::Absolute(y))) => x.partial_cmp(&y),
            _ => None,
        };
        match order {
            Some(std::cmp::Ordering::Greater) => Err(format!(
                "--time {s:?}: the span ends before it starts ({SPAN_SYNTAX})"
            )),
            Some(std::cmp::Ordering::Equal) => Err(format!(
                "--time {s:?}: the span is empty, it ends where it starts ({SPAN_SYNTAX})"
            )),
            _ => Ok(span),
        }
    }
}

/// What a `--time` span means, for its errors.
const SPAN_SYNTAX: &str = "START,END: samples with START <= time < END";

impl TimeSpan {
    /// [start, end) in clock ns, for a recording starting at `origin` ns.
    pub fn resolve(&self, origin: u64) -> (u64, u64) {
        let ns = |b: Option<TimeBound>, open: u64| match b {
            None => open,
            Some(TimeBound::Relative(s)) => origin.saturating_add((s * 1e9).round() as u64),
            Some(TimeBound::Absolute(s)) => (s * 1e9).round() as u64,
        };
        (ns(self.start, 0), ns(self.end, u64::MAX))
    }

    /// An error where the span, for recording `name` starting at `origin`
    /// ns, ends before it starts or is empty: what parsing cannot tell of
    /// a span with a relative and an absolute end (`@5,0.5` in a
    /// recording that starts 10 s after boot is @5 to @10.5; at 4 s, @5 to
    /// @4.5: an error).
    pub fn check(&self, name: &str, origin: u64) -> Result<(), String> {
        let (start, end) = self.resolve(origin);
        if start < end {
            return Ok(());
        }
        let secs = |ns: u64| format!("@{}.{:06}", ns / 1_000_000_000, ns % 1_000_000_000 / 1_000);
        Err(format!(
            "--time {}: the span {}: {name} starts at {}, which makes it {} to {} ({SPAN_SYNTAX})",
            self.ends(),
            if start == end {
                "is empty, it ends where it starts"
            } else {
                "ends before it starts"
            },
            secs(origin),
            secs(start),
            secs(end)
        ))
    }

    fn describe(&self) -> String {
        format!("{} s", self.ends())
    }

    /// A note where the span starts with a relative time past the end of
    /// a recording from `origin` to `last` ns: the times perf's `--time`
    /// takes (and `script` prints) are the clock's, written `@SECS` here.
    pub fn past_the_end(&self, origin: u64, last: u64) -> Option<String> {
        let Some(TimeBound::Relative(start)) = self.start else {
            return None;
        };
        if origin.saturating_add((start * 1e9).round() as u64) <= last {
            return None;
        }
        let abs = TimeSpan {
            start: self.start.map(TimeBound::absolute),
            end: self.end.map(TimeBound::absolute),
        };
        Some(format!(
            "--time {}: the recording lasted {:.3} s; times without @ count from its start \
             here, the clock's (perf's --time, the times `script` prints) are written \
             --time {}",
            self.ends(),
            last.saturating_sub(origin) as f64 / 1e9,
            abs.ends()
        ))
    }

    /// `START,END` as given (`@` before an absolute end).
    fn ends(&self) -> String {
        let b = |b: Option<TimeBound>| match b {
            None => String::new(),
            Some(TimeBound::Relative(s)) => format!("{s}"),
            Some(TimeBound::Absolute(s)) => format!("@{s}"),
        };
        format!("{},{}", b(self.start), b(self.end))
    }
}

impl Filter {
    pub fn is_empty(&self) -> bool {
        self.pids.is_empty()
            && self.tids.is_empty()
            && self.comms.is_empty()
            && self.cpus.is_empty()
            && self.dsos.is_empty()
            && self.time.is_none()
            && self.snapshot.is_none()
            && self.event.is_none()
    }

    /// Whether `s` passes; `span` is the resolved `--time` span, if any.
    fn matches_in(&self, s: &ResolvedSample, span: Option<(u64, u64)>) -> bool {
        (self.pids.is_empty() || self.pids.contains(&s.tgid) || self.pids.contains(&s.pid))
            && (self.tids.is_empty() || self.tids.contains(&s.pid))
            && (self.comms.is_empty() || self.comms.iter().any(|c| *c == *s.comm))
            && (self.cpus.is_empty() || self.cpus.contains(&s.cpu))
            && (self.dsos.is_empty()
                || self
                    .dsos
                    .iter()
                    .any(|d| *d == s.pc.dso || s.pc.path.as_deref() == Some(d.as_str())))
            && span.is_none_or(|(a, b)| s.time >= a && s.time < b)
            && self.snapshot.is_none_or(|n| s.snapshot == n)
            && self.event.as_ref().is_none_or(|(i, _)| s.event == *i)
    }

    /// Whether `s` passes, with a `--time` span relative to `origin` ns.
    pub fn matches(&self, s: &ResolvedSample, origin: u64) -> bool {
        self.matches_in(s, self.time.map(|t| t.resolve(origin)))
    }

    /// How the filter reads on a report's header line, e.g. `pid 42, comm sh`.
    pub fn describe(&self) -> String {
        fn list<T: ToString>(name: &str, v: &[T]) -> Option<String> {
            (!v.is_empty()).then(|| {
                let items: Vec<String> = v.iter().map(T::to_string).collect();
                format!("{name} {}", items.join(","))
            })
        }
        [
            list("pid", &self.pids),
            list("tid", &self.tids),
            list("comm", &self.comms),
            list("cpu", &self.cpus),
            list("dso", &self.dsos),
            self.time.map(|t| format!("time {}", t.describe())),
            self.snapshot.map(|n| format!("snapshot {n}")),
            self.event.as_ref().map(|(_, n)| format!("event {n}")),
        ]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join(", ")
    }
}

#[derive(Clone)]
pub struct Profile {
    pub header: Header,
    /// The recording's events, in the order they first appear (the first
    /// CONFIG's list, then events later configurations added).
    pub event_list: Vec<EventInfo>,
    /// The samples the analysis uses (all, or those `filter` kept).
    pub samples: Vec<ResolvedSample>,
    /// The filter applied with [`Profile::retain`] (empty: none).
    pub filter: Filter,
    pub events: Vec<Event>,
    pub per_cpu: BTreeMap<u16, CpuStats>,
    /// Time of the stream's first record, or its start (the device's open)
    /// if that is earlier: records can predate the open, when the per-CPU
    /// buffers held samples taken since the module was loaded.
    pub first_time: u64,
    /// Time of the stream's last record (the header's start time if none).
    pub last_time: u64,
    /// Warnings for the user (decoder, missing side-car data, truncation).
    pub warnings: Vec<String>,
    /// The error that stopped decoding (truncation, or corruption with
    /// `allow_corrupt`).
    pub error: Option<DecodeError>,
    /// `record -p PID` / `record -- CMD`: the processes named and their
    /// descendants (from the side-car's FORK records).
    pub target: Option<Vec<u32>>,
    /// The side-car's kallsyms (the kernel's symbols at the addresses it ran
    /// at), shared by the profile's copies.
    pub kallsyms: Option<Rc<Kallsyms>>,
    /// Samples of the recording with a user stack copy (`record
    /// --call-graph dwarf`), and how many the DWARF unwind gave callers.
    pub unwind: UnwindStats,
    /// What the module sampled, from the CONFIG records: the values of its
    /// `pid` setting in force when the recording's samples were taken (the
    /// last CONFIG's where there are none), each once, in order of
    /// appearance; `0` is every task, `N` process N and the tasks it
    /// created (`record -- CMD`, `record -p PID`). Empty: the stream has
    /// no CONFIG record to tell.
    pub profiled: Vec<u32>,
    /// Where its files were found (an archive's, debuginfod).
    pub locator: Rc<Locator>,
    /// Its side-car directory (`None`: [`Profile::from_bytes`]).
    pub sidecar_dir: Option<PathBuf>,
    /// The binaries symbolisation looked for, and what it found.
    pub binaries: Vec<UsedBinary>,
    /// The SWITCH records (`record --off-cpu`), in stream order, each with
    /// the SAMPLE that followed it (its stacks; `None` if it was lost):
    /// what [`crate::off_cpu`] makes its off-CPU time of.
    pub switches: Vec<crate::off_cpu::SwitchOut>,
    /// When threads exited, by thread id (the side-car's EXIT events): where
    /// a thread's last off-CPU block ends at the latest.
    pub exits: HashMap<u32, u64>,
    /// When threads were created, by thread id (the side-car's FORK
    /// events): where a thread's wall clock starts.
    pub starts: HashMap<u32, u64>,
}

impl Profile {
    /// The cgroup filters the module sampled under (their ids, in order of
    /// appearance; empty if it sampled every task throughout).
    pub fn cgroup_filters(&self) -> Vec<u64> {
        let mut ids = Vec::new();
        for e in &self.events {
            if let Event::Config { cgroup, .. } = e {
                if *cgroup != 0 && !ids.contains(cgroup) {
                    ids.push(*cgroup);
                }
            }
        }
        ids
    }

    /// Samples the analysis uses (those the filter kept).
    pub fn total_samples(&self) -> u64 {
        self.samples.len() as u64
    }
    /// Summed weight of the samples the analysis uses.
    pub fn total_weight(&self) -> u64 {
        self.samples.iter().map(|s| s.weight).sum()
    }
    /// The flight-recorder snapshots of the recording: `(seq, time, records,
    /// overwritten)` from their END records, in stream order.
    pub fn snapshots(&self) -> Vec<(u32, u64, u64, u64)> {
        self.events
            .iter()
            .filter_map(|e| match *e {
                Event::Snapshot {
                    end: true,
                    seq,
                    time,
                    records,
                    overwritten,
                    ..
                } => Some((seq, time, records, overwritten)),
                _ => None,
            })
            .collect()
    }

    /// Samples in the recording, whatever the filter.
    pub fn recorded_samples(&self) -> u64 {
        self.per_cpu.values().map(|c| c.samples).sum()
    }
    /// Samples the filter left out.
    pub fn filtered_out(&self) -> u64 {
        self.recorded_samples() - self.total_samples()
    }
    pub fn total_lost(&self) -> u64 {
        self.per_cpu.values().map(|c| c.lost).sum()
    }
    /// Samples of the recording after which perf throttled their counter.
    pub fn total_throttled(&self) -> u64 {
        self.per_cpu.values().map(|c| c.throttled).sum()
    }

    /// How long recording was on, in ns: from [`Profile::first_time`] to the
    /// last record, less the spans between a TRACING off and the next TRACING on
    /// (a first marker that turns recording on means it was off before; a
    /// marker older than the span's start counts as at its start).
    pub fn recording_ns(&self) -> u64 {
        let mut on_ns = 0u64;
        let mut on_since = None;
        let mut first = true;
        for e in &self.events {
            let Event::Tracing { time, on, .. } = *e else {
                continue;
            };
            let time = time.max(self.first_time);
            if first && !on {
                on_since = Some(self.first_time);
            }
            first = false;
            match (on, on_since) {
                (false, Some(since)) => {
                    on_ns += time.saturating_sub(since);
                    on_since = None;
                }
                (true, None) => on_since = Some(time),
                _ => {}
            }
        }
        if first {
            on_since = Some(self.first_time);
        }
        if let Some(since) = on_since {
            on_ns += self.last_time.saturating_sub(since);
        }
        on_ns
    }

    /// The sampling rate per CPU the recording asked for, where the header
    /// tells it: the frequency, or 1 s / period for the cpu-clock event.
    pub fn requested_rate(&self) -> Option<f64> {
        let h = &self.header;
        // The event shown, where CONFIG records say how it was sampled (one
        // setting only); else the header.
        let configs = self
            .events
            .iter()
            .any(|e| matches!(e, Event::Config { .. }));
        let shown = match &self.filter.event {
            _ if !configs => None,
            Some((i, _)) => self.event_list.get(usize::from(*i)),
            None if self.event_list.len() == 1 => self.event_list.first(),
            None => return None,
        };
        if let Some(e) = shown.filter(|e| e.settings.len() == 1) {
            let s = &e.settings[0];
            if let Some(hz) = s.strip_suffix(" Hz").and_then(|v| v.parse::<f64>().ok()) {
                return (hz > 0.0).then_some(hz);
            }
            if let Some(p) = s
                .strip_prefix("period ")
                .and_then(|v| v.parse::<f64>().ok())
            {
                return (e.unit == "ns" && p > 0.0).then(|| 1e9 / p);
            }
        }
        if h.sample_freq != 0 {
            Some(h.sample_freq as f64)
        } else if h.event_name() == "cpu-clock" && h.sample_period != 0 {
            Some(1e9 / h.sample_period as f64)
        } else {
            None
        }
    }

    /// The index of event `name`, or an error that lists the recording's
    /// events.
    pub fn event_index(&self, name: &str) -> Result<u16> {
        match self.event_list.iter().position(|e| e.name == name) {
            Some(i) => Ok(i as u16),
            None => bail!(
                "--event {}: the recording has no such event; its events are: {}",
                text::esc(name),
                text::esc(&event_names(&self.event_list))
            ),
        }
    }

    /// Indices of the events that kept samples have, in list order.
    pub fn events_sampled(&self) -> Vec<u16> {
        let mut seen = vec![false; self.event_list.len()];
        for s in &self.samples {
            if let Some(x) = seen.get_mut(usize::from(s.event)) {
                *x = true;
            }
        }
        (0..self.event_list.len() as u16)
            .filter(|&i| seen[usize::from(i)])
            .collect()
    }

    /// A copy of the profile with only the samples of event `idx` (the
    /// per-CPU totals stay those of the recording).
    pub fn for_event(&self, idx: u16) -> Profile {
        let mut p = self.clone();
        p.samples.retain(|s| s.event == idx);
        if let Some(e) = self.event_list.get(usize::from(idx)) {
            p.filter.event = Some((idx, e.name.clone()));
        }
        p
    }

    /// The event an analysis shows, for a recording that holds several: the
    /// first event with samples (or the first listed). `None` when
    /// `--event` chose one (the filter holds it) or there is only one.
    pub fn default_event(&self) -> Option<u16> {
        if self.filter.event.is_some() || self.event_list.len() < 2 {
            return None;
        }
        Some(self.events_sampled().first().copied().unwrap_or(0))
    }

    /// Keeps only the samples `filter` matches. The per-CPU totals (samples
    /// and LOST counts of the whole stream) stay as recorded.
    pub fn retain(&mut self, filter: &Filter) {
        let span = filter.time.map(|t| t.resolve(self.first_time));
        self.samples.retain(|s| filter.matches_in(s, span));
        // A switch goes with its stacks' sample (one without is kept: its
        // time counts for its thread, see `off_cpu.rs`).
        self.switches
            .retain(|w| w.sample.as_ref().is_none_or(|s| filter.matches_in(s, span)));
        self.filter = filter.clone();
    }

    /// Loads `file` and its side-car; or an archive's (`oprofile-rs
    /// archive`), whose files come first.
    pub fn load(file: &Path, opts: &LoadOptions) -> Result<Profile> {
        let mut locator = Locator {
            debuginfod: opts.debuginfod.clone(),
            ..Locator::default()
        };
        let (file, dir) = if crate::archive_read::is_archive(file) {
            let a = crate::archive_read::open(file)?;
            locator.known = a.manifest.known();
            locator.archive = Some(a.root);
            locator.strict = true;
            (a.stream, opts.sidecar.clone().unwrap_or(a.sidecar))
        } else {
            let dir = opts.sidecar.clone().unwrap_or_else(|| sidecar_dir(file));
            (file.to_path_buf(), dir)
        };
        let file = file.as_path();
        let data =
            std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))?;
        let sc = Sidecar::load(&dir)
            .with_context(|| format!("cannot read side-car {}", dir.display()))?;
        locator.kernel = sc.build_ids.clone();
        let mut p = Profile::from_bytes_located(&data, &sc, opts, locator)
            .with_context(|| format!("{}", file.display()))?;
        p.sidecar_dir = Some(dir.clone());
        if !dir.is_dir() {
            p.warnings.insert(
                0,
                format!(
                    "no side-car {}: addresses will not be symbolised",
                    dir.display()
                ),
            );
        }
        Ok(p)
    }

    /// Decodes and symbolises a stream with the given side-car.
    pub fn from_bytes(data: &[u8], sc: &Sidecar, opts: &LoadOptions) -> Result<Profile> {
        let locator = Locator {
            debuginfod: opts.debuginfod.clone(),
            kernel: sc.build_ids.clone(),
            ..Locator::default()
        };
        Profile::from_bytes_located(data, sc, opts, locator)
    }

    /// The recording kernel's release (side-car `info`).
    pub fn kernel_release(&self) -> Option<String> {
        let info = std::fs::read_to_string(self.sidecar_dir.as_ref()?.join("info")).ok()?;
        info.lines()
            .find_map(|l| l.strip_prefix("kernel-release: ").map(str::to_string))
    }

    fn from_bytes_located(
        data: &[u8],
        sc: &Sidecar,
        opts: &LoadOptions,
        locator: Locator,
    ) -> Result<Profile> {
        let locator = Rc::new(locator);
        // Records are taken one at a time as they are decoded: those of a
        // recording with user stack copies are kilobytes each.
        let mut dec = Decoder::new(data)?;
        let header_read = dec.header().clone();
        let mut warnings: Vec<String> = Vec::new();
        let (kallsyms, kallsyms_warnings) = sc.kallsyms();
        warnings.extend(kallsyms_warnings);
        match &kallsyms {
            None => warnings.push("no kallsyms captured: kernel addresses are [unknown]".into()),
            Some(k) if k.is_empty() => warnings.push(
                "captured kallsyms has no addresses (kptr_restrict? record as root): kernel addresses are [unknown]".into(),
            ),
            _ => {}
        }
        let mut ropts = ResolverOptions {
            kind: opts.symbolizer,
            perf_maps: sc.perf_maps.clone(),
            roots: sc.roots(),
            locator: locator.clone(),
            ..ResolverOptions::default()
        };
        ropts
            .debug_dirs
            .splice(0..0, opts.debug_dirs.iter().cloned());
        let (timeline, map_events, bad) = sc.timeline();
        if bad > 0 {
            warnings.push(format!(
                "{bad} lines of the side-car's events file could not be read and were ignored"
            ));
        }
        let mut resolver = Resolver::with_timeline(kallsyms, timeline, opts.symfs.clone(), ropts);
        let mut unwinder = DwarfUnwinder::new(sc.vdso.as_deref(), header_read.endian);
        if let Some(v) = &sc.vdso {
            if let Err(e) = resolver.set_vdso(v) {
                warnings.push(format!("the captured vDSO is unusable: {e}"));
            }
        }
        let target = sc
            .target
            .as_ref()
            .map(|roots| crate::mapevents::descendants(roots, &map_events));
        let exits = crate::off_cpu::thread_exits(&map_events);
        let starts = crate::off_cpu::thread_starts(&map_events);
        let mut comms: HashMap<u32, Rc<str>> = HashMap::new();
        // The pid and name of each CPU's latest COMM record. The module
        // writes a COMM before a sample whenever the CPU's previous COMM
        // named another task or name, so this one names the sample's task
        // exactly; `comms` (the latest of any CPU, in stream order) is only
        // the fallback: the stream keeps each CPU's records in order, not
        // the order between CPUs, and another CPU's COMM read later can be
        // older (a shell's name, read after its child's exec).
        let mut cpu_comm: HashMap<u16, (u32, Rc<str>)> = HashMap::new();
        let mut samples = Vec::new();
        let mut events = Vec::new();
        let mut per_cpu: BTreeMap<u16, CpuStats> = BTreeMap::new();
        let mut segment = 0u32;
        let mut snapshot = 0u32;
        let mut first_time = header_read.start_time;
        let mut last_time = header_read.start_time;
        let header = &header_read;
        // Events by name; the latest CONFIG's list as indices into it.
        let mut event_list: Vec<EventInfo> = Vec::new();
        let mut current: Vec<u16> = Vec::new();
        let mut config: Option<Box<Config>> = None;
        let mut profiled: Vec<u32> = Vec::new();
        let mut bad_event_index = 0u64;
        fn index_of(list: &mut Vec<EventInfo>, name: String) -> u16 {
            match list.iter().position(|e| e.name == name) {
                Some(i) => i as u16,
                None => {
                    list.push(EventInfo::new(name));
                    (list.len() - 1) as u16
                }
            }
        }
        let mut nr_records = 0usize;
        let mut error = None;
        let mut switches = crate::off_cpu::Pairing::default();
        for r in dec.by_ref() {
            let r = match r {
                Ok(r) => r,
                Err(e) => {
                    error = Some(e);
                    break;
                }
            };
            nr_records += 1;
            // The span of the recording: its samples, losses and switches.
            // A COMM record names a task the module saw, maybe long before
            // the stream (the backlog `record` leaves out keeps its COMM
            // records), and a CONFIG record says when a setting changed:
            // neither is time recorded. Nor does a TRACING record start
            // the span: `record` keeps the backlog's (the state they say
            // holds at the opening), and a `tracing_on` switch a minute
            // before the recording made its report say "recording: 60 s"
            // ([`Profile::recording_ns`] counts them from the span's start).
            match r {
                Record::Comm(_) | Record::Config(_) => {}
                Record::Tracing(_) => last_time = last_time.max(r.time()),
                _ => {
                    first_time = first_time.min(r.time());
                    last_time = last_time.max(r.time());
                }
            }
            match r {
                Record::Comm(c) => {
                    let end = c.comm.iter().position(|&b| b == 0).unwrap_or(c.comm.len());
                    let name: Rc<str> = Rc::from(text::from_bytes(&c.comm[..end]));
                    cpu_comm.insert(c.cpu, (c.pid, name.clone()));
                    comms.insert(c.pid, name);
                }
                Record::Lost(l) => {
                    per_cpu.entry(l.cpu).or_default().lost += l.count;
                    events.push(Event::Lost {
                        time: l.time,
                        cpu: l.cpu,
                        count: l.count,
                        segment,
                    });
                }
                // The events and settings from here on (version 2): a
                // SAMPLE's `event` indexes the latest list.
                Record::Config(c) => {
                    current = c
                        .events()
                        .iter()
                        .map(|d| {
                            let i = index_of(&mut event_list, d.name());
                            event_list[usize::from(i)].note_setting_in(
                                d.is_freq(),
                                d.value,
                                modes_sampled(d.flags),
                            );
                            i
                        })
                        .collect();
                    events.push(Event::Config {
                        time: c.time,
                        generation: c.generation,
                        summary: config_summary(&c),
                        segment,
                        cgroup: c.cgroup,
                        pid: c.pid,
                    });
                    config = Some(c);
                }
                // Flight-recorder frames: the samples between a snapshot's
                // BEGINs and its END are that snapshot's.
                Record::Snapshot(sn) => {
                    if sn.end {
                        segment += 1;
                        snapshot = 0;
                    } else if snapshot != sn.seq {
                        segment += 1;
                        snapshot = sn.seq;
                    }
                    events.push(Event::Snapshot {
                        time: sn.time,
                        cpu: sn.cpu,
                        end: sn.end,
                        seq: sn.seq,
                        overwritten: sn.overwritten,
                        records: sn.records,
                        segment,
                    });
                }
                Record::Tracing(t) => {
                    segment += 1;
                    events.push(Event::Tracing {
                        time: t.time,
                        cpu: t.cpu,
                        on: t.on,
                        segment,
                    })
                }
                Record::Switch(sw) => switches.switch(sw),
                Record::Sample(s) => {
                    per_cpu.entry(s.cpu).or_default().samples += 1;
                    // (At most 8 values: a stream that changes it all the
                    // time costs no more.)
                    if let Some(c) = &config {
                        if profiled.last() != Some(&c.pid)
                            && profiled.len() < 8
                            && !profiled.contains(&c.pid)
                        {
                            profiled.push(c.pid);
                        }
                    }
                    // The event and what the sample stands for: its own
                    // period, else its event's fixed one.
                    let desc = config
                        .as_ref()
                        .and_then(|c| c.events().get(usize::from(s.event)).copied());
                    let (event, fixed) = match (&config, desc) {
                        (_, Some(d)) => (
                            current[usize::from(s.event)],
                            (!d.is_freq()).then_some(d.value),
                        ),
                        (None, None) if s.event == 0 => {
                            let i = index_of(&mut event_list, header.event_name());
                            if event_list[usize::from(i)].settings.is_empty() {
                                let (freq, v) = if header.sample_freq != 0 {
                                    (true, header.sample_freq)
                                } else {
                                    (false, header.sample_period)
                                };
                                event_list[usize::from(i)].note_setting(freq, v);
                            }
                            (i, (header.sample_freq == 0).then_some(header.sample_period))
                        }
                        _ => {
                            bad_event_index += 1;
                            (
                                index_of(&mut event_list, format!("event-{}", s.event)),
                                None,
                            )
                        }
                    };
                    let period = if s.period != 0 {
                        s.period
                    } else {
                        fixed.unwrap_or(0)
                    };
                    event_list[usize::from(event)].samples += 1;
                    if s.throttled {
                        event_list[usize::from(event)].throttled += 1;
                        per_cpu.entry(s.cpu).or_default().throttled += 1;
                        events.push(Event::Throttle {
                            time: s.time,
                            cpu: s.cpu,
                            event,
                            segment,
                        });
                    }
                    let comm = cpu_comm
                        .get(&s.cpu)
                        .filter(|(pid, _)| *pid == s.pid)
                        .map(|(_, name)| name)
                        .or_else(|| comms.get(&s.pid))
                        .or_else(|| comms.get(&s.tgid))
                        .cloned()
                        .unwrap_or_else(|| {
                            let c: Rc<str> = if s.pid == 0 {
                                Rc::from("swapper")
                            } else {
                                Rc::from(format!(":{}", s.pid).as_str())
                            };
                            comms.insert(s.pid, c.clone());
                            c
                        });
                    let pc = resolver.resolve_at(s.kernel, s.tgid, s.time, s.pc);
                    let mut callchain: Vec<Rc<Frame>> = s
                        .callchain
                        .iter()
                        .filter(|&&a| a < PERF_CONTEXT_MAX && a != 0)
                        .map(|&a| resolver.resolve(true, s.tgid, a))
                        .collect();
                    // The user chain after the kernel chain: return
                    // addresses, except the first entry of a kernel-mode
                    // sample, where the task entered the kernel. The DWARF
                    // unwind's where the sample has a stack copy and it
                    // found callers; else the frame-pointer chain.
                    let unwound = s.user_stack.as_ref().and_then(|st| {
                        unwinder.callchain(
                            &resolver,
                            s.tgid,
                            s.time,
                            s.kernel,
                            st,
                            &s.user_callchain,
                        )
                    });
                    let user_chain = unwound
                        .as_ref()
                        .map_or(&s.user_callchain[..], |u| &u.chain[..]);
                    let mut cut_at_copy_end = unwound.as_ref().is_some_and(|u| u.cut);
                    for (i, &a) in user_chain.iter().enumerate() {
                        if a == CHAIN_CUT {
                            // The module's walk with unwind tables was cut
                            // here (no rule, a fault): marked.
                            callchain.push(Rc::new(Frame::truncated(CHAIN_CUT)));
                            cut_at_copy_end = false;
                            break;
                        }
                        if a == 0 || a >= PERF_CONTEXT_MAX {
                            continue;
                        }
                        // A return address is checked at its call (a - 1),
                        // where it is named.
                        let entry = s.kernel && i == 0;
                        let code = if entry { a } else { a - 1 };
                        if !resolver.user_code_at(s.tgid, s.time, code) {
                            // Not code: the walk read something else as a
                            // frame. Cut the stack, marked, here.
                            callchain.push(Rc::new(Frame::truncated(a)));
                            cut_at_copy_end = false;
                            break;
                        }
                        callchain.push(if entry {
                            resolver.resolve_at(false, s.tgid, s.time, a)
                        } else {
                            resolver.resolve_return(s.tgid, s.time, a)
                        });
                    }
                    if cut_at_copy_end {
                        // The stack copy ended before the outermost frame.
                        callchain.push(Rc::new(Frame::truncated(0)));
                    }
                    samples.push(ResolvedSample {
                        weight: 1,
                        period,
                        event,
                        time: s.time,
                        cpu: s.cpu,
                        pid: s.pid,
                        tgid: s.tgid,
                        comm,
                        kernel: s.kernel,
                        pc,
                        callchain,
                        segment,
                        snapshot,
                    });
                    if let Some(last) = samples.last() {
                        switches.sample(last);
                    }
                }
            }
        }
        let switches = switches.finish();
        // The decoder's findings first, as they concern the whole stream.
        let mut head: Vec<String> = dec.warnings().iter().map(|w| w.to_string()).collect();
        if let Some(e) = &error {
            if e.is_truncation() {
                head.push(format!(
                    "{e}: the last record is incomplete and was ignored"
                ));
            } else if opts.allow_corrupt {
                head.push(format!("{e}: using the {nr_records} records before it"));
            } else {
                bail!("{e} (use --allow-corrupt to analyse the {nr_records} records before it)");
            }
        }
        warnings.splice(0..0, head);
        if bad_event_index > 0 {
            warnings.push(format!(
                "{bad_event_index} samples name an event the configuration before them does not list (named event-N)"
            ));
        }
        // An event whose samples stand for different periods (frequency
        // mode, or a period changed between configurations): its samples
        // weigh their period.
        let mut first_period: Vec<Option<u64>> = vec![None; event_list.len()];
        for s in &samples {
            let e = usize::from(s.event);
            match first_period[e] {
                None => first_period[e] = Some(s.period),
                Some(p) if p != s.period => event_list[e].weighted = true,
                _ => {}
            }
        }
        for s in &mut samples {
            if event_list[usize::from(s.event)].weighted {
                s.weight = s.period.max(1);
            }
        }
        if event_list.is_empty() {
            // No sample and no CONFIG: the header's event.
            let mut e = EventInfo::new(header.event_name());
            if header.sample_freq != 0 {
                e.note_setting(true, header.sample_freq);
            } else {
                e.note_setting(false, header.sample_period);
            }
            event_list.push(e);
        }
        warnings.extend(resolver.take_warnings());
        warnings.extend(unwinder.take_warnings());
        let lost: u64 = per_cpu.values().map(|c| c.lost).sum();
        if lost > 0 {
            warnings.push(format!(
                "{lost} samples were lost ({}): a per-CPU buffer or the event buffer was full; \
                 raise the module's cpu_buffer_size or buffer_size, or read the device sooner",
                lost_share(samples.len() as u64, lost)
            ));
        }
        let throttled: u64 = per_cpu.values().map(|c| c.throttled).sum();
        if throttled > 0 {
            let by_event: Vec<String> = event_list
                .iter()
                .filter(|e| e.throttled > 0)
                .map(|e| format!("{} {}", e.name, e.throttled))
                .collect();
            warnings.push(format!(
                "perf throttled the sampling {throttled} times ({}): each time it took more \
                 samples in one tick than kernel.perf_event_max_sample_rate allows, and sampled \
                 nothing more on that CPU until the next tick (the kernel lowers that limit when \
                 overflow handlers take long: \"perf: interrupt took too long\" in its log); \
                 sample less often, or raise the sysctl",
                by_event.join(", ")
            ));
        }
        if profiled.is_empty() {
            profiled.extend(config.as_ref().map(|c| c.pid));
        }
        Ok(Profile {
            header: header_read,
            event_list,
            samples,
            filter: Filter::default(),
            events,
            per_cpu,
            first_time,
            last_time,
            warnings,
            error,
            target,
            binaries: resolver.used(),
            kallsyms: resolver.into_kallsyms().map(Rc::new),
            unwind: unwinder.stats,
            profiled,
            locator,
            sidecar_dir: None,
            switches,
            exits,
            starts,
        })
    }

    /// What the module sampled, in words ([`Profile::profiled`]): `pid N
    /// and the tasks it created`, `every task (system-wide)`, or several
    /// joined by `, then `; `None` where no CONFIG record tells.
    pub fn profiled_words(&self) -> Option<String> {
        if self.profiled.is_empty() {
            return None;
        }
        Some(
            self.profiled
                .iter()
                .map(|&p| profiled_word(p))
                .collect::<Vec<_>>()
                .join(", then "),
        )
    }
}

/// What a `pid` setting samples, in words.
pub fn profiled_word(pid: u32) -> String {
    match pid {
        0 => "every task (system-wide)".into(),
        p => format!("pid {p} and the tasks it created"),
    }
}

/// A CONFIG record in words, for `script --events`: `generation 2: cycles
/// period 1000000, page-faults 4000 Hz; backtrace 8/16; ...`.
/// ` (user mode only)` or ` (kernel mode only)` for an event whose CONFIG
/// flags exclude the other mode; nothing when both are sampled.
fn modes_sampled(flags: u8) -> &'static str {
    use oprofile_stream::oprofile_format::{EVENT_FLAG_EXCLUDE_KERNEL, EVENT_FLAG_EXCLUDE_USER};
    match (
        flags & EVENT_FLAG_EXCLUDE_USER != 0,
        flags & EVENT_FLAG_EXCLUDE_KERNEL != 0,
    ) {
        (true, false) => " (kernel mode only)",
        (false, true) => " (user mode only)",
        (true, true) => " (no mode)",
        (false, false) => "",
    }
}

fn config_summary(c: &Config) -> String {
    let events: Vec<String> = c
        .events()
        .iter()
        .map(|d| {
            if d.is_freq() {
                format!("{} {} Hz{}", d.name(), d.value, modes_sampled(d.flags))
            } else {
                format!("{} period {}{}", d.name(), d.value, modes_sampled(d.flags))
            }
        })
        .collect();
    format!(
        "generation {}: {}; backtrace depth {} kernel, {} user; cpu_buffer_size {}, buffer_size {}, watershed {}{}{}{}",
        c.generation,
        events.join(", "),
        c.backtrace_depth,
        c.user_backtrace_depth,
        c.cpu_buffer_size,
        c.buffer_size,
        c.buffer_watershed,
        if c.mode == oprofile_stream::oprofile_format::MODE_OVERWRITE {
            ", overwrite mode"
        } else {
            ""
        },
        if c.cgroup != 0 {
            format!(", only cgroup {} and below", c.cgroup)
        } else {
            String::new()
        },
        if c.pid != 0 {
            format!(", only pid {} and the tasks it creates", c.pid)
        } else {
            String::new()
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use oprofile_stream::{Encoder, Sample, Tracing};

    fn profile(start: u64, records: &[Record]) -> Profile {
        let h = Header {
            start_time: start,
            ..Header::default()
        };
        let mut e = Encoder::new(&h);
        for r in records {
            e.record(r);
        }
        Profile::from_bytes(&e.finish(), &Sidecar::default(), &LoadOptions::default()).unwrap()
    }

    fn sample(time: u64) -> Record {
        Record::Sample(Sample {
            cpu: 0,
            kernel: true,
            time,
            pc: 0xffff_ffff_8100_0000,
            pid: 1,
            tgid: 1,
            callchain: vec![],
            ..Default::default()
        })
    }

    fn tracing(time: u64, on: bool) -> Record {
        Record::Tracing(Tracing { cpu: 0, time, on })
    }

    #[test]
    fn recording_time_leaves_out_the_spans_while_off() {
        // No marker: from the start to the last record.
        assert_eq!(profile(1000, &[sample(4000)]).recording_ns(), 3000);
        // Samples buffered before the open count from the first.
        assert_eq!(
            profile(1000, &[sample(500), sample(4000)]).recording_ns(),
            3500
        );
        // Off from 3000 to 7000.
        let p = profile(
            1000,
            &[
                sample(2000),
                tracing(3000, false),
                tracing(7000, true),
                sample(9000),
            ],
        );
        assert_eq!(p.recording_ns(), 2000 + 2000);
        // Ends off: nothing after the last off counts.
        let p = profile(1000, &[sample(2000), tracing(3000, false)]);
        assert_eq!(p.recording_ns(), 2000);
        // The first marker turns recording on: it was off before.
        let p = profile(1000, &[tracing(5000, true), sample(6000)]);
        assert_eq!(p.recording_ns(), 1000);
        // An empty stream recorded nothing.
        assert_eq!(profile(1000, &[]).recording_ns(), 0);
        // Markers older than the stream's opening (`record` keeps the
        // backlog's TRACING records, not its samples): the span starts at
        // the opening all the same (it was 3500: from the switch at 100).
        let p = profile(
            1000,
            &[
                tracing(50, false),
                tracing(100, true),
                sample(2000),
                sample(3000),
            ],
        );
        assert_eq!((p.first_time, p.recording_ns()), (1000, 2000));
        // An old off with no on after it: off from the start.
        let p = profile(
            1000,
            &[tracing(100, false), tracing(2500, true), sample(3000)],
        );
        assert_eq!(p.recording_ns(), 500);
    }

    #[test]
    fn script_keeps_samples_on_their_side_of_tracing_records() {
        // CPU clocks skewed: the sample taken before the switch has a later
        // stamp than the TRACING off record, the one after it an earlier
        // stamp than the TRACING on record.
        let mut before = sample(5000);
        let mut after = sample(5500);
        if let (Record::Sample(b), Record::Sample(a)) = (&mut before, &mut after) {
            b.cpu = 1;
            a.cpu = 2;
        }
        let p = profile(
            1000,
            &[
                sample(2000),
                before,
                tracing(4000, false),
                tracing(6000, true),
                after,
                sample(7000),
            ],
        );
        let mut out = Vec::new();
        crate::script::write(
            &p,
            &crate::script::ScriptOptions {
                callchain: false,
                events: true,
                format: Default::default(),
            },
            &mut out,
        )
        .unwrap();
        let out = String::from_utf8(out).unwrap();
        let order: Vec<&str> = out
            .lines()
            .map(|l| {
                if l.contains("TRACING off") {
                    "off"
                } else if l.contains("TRACING on") {
                    "on"
                } else if l.contains("[001]") {
                    "before"
                } else if l.contains("[002]") {
                    "after"
                } else {
                    "other"
                }
            })
            .collect();
        assert_eq!(
            order,
            ["other", "before", "off", "on", "after", "other"],
            "{out}"
        );
    }

    #[test]
    fn requested_rate_from_the_header() {
        let mut p = profile(0, &[]);
        assert_eq!(p.requested_rate(), Some(1000.0)); // cpu-clock, 1 ms period
        p.header.sample_freq = 4000;
        assert_eq!(p.requested_rate(), Some(4000.0));
        p.header.sample_freq = 0;
        p.header.set_event_name("cycles");
        assert_eq!(p.requested_rate(), None); // a period of events: no rate
    }
}
