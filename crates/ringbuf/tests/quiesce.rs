// SPDX-License-Identifier: GPL-2.0
//! The switch/`writers_active` Dekker pair on real threads, with the
//! writers' CPU-local read-modify-writes (`src/ringbuf/atomics.rs`): the
//! writer has no full barrier between its `nest` increment and its switch
//! loads, the control side's `writers_active` makes up for it (`membarrier`).
//!
//! A writer thread writes checksummed, numbered records without pause while
//! the test thread turns the buffer off, resizes it (which replaces the
//! storage and copies what is unread) as soon as `writers_active()` says no
//! writer is in flight, turns it back on, and drains it now and then. A
//! writer still in flight during a resize would write into the replaced
//! storage (its record lost, or garbage in the new one) or tear the copy: the
//! test checks that every record read is whole and in order, and that every
//! record committed is read, skipped by a shrinking resize or still there.
//! The old storages are kept until the end, so that even a broken protocol
//! stays memory safe here. `QUIESCE_RESIZES` sets the number of resizes.
//!
//! What it cannot do: catch the store-buffer reordering that the control
//! side's barrier is for. The window (the writer's `nest` store still in its
//! store buffer while its switch load runs, and the controller's switch
//! change and `nest` load inside those few cycles) is too narrow: with the
//! barrier taken out, 2 x 3,000 resizes passed too (2026-11-26). The
//! argument is in `atomics::writers_barrier`; loom checks the protocol with
//! the writer's barrier in place (`tests/loom.rs`).

#![cfg(not(loom))]

mod common;
use common::*;
use oprofile_ringbuf::*;
use std::sync::atomic::{AtomicBool, AtomicU64 as StdU64, Ordering::*};

fn resizes() -> u64 {
    std::env::var("QUIESCE_RESIZES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000)
}

/// What the drains found.
#[derive(Default, Debug)]
struct Found {
    read: u64,
    torn: u64,
    reordered: u64,
    last: Option<u64>,
}

fn drain(b: &Buf, f: &mut Found) {
    let mut scratch = [0u8; 16];
    loop {
        let r = b.consume_batch(&mut scratch, |info, p| {
            let w0 = u64::from_ne_bytes(p[..8].try_into().unwrap());
            let w1 = u64::from_ne_bytes(p[8..16].try_into().unwrap());
            if w1 != !w0 || info.ts != w0.wrapping_mul(3) {
                f.torn += 1;
            }
            if f.last.is_some_and(|l| w0 <= l) {
                f.reordered += 1;
            }
            f.last = Some(w0);
            f.read += 1;
            true
        });
        match r {
            Ok(_) => {}
            Err(ReadError::Empty) => return,
            Err(e) => panic!("drain: {e:?} after {f:?}"),
        }
    }
}

#[test]
fn resize_under_a_running_writer_never_loses_or_tears() {
    let b = buf(256, Mode::ProducerConsumer);
    let stop = AtomicBool::new(false);
    let committed = StdU64::new(0);
    let mut kept = Vec::new();
    let mut found = Found::default();
    let (mut done, mut busy) = (0u64, 0u64);
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut seq = 0u64;
            while !stop.load(Relaxed) {
                if let Ok(mut slot) = b.reserve(16, seq.wrapping_mul(3)) {
                    slot.write_words(0, &[seq, !seq]);
                    slot.commit();
                    seq += 1;
                    committed.fetch_add(1, Relaxed);
                }
            }
        });
        let target = resizes();
        let mut i = 0u64;
        while done < target {
            i += 1;
            b.set_enabled(false).unwrap();
            // Alternate sizes: growing carries everything over, shrinking
            // may skip the oldest records (counted as overrun).
            let words = if i.is_multiple_of(2) { 128 } else { 256 };
            match b.resize(storage(words)) {
                Ok(old) => {
                    kept.push(old);
                    done += 1;
                }
                Err((_, ControlError::WritersActive)) => busy += 1,
                Err((_, e)) => panic!("resize: {e:?}"),
            }
            b.set_enabled(true).unwrap();
            // Let the writer in: a few records (a full buffer drops them,
            // so drain then).
            let from = committed.load(Relaxed);
            let full = b.stats().dropped_full;
            while committed.load(Relaxed) < from + 1 + i % 4 && b.stats().dropped_full == full {
                // The writer may share our CPU (a loaded host).
                std::thread::yield_now();
            }
            if i.is_multiple_of(8) {
                drain(&b, &mut found);
            }
        }
        stop.store(true, Relaxed);
    });
    drain(&b, &mut found);
    let st = b.stats();
    eprintln!(
        "{done} resizes ({busy} refused: writer in flight), committed {}, {found:?}, stats {st:?}",
        committed.load(Relaxed)
    );
    assert_eq!((found.torn, found.reordered), (0, 0), "{found:?}");
    assert_eq!(st.committed, committed.load(Relaxed));
    assert_eq!(st.read, found.read);
    assert_eq!(st.committed, st.read + st.overrun + st.entries, "{st:?}");
    assert_eq!(st.entries, 0);
}
