// SPDX-License-Identifier: GPL-2.0
//! Property tests against a simple model (VecDeque of published records).
//!
//! Random sequences of reserve (with nesting: a stack of open slots, closed
//! in or out of order), commit, discard, consume, peek, iterate and switch
//! toggles, in both modes, on small buffers so they fill and wrap.

#![cfg(not(loom))]

mod common;
use common::*;
use oprofile_ringbuf::header::DELTA_MAX;
use oprofile_ringbuf::*;
use proptest::prelude::*;
use std::collections::VecDeque;

#[derive(Clone, Debug)]
enum Time {
    Same,
    Small(u64),
    Big(u64),
    Back(u64),
    Abs(u64),
}

#[derive(Clone, Debug)]
enum Op {
    /// Reserve `len` bytes; then 0 = commit now, 1 = discard now, 2 = keep open.
    Reserve {
        len: usize,
        time: Time,
        then: u8,
    },
    /// Close the open slot at `idx % open.len()` (counted from the newest).
    Close {
        idx: usize,
        commit: bool,
    },
    Consume,
    /// `consume_batch`, stopping after `max` records.
    ConsumeBatch(usize),
    Peek,
    Iter,
    Enable(bool),
}

fn time() -> impl Strategy<Value = Time> {
    prop_oneof![
        Just(Time::Same),
        (1u64..1000).prop_map(Time::Small),
        (DELTA_MAX - 2..DELTA_MAX + 3).prop_map(Time::Big),
        (1u64 << 27..1u64 << 45).prop_map(Time::Big),
        (1u64..5000).prop_map(Time::Back),
        any::<u64>().prop_map(Time::Abs),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0usize..40, time(), prop_oneof![3 => Just(0u8), 1 => Just(1u8), 2 => Just(2u8)])
            .prop_map(|(len, time, then)| Op::Reserve { len, time, then }),
        3 => (0usize..8, proptest::bool::weighted(0.8)).prop_map(|(idx, commit)| Op::Close { idx, commit }),
        4 => Just(Op::Consume),
        2 => (1usize..6).prop_map(Op::ConsumeBatch),
        1 => Just(Op::Peek),
        1 => Just(Op::Iter),
        1 => proptest::bool::weighted(0.8).prop_map(Op::Enable),
    ]
}

#[derive(Clone, Debug, PartialEq)]
struct Rec {
    id: u64,
    ts: u64,
    data: Vec<u8>,
}

enum State {
    Open,
    Committed,
    Discarded,
}

fn words(len: usize) -> u64 {
    len.div_ceil(8) as u64
}

/// Checks one consumed record (`None`: the reader found nothing) against the
/// model's published records, removing what it consumed or skipped.
fn check_read(
    got: Option<(u64, Vec<u8>, u64)>,
    overwrite: bool,
    visible: &mut VecDeque<Option<Rec>>,
    lost_pending: &mut u64,
) -> Result<(), TestCaseError> {
    match got {
        None => {
            if !overwrite {
                prop_assert!(visible.iter().all(|r| r.is_none()));
            }
            // the reader may skip records it cannot time (overwrite)
            *lost_pending += visible.iter().flatten().count() as u64;
            visible.clear();
        }
        Some((gts, gdata, glost)) => {
            // candidates: records equal to what was read (several
            // may be identical); pick the one consistent with
            // `lost`, and in producer mode it must be the first
            let recs: Vec<(usize, &Rec)> = visible
                .iter()
                .enumerate()
                .filter_map(|(i, r)| r.as_ref().map(|r| (i, r)))
                .collect();
            let pick = recs
                .iter()
                .enumerate()
                .filter(|(_, (_, r))| r.ts == gts && r.data == gdata)
                .find(|(k, _)| !overwrite || *k as u64 + *lost_pending == glost)
                .map(|(k, (i, _))| (k as u64, *i));
            let Some((removed, idx)) = pick else {
                return Err(TestCaseError::fail(format!(
                    "read ({gts}, {gdata:?}, lost {glost}) not consistent with model"
                )));
            };
            if !overwrite {
                prop_assert_eq!(removed, 0, "producer mode skipped a record");
            }
            visible.drain(..=idx);
            prop_assert_eq!(glost, removed + *lost_pending);
            *lost_pending = 0;
        }
    }
    Ok(())
}

fn run(mode: Mode, size: usize, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let b = buf(size, mode);
    let size = size as u64;
    let overwrite = mode == Mode::Overwrite;
    // reservation-ordered records not yet published
    let mut inflight: Vec<(Rec, State)> = Vec::new();
    let mut open: Vec<(
        Slot<'_, 'static, Box<[oprofile_ringbuf::atomics::AtomicU64]>>,
        u64,
    )> = Vec::new();
    // published records; `None` = padding ghost (upper bound on space use)
    let mut visible: VecDeque<Option<Rec>> = VecDeque::new();
    let ghost_words: VecDeque<u64> = VecDeque::new();
    let mut lost_pending = 0u64;
    let mut attempts = 0u64;
    let mut next_id = 0u64;
    let mut ts = 1_000_000u64;
    let mut enabled = true;

    let publish = |inflight: &mut Vec<(Rec, State)>, visible: &mut VecDeque<Option<Rec>>| {
        if inflight.iter().any(|(_, s)| matches!(s, State::Open)) {
            return;
        }
        for (r, s) in inflight.drain(..) {
            match s {
                State::Committed => visible.push_back(Some(r)),
                _ => visible.push_back(None),
            }
        }
    };

    for op in ops {
        match op {
            Op::Reserve { len, time, then } => {
                ts = match time {
                    Time::Same => ts,
                    Time::Small(d) | Time::Big(d) => ts.wrapping_add(d),
                    Time::Back(d) => ts.wrapping_sub(d),
                    Time::Abs(t) => t,
                };
                attempts += 1;
                let id = next_id;
                next_id += 1;
                let data = payload(id, len);
                // words possibly in use (upper/lower bounds)
                let (mut hi, mut lo) = (0u64, 0u64);
                for r in visible.iter().flatten() {
                    hi += 2 + words(r.data.len());
                    lo += 1 + words(r.data.len());
                }
                for (r, st) in &inflight {
                    hi += 2 + words(r.data.len());
                    if !matches!(st, State::Discarded) {
                        lo += 1 + words(r.data.len());
                    }
                }
                hi += visible.iter().filter(|r| r.is_none()).count() as u64 * (2 + 5);
                match b.reserve(len, ts) {
                    Ok(mut slot) => {
                        prop_assert!(enabled && open.len() < MAX_NESTING);
                        if !overwrite {
                            prop_assert!(lo + 1 + words(len) <= size, "reserve beyond capacity");
                        }
                        prop_assert!(slot.write_bytes(0, &data));
                        inflight.push((Rec { id, ts, data }, State::Open));
                        match then {
                            0 => {
                                slot.commit();
                                inflight.last_mut().unwrap().1 = State::Committed;
                            }
                            1 => {
                                slot.discard();
                                inflight.last_mut().unwrap().1 = State::Discarded;
                            }
                            _ => open.push((slot, id)),
                        }
                        publish(&mut inflight, &mut visible);
                    }
                    Err(ReserveError::Disabled) => prop_assert!(!enabled),
                    Err(ReserveError::Nested) => {
                        prop_assert!(open.len() >= MAX_NESTING);
                        lost_pending += 1;
                    }
                    Err(ReserveError::Full) => {
                        prop_assert!(enabled && open.len() < MAX_NESTING);
                        if overwrite {
                            prop_assert!(
                                !open.is_empty(),
                                "overwrite mode only fails when blocked"
                            );
                        } else {
                            prop_assert!(hi + 2 + words(len) > size, "spurious Full");
                        }
                        lost_pending += 1;
                    }
                    Err(ReserveError::TooLarge) => {
                        prop_assert!(2 + words(len) > size);
                        lost_pending += 1;
                    }
                }
                let _ = &ghost_words;
            }
            Op::Close { idx, commit } => {
                if open.is_empty() {
                    continue;
                }
                let i = open.len() - 1 - idx % open.len();
                let (slot, id) = open.remove(i);
                let entry = inflight.iter_mut().find(|(r, _)| r.id == id).unwrap();
                if commit {
                    slot.commit();
                    entry.1 = State::Committed;
                } else {
                    slot.discard();
                    entry.1 = State::Discarded;
                }
                publish(&mut inflight, &mut visible);
            }
            Op::Consume => {
                let got = read(&b);
                check_read(got, overwrite, &mut visible, &mut lost_pending)?;
            }
            Op::ConsumeBatch(max) => {
                let got = read_batch(&b, max).unwrap_or_default();
                let all = got.len() < max;
                for r in got {
                    check_read(Some(r), overwrite, &mut visible, &mut lost_pending)?;
                }
                if all {
                    // the batch stopped by itself: it read (or skipped)
                    // everything committed, as a read finding nothing would
                    check_read(None, overwrite, &mut visible, &mut lost_pending)?;
                }
            }
            Op::Peek => {
                let mut out = [0u8; 64];
                let front = visible.iter().flatten().next().cloned();
                match b.peek(&mut out) {
                    Ok(info) => {
                        if !overwrite {
                            let f = front.unwrap();
                            prop_assert_eq!(info.ts, f.ts);
                            prop_assert_eq!(&out[..info.len], &f.data[..]);
                        }
                    }
                    Err(ReadError::Empty) => {
                        if !overwrite {
                            prop_assert!(front.is_none());
                        }
                    }
                    Err(e) => prop_assert!(false, "peek {:?}", e),
                }
            }
            Op::Iter => {
                let mut it = b.iter().unwrap();
                let mut out = [0u8; 64];
                let mut got = Vec::new();
                while let Some(info) = it.next_into(&mut out) {
                    got.push(Rec {
                        id: 0,
                        ts: info.ts,
                        data: out[..info.len].to_vec(),
                    });
                }
                let model: Vec<Rec> = visible
                    .iter()
                    .flatten()
                    .map(|r| Rec { id: 0, ..r.clone() })
                    .collect();
                if overwrite {
                    // a suffix of the model (older ones may be unreadable)
                    prop_assert!(model.ends_with(&got));
                } else {
                    prop_assert_eq!(got, model);
                }
            }
            Op::Enable(on) => {
                b.set_enabled(on).unwrap();
                enabled = on;
            }
        }
    }
    // close everything still open, innermost first
    while let Some((slot, id)) = open.pop() {
        slot.commit();
        inflight.iter_mut().find(|(r, _)| r.id == id).unwrap().1 = State::Committed;
    }
    publish(&mut inflight, &mut visible);
    prop_assert!(!b.writers_active());
    let s = b.stats();
    prop_assert_eq!(
        attempts,
        s.committed + s.discarded + s.dropped_full + s.dropped_disabled + s.commit_overrun
    );
    prop_assert_eq!(s.committed, s.read + s.entries + s.overrun);
    let rest = drain(&b);
    let s2 = b.stats();
    // in overwrite mode the reader may have to skip records it cannot time
    // (after a lap, up to the next sync record); they count as overrun
    prop_assert_eq!(rest.len() as u64 + (s2.overrun - s.overrun), s.entries);
    prop_assert_eq!(s2.entries, 0);
    if !overwrite {
        prop_assert_eq!(s2.overrun, 0);
    }
    let model: Vec<(u64, Vec<u8>)> = visible
        .into_iter()
        .flatten()
        .map(|r| (r.ts, r.data))
        .collect();
    let rest: Vec<(u64, Vec<u8>)> = rest.into_iter().map(|r| (r.0, r.1)).collect();
    if overwrite {
        prop_assert!(model.ends_with(&rest));
    } else {
        prop_assert_eq!(rest, model);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn producer_consumer_matches_model(size in prop_oneof![Just(8usize), Just(16), Just(64)],
                                       ops in proptest::collection::vec(op(), 1..200)) {
        run(Mode::ProducerConsumer, size, ops)?;
    }

    #[test]
    fn overwrite_matches_model(size in prop_oneof![Just(8usize), Just(16), Just(64)],
                               ops in proptest::collection::vec(op(), 1..200)) {
        run(Mode::Overwrite, size, ops)?;
    }
}
