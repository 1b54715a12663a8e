//! `html`: one self-contained interactive page (inline CSS, script and
//! data; no network access) with a searchable, zoomable flame graph (or
//! icicle), the call tree, the table of functions, a thread/process
//! selector and a timeline whose dragged range filters every view.
//!
//! The data is embedded compactly: a string table, the frames (name,
//! binary and kind as indices), the call stacks as a prefix tree (each
//! stack is its parent stack and one frame; a parent comes before its
//! children), the threads, and per sample its time (µs from the
//! recording's start), thread and stack, sorted by time. The page sums the
//! samples of the selection (thread, time range) in the browser whenever
//! it changes. The JSON sits in a `<script type="application/json">`
//! element with `<`, `>` and `&` written as `\u003c`, `\u003e`,
//! `\u0026`, so no name (`</script>`, `<!--`) can end or alter it; the
//! page's script puts names into the document as text only.

use std::collections::HashMap;
use std::io::Write;
use std::rc::Rc;

use anyhow::{bail, Result};
use serde::Serialize;

use crate::profile::Profile;
use crate::symbols::Frame;
use crate::text::esc;

/// The page: markup, style and script, with the title and data slots.
const TEMPLATE: &str = include_str!("html_page.html");
const TITLE_SLOT: &str = "__OPROFILE_RS_TITLE__";
const DATA_SLOT: &str = "__OPROFILE_RS_DATA__";

/// Kinds of frames (`frames.kind`).
const USER: u8 = 0;
const KERNEL: u8 = 1;
/// The task's name, the root of its stacks (as in folded stacks).
const COMM: u8 = 2;
/// The frame that ends a cut user call stack (`[truncated]`).
const CUT: u8 = 3;

#[derive(Serialize, Default)]
struct Frames {
    name: Vec<u32>,
    dso: Vec<u32>,
    kind: Vec<u8>,
}

#[derive(Serialize, Default)]
struct Stacks {
    /// The stack without its last frame (-1: none).
    parent: Vec<i64>,
    frame: Vec<u32>,
}

#[derive(Serialize, Default)]
struct Threads {
    tid: Vec<u32>,
    pid: Vec<u32>,
    comm: Vec<u32>,
}

#[derive(Serialize, Default)]
struct Samples {
    /// µs since the recording's start.
    t: Vec<u64>,
    thread: Vec<u32>,
    stack: Vec<u32>,
    /// Each sample's weight, where some weighs more than 1 (periods that
    /// differ: frequency mode).
    #[serde(skip_serializing_if = "Option::is_none")]
    weight: Option<Vec<u64>>,
}

/// What the page shows, as JSON.
#[derive(Serialize, Default)]
pub struct PageData {
    title: String,
    /// The header's line under the title (event, samples, recording time).
    summary: String,
    /// What the samples' weights count: `samples`, `ns`, `events`.
    unit: String,
    /// Warnings about the recording: lost samples, throttling, cut call
    /// stacks, and the loader's others.
    warnings: Vec<String>,
    strings: Vec<String>,
    frames: Frames,
    stacks: Stacks,
    threads: Threads,
    samples: Samples,
}

#[derive(Default)]
struct Interner {
    strings: Vec<String>,
    ids: HashMap<String, u32>,
}

impl Interner {
    fn id(&mut self, s: &str) -> u32 {
        if let Some(&i) = self.ids.get(s) {
            return i;
        }
        let i = self.strings.len() as u32;
        self.strings.push(s.to_string());
        self.ids.insert(s.to_string(), i);
        i
    }
}

/// Builds the page's data from the samples `p` kept.
pub fn page_data(p: &Profile, title: &str) -> PageData {
    let mut strings = Interner::default();
    let mut frames = Frames::default();
    let mut frame_ids: HashMap<(u32, u32, u8), u32> = HashMap::new();
    let mut frame_of = |strings: &mut Interner, name: &str, dso: &str, kind: u8| -> u32 {
        // Names come from the profiled programs: control characters and
        // bidirectional overrides shown visibly, as in every text output.
        let key = (strings.id(&esc(name)), strings.id(&esc(dso)), kind);
        *frame_ids.entry(key).or_insert_with(|| {
            frames.name.push(key.0);
            frames.dso.push(key.1);
            frames.kind.push(key.2);
            frames.name.len() as u32 - 1
        })
    };
    // The page's frames of each resolved frame: the function, then those
    // inlined at the address, outermost first (as the folded stacks).
    let mut of_frame: HashMap<*const Frame, Vec<u32>> = HashMap::new();
    let mut stacks = Stacks::default();
    let mut stack_ids: HashMap<(i64, u32), u32> = HashMap::new();
    let mut threads = Threads::default();
    let mut thread_ids: HashMap<(u32, u32, Rc<str>), u32> = HashMap::new();
    let mut order: Vec<&crate::profile::ResolvedSample> = p.samples.iter().collect();
    order.sort_by_key(|s| s.time);
    let mut samples = Samples::default();
    let weighted = p.samples.iter().any(|s| s.weight != 1);
    let mut weights = Vec::new();
    for s in order {
        let comm = frame_of(&mut strings, &s.comm, "", COMM);
        let mut path = vec![comm];
        for f in s.stack_root_first() {
            let ids = of_frame.entry(Rc::as_ptr(f)).or_insert_with(|| {
                let kind = if f.is_truncated() {
                    CUT
                } else if f.kernel {
                    KERNEL
                } else {
                    USER
                };
                let mut v = vec![frame_of(&mut strings, &f.function_name(), &f.dso, kind)];
                for (name, _) in &f.inlined {
                    v.push(frame_of(&mut strings, name, &f.dso, kind));
                }
                v
            });
            path.extend_from_slice(ids);
        }
        let mut parent = -1i64;
        for fr in path {
            let id = *stack_ids.entry((parent, fr)).or_insert_with(|| {
                stacks.parent.push(parent);
                stacks.frame.push(fr);
                stacks.frame.len() as u32 - 1
            });
            parent = i64::from(id);
        }
        let thread = *thread_ids
            .entry((s.pid, s.tgid, s.comm.clone()))
            .or_insert_with(|| {
                threads.tid.push(s.pid);
                threads.pid.push(s.tgid);
                threads.comm.push(strings.id(&esc(&s.comm)));
                threads.tid.len() as u32 - 1
            });
        samples.t.push(s.time.saturating_sub(p.first_time) / 1000);
        samples.thread.push(thread);
        samples.stack.push(parent as u32);
        if weighted {
            weights.push(s.weight);
        }
    }
    if weighted {
        samples.weight = Some(weights);
    }
    let mut warnings: Vec<String> = p.warnings.iter().map(|w| esc(w).into_owned()).collect();
    if let Some(t) = crate::report::truncated_note(p) {
        warnings.push(t);
    }
    PageData {
        title: title.to_string(),
        summary: summary(p),
        unit: crate::report::shown_event(p)
            .map_or("samples", |e| e.weight_unit())
            .to_string(),
        warnings,
        strings: strings.strings,
        frames,
        stacks,
        threads,
        samples,
    }
}

/// The line under the title: the event, the samples, lost ones, the
/// filter, the recording's time.
fn summary(p: &Profile) -> String {
    let mut parts = Vec::new();
    match crate::report::shown_event(p) {
        Some(e) => parts.push(format!("event {} ({})", esc(&e.name), esc(&e.describe()))),
        None => parts.push(format!(
            "events {}",
            esc(&crate::profile::event_names(&p.event_list))
        )),
    }
    let recorded = p.recorded_samples();
    let mut samples = format!("{recorded} samples");
    if p.total_lost() > 0 {
        samples += &format!(
            ", {} lost ({} of those taken)",
            p.total_lost(),
            crate::profile::lost_share(recorded, p.total_lost())
        );
    }
    parts.push(samples);
    if !p.filter.is_empty() {
        parts.push(format!(
            "filter {}: {} of {recorded} samples",
            esc(&p.filter.describe()),
            p.total_samples()
        ));
    }
    parts.push(format!(
        "recording {:.2} s, {} CPUs",
        p.recording_ns() as f64 / 1e9,
        p.header.nr_cpus
    ));
    if let Some(w) = p.profiled_words() {
        parts.push(format!("profiled: {w}"));
    }
    parts.join(" · ")
}

/// JSON that can sit inside a `<script>` element: `<`, `>` and `&` (only
/// ever in strings) escaped, and the line separators JavaScript once took
/// for line ends.
pub fn script_json(v: &impl Serialize) -> Result<String> {
    let json = serde_json::to_string(v)?;
    let mut out = String::with_capacity(json.len() + json.len() / 64);
    for c in json.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    Ok(out)
}

/// Text for HTML markup (the title).
fn html_text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The page for the samples `p` kept.
pub fn page(p: &Profile, title: &str) -> Result<String> {
    if p.samples.is_empty() {
        if p.filtered_out() > 0 {
            bail!(
                "no samples: the filter ({}) keeps none of the {}",
                esc(&p.filter.describe()),
                p.filtered_out()
            );
        }
        bail!("no samples: nothing to show");
    }
    let data = script_json(&page_data(p, &esc(title)))?;
    let (head, tail) = TEMPLATE
        .split_once(DATA_SLOT)
        .expect("the page has a data slot");
    let mut out = String::with_capacity(TEMPLATE.len() + data.len());
    out.push_str(&head.replacen(TITLE_SLOT, &html_text(&esc(title)), 1));
    out.push_str(&data);
    out.push_str(tail);
    Ok(out)
}

pub fn write(p: &Profile, title: &str, out: &mut dyn Write) -> Result<()> {
    out.write_all(page(p, title)?.as_bytes())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn script_json_cannot_end_its_script() {
        let v = vec!["</script><!--<script>", "a&b", "\u{2028}"];
        let j = script_json(&v).unwrap();
        assert!(
            !j.contains('<') && !j.contains('>') && !j.contains('&'),
            "{j}"
        );
        let back: Vec<String> = serde_json::from_str(&j).unwrap();
        assert_eq!(back, v);
    }

    #[test]
    fn the_template_has_its_slots_once() {
        assert_eq!(TEMPLATE.matches(DATA_SLOT).count(), 1);
        assert_eq!(TEMPLATE.matches(TITLE_SLOT).count(), 1);
        // The data slot is inside the JSON script element, and nothing in
        // the page fetches anything.
        let (before, _) = TEMPLATE.split_once(DATA_SLOT).unwrap();
        assert!(before
            .trim_end()
            .ends_with("<script id=\"profile-data\" type=\"application/json\">"));
        for fetch in ["http:", "https:", "src=", "@import", "url("] {
            assert!(!TEMPLATE.contains(fetch), "{fetch}");
        }
    }
}
