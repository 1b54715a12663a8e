//! `report`: a flat profile.

use std::collections::HashMap;
use std::io::Write;

use crate::profile::{lost_share, Profile};
use crate::text::esc;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum SortKey {
    /// One row per symbol (and binary).
    #[default]
    Symbol,
    /// One row per process.
    Pid,
    /// One row per CPU.
    Cpu,
}

#[derive(Debug, Clone, Default)]
pub struct ReportOptions {
    pub sort: SortKey,
    /// Split rows by CPU.
    pub per_cpu: bool,
    /// Split rows by process.
    pub per_process: bool,
    /// Show only the first N rows (0 = all).
    pub top: usize,
}

/// One row of the flat profile.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub samples: u64,
    pub percent: f64,
    pub symbol: Option<String>,
    pub dso: Option<String>,
    pub cpu: Option<u16>,
    /// (tgid, comm); for rows merged over several processes, the process with
    /// the most samples and how many others there were.
    pub process: Option<(u32, String, usize)>,
}

/// Samples of a group and their split by (tgid, comm).
type Group = (u64, HashMap<(u32, String), u64>);

#[derive(Hash, PartialEq, Eq, Clone)]
struct Key {
    symbol: Option<String>,
    dso: Option<String>,
    cpu: Option<u16>,
    process: Option<(u32, String)>,
}

/// Computes the rows, most samples first (ties by name).
pub fn rows(p: &Profile, o: &ReportOptions) -> Vec<Row> {
    let total = p.total_samples();
    let mut groups: HashMap<Key, Group> = HashMap::new();
    for s in &p.samples {
        let by_sym = o.sort == SortKey::Symbol;
        let key = Key {
            symbol: by_sym.then(|| s.pc.name()),
            dso: by_sym.then(|| s.pc.dso.clone()),
            cpu: (o.per_cpu || o.sort == SortKey::Cpu).then_some(s.cpu),
            process: (o.per_process || o.sort == SortKey::Pid)
                .then(|| (s.tgid, s.comm.to_string())),
        };
        let g = groups.entry(key).or_default();
        g.0 += 1;
        *g.1.entry((s.tgid, s.comm.to_string())).or_default() += 1;
    }
    let mut rows: Vec<Row> = groups
        .into_iter()
        .map(|(k, (n, procs))| {
            let process = match k.process {
                Some((t, c)) => Some((t, c, 0)),
                None if o.sort == SortKey::Cpu => None,
                None => {
                    let mut v: Vec<_> = procs.into_iter().collect();
                    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
                    let others = v.len() - 1;
                    v.into_iter().next().map(|((t, c), _)| (t, c, others))
                }
            };
            Row {
                samples: n,
                percent: if total == 0 {
                    0.0
                } else {
                    100.0 * n as f64 / total as f64
                },
                symbol: k.symbol,
                dso: k.dso,
                cpu: k.cpu,
                process,
            }
        })
        .collect();
    rows.sort_by(|a, b| {
        b.samples
            .cmp(&a.samples)
            .then_with(|| a.symbol.cmp(&b.symbol))
            .then_with(|| a.cpu.cmp(&b.cpu))
            .then_with(|| {
                a.process
                    .as_ref()
                    .map(|p| p.0)
                    .cmp(&b.process.as_ref().map(|p| p.0))
            })
    });
    if o.top > 0 {
        rows.truncate(o.top);
    }
    rows
}

/// Writes the report: header, per-CPU totals, then the rows.
pub fn write(p: &Profile, o: &ReportOptions, out: &mut dyn Write) -> std::io::Result<()> {
    let h = &p.header;
    let mode = if h.sample_freq != 0 {
        format!("{} Hz", h.sample_freq)
    } else {
        format!("period {}", h.sample_period)
    };
    writeln!(
        out,
        "# event: {} ({}), {}, {} CPUs",
        h.event_name(),
        h.sample_source_name(),
        mode,
        h.nr_cpus
    )?;
    let recorded = p.recorded_samples();
    write!(out, "# samples: {}, lost: {}", recorded, p.total_lost())?;
    if p.total_lost() > 0 {
        write!(
            out,
            " ({} of the samples taken)",
            lost_share(recorded, p.total_lost())
        )?;
    }
    writeln!(out)?;
    if !p.filter.is_empty() {
        writeln!(
            out,
            "# filter: {}: {} of {} samples",
            esc(&p.filter.describe()),
            p.total_samples(),
            p.recorded_samples()
        )?;
    }
    let secs = p.recording_ns() as f64 / 1e9;
    write!(out, "# recording: {secs:.2} s")?;
    if let Some(rate) = p.requested_rate() {
        write!(out, ", {rate:.0} samples/s per CPU asked for")?;
    }
    writeln!(out)?;
    writeln!(
        out,
        "# {:>4} {:>10} {:>10} {:>10}",
        "cpu", "samples", "lost", "taken/s"
    )?;
    for (cpu, st) in &p.per_cpu {
        let rate = if secs > 0.0 {
            format!("{:.0}", (st.samples + st.lost) as f64 / secs)
        } else {
            "-".into()
        };
        writeln!(
            out,
            "# {:>4} {:>10} {:>10} {:>10}",
            cpu, st.samples, st.lost, rate
        )?;
    }
    writeln!(out, "#")?;
    // Names come from the profiled programs: escaped for the terminal.
    let rows: Vec<Row> = rows(p, o)
        .into_iter()
        .map(|mut r| {
            r.symbol = r.symbol.map(|s| esc(&s).into_owned());
            r.dso = r.dso.map(|s| esc(&s).into_owned());
            if let Some(pr) = &mut r.process {
                pr.1 = esc(&pr.1).into_owned();
            }
            r
        })
        .collect();
    let show_sym = o.sort == SortKey::Symbol;
    let show_cpu = o.per_cpu || o.sort == SortKey::Cpu;
    let show_proc = o.sort != SortKey::Cpu || o.per_process;
    let sym_w = if show_sym {
        rows.iter()
            .filter_map(|r| r.symbol.as_ref())
            .map(|s| s.len())
            .max()
            .unwrap_or(6)
            .clamp(6, 60)
    } else {
        0
    };
    let dso_w = if show_sym {
        rows.iter()
            .filter_map(|r| r.dso.as_ref())
            .map(|s| s.len())
            .max()
            .unwrap_or(6)
            .clamp(6, 30)
    } else {
        0
    };
    let mut head = format!("{:>10} {:>7}", "Samples", "%");
    if show_cpu {
        head += &format!("  {:>4}", "CPU");
    }
    if show_sym {
        head += &format!("  {:<sym_w$}  {:<dso_w$}", "Symbol", "Binary");
    }
    if show_proc {
        head += "  Pid/Comm";
    }
    writeln!(out, "{}", head.trim_end())?;
    for r in &rows {
        let mut line = format!("{:>10} {:>6.2}%", r.samples, r.percent);
        if show_cpu {
            line += &format!("  {:>4}", r.cpu.map(|c| c.to_string()).unwrap_or_default());
        }
        if show_sym {
            line += &format!(
                "  {:<sym_w$}  {:<dso_w$}",
                r.symbol.as_deref().unwrap_or(""),
                r.dso.as_deref().unwrap_or("")
            );
        }
        if show_proc {
            if let Some((t, c, others)) = &r.process {
                line += &format!("  {t}/{c}");
                if *others > 0 {
                    line += &format!(" (+{others} more)");
                }
            }
        }
        writeln!(out, "{}", line.trim_end())?;
    }
    Ok(())
}
