// SPDX-License-Identifier: GPL-2.0
//! What a polling reader costs the writer, line by line (prints figures; not
//! a timed test).
//!
//! cargo run --release -p oprofile-ringbuf --example coherence [-- ROUNDS]
//!
//! The benchmark's concurrent row (b) (`bench.rs`) mixes two costs: the
//! reader's own work and what its loads of the writer's cache lines cost the
//! writer. This separates the second. One writer thread writes 16-byte
//! records as in `bench.rs` (`common::write`); when the buffer is full it drains it itself
//! (`consume_batch`, inside the timed loop in every mode alike). A second
//! thread does one of:
//!
//! - `none`: nothing (the thread is not started);
//! - `control`: loads, in a loop, a field no writer stores to
//!   (`capacity_words`: the mask);
//! - `head`: loads `used_words()` in a loop: `head`, which the writer stores
//!   (CPU-local `cmpxchg`) once per record, and `tail`;
//! - `stats`: loads `stats()` in a loop: among others the per-level commit
//!   counters, which the writer stores twice per record;
//! - `consume_batch`: the concurrent reader of row (b), consuming.
//!
//! Printed per mode: the writer's wall ns per record (min/median/max of the
//! rounds) and, for the polling modes, records per change the reader saw
//! (how many records the writer gets done per round trip of the line). A
//! ping-pong of one line between the two threads gives the round trip.

mod common;

use common::{buffer, write};
use oprofile_ringbuf::Mode;
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

const RECORDS: u64 = 4_000_000;

/// A value on cache lines of its own.
#[repr(align(128))]
struct Line(AtomicU64);

#[derive(Clone, Copy, PartialEq)]
enum Poll {
    None,
    Control,
    Head,
    Stats,
    Consume,
}

impl Poll {
    fn name(self) -> &'static str {
        match self {
            Poll::None => "none",
            Poll::Control => "control (a line never written)",
            Poll::Head => "head (written once per record)",
            Poll::Stats => "stats (counters, twice per record)",
            Poll::Consume => "consume_batch (row (b))",
        }
    }
}

/// Round trip of one line between two threads, ns.
fn pingpong() -> f64 {
    let a = Line(AtomicU64::new(0));
    let n = 200_000u64;
    let t = std::thread::scope(|s| {
        s.spawn(|| {
            let mut v = 1;
            while v < 2 * n {
                while a.0.load(Ordering::Acquire) != v {}
                a.0.store(v + 1, Ordering::Release);
                v += 2;
            }
        });
        let t = Instant::now();
        let mut v = 0;
        while v < 2 * n {
            a.0.store(v + 1, Ordering::Release);
            v += 2;
            while v < 2 * n && a.0.load(Ordering::Acquire) != v {}
        }
        t.elapsed()
    });
    t.as_nanos() as f64 / n as f64
}

/// Writer ns per record, and records per change the poller saw.
fn run(poll: Poll) -> (f64, f64) {
    let b = buffer(Mode::ProducerConsumer);
    let stop = Line(AtomicU64::new(0));
    std::thread::scope(|s| {
        let reader = (poll != Poll::None).then(|| {
            s.spawn(|| {
                let (mut last, mut changes) = (0u64, 0u64);
                let mut out = [0u8; 16];
                while stop.0.load(Ordering::Relaxed) == 0 {
                    let v = match poll {
                        Poll::Control => b.capacity_words() as u64,
                        Poll::Head => b.used_words(),
                        Poll::Stats => b.stats().committed,
                        _ => {
                            let _ = b.consume_batch(&mut out, |i, _| {
                                black_box(i);
                                true
                            });
                            continue;
                        }
                    };
                    if v != last {
                        last = v;
                        changes += 1;
                    }
                }
                changes
            })
        });
        let mut out = [0u8; 16];
        let t = Instant::now();
        let mut i = 0u64;
        while i < RECORDS {
            if write(&b, i) {
                i += 1;
            } else {
                while b.consume_batch(&mut out, |_, _| true).is_ok() {}
            }
        }
        let e = t.elapsed();
        stop.0.store(1, Ordering::Relaxed);
        let changes = reader.map_or(0, |r| r.join().unwrap_or(0));
        (
            e.as_nanos() as f64 / RECORDS as f64,
            RECORDS as f64 / changes.max(1) as f64,
        )
    })
}

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(5)
        .max(1);
    println!(
        "{RECORDS} records of 16 B per round, {rounds} rounds; line round trip {:.1} ns",
        pingpong()
    );
    let modes = [
        Poll::None,
        Poll::Control,
        Poll::Head,
        Poll::Stats,
        Poll::Consume,
    ];
    let mut ns: Vec<Vec<f64>> = vec![Vec::new(); modes.len()];
    let mut per: Vec<Vec<f64>> = vec![Vec::new(); modes.len()];
    for _ in 0..rounds {
        for (k, m) in modes.iter().enumerate() {
            let (n, p) = run(*m);
            ns[k].push(n);
            per[k].push(p);
        }
    }
    println!(
        "{:<38} {:>8} {:>8} {:>8}   records per change seen (median)",
        "reader polls", "min", "median", "max"
    );
    for (k, m) in modes.iter().enumerate() {
        let v = &mut ns[k];
        v.sort_by(|a, b| a.total_cmp(b));
        let p = &mut per[k];
        p.sort_by(|a, b| a.total_cmp(b));
        let polls = matches!(m, Poll::Head | Poll::Stats);
        println!(
            "{:<38} {:>8.2} {:>8.2} {:>8.2}   {}",
            m.name(),
            v[0],
            v[v.len() / 2],
            v[v.len() - 1],
            if polls {
                format!("{:.1}", p[p.len() / 2])
            } else {
                "-".into()
            }
        );
    }
}
