// SPDX-License-Identifier: GPL-2.0
//! Loom model checking: one writer thread (nesting modelled as sequential
//! nested reservations inside it, since loom threads model other CPUs) against
//! one reader thread, in both modes.
//!
//! Run: RUSTFLAGS="--cfg loom" cargo test -p oprofile-ringbuf --release --test loom
#![cfg(loom)]

use loom::sync::Arc;
use loom::thread;
use oprofile_ringbuf::atomics::AtomicU64;
use oprofile_ringbuf::{CpuBuffer, Mode, RecordSwitch, Switches};

type Buf = CpuBuffer<'static, Box<[AtomicU64]>>;

fn make(words: usize, mode: Mode) -> Arc<Buf> {
    let global: &'static RecordSwitch = Box::leak(Box::new(RecordSwitch::new(true)));
    let set: &'static RecordSwitch = Box::leak(Box::new(RecordSwitch::new(true)));
    let storage: Box<[AtomicU64]> = (0..words).map(|_| AtomicU64::new(0)).collect();
    Arc::new(CpuBuffer::new(storage, mode, Switches { global, set }).unwrap())
}

fn write(b: &Buf, ts: u64) -> bool {
    match b.reserve(8, ts) {
        Ok(mut s) => {
            s.write_word(0, ts * 3);
            s.commit();
            true
        }
        Err(_) => false,
    }
}

/// (ts, payload word, lost)
fn read(b: &Buf) -> Option<(u64, u64, u64)> {
    let mut out = [0u8; 8];
    b.consume(&mut out)
        .ok()
        .map(|i| (i.ts, u64::from_ne_bytes(out), i.lost))
}

/// Up to `max` records with one `consume_batch` (ts, payload word, lost).
fn read_batch(b: &Buf, max: usize) -> Vec<(u64, u64, u64)> {
    let mut scratch = [0u8; 8];
    let mut got = Vec::new();
    let _ = b.consume_batch(&mut scratch, |i, p| {
        got.push((i.ts, u64::from_ne_bytes(p.try_into().unwrap()), i.lost));
        got.len() < max
    });
    got
}

static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

fn count() {
    RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
}

fn report(name: &str) {
    println!(
        "{name}: {} executions explored",
        RUNS.swap(0, std::sync::atomic::Ordering::Relaxed)
    );
}

fn builder() -> loom::model::Builder {
    // Exhaustive unless LOOM_MAX_PREEMPTIONS is set.
    loom::model::Builder::new()
}

#[test]
fn producer_consumer_nested_writer_vs_reader() {
    builder().check(|| {
        count();
        let b = make(16, Mode::ProducerConsumer);
        let w = b.clone();
        let t = thread::spawn(move || {
            // task-level writer interrupted by an "irq" writer that reserves
            // and commits before the outer one commits
            let mut outer = w.reserve(8, 10).unwrap();
            outer.write_word(0, 30);
            assert!(write(&w, 20));
            outer.commit();
            assert!(write(&w, 40));
        });
        let mut got = Vec::new();
        for _ in 0..2 {
            if let Some(r) = read(&b) {
                got.push(r);
            }
        }
        t.join().unwrap();
        while let Some(r) = read(&b) {
            got.push(r);
        }
        assert_eq!(got, vec![(10, 30, 0), (20, 60, 0), (40, 120, 0)]);
        let s = b.stats();
        assert_eq!((s.committed, s.read, s.entries), (3, 3, 0));
    });
    report("producer_consumer");
}

#[test]
fn overwrite_writer_laps_reader() {
    builder().check(|| {
        // 8 words: a record is 2 words (+1 with a time prefix), so 4 records lap
        count();
        let b = make(8, Mode::Overwrite);
        let w = b.clone();
        let t = thread::spawn(move || {
            for ts in 1..=4 {
                assert!(write(&w, ts));
            }
        });
        let mut got = Vec::new();
        if let Some(r) = read(&b) {
            got.push(r);
        }
        t.join().unwrap();
        while let Some(r) = read(&b) {
            got.push(r);
        }
        // never garbage: payload matches the time stamp, order preserved,
        // lost counts exactly the records missing before each one
        let mut expect = 1;
        let mut lost_total = 0;
        for &(ts, word, lost) in &got {
            assert_eq!(word, ts * 3, "torn or garbage record");
            assert!(ts >= expect);
            lost_total += lost;
            expect = ts + 1;
        }
        assert_eq!(*got.last().map(|(ts, _, _)| ts).unwrap_or(&4), 4);
        let s = b.stats();
        assert_eq!(s.committed, 4);
        assert_eq!(s.committed, s.read + s.entries + s.overrun);
        assert_eq!(s.read, got.len() as u64);
        assert_eq!(lost_total, s.overrun);
    });
    report("overwrite");
}

#[test]
fn switch_off_then_quiesce_is_reliable() {
    // Dekker argument: after set_enabled(false) returns, either a writer saw
    // "off", or writers_active() sees it; once not active, no record appears.
    builder().check(|| {
        count();
        let b = make(16, Mode::ProducerConsumer);
        let w = b.clone();
        let t = thread::spawn(move || write(&w, 7));
        b.set_enabled(false).unwrap();
        while b.writers_active() {
            thread::yield_now();
        }
        let committed_before = b.stats().committed;
        let wrote = t.join().unwrap();
        assert_eq!(
            b.stats().committed,
            committed_before,
            "a writer slipped past the switch"
        );
        assert_eq!(wrote, committed_before == 1);
        let spare = make(16, Mode::ProducerConsumer);
        spare.set_enabled(false).unwrap();
        b.swap(&spare).unwrap();
        assert_eq!(spare.stats().committed, committed_before);
    });
    report("switch_off");
}

#[test]
fn producer_consumer_nested_writer_vs_batched_reader() {
    builder().check(|| {
        count();
        let b = make(16, Mode::ProducerConsumer);
        let w = b.clone();
        let t = thread::spawn(move || {
            let mut outer = w.reserve(8, 10).unwrap();
            outer.write_word(0, 30);
            assert!(write(&w, 20));
            outer.commit();
            assert!(write(&w, 40));
        });
        // a batch while the writer runs, then the rest
        let mut got = read_batch(&b, usize::MAX);
        t.join().unwrap();
        got.extend(read_batch(&b, usize::MAX));
        assert_eq!(got, vec![(10, 30, 0), (20, 60, 0), (40, 120, 0)]);
        let s = b.stats();
        assert_eq!((s.committed, s.read, s.entries), (3, 3, 0));
    });
    report("producer_consumer_batched");
}

#[test]
fn producer_consumer_full_writer_vs_batched_reader() {
    // 8 words: two records fill the buffer; the writer retries until the
    // batch's tail update gives it room, so the reader's copies must be done
    // before the writer reuses the space (Release store of tail / Acquire load).
    builder().check(|| {
        count();
        let b = make(8, Mode::ProducerConsumer);
        let w = b.clone();
        let t = thread::spawn(move || {
            for ts in 1..=3 {
                while !write(&w, ts) {
                    thread::yield_now();
                }
            }
        });
        let mut got = Vec::new();
        while got.len() < 3 {
            let batch = read_batch(&b, usize::MAX);
            if batch.is_empty() {
                thread::yield_now();
            }
            got.extend(batch);
        }
        t.join().unwrap();
        let ts: Vec<u64> = got.iter().map(|r| r.0).collect();
        assert_eq!(ts, vec![1, 2, 3]);
        for &(ts, word, _) in &got {
            assert_eq!(word, ts * 3, "torn record");
        }
        let s = b.stats();
        assert_eq!(s.read, 3);
        assert_eq!(got.iter().map(|r| r.2).sum::<u64>(), s.dropped_full);
    });
    report("producer_consumer_full_batched");
}

#[test]
fn overwrite_writer_laps_batched_reader() {
    builder().check(|| {
        count();
        let b = make(8, Mode::Overwrite);
        let w = b.clone();
        let t = thread::spawn(move || {
            for ts in 1..=4 {
                assert!(write(&w, ts));
            }
        });
        let mut got = read_batch(&b, usize::MAX);
        t.join().unwrap();
        got.extend(read_batch(&b, usize::MAX));
        let mut expect = 1;
        let mut lost_total = 0;
        for &(ts, word, lost) in &got {
            assert_eq!(word, ts * 3, "torn or garbage record");
            assert!(ts >= expect);
            lost_total += lost;
            expect = ts + 1;
        }
        assert_eq!(*got.last().map(|(ts, _, _)| ts).unwrap_or(&4), 4);
        let s = b.stats();
        assert_eq!(s.committed, 4);
        assert_eq!(s.committed, s.read + s.entries + s.overrun);
        assert_eq!(s.read, got.len() as u64);
        assert_eq!(lost_total, s.overrun);
    });
    report("overwrite_batched");
}
