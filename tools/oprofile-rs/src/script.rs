//! `script`: one line per sample, like `perf script`.

use std::io::Write;

use crate::profile::{Event, Profile};
use crate::text::esc;

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

/// Writes every sample in time order (within the spans between TRACING
/// records, which keep their place in the stream):
/// `TIME [CPU] PID/TID COMM ADDRESS SYMBOL (BINARY)`.
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
                Event::Tracing { time, segment, .. } => (*segment, 0, *time),
            };
            (key, Item::E(e))
        }));
    }
    items.sort_by_key(|(k, _)| *k);
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
                    esc(&s.comm),
                    s.pc.addr,
                    esc(&s.pc.name()),
                    esc(&s.pc.dso)
                )?;
                if o.callchain {
                    for f in &s.callchain {
                        writeln!(
                            out,
                            "\t{:016x} {} ({})",
                            f.addr,
                            esc(&f.name()),
                            esc(&f.dso)
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
            Item::E(Event::Tracing { time, cpu, on, .. }) => writeln!(
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
