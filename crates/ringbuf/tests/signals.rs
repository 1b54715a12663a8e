// SPDX-License-Identifier: GPL-2.0
//! Nesting stress on the host with real asynchronous interruption: POSIX
//! signals play the interrupts of the kernel's KUnit stress
//! (`src/kunit/ringbuf_stress.rs`). One writer thread ("task") is interrupted
//! at arbitrary instructions by a `SIGUSR1` handler ("IRQ") and a `SIGUSR2`
//! handler ("NMI", which may interrupt the IRQ handler too), sent by the
//! reader thread; the task and IRQ writers also send themselves an NMI in
//! the middle of an open record (nesting depth 2 and 3). Writers nest
//! strictly, as on one CPU. The reader alternates `consume` and
//! `consume_batch` and checks every record (checksum, per-kind order, time
//! stamp equal to the one written).

#![cfg(not(loom))]

mod common;

use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64 as StdU64, Ordering::*};
use std::sync::Mutex;

use common::*;
use oprofile_ringbuf::{Mode, ReadError};

const TASK: usize = 0;
const IRQ: usize = 1;
const NMI: usize = 2;
const KINDS: usize = 3;
const MIN_WORDS: usize = 3;
const MAX_WORDS: usize = 7;
const READ_BATCH: usize = 32;
/// The task writer waits this long between records.
const PACE_NS: u64 = 500;

/// The buffer under test, for the signal handlers.
static ACTIVE: AtomicPtr<Buf> = AtomicPtr::new(ptr::null_mut());
/// The writer thread (target of the signals).
static WRITER: StdU64 = StdU64::new(0);
static WRITER_SET: AtomicBool = AtomicBool::new(false);
static SEQ: [StdU64; KINDS] = [StdU64::new(0), StdU64::new(0), StdU64::new(0)];
static COMMITTED: [StdU64; KINDS] = [StdU64::new(0), StdU64::new(0), StdU64::new(0)];
static NESTED: StdU64 = StdU64::new(0);
static OPEN: StdU64 = StdU64::new(0);
/// Tests in this file share the handlers: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn checksum(words: &[u64]) -> u64 {
    words.iter().fold(0x9e37_79b9_7f4a_7c15u64, |c, &w| {
        (c ^ w).wrapping_mul(0x0000_0100_0000_01b3).rotate_left(17)
    })
}

fn now_ns() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid pointer; clock_gettime is async-signal-safe.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

fn send_self(sig: libc::c_int) {
    // SAFETY: plain call; delivered before it returns (not blocked).
    unsafe { libc::pthread_kill(libc::pthread_self(), sig) };
}

/// Writes one record of `kind`, calling `mid` while it is open
/// (async-signal-safe: atomics only).
fn write_one(b: &Buf, kind: usize, mid: impl FnOnce()) {
    let seq = SEQ[kind].load(Relaxed) + 1;
    SEQ[kind].store(seq, Relaxed);
    let nwords = MIN_WORDS + (seq as usize % (MAX_WORDS - MIN_WORDS + 1));
    let ts = now_ns();
    match b.reserve(nwords * 8, ts) {
        Ok(mut slot) => {
            if OPEN.fetch_add(1, Relaxed) > 0 {
                NESTED.fetch_add(1, Relaxed);
            }
            let mut words = [0u64; MAX_WORDS];
            words[0] = ((kind as u64) << 56) | seq;
            words[1] = ts;
            for (i, w) in words.iter_mut().enumerate().take(nwords - 1).skip(2) {
                *w = seq.wrapping_mul(0x2545_f491_4f6c_dd1d) ^ i as u64;
            }
            words[nwords - 1] = checksum(&words[..nwords - 1]);
            let half = nwords / 2;
            slot.write_words(0, &words[..half]);
            mid();
            slot.write_words(half, &words[half..nwords]);
            slot.commit();
            OPEN.fetch_sub(1, Relaxed);
            COMMITTED[kind].fetch_add(1, Relaxed);
        }
        Err(_) => mid(),
    }
}

extern "C" fn irq_handler(_: libc::c_int) {
    let p = ACTIVE.load(Acquire);
    if p.is_null() {
        return;
    }
    // SAFETY: the buffer outlives the run (ACTIVE is cleared, and the writer
    // thread joined, before it is dropped).
    let b = unsafe { &*p };
    let self_nmi = SEQ[IRQ].load(Relaxed).is_multiple_of(2);
    write_one(b, IRQ, || {
        if self_nmi {
            send_self(libc::SIGUSR2);
        }
    });
}

extern "C" fn nmi_handler(_: libc::c_int) {
    let p = ACTIVE.load(Acquire);
    if p.is_null() {
        return;
    }
    // SAFETY: as in `irq_handler`.
    let b = unsafe { &*p };
    write_one(b, NMI, || {});
}

fn install() {
    // SAFETY: sigaction with valid handlers; SIGUSR1's handler can be
    // interrupted by SIGUSR2 only, SIGUSR2's by nothing (NMI-like).
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = irq_handler as *const () as usize;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaddset(&mut sa.sa_mask, libc::SIGUSR1);
        sa.sa_flags = libc::SA_RESTART;
        assert_eq!(libc::sigaction(libc::SIGUSR1, &sa, ptr::null_mut()), 0);
        sa.sa_sigaction = nmi_handler as *const () as usize;
        libc::sigaddset(&mut sa.sa_mask, libc::SIGUSR2);
        assert_eq!(libc::sigaction(libc::SIGUSR2, &sa, ptr::null_mut()), 0);
    }
}

#[derive(Default, Debug)]
struct Found {
    read: u64,
    torn: u64,
    reordered: u64,
    bad_ts: u64,
    first_bad: Option<(usize, u64, u64, u64, bool)>,
}

fn check(f: &mut Found, last: &mut [u64; KINDS], p: &[u8], ts: u64, batched: bool) {
    let n = p.len() / 8;
    if !p.len().is_multiple_of(8) || !(MIN_WORDS..=MAX_WORDS).contains(&n) {
        f.torn += 1;
        return;
    }
    let w: Vec<u64> = p
        .chunks_exact(8)
        .map(|c| u64::from_ne_bytes(c.try_into().unwrap()))
        .collect();
    let kind = (w[0] >> 56) as usize;
    let seq = w[0] & ((1 << 56) - 1);
    if kind >= KINDS || checksum(&w[..n - 1]) != w[n - 1] {
        f.torn += 1;
        return;
    }
    if w[1] != ts {
        f.bad_ts += 1;
        f.first_bad.get_or_insert((kind, seq, w[1], ts, batched));
    }
    if seq <= last[kind] {
        f.reordered += 1;
    }
    last[kind] = seq;
    f.read += 1;
}

/// Runs one stress round; `batch`: the reader alternates `consume` and
/// `consume_batch` (else `consume` only).
fn run(mode: Mode, words: usize, task_records: u64, batch: bool) -> Found {
    let b: &'static Buf = Box::leak(Box::new(buf(words, mode)));
    for s in SEQ.iter().chain(COMMITTED.iter()) {
        s.store(0, Relaxed);
    }
    install();
    ACTIVE.store(ptr::from_ref(b).cast_mut(), Release);
    let done = &*Box::leak(Box::new(AtomicBool::new(false)));
    WRITER_SET.store(false, Release);
    let pace = env("SIGNAL_PACE_NS", PACE_NS);
    NESTED.store(0, Relaxed);
    let writer = std::thread::spawn(move || {
        // SAFETY: plain call.
        WRITER.store(unsafe { libc::pthread_self() } as u64, Relaxed);
        WRITER_SET.store(true, Release);
        for i in 0..task_records {
            // Pace the task writer so that the reader keeps up (as in the
            // kernel, where the reader mostly does).
            let t = now_ns();
            while now_ns().wrapping_sub(t) < pace {
                std::hint::spin_loop();
            }
            write_one(b, TASK, || {
                if i.is_multiple_of(64) {
                    send_self(libc::SIGUSR2);
                }
            });
        }
        done.store(true, Release);
    });
    while !WRITER_SET.load(Acquire) {
        std::hint::spin_loop();
    }
    let target = WRITER.load(Relaxed) as libc::pthread_t;
    let mut found = Found::default();
    let mut last = [0u64; KINDS];
    let mut out = [0u8; MAX_WORDS * 8];
    let mut batched = false;
    let mut i = 0u64;
    loop {
        let fin = done.load(Acquire);
        if !fin {
            i += 1;
            let sig = match i % 16 {
                0 => Some(libc::SIGUSR1),
                8 => Some(libc::SIGUSR2),
                _ => None,
            };
            if let Some(sig) = sig {
                // SAFETY: the writer thread runs until `done`.
                unsafe { libc::pthread_kill(target, sig) };
            }
        }
        batched = batch && !batched;
        let got = if batched {
            let mut n = 0;
            b.consume_batch(&mut out, |info, p| {
                check(&mut found, &mut last, p, info.ts, true);
                n += 1;
                n < READ_BATCH
            })
            .map(|_| ())
        } else {
            b.consume(&mut out)
                .map(|info| check(&mut found, &mut last, &out[..info.len], info.ts, false))
        };
        match got {
            Ok(()) | Err(ReadError::Contended) => {}
            Err(ReadError::Empty) if fin => break,
            Err(ReadError::Empty) => {}
            Err(e) => panic!("read error {e:?}"),
        }
    }
    writer.join().unwrap();
    ACTIVE.store(ptr::null_mut(), Release);
    let st = b.stats();
    println!(
        "{mode:?} batch={batch}: committed task/irq/nmi={}/{}/{} nested={} stats={st:?} found={found:?}",
        COMMITTED[0].load(Relaxed),
        COMMITTED[1].load(Relaxed),
        COMMITTED[2].load(Relaxed),
        NESTED.load(Relaxed)
    );
    found
}

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn rounds() -> u64 {
    env("SIGNAL_ROUNDS", 1)
}

#[test]
fn signal_nesting_producer_consumer() {
    let _g = SERIAL.lock().unwrap();
    for _ in 0..rounds() {
        let f = run(
            Mode::ProducerConsumer,
            1024,
            env("SIGNAL_RECORDS", 50_000),
            true,
        );
        assert_eq!((f.torn, f.reordered, f.bad_ts), (0, 0, 0), "{f:?}");
    }
}

#[test]
fn signal_nesting_overwrite() {
    let _g = SERIAL.lock().unwrap();
    for _ in 0..rounds() {
        let f = run(Mode::Overwrite, 256, env("SIGNAL_RECORDS", 50_000), true);
        assert_eq!((f.torn, f.reordered, f.bad_ts), (0, 0, 0), "{f:?}");
    }
}
