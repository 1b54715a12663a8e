// SPDX-License-Identifier: GPL-2.0
//! Ring buffer benchmark (prints figures; not a timed test).
//!
//! cargo run --release -p oprofile-ringbuf --example bench [-- --quick] [--rounds N] [--rtrb-work K]
//!
//! Workload: 16-byte payload records (two u64 words) from one writer thread.
//! (a) no concurrent reader: the buffer is filled in batches and drained,
//!     untimed, between batches (overwrite mode: no draining at all);
//! (b) a concurrent reader thread consumes while the writer writes; the
//!     writer retries on Full so every record goes through. The reader
//!     consumes record by record (`consume`), then in batches
//!     (`consume_batch`: every record committed when the call starts).
//! (c) the reader alone: the buffer is filled untimed, then drained with
//!     `consume_batch` (timed).
//! (b') as (b) with `consume_batch`, and rtrb's, but the reader pauses a few
//!     hundred ns (200 spin-loop hints) each time it finds nothing.
//! The same workloads run through `rtrb` (a well-known SPSC queue of
//! `[u64; 2]` items) for reference, and the writer's former floor: the two
//! locked read-modify-writes every reserve+commit did until 2026-11-26 (and
//! the plain store that leaves), alone.
//! rtrb+ rows: rtrb again, its writer given our writer's cost per item
//! (dependent arithmetic, no memory access; `calibrate` picks the amount
//! so that its writer alone costs what ours does, before the rounds;
//! `--rtrb-work K` gives it K rounds instead). A
//! reader that keeps up polls the lines the writer is storing to, and
//! then the writer's own cost per record decides how many records it gets
//! through per round trip of those lines: rows (b) and (b') compare the
//! two pipelines with writers of equal cost, i.e. the readers and the
//! publication protocols.
//!
//! `--rounds N` (default 5) runs every row N times with 1/N of the records,
//! round after round, and prints min/median/max ns per record and the
//! median of the per-round ratios to rtrb (on a loaded host the ratios of
//! rows run close in time move much less than the absolute figures).

mod common;

use common::{buffer, write, PAYLOAD, WORDS};
use oprofile_ringbuf::{Mode, ReadError};
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// A point in time: the wall clock and the calling thread's CPU time.
#[derive(Clone, Copy)]
struct Stamp {
    wall: Instant,
    cpu: Duration,
}

/// Time between two stamps: wall and the thread's CPU time. On a loaded
/// host the wall time includes the time the thread waited for a CPU; the
/// CPU time does not (it is what the single-threaded rows cost).
#[derive(Clone, Copy, Default)]
struct Times {
    wall: Duration,
    cpu: Duration,
}

impl std::ops::AddAssign for Times {
    fn add_assign(&mut self, o: Times) {
        self.wall += o.wall;
        self.cpu += o.cpu;
    }
}

fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write to.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

fn stamp() -> Stamp {
    Stamp {
        wall: Instant::now(),
        cpu: thread_cpu(),
    }
}

impl Stamp {
    fn elapsed(&self) -> Times {
        Times {
            wall: self.wall.elapsed(),
            cpu: thread_cpu() - self.cpu,
        }
    }
}

/// The concurrent rows' stop flag, on cache lines of its own (the reader
/// loads it at every empty poll; it lives on the writer thread's stack).
#[repr(align(128))]
struct Flag(AtomicBool);

impl std::ops::Deref for Flag {
    type Target = AtomicBool;

    fn deref(&self) -> &AtomicBool {
        &self.0
    }
}

struct Row {
    name: &'static str,
    records: u64,
    elapsed: Times,
    note: String,
}

fn print(r: &Row) {
    let ns = r.elapsed.wall.as_nanos() as f64 / r.records as f64;
    let rps = r.records as f64 / r.elapsed.wall.as_secs_f64();
    println!(
        "{:<44} {:>8.2} ns/rec {:>8.2} cpu ns/rec {:>9.2} Mrec/s {:>9.1} MB/s  {}",
        r.name,
        ns,
        cpu_ns(r),
        rps / 1e6,
        rps * PAYLOAD as f64 / 1e6,
        r.note
    );
}

/// (a) ours, producer/consumer: fill, drain untimed, repeat.
fn ours_batches(total: u64) -> Row {
    let b = buffer(Mode::ProducerConsumer);
    let per_batch = (WORDS / 4) as u64; // 3 words per record + sync records
    let mut out = [0u8; PAYLOAD];
    let mut elapsed = Times::default();
    // One untimed pass over the whole buffer first: the first writes to
    // fresh pages fault, and a short run (the calibration's) would time
    // those faults with its records.
    for i in 0..per_batch {
        black_box(write(&b, i));
    }
    while b.consume(&mut out).is_ok() {}
    let mut done = 0u64;
    while done < total {
        let n = per_batch.min(total - done);
        let t = stamp();
        for i in done..done + n {
            black_box(write(&b, i));
        }
        elapsed += t.elapsed();
        while b.consume(&mut out).is_ok() {}
        done += n;
    }
    let s = b.stats();
    Row {
        name: "ringbuf  (a) no reader, producer/consumer",
        records: total,
        elapsed,
        note: format!(
            "(read {} after the warm-up pass, dropped {})",
            s.read - per_batch,
            s.dropped_full
        ),
    }
}

/// (c) ours, the reader alone: fill untimed, drain with `consume_batch`.
fn ours_drain(total: u64) -> Row {
    let b = buffer(Mode::ProducerConsumer);
    let per_batch = (WORDS / 4) as u64;
    let mut out = [0u8; PAYLOAD];
    let mut elapsed = Times::default();
    let mut done = 0u64;
    let mut sum = 0u64;
    while done < total {
        let n = per_batch.min(total - done);
        for i in done..done + n {
            write(&b, i);
        }
        let t = stamp();
        while let Ok(k) = b.consume_batch(&mut out, |info, p| {
            sum = sum.wrapping_add(info.ts ^ u64::from(p[0]));
            true
        }) {
            black_box(k);
        }
        elapsed += t.elapsed();
        done += n;
    }
    black_box(sum);
    Row {
        name: "ringbuf  (c) reader alone, consume_batch",
        records: total,
        elapsed,
        note: format!("(read {})", b.stats().read),
    }
}

/// (c) rtrb, the reader alone: fill untimed, pop everything.
fn rtrb_drain(total: u64) -> Row {
    let cap = WORDS / 4;
    let (mut p, mut c) = rtrb::RingBuffer::<[u64; 2]>::new(cap);
    let mut elapsed = Times::default();
    let mut done = 0u64;
    let mut sum = 0u64;
    while done < total {
        let n = (cap as u64).min(total - done);
        for i in done..done + n {
            let _ = p.push([i, !i]);
        }
        let t = stamp();
        while let Ok(v) = c.pop() {
            sum = sum.wrapping_add(v[0] ^ v[1]);
        }
        elapsed += t.elapsed();
        done += n;
    }
    black_box(sum);
    Row {
        name: "rtrb     (c) reader alone",
        records: total,
        elapsed,
        note: String::new(),
    }
}

/// (a) ours, overwrite mode, never drained (flight recorder steady state).
fn ours_overwrite(total: u64) -> Row {
    let b = buffer(Mode::Overwrite);
    let t = stamp();
    for i in 0..total {
        black_box(write(&b, i));
    }
    let elapsed = t.elapsed();
    Row {
        name: "ringbuf  (a) no reader, overwrite (lapping)",
        records: total,
        elapsed,
        note: format!("(overrun {})", b.stats().overrun),
    }
}

/// What a concurrent reader does when it finds nothing: spin once
/// (`pause` false: it polls again at once), or 200 times (`pause` true, a
/// few hundred ns: a reader that lets records gather, as the module's sync
/// does on a far larger scale, draining every HZ/10). Each poll loads the
/// writer's last published position, and each batch reads the line the
/// writer is filling, so a reader that polls without pause takes those
/// lines from the writer's CPU after every few records.
#[inline(always)]
fn idle(pause: bool) {
    let spins = if pause { 200 } else { 1 };
    for _ in 0..spins {
        std::hint::spin_loop();
    }
}

/// How the concurrent reader reads.
#[derive(Clone, Copy, PartialEq)]
enum Reader {
    /// `consume`, one record per call.
    PerRecord,
    /// `consume_batch`, every committed record per call.
    Batched,
}

/// (b) ours with a concurrent reader.
fn ours_concurrent(total: u64, how: Reader, pause: bool) -> Row {
    let b = buffer(Mode::ProducerConsumer);
    let stop = Flag(AtomicBool::new(false));
    let (elapsed, read, full) = std::thread::scope(|s| {
        let reader = s.spawn(|| {
            let mut out = [0u8; PAYLOAD];
            let mut n = 0u64;
            let mut expect = 0u64;
            if how == Reader::Batched {
                let mut batches = 0u64;
                loop {
                    let got = b.consume_batch(&mut out, |info, p| {
                        let v = u64::from_ne_bytes(p[..8].try_into().unwrap());
                        assert_eq!(v, expect, "out of order or torn");
                        assert_eq!(info.ts, v * 10);
                        expect += 1;
                        true
                    });
                    match got {
                        Ok(k) => {
                            n += k as u64;
                            batches += 1;
                        }
                        Err(ReadError::Empty) => {
                            if stop.load(Ordering::Acquire) && b.entries() == 0 {
                                break (n, batches);
                            }
                            idle(pause);
                        }
                        Err(e) => panic!("{e:?}"),
                    }
                }
            } else {
                loop {
                    match b.consume(&mut out) {
                        Ok(info) => {
                            let v = u64::from_ne_bytes(out[..8].try_into().unwrap());
                            assert_eq!(v, expect, "out of order or torn");
                            assert_eq!(info.ts, v * 10);
                            expect += 1;
                            n += 1;
                        }
                        Err(ReadError::Empty) => {
                            if stop.load(Ordering::Acquire) && b.entries() == 0 {
                                break (n, n);
                            }
                            std::hint::spin_loop();
                        }
                        Err(e) => panic!("{e:?}"),
                    }
                }
            }
        });
        let t = stamp();
        let mut full = 0u64;
        for i in 0..total {
            while !write(&b, i) {
                full += 1;
                std::hint::spin_loop();
            }
        }
        let e = t.elapsed();
        stop.store(true, Ordering::Release);
        (e, reader.join().unwrap(), full)
    });
    let (read, calls) = read;
    assert_eq!(read, total);
    Row {
        name: match how {
            Reader::PerRecord => "ringbuf  (b) concurrent reader, consume",
            Reader::Batched if pause => "ringbuf  (b') pausing reader, consume_batch",
            Reader::Batched => "ringbuf  (b) concurrent reader, consume_batch",
        },
        records: total,
        elapsed,
        note: format!(
            "(all {read} read in order, {:.1} per call, {full} full retries)",
            read as f64 / calls.max(1) as f64
        ),
    }
}

/// The floor of our writer until 2026-11-26: its two locked
/// read-modify-writes alone (the nesting counter in, the `head` CAS) and the
/// plain store of the nesting counter out, on fields laid out as in the
/// buffer, with nothing else. On x86_64 Linux the writer's are CPU-local now
/// (no `lock`), so this is what they cost before, not a floor any more.
fn locked_floor(total: u64) -> Row {
    let nest = std::sync::atomic::AtomicU64::new(0);
    let head = std::sync::atomic::AtomicU64::new(0);
    let t = stamp();
    for _ in 0..total {
        let d = nest.fetch_add(black_box(1), Ordering::SeqCst);
        let h = head.load(Ordering::Acquire);
        let _ = head.compare_exchange(h, h + 3, Ordering::AcqRel, Ordering::Acquire);
        nest.store(d, Ordering::Release);
    }
    let elapsed = t.elapsed();
    black_box((nest.load(Ordering::Relaxed), head.load(Ordering::Relaxed)));
    Row {
        name: "floor    2 locked RMWs (the writer until 11-26)",
        records: total,
        elapsed,
        note: String::new(),
    }
}

/// rtrb's second word of item `i`: `!i`, as our records carry. The rows
/// "rtrb with our writer's cost" compute it with [`work`] instead.
#[inline(always)]
fn plain(i: u64) -> u64 {
    !i
}

/// `k` rounds of dependent arithmetic on `i` (a few cycles each, no memory
/// access): what the rows "rtrb with our writer's cost" add to rtrb's
/// writer per item, `k` chosen by [`calibrate`] so that rtrb's writer alone
/// costs what ours does.
#[inline(always)]
fn work(i: u64, k: u32) -> u64 {
    let mut x = i;
    for _ in 0..k {
        x = (x ^ (x >> 7)).wrapping_add(i);
    }
    x
}

/// rtrb's writer alone with `k` rounds of [`work`] per item over ours alone
/// (CPU time per record), each pair measured back to back, median of 5
/// pairs. Back to back, because this kind of host runs in phases of a few
/// seconds in which every row costs up to twice as much (our writer alone
/// 9.4 to 18 ns within 6 s of one process, 2026-11-27): a target taken
/// once, before the probes,
/// could come from another phase than the probes (it had rtrb+'s writer
/// at 0.5-0.8 of ours in the rounds).
fn cost_ratio(k: u32) -> f64 {
    let mut v: Vec<f64> = (0..5)
        .map(|_| {
            let ours = cpu_ns(&ours_batches(200_000));
            cpu_ns(&rtrb_batches(200_000, "", |i| work(i, k))) / ours
        })
        .collect();
    median(&mut v)
}

/// The `k` for [`work`] that makes rtrb's writer alone cost what ours does
/// ([`cost_ratio`] closest to 1): doubling then bisection to the two `k`
/// around it, then the closer of the two. Returns it and its ratio.
fn calibrate() -> (u32, f64) {
    let mut hi = 1u32;
    while cost_ratio(hi) < 1.0 && hi < 1 << 16 {
        hi *= 2;
    }
    let mut lo = hi / 2;
    while hi - lo > 1 {
        let mid = (lo + hi) / 2;
        if cost_ratio(mid) < 1.0 {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    let (rl, rh) = (cost_ratio(lo), cost_ratio(hi));
    if 1.0 - rl < rh - 1.0 {
        (lo, rl)
    } else {
        (hi, rh)
    }
}

/// (a) rtrb: fill, drain untimed, repeat; items `[i, second(i)]`.
fn rtrb_batches(total: u64, name: &'static str, second: impl Fn(u64) -> u64) -> Row {
    let cap = WORDS / 4;
    let (mut p, mut c) = rtrb::RingBuffer::<[u64; 2]>::new(cap);
    let mut elapsed = Times::default();
    // An untimed pass first, as in `ours_batches`.
    for i in 0..cap as u64 {
        black_box(p.push([i, second(i)]).is_ok());
    }
    while c.pop().is_ok() {}
    let mut done = 0u64;
    while done < total {
        let n = (cap as u64).min(total - done);
        let t = stamp();
        for i in done..done + n {
            black_box(p.push([i, second(i)]).is_ok());
        }
        elapsed += t.elapsed();
        while c.pop().is_ok() {}
        done += n;
    }
    Row {
        name,
        records: total,
        elapsed,
        note: String::new(),
    }
}

/// (b)/(b') rtrb with a concurrent reader; items `[i, second(i)]`.
fn rtrb_concurrent(
    total: u64,
    pause: bool,
    name: &'static str,
    second: impl Fn(u64) -> u64,
) -> Row {
    let (mut p, c) = rtrb::RingBuffer::<[u64; 2]>::new(WORDS / 4);
    let stop = Flag(AtomicBool::new(false));
    let (elapsed, read) = std::thread::scope(|s| {
        // The consumer moves to the reader thread: left on this thread's
        // stack next to the producer, its per-pop stores shared the
        // producer's cache line (rtrb's row moved between 6 and 60 ns with
        // the stack layout of the build).
        let stop = &stop;
        let reader = s.spawn(move || {
            let mut c = c;
            let mut n = 0u64;
            loop {
                match c.pop() {
                    Ok(v) => {
                        assert_eq!(v[0], n);
                        n += 1;
                    }
                    Err(_) => {
                        if stop.load(Ordering::Acquire) && c.is_empty() {
                            break n;
                        }
                        idle(pause);
                    }
                }
            }
        });
        let t = stamp();
        for i in 0..total {
            while p.push([i, second(i)]).is_err() {
                std::hint::spin_loop();
            }
        }
        let e = t.elapsed();
        stop.store(true, Ordering::Release);
        (e, reader.join().unwrap())
    });
    assert_eq!(read, total);
    Row {
        name,
        records: total,
        elapsed,
        note: String::new(),
    }
}

/// Median of `v` (sorted in place).
fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn ns(r: &Row) -> f64 {
    r.elapsed.wall.as_nanos() as f64 / r.records as f64
}

/// The timing thread's CPU time per record (the writer's, in (b)).
fn cpu_ns(r: &Row) -> f64 {
    r.elapsed.cpu.as_nanos() as f64 / r.records as f64
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let rounds: usize = args
        .iter()
        .position(|a| a == "--rounds")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(if quick { 1 } else { 5 })
        .max(1);
    let total: u64 = if quick { 200_000 } else { 20_000_000 };
    let per = total / rounds as u64;
    println!(
        "{} records of {PAYLOAD} B payload per row in {rounds} round(s), buffer {} KiB{}",
        per * rounds as u64,
        WORDS * 8 / 1024,
        if quick { " (--quick)" } else { "" }
    );
    // Every round runs every row, so that the rows compared in a ratio ran
    // close in time (on a loaded host the absolute figures move with the
    // load from round to round; the ratios much less).
    // rtrb's writer given our writer's cost (see `work`): calibrated
    // against our writer alone, before the rounds.
    // `--rtrb-work K`: that amount instead of the calibrated one.
    let (k, ratio) = match args
        .iter()
        .position(|a| a == "--rtrb-work")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
    {
        Some(k) => (k, cost_ratio(k)),
        None => calibrate(),
    };
    let costly = move |i| work(i, k);
    println!(
        "rtrb's writer with our writer's cost: {k} rounds of `work` per item \
         (its writer alone {ratio:.2}x ours when calibrated, back to back)"
    );
    let mut all: Vec<Vec<Row>> = Vec::new();
    for _ in 0..rounds {
        all.push(vec![
            ours_batches(per),
            rtrb_batches(per, "rtrb     (a) no reader", plain),
            ours_overwrite(per),
            locked_floor(per),
            ours_concurrent(per, Reader::PerRecord, false),
            ours_concurrent(per, Reader::Batched, false),
            rtrb_concurrent(per, false, "rtrb     (b) concurrent reader", plain),
            ours_drain(per),
            rtrb_drain(per),
            ours_concurrent(per, Reader::Batched, true),
            rtrb_concurrent(per, true, "rtrb     (b') pausing reader", plain),
            rtrb_batches(per, "rtrb+    (a) no reader, our writer's cost", costly),
            rtrb_concurrent(
                per,
                false,
                "rtrb+    (b) concurrent, our writer's cost",
                costly,
            ),
            rtrb_concurrent(
                per,
                true,
                "rtrb+    (b') pausing, our writer's cost",
                costly,
            ),
        ]);
    }
    if rounds == 1 {
        for r in &all[0] {
            print(r);
        }
    } else {
        println!(
            "{:<44} {:>9} {:>9} {:>9} | {:>9} {:>9} {:>9}  (last round's note)",
            "ns per record: wall", "min", "median", "max", "cpu min", "median", "max"
        );
        for i in 0..all[0].len() {
            let mut w: Vec<f64> = all.iter().map(|round| ns(&round[i])).collect();
            let mut c: Vec<f64> = all.iter().map(|round| cpu_ns(&round[i])).collect();
            let (wm, cm) = (median(&mut w), median(&mut c));
            println!(
                "{:<44} {:>9.2} {:>9.2} {:>9.2} | {:>9.2} {:>9.2} {:>9.2}  {}",
                all[0][i].name,
                w[0],
                wm,
                w[w.len() - 1],
                c[0],
                cm,
                c[c.len() - 1],
                all[rounds - 1][i].note
            );
        }
    }
    // Ratios to rtrb, round by round (rows: 0 ours alone, 1 rtrb alone,
    // 5 ours with a batched concurrent reader, 6 rtrb concurrent, 7 and 8
    // the readers alone, 9 and 10 the concurrent rows with a pausing
    // reader, 11 to 13 rtrb alone, concurrent and with a pausing reader,
    // with our writer's cost): the
    // writer alone in CPU time (what it costs, whatever the scheduler did),
    // the concurrent rows in wall time (the pipeline's throughput).
    let ratio = |a: usize, b: usize, t: fn(&Row) -> f64| {
        let mut v: Vec<f64> = all
            .iter()
            .map(|round| t(&round[a]) / t(&round[b]))
            .collect();
        let med = median(&mut v);
        (v[0], med, v[v.len() - 1])
    };
    for (what, a, b, t) in [
        (
            "writer alone / rtrb alone (cpu)",
            0,
            1,
            cpu_ns as fn(&Row) -> f64,
        ),
        (
            "concurrent consume_batch / rtrb (wall)",
            5,
            6,
            ns as fn(&Row) -> f64,
        ),
        (
            "reader alone / rtrb reader alone (cpu)",
            7,
            8,
            cpu_ns as fn(&Row) -> f64,
        ),
        (
            "concurrent pausing consume_batch / rtrb (wall)",
            9,
            10,
            ns as fn(&Row) -> f64,
        ),
        (
            "writer alone / rtrb+ alone (cpu)",
            0,
            11,
            cpu_ns as fn(&Row) -> f64,
        ),
        (
            "concurrent consume_batch / rtrb+ (wall)",
            5,
            12,
            ns as fn(&Row) -> f64,
        ),
        (
            "concurrent pausing consume_batch / rtrb+ (wall)",
            9,
            13,
            ns as fn(&Row) -> f64,
        ),
    ] {
        let (lo, med, hi) = ratio(a, b, t);
        println!("ratio {what:<44} min {lo:>6.2}  median {med:>6.2}  max {hi:>6.2}");
    }
}
