//! `script`: one line per sample, like `perf script`.

use std::io::Write;

use crate::profile::{Event, Profile};

#[derive(Debug, Clone, Copy, Default)]
pub struct ScriptOptions {
    /// Print the callchain under each sample.
    pub callchain: bool,
    /// Also print LOST and TRACING events.
    pub events: bool,
}

/// `1234567890` ns → `1.234567` (seconds.microseconds).
pub fn format_time(ns: u64) -> String {
    format!("{}.{:06}", ns / 1_000_000_000, (ns % 1_000_000_000) / 1_000)
}

/// Writes every sample in time order:
/// `TIME [CPU] PID/TID COMM ADDRESS SYMBOL (BINARY)`.
pub fn write(p: &Profile, o: &ScriptOptions, out: &mut dyn Write) -> std::io::Result<()> {
    enum Item<'a> {
        S(&'a crate::profile::ResolvedSample),
        E(&'a Event),
    }
    let mut items: Vec<(u64, Item)> = p.samples.iter().map(|s| (s.time, Item::S(s))).collect();
    if o.events {
        items.extend(p.events.iter().map(|e| {
            let t = match e {
                Event::Lost { time, .. } | Event::Tracing { time, .. } => *time,
            };
            (t, Item::E(e))
        }));
    }
    // Records of different CPUs may trail by one sync batch: sort (stable).
    items.sort_by_key(|(t, _)| *t);
    for (_, it) in items {
        match it {
            Item::S(s) => {
                writeln!(
                    out,
                    "{:>16} [{:03}] {:>7}/{:<7} {:<16} {:016x} {} ({})",
                    format_time(s.time),
                    s.cpu,
                    s.tgid,
                    s.pid,
                    s.comm,
                    s.pc.addr,
                    s.pc.name(),
                    s.pc.dso
                )?;
                if o.callchain {
                    for f in &s.callchain {
                        writeln!(out, "\t{:016x} {} ({})", f.addr, f.name(), f.dso)?;
                    }
                    if !s.callchain.is_empty() {
                        writeln!(out)?;
                    }
                }
            }
            Item::E(Event::Lost { time, cpu, count }) => writeln!(
                out,
                "{:>16} [{:03}] LOST {count} samples",
                format_time(*time),
                cpu
            )?,
            Item::E(Event::Tracing { time, cpu, on }) => writeln!(
                out,
                "{:>16} [{:03}] TRACING {}",
                format_time(*time),
                cpu,
                if *on { "on" } else { "off" }
            )?,
        }
    }
    Ok(())
}
