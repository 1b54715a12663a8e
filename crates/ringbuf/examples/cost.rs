// SPDX-License-Identifier: GPL-2.0
//! Instruction cost of the ring's fast paths, for `valgrind --tool=callgrind`
//! (instruction counts do not change with the host's load, unlike the
//! nanoseconds of `bench`).
//!
//! valgrind --tool=callgrind --callgrind-out-file=cg.out \
//!     target/release/examples/cost
//! callgrind_annotate --inclusive=yes cg.out | grep cost::
//!
//! Each `cost::*` function below handles `RECORDS` records of 16 bytes, one
//! thread, no contention, so its inclusive count divided by `RECORDS` is the
//! instructions per record of that path: `write_pc` (reserve + two payload
//! words + commit, producer/consumer mode), `write_ow` (the same in
//! overwrite mode, lapping), `read_batch` (`consume_batch` of everything
//! committed) and `read_each` (`consume`, one call per record). The program
//! also prints those counts' denominators and a check sum.

mod common;

use common::{buffer, Buf};
use oprofile_ringbuf::Mode;
use std::hint::black_box;

/// Records per measured call: fits in the buffer (3 words each, plus sync
/// records).
const RECORDS: u64 = 16_000;
const ROUNDS: u64 = 8;

#[inline(never)]
fn write_pc(b: &Buf, from: u64) {
    for i in from..from + RECORDS {
        let mut s = b.reserve(16, i * 10).unwrap();
        s.write_words(0, &[i, !i]);
        s.commit();
    }
}

#[inline(never)]
fn write_ow(b: &Buf, from: u64) {
    for i in from..from + RECORDS {
        if let Ok(mut s) = b.reserve(16, i * 10) {
            s.write_words(0, &[i, !i]);
            s.commit();
        }
    }
}

#[inline(never)]
fn read_batch(b: &Buf) -> u64 {
    let mut scratch = [0u8; 16];
    let mut sum = 0u64;
    let mut n = 0u64;
    while let Ok(k) = b.consume_batch(&mut scratch, |info, p| {
        sum = sum.wrapping_add(info.ts ^ u64::from(p[0]));
        true
    }) {
        n += k as u64;
    }
    assert_eq!(n, RECORDS);
    sum
}

#[inline(never)]
fn read_each(b: &Buf) -> u64 {
    let mut out = [0u8; 16];
    let mut sum = 0u64;
    let mut n = 0u64;
    while let Ok(info) = b.consume(&mut out) {
        sum = sum.wrapping_add(info.ts ^ u64::from(out[0]));
        n += 1;
    }
    assert_eq!(n, RECORDS);
    sum
}

fn main() {
    let pc = buffer(Mode::ProducerConsumer);
    let ow = buffer(Mode::Overwrite);
    let mut sum = 0u64;
    for r in 0..ROUNDS {
        write_pc(&pc, r * 2 * RECORDS);
        sum = sum.wrapping_add(black_box(read_batch(&pc)));
        write_pc(&pc, (r * 2 + 1) * RECORDS);
        sum = sum.wrapping_add(black_box(read_each(&pc)));
        write_ow(&ow, r * RECORDS);
    }
    println!(
        "{} records per call; write_pc {} calls, read_batch {}, read_each {}, write_ow {}; check {sum:x}",
        RECORDS,
        2 * ROUNDS,
        ROUNDS,
        ROUNDS,
        ROUNDS
    );
}
