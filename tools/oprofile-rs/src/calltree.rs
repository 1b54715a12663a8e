//! `report -g`: call trees under the rows of a report, as `perf report -g
//! graph,PCT,caller|callee` draws them.
//!
//! A row's tree is made of the call paths of the samples the row stands
//! for, merged where they agree. Its order says which way the paths go:
//!
//! - `caller`: from the caller toward the callee. With `--children` a row's
//!   paths start at its function (its outermost frame in the stack, so a
//!   recursive function's own recursion is under it) and go down to the
//!   sampled frame: the tree says where the function's time goes. Without
//!   `--children` they are the whole stacks of the row's own samples, from
//!   the outermost frame recorded down to the row's function (perf's
//!   inverted caller graph).
//! - `callee`: from the callee toward its callers. A row's paths start at
//!   its function (its innermost frame in the stack) and go up to the
//!   outermost frame recorded: the tree says who calls the function, and
//!   through whom (perf's default without `--children`). Without
//!   `--children` only the row's own samples (taken in the function) are
//!   in it, with `--children` every sample with the function in its stack.
//!
//! Every sample is in a row's tree once, whatever its recursion: a node's
//! weight is the sum of its children's plus its own `self_weight` (the
//! paths that end there: in caller order the samples taken in that frame,
//! in callee order the stacks whose outermost recorded frame it is). The
//! percentages are of all samples kept, as the rows' (perf's `graph`, not
//! `fractal`); branches under the threshold are left out, and their number
//! and weight are given instead.

use std::collections::HashMap;
use std::io::Write;

use serde::Serialize;

use crate::symbols::Frame;
use crate::text::esc;

/// Which way a call tree's paths go (see the module's documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Order {
    /// From each function toward its callees.
    Caller,
    /// From each function toward its callers.
    Callee,
}

impl Order {
    pub fn name(self) -> &'static str {
        match self {
            Order::Caller => "caller",
            Order::Callee => "callee",
        }
    }
}

/// perf's default threshold of `-g`: branches under 0.5% are hidden.
pub const DEFAULT_THRESHOLD: f64 = 0.5;

/// `-g [ORDER][,PCT]` as given: what it leaves out takes the defaults
/// ([`CallGraphSpec::resolve`]).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct CallGraphSpec {
    pub order: Option<Order>,
    pub threshold: Option<f64>,
}

/// The call trees to draw: their order and the percentage under which a
/// branch is hidden.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CallGraph {
    pub order: Order,
    pub threshold: f64,
}

impl CallGraphSpec {
    /// Reads the value of `-g`: comma-separated words in any order, as
    /// perf's `-g` takes them: `caller` or `callee`, a threshold in percent
    /// (`0.5`, `2%`), and perf's `graph` (the only print type here),
    /// `function` (the only key) and `percent` (the only value), which
    /// change nothing. An empty value (`-g` alone) takes every default.
    pub fn parse(s: &str) -> Result<CallGraphSpec, String> {
        let mut spec = CallGraphSpec::default();
        for w in s.split(',').map(str::trim).filter(|w| !w.is_empty()) {
            match w {
                "caller" | "callee" => {
                    let o = if w == "caller" {
                        Order::Caller
                    } else {
                        Order::Callee
                    };
                    if spec.order.is_some_and(|x| x != o) {
                        return Err("both caller and callee: give one order".into());
                    }
                    spec.order = Some(o);
                }
                "graph" | "function" | "percent" => {}
                "flat" | "fractal" | "folded" | "none" => {
                    return Err(format!(
                        "{w:?}: only the graph print type is drawn here (`folded` is a command of \
                         its own)"
                    ))
                }
                "address" | "period" | "count" | "branch" => {
                    return Err(format!(
                        "{w:?} is not taken: the trees are of functions, in percent"
                    ))
                }
                _ if w.starts_with(|c: char| c.is_ascii_digit() || c == '.') => {
                    if spec.threshold.is_some() {
                        return Err(format!(
                            "{w:?}: one threshold only (perf's print limit is not taken)"
                        ));
                    }
                    spec.threshold = Some(crate::spelling::parse_percent(w)?);
                }
                _ => {
                    return Err(format!(
                        "{w:?} is not an order (caller, callee) or a threshold in percent"
                    ))
                }
            }
        }
        Ok(spec)
    }

    /// The trees to draw: the order defaults to `caller` with `--children`,
    /// else `callee` (as perf's); the threshold to `--percent-limit` if
    /// given, else 0.5%.
    pub fn resolve(self, children: bool, percent_limit: Option<f64>) -> CallGraph {
        CallGraph {
            order: self.order.unwrap_or(if children {
                Order::Caller
            } else {
                Order::Callee
            }),
            threshold: self
                .threshold
                .or(percent_limit)
                .unwrap_or(DEFAULT_THRESHOLD),
        }
    }
}

/// What a threshold left out at one place in a tree.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Hidden {
    /// Branches left out.
    pub branches: usize,
    /// Their summed weight, and its share of all samples kept.
    pub weight: u64,
    pub percent: f64,
}

/// A node of a call tree: a function at one place in the call paths.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Node {
    pub symbol: String,
    pub dso: String,
    /// The samples whose path goes through here (and their share of all
    /// samples kept): `self_weight` plus the children's, hidden ones
    /// included.
    pub weight: u64,
    pub percent: f64,
    /// The paths that end here: the samples taken in this frame (caller
    /// order), or whose outermost recorded frame it is (callee order).
    pub self_weight: u64,
    pub self_percent: f64,
    /// The next frames of the paths, most weight first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub children: Vec<Node>,
    /// The children under the threshold.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hidden: Option<Hidden>,
}

/// A row's call tree: its top nodes (one, the row's function, where the
/// paths start at it), and those hidden.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct Tree {
    pub nodes: Vec<Node>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hidden: Option<Hidden>,
}

/// Functions as small numbers, for the trees under construction.
#[derive(Default)]
pub struct Interner {
    ids: HashMap<(String, String), u32>,
    names: Vec<(String, String)>,
}

impl Interner {
    /// The id of `f`'s function (its name, as the report's rows have it,
    /// and binary).
    pub fn id(&mut self, f: &Frame) -> u32 {
        self.intern(f.name(), f.dso.clone())
    }

    fn intern(&mut self, name: String, dso: String) -> u32 {
        let k = (name, dso);
        if let Some(&i) = self.ids.get(&k) {
            return i;
        }
        let i = self.names.len() as u32;
        self.names.push(k.clone());
        self.ids.insert(k, i);
        i
    }
}

struct BNode {
    id: u32,
    weight: u64,
    self_weight: u64,
    kids: Vec<BNode>,
}

/// A call tree under construction.
#[derive(Default)]
pub struct Builder {
    roots: Vec<BNode>,
}

impl Builder {
    /// Adds a sample of weight `w` whose path is `path` (function ids).
    pub fn add(&mut self, path: &[u32], w: u64) {
        let mut level = &mut self.roots;
        for (i, &id) in path.iter().enumerate() {
            let pos = match level.iter().position(|n| n.id == id) {
                Some(p) => p,
                None => {
                    level.push(BNode {
                        id,
                        weight: 0,
                        self_weight: 0,
                        kids: Vec::new(),
                    });
                    level.len() - 1
                }
            };
            let node = &mut level[pos];
            node.weight += w;
            if i + 1 == path.len() {
                node.self_weight += w;
                return;
            }
            level = &mut node.kids;
        }
    }

    /// The finished tree: percentages of `total`, branches under
    /// `threshold` percent hidden.
    pub fn finish(self, names: &Interner, total: u64, threshold: f64) -> Tree {
        let (nodes, hidden) = finish_level(self.roots, names, total, threshold);
        Tree { nodes, hidden }
    }
}

/// The stacks of many samples merged where they agree, each frame with
/// the row it stands for: with `--children` every sample is in the tree of
/// many rows, and adding its path to each costs the square of its depth
/// (deep stacks times many samples: minutes). The trie holds each stack
/// once, and [`Trie::split`] gives each row the subtrees under its frames.
pub struct Trie {
    nodes: Vec<TNode>,
    index: HashMap<(u32, u32, u32), u32>,
}

struct TNode {
    /// The function ([`Interner`]).
    fid: u32,
    /// The row the frame stands for, `NO_ROW` for none.
    row: u32,
    weight: u64,
    self_weight: u64,
    kids: Vec<u32>,
}

const NO_ROW: u32 = u32::MAX;

impl Default for Trie {
    fn default() -> Trie {
        Trie {
            nodes: vec![TNode {
                fid: u32::MAX,
                row: NO_ROW,
                weight: 0,
                self_weight: 0,
                kids: Vec::new(),
            }],
            index: HashMap::new(),
        }
    }
}

impl Trie {
    /// Adds a sample of weight `w` whose path is `path`: each frame's
    /// function and the index of the row it stands for, if any.
    pub fn add(&mut self, path: impl IntoIterator<Item = (u32, Option<usize>)>, w: u64) {
        let mut at = 0u32;
        for (fid, row) in path {
            let row = row.map_or(NO_ROW, |r| r as u32);
            let next = self.nodes.len() as u32;
            let k = *self.index.entry((at, fid, row)).or_insert(next);
            if k == next {
                self.nodes.push(TNode {
                    fid,
                    row,
                    weight: 0,
                    self_weight: 0,
                    kids: Vec::new(),
                });
                self.nodes[at as usize].kids.push(k);
            }
            self.nodes[k as usize].weight += w;
            at = k;
        }
        if at != 0 {
            self.nodes[at as usize].self_weight += w;
        }
    }

    /// Adds to the tree of each row the subtrees of its frames, from the
    /// first one of each path (not again below it: a path is in a row's
    /// tree once, whatever its recursion).
    pub fn split(&self, rows: &mut [Builder]) {
        let mut active = vec![false; rows.len()];
        self.walk(0, &mut active, rows);
    }

    fn walk(&self, n: u32, active: &mut [bool], rows: &mut [Builder]) {
        for &k in &self.nodes[n as usize].kids {
            let row = self.nodes[k as usize].row as usize;
            if row != NO_ROW as usize && row < rows.len() && !active[row] {
                self.merge(k, &mut rows[row].roots);
                active[row] = true;
                self.walk(k, active, rows);
                active[row] = false;
            } else {
                self.walk(k, active, rows);
            }
        }
    }

    /// Adds the subtree of `n` to `level`, nodes of the same function
    /// merged.
    fn merge(&self, n: u32, level: &mut Vec<BNode>) {
        let t = &self.nodes[n as usize];
        let pos = match level.iter().position(|b| b.id == t.fid) {
            Some(p) => p,
            None => {
                level.push(BNode {
                    id: t.fid,
                    weight: 0,
                    self_weight: 0,
                    kids: Vec::new(),
                });
                level.len() - 1
            }
        };
        let b = &mut level[pos];
        b.weight += t.weight;
        b.self_weight += t.self_weight;
        for &k in &t.kids {
            self.merge(k, &mut b.kids);
        }
    }
}

fn pct(part: u64, total: u64) -> f64 {
    if total == 0 {
        0.0
    } else {
        100.0 * part as f64 / total as f64
    }
}

fn finish_level(
    mut level: Vec<BNode>,
    names: &Interner,
    total: u64,
    threshold: f64,
) -> (Vec<Node>, Option<Hidden>) {
    level.sort_by(|a, b| {
        b.weight
            .cmp(&a.weight)
            .then_with(|| names.names[a.id as usize].cmp(&names.names[b.id as usize]))
    });
    let mut nodes = Vec::new();
    let mut hidden = Hidden {
        branches: 0,
        weight: 0,
        percent: 0.0,
    };
    for n in level {
        if pct(n.weight, total) < threshold {
            hidden.branches += 1;
            hidden.weight += n.weight;
            continue;
        }
        let (children, h) = finish_level(n.kids, names, total, threshold);
        let (symbol, dso) = names.names[n.id as usize].clone();
        nodes.push(Node {
            symbol,
            dso,
            weight: n.weight,
            percent: pct(n.weight, total),
            self_weight: n.self_weight,
            self_percent: pct(n.self_weight, total),
            children,
            hidden: h,
        });
    }
    hidden.percent = pct(hidden.weight, total);
    (nodes, (hidden.branches > 0).then_some(hidden))
}

/// Writes `tree` under a row: one line a node, `lead` first, then its
/// percentages (and in caller order its self percentage), then the
/// branches drawn as perf draws them (`|--`, `\--`; a lone child goes on
/// straight under its parent). A node's binary is named where it is not
/// its parent's.
pub fn write(
    tree: &Tree,
    order: Order,
    threshold: f64,
    lead: &str,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let w = Writer {
        order,
        threshold,
        lead,
    };
    w.level(&tree.nodes, tree.hidden.as_ref(), "", None, out)
}

struct Writer<'a> {
    order: Order,
    threshold: f64,
    lead: &'a str,
}

impl Writer<'_> {
    fn figures(&self, percent: f64, self_percent: Option<f64>) -> String {
        match (self.order, self_percent) {
            (Order::Caller, Some(s)) => format!("{}{percent:>7.2}% {s:>7.2}%", self.lead),
            (Order::Caller, None) => format!("{}{percent:>7.2}% {:>8}", self.lead, ""),
            (Order::Callee, _) => format!("{}{percent:>7.2}%", self.lead),
        }
    }

    /// The nodes of one level, under a parent in binary `parent_dso`
    /// (`None` at the top); `indent` is where they are drawn.
    fn level(
        &self,
        nodes: &[Node],
        hidden: Option<&Hidden>,
        indent: &str,
        parent_dso: Option<&str>,
        out: &mut dyn Write,
    ) -> std::io::Result<()> {
        let count = nodes.len() + usize::from(hidden.is_some());
        // A lone child goes on straight below its parent.
        let straight = count == 1 && hidden.is_none();
        for (i, n) in nodes.iter().enumerate() {
            let last = i + 1 == count;
            let (mark, next) = if straight {
                ("", indent.to_string())
            } else if last {
                ("\\--", format!("{indent}   "))
            } else {
                ("|--", format!("{indent}|  "))
            };
            let dso = match parent_dso {
                Some(d) if d != n.dso && !n.dso.is_empty() => format!("  ({})", esc(&n.dso)),
                _ => String::new(),
            };
            writeln!(
                out,
                "{}  {indent}{mark}{}{dso}",
                self.figures(n.percent, Some(n.self_percent)),
                esc(&n.symbol)
            )?;
            self.level(&n.children, n.hidden.as_ref(), &next, Some(&n.dso), out)?;
        }
        if let Some(h) = hidden {
            let mark = if count == 1 { "" } else { "\\--" };
            writeln!(
                out,
                "{}  {indent}{mark}[{} {} under {:.2}% hidden]",
                self.figures(h.percent, None),
                h.branches,
                if h.branches == 1 {
                    "branch"
                } else {
                    "branches"
                },
                self.threshold
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The trie gives each row the tree that adding each path to it from
    /// the row's first frame on gives, for random paths with recursion.
    #[test]
    fn trie_split_is_the_paths_from_each_rows_first_frame() {
        let mut names = Interner::default();
        for f in 0..7 {
            names.intern(format!("f{f}"), "bin".into());
        }
        // Functions 0..4 have rows (function 3 and 4 share one: two
        // functions of a binary, say); 5 and 6 have none.
        let row_of = |f: u32| match f {
            0..=2 => Some(f as usize),
            3 | 4 => Some(3),
            _ => None,
        };
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        let mut trie = Trie::default();
        let mut naive: Vec<Builder> = (0..4).map(|_| Builder::default()).collect();
        for _ in 0..500 {
            let len = 1 + next(12) as usize;
            let path: Vec<u32> = (0..len).map(|_| next(7) as u32).collect();
            let w = 1 + next(5);
            trie.add(path.iter().map(|&f| (f, row_of(f))), w);
            let mut seen = [false; 4];
            for (i, &f) in path.iter().enumerate() {
                if let Some(r) = row_of(f) {
                    if !seen[r] {
                        seen[r] = true;
                        naive[r].add(&path[i..], w);
                    }
                }
            }
        }
        let mut split: Vec<Builder> = (0..4).map(|_| Builder::default()).collect();
        trie.split(&mut split);
        for (r, (a, b)) in split.into_iter().zip(naive).enumerate() {
            let (a, b) = (a.finish(&names, 1000, 0.0), b.finish(&names, 1000, 0.0));
            assert!(!b.nodes.is_empty(), "row {r}");
            assert_eq!(a, b, "row {r}");
        }
    }
}
