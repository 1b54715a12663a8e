// SPDX-License-Identifier: GPL-2.0
//! Exhaustive interrupt-nesting model: a writer is interrupted at every
//! atomic step by a nested writer (which can itself be interrupted), or a
//! reader on another CPU reads at that step; then everything is read back
//! with `consume` or `consume_batch` and every record must come back with
//! exactly the time stamp it was written with.
//!
//! The atomics are wrapped (`--cfg ringbuf_nesting`, see `atomics.rs`) so
//! that a hook runs before each atomic access; an interrupt can only change
//! what the interrupted code sees at such a step. Strict nesting (an
//! interrupting writer finishes before the interrupted one goes on) is what
//! the kernel's task/IRQ/NMI writers on one CPU do, and what loom's threads
//! cannot express.
//!
//! Run: RUSTFLAGS="--cfg ringbuf_nesting" cargo test -p oprofile-ringbuf --release --test nesting
//! (`NESTING_POINTS=3` for three interrupt points per run instead of two,
//! `NESTING_STEPS=N` to place them in the first N steps instead of 100).
#![cfg(all(ringbuf_nesting, not(loom)))]

mod common;

use std::cell::{Cell, RefCell};

use common::*;
use oprofile_ringbuf::atomics::set_interrupt_hook;
use oprofile_ringbuf::{Mode, ReadError};

/// What happens at an interrupt point.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Act {
    /// A nested writer writes one record.
    Write,
    /// A nested writer reserves a record (16 bytes, so that it may end
    /// where the interrupted writer's will) and discards it.
    Discard,
    /// The reader (another CPU) consumes one record.
    Consume,
    /// The reader consumes a batch of at most two records.
    Batch,
}

#[derive(Default)]
struct Sim {
    buf: Option<&'static Buf>,
    /// Atomic steps so far in this run.
    step: usize,
    /// (step, action) of the interrupts of this run.
    points: Vec<(usize, Act)>,
    /// The steps at which an interrupt point fired in this run.
    fired: Vec<usize>,
    /// Time stamp written for record `id` (index).
    written: Vec<u64>,
    /// (id, ts) as read back.
    read: Vec<(u64, u64)>,
    clock: u64,
}

thread_local! {
    static SIM: RefCell<Sim> = RefCell::new(Sim::default());
    static ACTIVE: Cell<bool> = const { Cell::new(false) };
}

/// Writes one record; its payload is its id. Reads the clock before
/// reserving, as the kernel's writers do (so an interrupting writer has a
/// later time than the interrupted one).
fn write_one(b: &Buf) {
    let (id, ts) = SIM.with(|s| {
        let mut s = s.borrow_mut();
        s.clock += 1000;
        let ts = s.clock;
        s.written.push(ts);
        (s.written.len() as u64 - 1, ts)
    });
    match b.reserve(8, ts) {
        Ok(mut slot) => {
            assert!(slot.write_word(0, id));
            slot.commit();
        }
        Err(_) => SIM.with(|s| s.borrow_mut().written[id as usize] = u64::MAX),
    }
}

/// Reserves a record and discards it (its time is not used).
fn discard_one(b: &Buf) {
    let ts = SIM.with(|s| {
        let mut s = s.borrow_mut();
        s.clock += 1000;
        s.clock
    });
    if let Ok(slot) = b.reserve(16, ts) {
        slot.discard();
    }
}

fn record(got: &mut Vec<(u64, u64)>, ts: u64, p: &[u8]) {
    got.push((u64::from_ne_bytes(p.try_into().unwrap()), ts));
}

fn consume(b: &Buf) -> Option<(u64, u64)> {
    let mut out = [0u8; 8];
    match b.consume(&mut out) {
        Ok(i) => Some((u64::from_ne_bytes(out), i.ts)),
        Err(ReadError::Empty | ReadError::Busy) => None,
        Err(e) => panic!("consume: {e:?}"),
    }
}

fn batch(b: &Buf, max: usize) -> Vec<(u64, u64)> {
    let mut out = [0u8; 8];
    let mut got = Vec::new();
    match b.consume_batch(&mut out, |i, p| {
        record(&mut got, i.ts, p);
        got.len() < max
    }) {
        Ok(_) | Err(ReadError::Empty | ReadError::Busy) => got,
        Err(e) => panic!("consume_batch: {e:?}"),
    }
}

fn hook() {
    if !ACTIVE.with(Cell::get) {
        return;
    }
    let fire = SIM.with(|s| {
        let mut s = s.borrow_mut();
        let step = s.step;
        s.step += 1;
        let act = s.points.iter().find(|p| p.0 == step).map(|p| p.1);
        if act.is_some() {
            s.fired.push(step);
        }
        act.zip(s.buf)
    });
    let Some((act, b)) = fire else {
        return;
    };
    match act {
        Act::Write => write_one(b),
        Act::Discard => discard_one(b),
        Act::Consume => {
            let got = consume(b);
            SIM.with(|s| s.borrow_mut().read.extend(got));
        }
        Act::Batch => {
            let got = batch(b, 2);
            SIM.with(|s| s.borrow_mut().read.extend(got));
        }
    }
}

/// What one run did: the steps of the interrupted write (nested ones
/// included), the steps at which a point fired, and a description of the
/// first record read back with a wrong time, if any.
struct Outcome {
    steps: usize,
    fired: Vec<usize>,
    failure: Option<String>,
}

/// One run: `prefill` records, then one writer interrupted at `points`,
/// then a drain (batched or not).
fn run(b: &'static Buf, prefill: usize, points: &[(usize, Act)], drain_batched: bool) -> Outcome {
    b.set_enabled(false).unwrap();
    b.reset().unwrap();
    b.set_enabled(true).unwrap();
    SIM.with(|s| {
        *s.borrow_mut() = Sim {
            buf: Some(b),
            points: points.to_vec(),
            ..Sim::default()
        }
    });
    for _ in 0..prefill {
        write_one(b);
    }
    // Read one so that the reader's time base is in use.
    let first = consume(b);
    ACTIVE.with(|a| a.set(true));
    write_one(b);
    ACTIVE.with(|a| a.set(false));
    let mut rest = Vec::new();
    if drain_batched {
        loop {
            let got = batch(b, 3);
            if got.is_empty() {
                break;
            }
            rest.extend(got);
        }
    } else {
        rest.extend(std::iter::from_fn(|| consume(b)));
    }
    // Everything reserved was published: a record committed by a nested
    // writer that the outermost one failed to publish stays between
    // `commit` and `head`, unread.
    let left = b.used_words();
    let failure = SIM.with(|s| {
        let s = s.borrow();
        if left != 0 {
            return Some(format!(
                "{left} words left unpublished after the drain (all written: {:?}; steps {})",
                s.written, s.step
            ));
        }
        let all = first.iter().chain(&s.read).chain(&rest);
        for &(id, ts) in all {
            let want = s.written.get(id as usize).copied();
            if want != Some(ts) {
                return Some(format!(
                    "record {id} read with ts {ts}, written with {want:?} \
                     (all written: {:?}; steps {})",
                    s.written, s.step
                ));
            }
        }
        None
    });
    SIM.with(|s| {
        let s = s.borrow();
        Outcome {
            steps: s.step,
            fired: s.fired.clone(),
            failure,
        }
    })
}

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// All sets of up to `n` distinct steps below `k`, each with an action.
fn plans(k: usize, n: usize) -> Vec<Vec<(usize, Act)>> {
    let acts = [Act::Write, Act::Discard, Act::Consume, Act::Batch];
    let mut out: Vec<Vec<(usize, Act)>> = vec![vec![]];
    let mut frontier = out.clone();
    for _ in 0..n {
        let mut next = Vec::new();
        for p in &frontier {
            let from = p.last().map_or(0, |l| l.0 + 1);
            for step in from..k {
                for act in acts {
                    let mut q = p.clone();
                    q.push((step, act));
                    next.push(q);
                }
            }
        }
        out.extend(next.iter().cloned());
        frontier = next;
    }
    out
}

fn explore(mode: Mode, words: usize, prefill: usize) {
    set_interrupt_hook(Some(hook));
    let b: &'static Buf = Box::leak(Box::new(buf(words, mode)));
    // Steps of one uninterrupted write, plus room for the nested ones.
    SIM.with(|s| *s.borrow_mut() = Sim::default());
    let k = env("NESTING_STEPS", 100);
    let plans = plans(k, env("NESTING_POINTS", 2));
    // The steps of an uninterrupted write: the interrupt hook must see some
    // (else no point ever fires and every run below passes untested).
    let base = run(b, prefill, &[], false).steps;
    let mut failures = Vec::new();
    let mut fired = 0;
    for p in &plans {
        for drain_batched in [false, true] {
            let o = run(b, prefill, p, drain_batched);
            fired += o.fired.len();
            if let Some(f) = o.failure {
                failures.push(format!(
                    "{mode:?} points {p:?} batched drain {drain_batched}: {f}"
                ));
            }
            // Up to its first point a run is the uninterrupted write: a
            // first point within that write's steps must fire there.
            if let Some(&(first, _)) = p.first() {
                if first < base && o.fired.first() != Some(&first) {
                    failures.push(format!(
                        "{mode:?} points {p:?} batched drain {drain_batched}: the first point did not fire \
                         (fired at {:?}; {base} steps uninterrupted)",
                        o.fired
                    ));
                }
            }
        }
    }
    set_interrupt_hook(None);
    println!(
        "{mode:?}: {} runs, {} failed; an uninterrupted write has {base} steps; {fired} points fired",
        plans.len() * 2,
        failures.len()
    );
    for f in failures.iter().take(5) {
        println!("  {f}");
    }
    assert!(
        base > 0,
        "{mode:?}: the interrupt hook saw no step of a write"
    );
    assert!(
        fired > 0,
        "{mode:?}: no interrupt point fired in {} runs",
        plans.len() * 2
    );
    assert!(failures.is_empty(), "{}", failures[0]);
}

#[test]
fn nested_writers_keep_exact_time_producer_consumer() {
    explore(Mode::ProducerConsumer, 64, 2);
}

#[test]
fn nested_writers_keep_exact_time_overwrite() {
    // 16 words, filled: the interrupted writers overwrite (make_room).
    explore(Mode::Overwrite, 16, 6);
}
