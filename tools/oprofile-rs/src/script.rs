//! `script`: one line per sample, like `perf script`.

use std::io::Write;

use oprofile_stream::HeaderExt;

use crate::profile::{Event, Profile};
use crate::text::esc;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum ScriptFormat {
    /// `TIME [CPU] PID/TID COMM ADDRESS SYMBOL (BINARY) [FILE:LINE] EVENT
    /// PERIOD`.
    #[default]
    Oprofile,
    /// The text of `perf script` (always with the callchain).
    Perf,
}

#[derive(Debug, Clone, Copy, Default)]
pub struct ScriptOptions {
    /// Print the callchain under each sample.
    pub callchain: bool,
    /// Also print LOST, TRACING and SNAPSHOT events.
    pub events: bool,
    pub format: ScriptFormat,
}

/// ` FILE:LINE` (escaped) where DWARF gave one.
fn srcline(l: Option<&crate::symbols::SrcLine>) -> String {
    l.map(|l| format!(" {}", esc(&l.to_string())))
        .unwrap_or_default()
}

/// `1234567890` ns → `1.234567` (seconds.microseconds).
pub fn format_time(ns: u64) -> String {
    format!("{}.{:06}", ns / 1_000_000_000, (ns % 1_000_000_000) / 1_000)
}

/// Writes every sample in time order (within the spans between TRACING
/// records, which keep their place in the stream):
/// `TIME [CPU] PID/TID COMM ADDRESS SYMBOL (BINARY) [FILE:LINE] EVENT PERIOD`
/// (PERIOD: the events, or ns for the clocks, the sample stands for; `-`
/// if the stream does not tell).
pub fn write(p: &Profile, o: &ScriptOptions, out: &mut dyn Write) -> std::io::Result<()> {
    enum Item<'a> {
        S(&'a crate::profile::ResolvedSample),
        E(&'a Event),
    }
    // Order: by stream segment (TRACING records delimit them, exactly), then
    // by time within a segment, where records of different CPUs may trail
    // by one sync batch; a TRACING record opens its segment. Stable sort.
    let mut items: Vec<((u32, u8, u64), Item)> = p
        .samples
        .iter()
        .map(|s| ((s.segment, 1, s.time), Item::S(s)))
        .collect();
    if o.events {
        items.extend(p.events.iter().map(|e| {
            let key = match e {
                Event::Lost { time, segment, .. } => (*segment, 1, *time),
                // After its sample (same key; samples come first, stable sort).
                Event::Throttle { time, segment, .. } => (*segment, 1, *time),
                Event::Tracing { time, segment, .. } => (*segment, 0, *time),
                Event::Snapshot { time, segment, .. } => (*segment, 0, *time),
                Event::Config { time, segment, .. } => (*segment, 0, *time),
            };
            (key, Item::E(e))
        }));
    }
    items.sort_by_key(|(k, _)| *k);
    if o.format == ScriptFormat::Perf {
        for (_, it) in items {
            if let Item::S(s) = it {
                write_perf_sample(p, s, out)?;
            }
        }
        return Ok(());
    }
    for (_, it) in items {
        match it {
            Item::S(s) => {
                writeln!(
                    out,
                    "{:>16} [{:03}] {:>7}/{:<7} {:<16} {:016x} {} ({}){} {} {}",
                    format_time(s.time),
                    s.cpu,
                    s.tgid,
                    s.pid,
                    esc(&s.comm),
                    s.pc.addr,
                    esc(&s.pc.name()),
                    esc(&s.pc.dso),
                    // The line in the function named (with inlined
                    // functions there: the call to them; each of those is
                    // listed with its own line under --callchain).
                    srcline(s.pc.srcline.as_ref()),
                    perf_word(&event_name(p, s)),
                    period_text(s)
                )?;
                if o.callchain {
                    // Functions inlined at the sampled address, innermost first.
                    for (name, line) in s.pc.inlined.iter().rev() {
                        writeln!(
                            out,
                            "\t{:016x} {} (inlined){}",
                            s.pc.addr,
                            esc(name),
                            srcline(line.as_ref())
                        )?;
                    }
                    for f in &s.callchain {
                        for (name, line) in f.inlined.iter().rev() {
                            writeln!(
                                out,
                                "\t{:016x} {} (inlined){}",
                                f.addr,
                                esc(name),
                                srcline(line.as_ref())
                            )?;
                        }
                        writeln!(
                            out,
                            "\t{:016x} {} ({}){}",
                            f.addr,
                            esc(&f.name()),
                            esc(&f.dso),
                            srcline(f.srcline.as_ref())
                        )?;
                    }
                    if !s.callchain.is_empty() {
                        writeln!(out)?;
                    }
                }
            }
            Item::E(Event::Lost {
                time, cpu, count, ..
            }) => writeln!(
                out,
                "{:>16} [{:03}] LOST {count} samples",
                format_time(*time),
                cpu
            )?,
            Item::E(Event::Config { time, summary, .. }) => writeln!(
                out,
                "{:>16} [000] CONFIG {}",
                format_time(*time),
                esc(summary)
            )?,
            Item::E(Event::Tracing { time, cpu, on, .. }) => writeln!(
                out,
                "{:>16} [{:03}] TRACING {}",
                format_time(*time),
                cpu,
                if *on { "on" } else { "off" }
            )?,
            Item::E(Event::Snapshot {
                time,
                cpu,
                end,
                seq,
                overwritten,
                records,
                ..
            }) => writeln!(
                out,
                "{:>16} [{:03}] SNAPSHOT {seq} {}: {records} records, {overwritten} overwritten",
                format_time(*time),
                cpu,
                if *end { "end" } else { "begin" }
            )?,
            Item::E(Event::Throttle {
                time, cpu, event, ..
            }) => writeln!(
                out,
                "{:>16} [{:03}] THROTTLE {}: perf stopped the counter until its next tick",
                format_time(*time),
                cpu,
                perf_word(&event_name_at(p, *event))
            )?,
        }
    }
    Ok(())
}

/// The name of a sample's event.
fn event_name(p: &Profile, s: &crate::profile::ResolvedSample) -> String {
    event_name_at(p, s.event)
}

/// The name of event `event` (an index into [`Profile::event_list`]).
fn event_name_at(p: &Profile, event: u16) -> String {
    p.event_list
        .get(usize::from(event))
        .map_or_else(|| p.header.event_name(), |e| e.name.clone())
}

/// A sample's period, `-` where not known.
fn period_text(s: &crate::profile::ResolvedSample) -> String {
    if s.period == 0 {
        "-".into()
    } else {
        s.period.to_string()
    }
}

/// A word of a `perf script` line: escaped, spaces as `_` (the importers
/// split the header line and the frame lines at spaces).
fn perf_word(s: &str) -> String {
    let w = esc(s).replace(' ', "_");
    if w.is_empty() {
        "[unknown]".into()
    } else {
        w
    }
}

/// One sample as `perf script` prints it with a callchain:
///
/// ```text
/// COMM  TGID/TID [CPU] SECS.USECS: PERIOD EVENT:
/// \tADDRESS SYMBOL (BINARY)       leaf first, one line per frame
///
/// ```
/// Inlined functions get a line each (innermost first, at the address of the
/// frame they were inlined into), unknown symbols read `[unknown]`, binaries
/// are full paths where known. PERIOD is the events (ns for the clocks) the
/// sample stands for (1 if the stream does not tell), EVENT its event.
pub fn write_perf_sample(
    p: &Profile,
    s: &crate::profile::ResolvedSample,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let period = s.period.max(1);
    writeln!(
        out,
        "{} {:>7}/{:<7} [{:03}] {}: {:>10} {}:",
        perf_word(&s.comm),
        s.tgid,
        s.pid,
        s.cpu,
        format_time(s.time),
        period,
        perf_word(&event_name(p, s))
    )?;
    for f in std::iter::once(&s.pc).chain(s.callchain.iter()) {
        // perf names the image of unknown kernel addresses too.
        let dso = match (&f.path, f.kernel && f.dso == "[unknown]") {
            (_, true) => crate::symbols::KERNEL_DSO.to_string(),
            (Some(p), _) => perf_word(p),
            (None, _) => perf_word(&f.dso),
        };
        for name in f.names_inner_first() {
            writeln!(out, "\t{:16x} {} ({})", f.addr, esc(&name), dso)?;
        }
    }
    writeln!(out)
}
