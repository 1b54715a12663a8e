//! `folded` (Brendan Gregg's folded stacks) and `flamegraph` (inferno SVG).

use std::collections::BTreeMap;
use std::io::Write;

use anyhow::Result;

use crate::profile::Profile;
use crate::symbols::Frame;
use crate::text;

fn frame_name(f: &Frame) -> String {
    // Kernel addresses without a symbol (no kallsyms, or outside every
    // symbol) are one frame per image, not one sliver per address
    // (`report` and `script` keep the addresses).
    let mut n = text::folded_frame(&f.function_name());
    if f.kernel {
        // The stackcollapse-perf convention for kernel frames.
        n.push_str("_[k]");
    }
    n
}

/// Folded stacks, `comm;outermost;...;leaf COUNT`, sorted by stack. COUNT
/// sums the samples' weights: samples, or for an event whose periods differ
/// (frequency mode) the events (ns for the clocks) they stand for.
pub fn folded_lines(p: &Profile) -> Vec<String> {
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    for s in &p.samples {
        let mut line = text::folded_frame(&s.comm).replace(' ', "_");
        if line.is_empty() {
            line.push_str("[unknown]");
        }
        for f in s.stack_root_first() {
            line.push(';');
            line.push_str(&frame_name(f));
            // Functions inlined there, outermost first (as perf does).
            for (name, _) in &f.inlined {
                line.push(';');
                line.push_str(&text::folded_frame(name));
                if f.kernel {
                    line.push_str("_[k]");
                }
            }
        }
        *counts.entry(line).or_default() += s.weight;
    }
    counts
        .into_iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect()
}

pub fn write_folded(p: &Profile, out: &mut dyn Write) -> std::io::Result<()> {
    for l in folded_lines(p) {
        writeln!(out, "{l}")?;
    }
    Ok(())
}

/// Renders a flame graph SVG.
pub fn write_flamegraph(p: &Profile, title: &str, out: &mut dyn Write) -> Result<()> {
    let lines = folded_lines(p);
    let mut opts = inferno::flamegraph::Options::default();
    opts.title = title.to_string();
    opts.count_name = crate::report::shown_event(p)
        .map_or("samples", |e| e.weight_unit())
        .to_string();
    if lines.is_empty() {
        anyhow::bail!("no samples: nothing to draw");
    }
    inferno::flamegraph::from_lines(&mut opts, lines.iter().map(String::as_str), out)?;
    Ok(())
}
