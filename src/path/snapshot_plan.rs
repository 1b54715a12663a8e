// SPDX-License-Identifier: GPL-2.0

//! Which records a flight-recorder snapshot keeps, and in which order it
//! writes them: pure logic over the records staged from each CPU buffer.
//!
//! This file is both a module of the kernel crate (`src/path/snapshot.rs` uses it)
//! and the root of the host crate `oprofile-snapshot-plan`
//! (`crates/snapshot`), whose unit and property tests check it. It uses only
//! `core`: no allocation, no panicking code path.
//!
//! A snapshot (see `Documentation/stream-format.md`, SNAPSHOT) takes, per CPU,
//! the records that CPU's buffer held, oldest first ([`Staged`]), and keeps:
//!
//! 1. only records named by a COMM: the records before a CPU's first COMM
//!    belong to a task whose COMM was overwritten in the ring, so they are
//!    dropped (and counted as overwritten). The sampler re-names the running
//!    task often enough that this is a short prefix (`sampler.rs`);
//! 2. of those, the newest that fit in `budget` bytes, by time across CPUs
//!    (the newest record of all CPUs first, then the next newest, ...,
//!    until one does not fit). Where a CPU's cut falls after its first COMM
//!    and before a SAMPLE, the latest COMM before the cut is kept too, in
//!    front of that CPU's records (it names them), and counted in the budget.
//!
//! [`next_merged`] then hands out the kept records merged by time across
//! CPUs, each CPU's in its own order.

#![cfg_attr(snapshot_plan_host, no_std)]
#![deny(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::unreachable,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects
)]

/// One CPU's staged records, oldest first.
pub trait Staged {
    /// Number of records.
    fn count(&self) -> usize;
    /// Bytes of record `i` (as written to the stream).
    fn bytes(&self, i: usize) -> usize;
    /// Time of record `i`.
    fn time(&self, i: usize) -> u64;
    /// Whether record `i` is a COMM record (it names the records after it).
    fn is_comm(&self, i: usize) -> bool;
}

/// What a snapshot keeps of one CPU's staged records: `restate` (if any),
/// then records `first..count`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuPlan {
    /// The first record kept in order; those before it are dropped, except
    /// `restate`.
    pub first: usize,
    /// A COMM record before `first`, kept in front of the others: it names
    /// the first records kept.
    pub restate: Option<usize>,
    /// Staged records (`count`).
    pub count: usize,
    /// This CPU's first COMM (or `count`): the records before it are
    /// nameless and never kept.
    pub named: usize,
}

impl CpuPlan {
    /// Records the snapshot writes for this CPU.
    pub fn records(&self) -> usize {
        self.count
            .saturating_sub(self.first)
            .saturating_add(usize::from(self.restate.is_some()))
    }

    /// Records dropped: overwritten in effect (nameless, or no room).
    pub fn dropped(&self) -> usize {
        self.first
            .saturating_sub(usize::from(self.restate.is_some()))
    }

    /// The next record this CPU hands to the merge, if any.
    fn head(&self) -> Option<usize> {
        self.restate
            .or((self.first < self.count).then_some(self.first))
    }

    /// Takes the record [`CpuPlan::head`] gave.
    fn advance(&mut self) {
        if self.restate.take().is_none() {
            self.first = self.first.saturating_add(1);
        }
    }
}

/// Index of the first COMM of `s` (or its count: none).
fn first_comm<S: Staged>(s: &S) -> usize {
    (0..s.count()).find(|&i| s.is_comm(i)).unwrap_or(s.count())
}

/// The latest COMM of `s` below `i` and at or above `lo`.
fn comm_before<S: Staged>(s: &S, i: usize, lo: usize) -> Option<usize> {
    (lo..i).rev().find(|&j| s.is_comm(j))
}

/// Plans the snapshot of `cpus` (one [`Staged`] per CPU) within `budget`
/// bytes: writes one [`CpuPlan`] per CPU into `plans` (extra CPUs of either
/// slice are ignored) and returns the bytes kept (at most `budget`).
///
/// Cost: O(records × CPUs) comparisons, and each record's COMM is looked for
/// once (amortised O(records)). `pause` is called every [`PAUSE_EVERY`]
/// records kept (the kernel lets other tasks run there).
pub fn plan<S: Staged>(
    cpus: &[S],
    budget: usize,
    plans: &mut [CpuPlan],
    pause: &mut dyn FnMut(),
) -> usize {
    // `first` starts past the end (nothing kept) and moves down, at most to
    // `named`.
    for (s, p) in cpus.iter().zip(plans.iter_mut()) {
        *p = CpuPlan {
            first: s.count(),
            restate: None,
            count: s.count(),
            named: first_comm(s),
        };
    }
    let mut total = 0usize;
    let mut until_pause = PAUSE_EVERY;
    loop {
        // The newest record not kept yet among the CPUs: the one before
        // each CPU's `first`, if it is not nameless.
        let mut best: Option<(u64, usize, usize)> = None;
        for (c, (s, p)) in cpus.iter().zip(plans.iter()).enumerate() {
            let Some(i) = p.first.checked_sub(1) else {
                continue;
            };
            if i < p.named {
                continue;
            }
            let t = s.time(i);
            if best.is_none_or(|(bt, bc, _)| (t, c) > (bt, bc)) {
                best = Some((t, c, i));
            }
        }
        let Some((_, c, i)) = best else {
            break;
        };
        let (Some(s), Some(p)) = (cpus.get(c), plans.get_mut(c)) else {
            break;
        };
        let lo = p.named;
        let old_restate = p.restate.map_or(0, |j| s.bytes(j));
        let new_restate = if s.is_comm(i) {
            None
        } else {
            match p.restate {
                // Still the latest COMM before `i` (`i` is no COMM).
                Some(j) if j < i => Some(j),
                _ => comm_before(s, i, lo),
            }
        };
        let new_total = total
            .saturating_sub(old_restate)
            .saturating_add(s.bytes(i))
            .saturating_add(new_restate.map_or(0, |j| s.bytes(j)));
        if new_total > budget {
            break;
        }
        p.first = i;
        p.restate = new_restate;
        total = new_total;
        until_pause = until_pause.saturating_sub(1);
        if until_pause == 0 {
            pause();
            until_pause = PAUSE_EVERY;
        }
    }
    total
}

/// How many records [`plan`] keeps between two calls of its `pause` (and
/// the kernel's merge writes between two `cond_resched()`).
pub const PAUSE_EVERY: usize = 256;

/// The next record of the merge of the kept records of `cpus` (as planned
/// in `plans`, which it consumes): `(cpu, index)`, the record with the
/// smallest time among each CPU's next one (ties: the lowest CPU), so that
/// each CPU's records keep their order.
pub fn next_merged<S: Staged>(cpus: &[S], plans: &mut [CpuPlan]) -> Option<(usize, usize)> {
    let mut best: Option<(u64, usize, usize)> = None;
    for (c, (s, p)) in cpus.iter().zip(plans.iter()).enumerate() {
        if let Some(i) = p.head() {
            let t = s.time(i);
            if best.is_none_or(|(bt, _, _)| t < bt) {
                best = Some((t, c, i));
            }
        }
    }
    let (_, c, i) = best?;
    plans.get_mut(c)?.advance();
    Some((c, i))
}
