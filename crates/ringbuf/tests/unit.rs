// SPDX-License-Identifier: GPL-2.0
//! Unit tests for every operation and mode of the ring buffer core.

#![cfg(not(loom))]

mod common;
use common::*;
use oprofile_ringbuf::header::DELTA_MAX;
use oprofile_ringbuf::*;

#[test]
fn roundtrip_and_empty() {
    let b = buf(64, Mode::ProducerConsumer);
    assert_eq!(read(&b), None);
    write(&b, &payload(1, 16), 1000).unwrap();
    assert_eq!(b.entries(), 1);
    assert_eq!(b.bytes(), 16);
    assert_eq!(read(&b), Some((1000, payload(1, 16), 0)));
    assert_eq!(read(&b), None);
    assert_eq!(b.entries(), 0);
    let s = b.stats();
    assert_eq!((s.committed, s.read, s.read_bytes), (1, 1, 16));
}

#[test]
fn many_sizes_in_order() {
    let b = buf(1024, Mode::ProducerConsumer);
    for len in 0..41usize {
        write(&b, &payload(len as u64, len), 10 * len as u64).unwrap();
    }
    assert_eq!(b.entries(), 41);
    for len in 0..41usize {
        assert_eq!(
            read(&b),
            Some((10 * len as u64, payload(len as u64, len), 0))
        );
    }
}

#[test]
fn write_word_and_bounds() {
    let b = buf(64, Mode::ProducerConsumer);
    let mut s = b.reserve(12, 5).unwrap();
    assert_eq!(s.len(), 12);
    assert!(s.write_word(0, 0x0807_0605_0403_0201));
    assert!(s.write_word(1, 0x0c0b_0a09));
    assert!(!s.write_word(2, 0));
    assert!(!s.write_bytes(10, &[1, 2, 3]));
    assert!(!s.write_bytes(usize::MAX, &[1]));
    assert!(s.write_bytes(11, &[0xff]));
    assert!(!s.write_words(1, &[1, 2]));
    s.commit();
    let (ts, data, _) = read(&b).unwrap();
    assert_eq!(ts, 5);
    // Words read back in the machine's byte order (the stream's), and a
    // byte written over a word lands at its place in memory order.
    let mut want = 0x0807_0605_0403_0201u64.to_ne_bytes().to_vec();
    let mut w1 = 0x0c0b_0a09u64.to_ne_bytes();
    w1[3] = 0xff;
    want.extend_from_slice(&w1[..4]);
    assert_eq!(data, want);
}

/// Bytes written at any offset, over a payload written first with other
/// bytes, read back in place: whole words (the fast path), a word's head or
/// tail, several words with partial ones at both ends.
#[test]
fn write_bytes_at_every_offset_and_length() {
    for len in 1..=40usize {
        for offset in 0..=(40 - len) {
            let b = buf(256, Mode::ProducerConsumer);
            let mut s = b.reserve(40, 7).unwrap();
            let under = payload(3, 40);
            assert!(s.write_bytes(0, &under));
            let bytes = payload(9, len);
            assert!(s.write_bytes(offset, &bytes));
            s.commit();
            let mut want = under.clone();
            want[offset..offset + len].copy_from_slice(&bytes);
            assert_eq!(read(&b), Some((7, want, 0)), "offset {offset} len {len}");
        }
    }
}

#[test]
fn nested_commit_publishes_in_reservation_order() {
    let b = buf(128, Mode::ProducerConsumer);
    let mut outer = b.reserve(8, 100).unwrap();
    // "interrupt": a nested writer reserves and commits before the outer one
    let mut inner = b.reserve(8, 101).unwrap();
    assert!(b.writers_active());
    inner.write_word(0, 2);
    inner.commit();
    assert_eq!(
        read(&b),
        None,
        "nested commit must not publish past the outer reservation"
    );
    outer.write_word(0, 1);
    outer.commit();
    assert!(!b.writers_active());
    assert_eq!(read(&b).unwrap().1, 1u64.to_ne_bytes());
    assert_eq!(read(&b).unwrap().1, 2u64.to_ne_bytes());
}

#[test]
fn four_levels_then_nested_error() {
    let b = buf(256, Mode::ProducerConsumer);
    let mut slots = Vec::new();
    for lvl in 0..MAX_NESTING {
        let mut s = b.reserve(8, lvl as u64).unwrap();
        s.write_word(0, lvl as u64);
        slots.push(s);
    }
    assert_eq!(b.reserve(8, 9).err(), Some(ReserveError::Nested));
    assert_eq!(b.stats().commit_overrun, 1);
    // finish innermost first (interrupt order)
    while let Some(s) = slots.pop() {
        s.commit();
    }
    let got: Vec<u64> = drain(&b).iter().map(|r| r.0).collect();
    assert_eq!(got, vec![0, 1, 2, 3]);
}

#[test]
fn out_of_order_commits() {
    let b = buf(128, Mode::ProducerConsumer);
    let mut a = b.reserve(8, 1).unwrap();
    let mut c = b.reserve(8, 2).unwrap();
    a.write_word(0, 10);
    c.write_word(0, 20);
    a.commit();
    assert_eq!(read(&b), None);
    c.commit();
    let got: Vec<(u64, Vec<u8>, u64)> = drain(&b);
    assert_eq!(got.len(), 2);
    assert_eq!((got[0].0, got[1].0), (1, 2));
}

#[test]
fn discard_last_rolls_back_and_non_last_pads() {
    let b = buf(128, Mode::ProducerConsumer);
    write(&b, &payload(1, 8), 1).unwrap();
    let used = b.used_words();
    let s = b.reserve(24, 2).unwrap();
    s.discard();
    assert_eq!(b.used_words(), used, "last reservation is rolled back");
    // non-last: outer discarded after a nested reservation
    let outer = b.reserve(16, 3).unwrap();
    let mut inner = b.reserve(8, 4).unwrap();
    inner.write_word(0, 44);
    inner.commit();
    outer.discard();
    assert!(b.used_words() > used);
    let got = drain(&b);
    assert_eq!(got.iter().map(|r| r.0).collect::<Vec<_>>(), vec![1, 4]);
    let s = b.stats();
    assert_eq!((s.committed, s.discarded, s.entries), (2, 2, 0));
}

#[test]
fn dropping_slot_discards_and_releases_nesting() {
    let b = buf(64, Mode::ProducerConsumer);
    {
        let _s = b.reserve(8, 1).unwrap();
        assert!(b.writers_active());
    }
    assert!(!b.writers_active());
    assert_eq!(b.stats().discarded, 1);
    write(&b, &[7; 8], 2).unwrap();
    assert_eq!(read(&b).unwrap().0, 2);
}

#[test]
fn time_extend_backwards_and_extremes() {
    let b = buf(1024, Mode::ProducerConsumer);
    let times = [
        0,
        1,
        1 + DELTA_MAX,
        2 + 2 * DELTA_MAX,
        2 + 2 * DELTA_MAX + (DELTA_MAX + 1),
        1 << 40,
        (1 << 40) + 3,
        5, // backwards
        u64::MAX - 1,
        u64::MAX,
        0, // backwards
        (1 << 63) + 12345,
    ];
    for (i, &t) in times.iter().enumerate() {
        write(&b, &payload(i as u64, 8), t).unwrap();
    }
    let got: Vec<u64> = drain(&b).iter().map(|r| r.0).collect();
    assert_eq!(got, times);
}

#[test]
fn nested_writer_with_later_time_reserves_first() {
    // outer reads its clock (t=100), gets interrupted by a writer that reads
    // t=200 and reserves first; then the outer reserves with t=100.
    let b = buf(128, Mode::ProducerConsumer);
    write(&b, &[0; 8], 50).unwrap();
    let inner = b.reserve(8, 200).unwrap();
    inner.commit();
    write(&b, &[0; 8], 100).unwrap();
    write(&b, &[0; 8], 101).unwrap();
    let got: Vec<u64> = drain(&b).iter().map(|r| r.0).collect();
    assert_eq!(got, vec![50, 200, 100, 101]);
}

#[test]
fn producer_full_drops_and_reports_lost() {
    let b = buf(16, Mode::ProducerConsumer);
    let mut ok = 0;
    let mut dropped = 0;
    for i in 0..10u64 {
        match write(&b, &payload(i, 16), i) {
            Ok(()) => ok += 1,
            Err(ReserveError::Full) => dropped += 1,
            Err(e) => panic!("{e:?}"),
        }
    }
    assert!(ok >= 3 && dropped > 0);
    assert_eq!(b.stats().dropped_full, dropped);
    let got = drain(&b);
    assert_eq!(got.len() as u64, ok);
    assert_eq!(got[0].2, dropped, "lost is reported with the next read");
    assert!(got[1..].iter().all(|r| r.2 == 0));
    for (i, r) in got.iter().enumerate() {
        assert_eq!(r.0, i as u64);
        assert_eq!(r.1, payload(i as u64, 16));
    }
    // space is usable again
    write(&b, &payload(99, 16), 99).unwrap();
}

#[test]
fn too_large() {
    let b = buf(16, Mode::ProducerConsumer);
    assert_eq!(b.max_payload(), 14 * 8);
    assert!(b.reserve(b.max_payload() + 1, 0).is_err());
    assert_eq!(
        b.reserve(b.max_payload() + 1, 0).err(),
        Some(ReserveError::TooLarge)
    );
    write(&b, &vec![3; b.max_payload()], 7).unwrap();
    assert_eq!(read(&b).unwrap().1.len(), 14 * 8);
    assert_eq!(b.stats().dropped_full, 2);
}

#[test]
fn consume_buffer_too_small_does_not_consume() {
    let b = buf(64, Mode::ProducerConsumer);
    write(&b, &payload(1, 20), 3).unwrap();
    let mut small = [0u8; 8];
    assert_eq!(
        b.consume(&mut small),
        Err(ReadError::BufferTooSmall { needed: 20 })
    );
    assert_eq!(read(&b).unwrap().1, payload(1, 20));
}

#[test]
fn overwrite_laps_keep_newest_exact() {
    let b = buf(64, Mode::Overwrite);
    let n = 200u64;
    for i in 0..n {
        write(&b, &payload(i, 8 + (i as usize % 3) * 8), 1000 + i * 7).unwrap();
    }
    let s = b.stats();
    assert!(s.overrun > 0);
    let got = drain(&b);
    assert!(!got.is_empty());
    // the records read are the newest ones, in order, with exact data
    let first = n - got.len() as u64;
    for (k, r) in got.iter().enumerate() {
        let i = first + k as u64;
        assert_eq!(r.0, 1000 + i * 7);
        assert_eq!(r.1, payload(i, 8 + (i as usize % 3) * 8));
    }
    assert_eq!(
        got[0].2, first,
        "lost before the first record = records overrun"
    );
    let s = b.stats();
    assert_eq!(s.committed, s.read + s.entries + s.overrun);
    assert_eq!(s.overrun, first);
}

#[test]
fn overwrite_interleaved_with_reads() {
    let b = buf(32, Mode::Overwrite);
    let mut expect_next = 0u64;
    let mut lost_total = 0;
    for i in 0..500u64 {
        write(&b, &payload(i, 8), i).unwrap();
        if i % 7 == 0 {
            if let Some((ts, data, lost)) = read(&b) {
                lost_total += lost;
                assert!(ts >= expect_next);
                assert_eq!(
                    ts - expect_next,
                    lost,
                    "lost counts exactly the skipped records"
                );
                assert_eq!(data, payload(ts, 8));
                expect_next = ts + 1;
            }
        }
    }
    for (ts, _, lost) in drain(&b) {
        lost_total += lost;
        assert_eq!(ts - expect_next, lost);
        expect_next = ts + 1;
    }
    assert_eq!(expect_next, 500);
    assert_eq!(lost_total, b.stats().overrun);
}

#[test]
fn overwrite_never_overwrites_uncommitted() {
    let b = buf(32, Mode::Overwrite);
    let mut outer = b.reserve(8, 1).unwrap();
    outer.write_word(0, 0xabcd);
    // nested writers fill the buffer; they cannot overwrite `outer`
    let mut failed = 0;
    for i in 0..40u64 {
        match write(&b, &payload(i, 8), 2 + i) {
            Ok(()) => {}
            Err(ReserveError::Full) => failed += 1,
            Err(e) => panic!("{e:?}"),
        }
    }
    assert!(failed > 0);
    assert_eq!(b.stats().commit_overrun, failed);
    outer.commit();
    let got = drain(&b);
    assert_eq!(got[0].1, 0xabcdu64.to_ne_bytes());
    assert_eq!(got[0].0, 1);
}

#[test]
fn switches_global_set_cpu() {
    let global = RecordSwitch::new(true);
    let set = RecordSwitch::new(true);
    let b = CpuBuffer::new(
        storage(64),
        Mode::ProducerConsumer,
        Switches {
            global: &global,
            set: &set,
        },
    )
    .unwrap();
    let w = |t| b.reserve(8, t).map(|s| s.commit());
    // `is_recording` says what the next reserve finds.
    assert!(b.is_recording());
    w(1).unwrap();
    global.set(false);
    assert!(!b.is_recording());
    assert_eq!(w(2), Err(ReserveError::Disabled));
    global.set(true);
    set.set(false);
    assert!(!b.is_recording());
    assert_eq!(w(3), Err(ReserveError::Disabled));
    set.set(true);
    b.set_enabled(false).unwrap();
    assert!(!b.is_enabled());
    assert!(!b.is_recording());
    assert_eq!(w(4), Err(ReserveError::Disabled));
    b.set_enabled(true).unwrap();
    assert!(b.is_recording());
    w(5).unwrap();
    assert_eq!(b.stats().dropped_disabled, 3);
    assert!(!b.writers_active());
    let mut out = [0u8; 8];
    assert_eq!(b.consume(&mut out).unwrap().ts, 1);
    assert_eq!(b.consume(&mut out).unwrap().ts, 5);
}

#[test]
fn peek_and_iter_are_non_destructive() {
    let b = buf(128, Mode::ProducerConsumer);
    for i in 0..5 {
        write(&b, &payload(i, 8), i * 10).unwrap();
    }
    let mut out = [0u8; 4];
    let p = b.peek(&mut out).unwrap();
    assert_eq!((p.ts, p.len), (0, 8));
    assert_eq!(out[..], payload(0, 8)[..4]);
    {
        let mut it = b.iter().unwrap();
        assert_eq!(
            b.consume(&mut [0; 8]),
            Err(ReadError::Busy),
            "one reader at a time"
        );
        let mut out = [0u8; 8];
        let mut n = 0;
        while let Some(info) = it.next_into(&mut out) {
            assert_eq!(info.ts, n * 10);
            assert_eq!(out.to_vec(), payload(n, 8));
            n += 1;
        }
        assert_eq!(n, 5);
    }
    assert_eq!(b.iter().unwrap().count(), 5);
    assert_eq!(drain(&b).len(), 5);
    assert_eq!(b.peek(&mut []), Err(ReadError::Empty));
}

#[test]
fn iter_snapshot_excludes_later_commits() {
    let b = buf(128, Mode::ProducerConsumer);
    write(&b, &[1; 8], 1).unwrap();
    let it = b.iter().unwrap();
    write(&b, &[2; 8], 2).unwrap();
    assert_eq!(it.count(), 1);
}

#[test]
fn swap_requires_quiesced_and_exchanges_content() {
    let a = buf(64, Mode::ProducerConsumer);
    let spare = buf(128, Mode::ProducerConsumer);
    spare.set_enabled(false).unwrap();
    for i in 0..3 {
        write(&a, &payload(i, 8), 100 + i).unwrap();
    }
    assert_eq!(a.swap(&spare), Err(ControlError::Recording));
    a.set_enabled(false).unwrap();
    {
        let _s = a.reserve(8, 0); // disabled: no slot, no writer left active
        assert!(!a.writers_active());
    }
    assert_eq!(a.swap(&a), Err(ControlError::SameBuffer));
    a.swap(&spare).unwrap();
    assert_eq!(a.capacity_words(), 128);
    assert_eq!(spare.capacity_words(), 64);
    a.set_enabled(true).unwrap();
    assert_eq!(read(&a), None);
    write(&a, &payload(9, 8), 500).unwrap();
    let old = drain(&spare);
    assert_eq!(
        old.iter().map(|r| r.0).collect::<Vec<_>>(),
        vec![100, 101, 102]
    );
    assert_eq!(spare.stats().read, 3);
    assert_eq!(read(&a).unwrap().0, 500);
}

#[test]
fn swap_refused_with_writer_in_flight() {
    let a = buf(64, Mode::ProducerConsumer);
    let spare = buf(64, Mode::ProducerConsumer);
    spare.set_enabled(false).unwrap();
    let s = a.reserve(8, 1).unwrap();
    a.set_enabled(false).unwrap();
    assert!(a.writers_active());
    assert_eq!(a.swap(&spare), Err(ControlError::WritersActive));
    s.commit();
    assert!(!a.writers_active());
    a.swap(&spare).unwrap();
    assert_eq!(read(&spare).unwrap().0, 1);
    // reader busy
    let _it = a.iter().unwrap();
    assert_eq!(a.swap(&spare), Err(ControlError::ReaderBusy));
}

#[test]
fn resize_grow_and_shrink_carry_over() {
    let b = buf(64, Mode::ProducerConsumer);
    for i in 0..10 {
        write(&b, &payload(i, 16), 1000 + i).unwrap();
    }
    read(&b).unwrap();
    assert!(matches!(
        b.resize(storage(256)),
        Err((_, ControlError::Recording))
    ));
    b.set_enabled(false).unwrap();
    assert!(matches!(
        b.resize(storage(2)),
        Err((_, ControlError::TooSmall))
    ));
    let old = b.resize(storage(256)).unwrap();
    assert_eq!(old.len(), 64);
    assert_eq!(b.capacity_words(), 256);
    // shrink to 16 words: only the newest records that fit survive
    b.resize(storage(16)).unwrap();
    b.set_enabled(true).unwrap();
    assert_eq!(write(&b, &payload(10, 16), 1010), Err(ReserveError::Full));
    let mut got = drain(&b);
    write(&b, &payload(10, 16), 1010).unwrap();
    got.extend(drain(&b));
    let ts: Vec<u64> = got.iter().map(|r| r.0).collect();
    assert_eq!(ts[0], 1005, "16 words hold the 5 newest 3-word records");
    assert_eq!(*ts.last().unwrap(), 1010);
    assert!(ts.windows(2).all(|w| w[1] == w[0] + 1), "{ts:?}");
    for r in &got {
        assert_eq!(r.1, payload(r.0 - 1000, 16));
    }
    let s = b.stats();
    assert_eq!(s.committed, s.read + s.entries + s.overrun);
    assert_eq!(s.overrun + s.read, 11);
    assert_eq!(s.dropped_full, 1);
}

/// Laps a flight recorder of 32 words with 500 records of 8 bytes and checks
/// that the reader gets the newest ones with their exact times, none skipped
/// as unreadable: the writers' time sync records must come every 8 words (the
/// interval of 32 words), not every 512 (that of 4096 words), for the buffer
/// to keep a time base.
fn laps_keep_their_times(b: &Buf) {
    assert_eq!(b.capacity_words(), 32);
    for i in 0..500u64 {
        write(b, &payload(i, 8), 1_000_000 + i * 3).unwrap();
    }
    let got = drain(b);
    assert!(
        got.len() >= 4,
        "{} records read of a full 32-word buffer",
        got.len()
    );
    let first = 500 - got.len() as u64;
    for (k, r) in got.iter().enumerate() {
        let i = first + k as u64;
        assert_eq!((r.0, &r.1), (1_000_000 + i * 3, &payload(i, 8)));
    }
    let s = b.stats();
    assert_eq!(s.committed, s.read + s.entries + s.overrun);
    assert_eq!(s.read, got.len() as u64);
}

/// A resize sets the sync interval of the new size.
#[test]
fn resize_sets_the_sync_interval_of_the_new_size() {
    let b = buf(4096, Mode::Overwrite);
    b.set_enabled(false).unwrap();
    b.resize(storage(32)).unwrap();
    b.set_enabled(true).unwrap();
    laps_keep_their_times(&b);
}

/// A swap exchanges the sync intervals with the storages.
#[test]
fn swap_exchanges_the_sync_intervals_with_the_storages() {
    let small = buf(32, Mode::Overwrite);
    let big = buf(4096, Mode::Overwrite);
    small.set_enabled(false).unwrap();
    big.set_enabled(false).unwrap();
    small.swap(&big).unwrap();
    big.set_enabled(true).unwrap();
    laps_keep_their_times(&big);
}

#[test]
fn mode_switch_and_reset() {
    let b = buf(32, Mode::ProducerConsumer);
    assert_eq!(b.set_mode(Mode::Overwrite), Err(ControlError::Recording));
    b.set_enabled(false).unwrap();
    b.set_mode(Mode::Overwrite).unwrap();
    assert_eq!(b.mode(), Mode::Overwrite);
    b.set_enabled(true).unwrap();
    for i in 0..50 {
        write(&b, &payload(i, 8), i).unwrap();
    }
    assert!(b.stats().overrun > 0);
    b.set_enabled(false).unwrap();
    b.reset().unwrap();
    assert_eq!(b.stats(), Stats::default());
    b.set_enabled(true).unwrap();
    assert_eq!(read(&b), None);
    write(&b, &payload(1, 8), 77).unwrap();
    assert_eq!(read(&b).unwrap().0, 77);
}

#[test]
fn back_to_producer_consumer_after_overwrite_laps() {
    // The module's runtime switch (`mode`): the flight recorder laps the
    // ring, a snapshot drains it, the ring goes back to producer/consumer
    // (empty, recording off) and works as one from where it stands.
    let b = buf(32, Mode::Overwrite);
    for i in 0..50 {
        write(&b, &payload(i, 8), 1000 + i).unwrap();
    }
    let laps = b.stats();
    assert!(laps.overrun > 0);
    let newest = drain_batched(&b, 4);
    assert_eq!(newest.last().unwrap().0, 1049);
    b.set_enabled(false).unwrap();
    b.set_mode(Mode::ProducerConsumer).unwrap();
    assert_eq!(b.mode(), Mode::ProducerConsumer);
    b.set_enabled(true).unwrap();
    // Full is now a refusal, not an overwrite.
    let mut written = 0;
    while write(&b, &payload(written, 8), 2000 + written).is_ok() {
        written += 1;
    }
    assert!(written > 0);
    assert_eq!(
        b.stats().overrun,
        laps.overrun,
        "nothing overwritten any more"
    );
    assert_eq!(b.stats().dropped_full, 1);
    let got = drain_batched(&b, 3);
    let ts: Vec<u64> = got.iter().map(|r| r.0).collect();
    assert_eq!(ts, (2000..2000 + written).collect::<Vec<_>>());
    for r in &got {
        assert_eq!(r.1, payload(r.0 - 2000, 8));
    }
    // And back to overwrite: it laps again.
    b.set_enabled(false).unwrap();
    b.set_mode(Mode::Overwrite).unwrap();
    b.set_enabled(true).unwrap();
    for i in 0..40 {
        write(&b, &payload(i, 8), 3000 + i).unwrap();
    }
    assert!(b.stats().overrun > laps.overrun);
    assert_eq!(drain(&b).last().unwrap().0, 3039);
    let s = b.stats();
    assert_eq!(s.committed, s.read + s.entries + s.overrun);
}

#[test]
fn non_power_of_two_storage_and_too_small() {
    assert_eq!(
        CpuBuffer::new(storage(3), Mode::ProducerConsumer, switches()).err(),
        Some(InitError::TooSmall)
    );
    let b = CpuBuffer::new(storage(100), Mode::ProducerConsumer, switches()).unwrap();
    assert_eq!(b.capacity_words(), 64);
}

#[test]
fn accounting_invariant_mixed() {
    for mode in [Mode::ProducerConsumer, Mode::Overwrite] {
        let b = buf(64, mode);
        let mut attempts = 0u64;
        let mut x = 12345u64;
        let mut rnd = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut held = Vec::new();
        for i in 0..3000u64 {
            let r = rnd() % 10;
            if r < 5 {
                attempts += 1;
                if let Ok(mut s) = b.reserve((rnd() % 40) as usize, i) {
                    s.write_bytes(0, &[1]);
                    if held.len() < 5 && rnd() % 3 == 0 {
                        held.push(s);
                    } else if rnd() % 5 == 0 {
                        s.discard();
                    } else {
                        s.commit();
                    }
                }
            } else if r < 7 {
                if let Some(s) = held.pop() {
                    s.commit();
                }
            } else if r < 8 {
                b.set_enabled(rnd() % 4 != 0).unwrap();
            } else {
                read(&b);
            }
        }
        held.clear();
        let s = b.stats();
        assert_eq!(
            attempts,
            s.committed + s.discarded + s.dropped_full + s.dropped_disabled + s.commit_overrun
        );
        assert_eq!(s.committed, s.read + s.entries + s.overrun);
        let left = drain(&b).len() as u64;
        assert_eq!(left, s.entries);
    }
}

#[test]
fn batch_reads_everything_in_order_once() {
    let b = buf(1024, Mode::ProducerConsumer);
    assert_eq!(read_batch(&b, usize::MAX), None);
    for len in 0..41usize {
        write(&b, &payload(len as u64, len), 10 * len as u64).unwrap();
    }
    let got = read_batch(&b, usize::MAX).unwrap();
    assert_eq!(got.len(), 41);
    for (len, r) in got.iter().enumerate() {
        assert_eq!(*r, (10 * len as u64, payload(len as u64, len), 0));
    }
    assert_eq!(read_batch(&b, usize::MAX), None);
    let s = b.stats();
    assert_eq!((s.read, s.entries), (41, 0));
    assert_eq!(s.read_bytes, (0..41).sum::<u64>());
}

#[test]
fn batch_stops_when_asked_and_resumes() {
    let b = buf(256, Mode::ProducerConsumer);
    for i in 0..10u64 {
        write(&b, &payload(i, 16), 100 + i).unwrap();
    }
    let first = read_batch(&b, 3).unwrap();
    assert_eq!(
        first.iter().map(|r| r.0).collect::<Vec<_>>(),
        [100, 101, 102]
    );
    assert_eq!(b.entries(), 7);
    // the time base carries over to a per-record read and back
    assert_eq!(read(&b).unwrap().0, 103);
    let rest = drain_batched(&b, 2);
    assert_eq!(
        rest.iter().map(|r| r.0).collect::<Vec<_>>(),
        (104..110).collect::<Vec<_>>()
    );
    for r in &rest {
        assert_eq!(r.1, payload(r.0 - 100, 16));
    }
}

#[test]
fn batch_scratch_too_small() {
    let b = buf(64, Mode::ProducerConsumer);
    write(&b, &payload(1, 8), 1).unwrap();
    write(&b, &payload(2, 20), 2).unwrap();
    write(&b, &payload(3, 8), 3).unwrap();
    let mut small = [0u8; 8];
    let mut got = Vec::new();
    // the second record does not fit: the batch ends before it
    assert_eq!(
        b.consume_batch(&mut small, |i, p| {
            got.push((i.ts, p.to_vec()));
            true
        }),
        Ok(1)
    );
    assert_eq!(got, [(1, payload(1, 8))]);
    // first record too large: nothing consumed
    assert_eq!(
        b.consume_batch(&mut small, |_, _| panic!("nothing fits")),
        Err(ReadError::BufferTooSmall { needed: 20 })
    );
    assert_eq!(b.entries(), 2);
    let rest = drain_batched(&b, usize::MAX);
    assert_eq!(
        rest.iter().map(|r| r.0).collect::<Vec<_>>(),
        [2, 3],
        "nothing was lost"
    );
}

#[test]
fn batch_busy_while_another_reader_holds_the_lock() {
    let b = buf(64, Mode::ProducerConsumer);
    write(&b, &payload(1, 8), 1).unwrap();
    let it = b.iter().unwrap();
    let mut scratch = [0u8; 64];
    assert_eq!(
        b.consume_batch(&mut scratch, |_, _| true),
        Err(ReadError::Busy)
    );
    drop(it);
    assert_eq!(b.consume_batch(&mut scratch, |_, _| true), Ok(1));
}

#[test]
fn batch_reports_drops_with_its_first_record() {
    let b = buf(16, Mode::ProducerConsumer);
    let mut dropped = 0;
    for i in 0..10u64 {
        if write(&b, &payload(i, 16), i).is_err() {
            dropped += 1;
        }
    }
    assert!(dropped > 0);
    let got = read_batch(&b, usize::MAX).unwrap();
    assert_eq!(got[0].2, dropped);
    assert!(got[1..].iter().all(|r| r.2 == 0));
    assert_eq!(b.stats().read, got.len() as u64);
}

#[test]
fn batch_publishes_tail_during_a_long_batch() {
    // A writer (here: the closure itself, as a nested writer on the reader's
    // CPU would) finds room again once a quarter buffer has been read.
    let b = buf(64, Mode::ProducerConsumer);
    let mut n = 0u64;
    while write(&b, &payload(n, 8), n).is_ok() {
        n += 1;
    }
    let mut scratch = [0u8; 8];
    let (mut seen, mut wrote_at) = (0u64, None);
    let got = b.consume_batch(&mut scratch, |_, _| {
        seen += 1;
        if wrote_at.is_none() && write(&b, &payload(99, 8), 1000).is_ok() {
            wrote_at = Some(seen);
        }
        true
    });
    assert_eq!(got, Ok(n as usize), "the batch covers what was committed");
    let at = wrote_at.expect("room was published during the batch");
    assert!(
        at < n,
        "published before the end of the batch ({at} of {n})"
    );
    assert_eq!(read(&b).map(|r| r.0), Some(1000));
}

#[test]
fn batch_overwrite_laps_keep_newest_exact() {
    for max in [1, 2, 5, usize::MAX] {
        let b = buf(32, Mode::Overwrite);
        let mut expect_next = 0u64;
        let mut lost_total = 0;
        for i in 0..500u64 {
            write(&b, &payload(i, 8 + (i as usize % 2) * 8), i).unwrap();
            if i % 7 == 0 {
                for (ts, data, lost) in read_batch(&b, max).unwrap_or_default() {
                    lost_total += lost;
                    assert_eq!(ts - expect_next, lost, "lost counts the skipped records");
                    assert_eq!(data, payload(ts, 8 + (ts as usize % 2) * 8));
                    expect_next = ts + 1;
                }
            }
        }
        for (ts, _, lost) in drain_batched(&b, max) {
            lost_total += lost;
            assert_eq!(ts - expect_next, lost);
            expect_next = ts + 1;
        }
        assert_eq!(expect_next, 500);
        let s = b.stats();
        assert_eq!(lost_total, s.overrun);
        assert_eq!(s.committed, s.read + s.entries + s.overrun);
        assert_eq!(s.entries, 0);
    }
}
