// SPDX-License-Identifier: GPL-2.0

//! Unit and property tests of the snapshot planner (`src/path/snapshot_plan.rs`):
//! the newest named records that fit, COMM restated, merged by time.

use oprofile_snapshot_plan::{next_merged, plan, CpuPlan, Staged};
use proptest::prelude::*;

#[derive(Clone, Copy, Debug)]
struct Rec {
    bytes: usize,
    time: u64,
    comm: bool,
}

#[derive(Clone, Debug, Default)]
struct Cpu(Vec<Rec>);

impl Staged for Cpu {
    fn count(&self) -> usize {
        self.0.len()
    }
    fn bytes(&self, i: usize) -> usize {
        self.0[i].bytes
    }
    fn time(&self, i: usize) -> u64 {
        self.0[i].time
    }
    fn is_comm(&self, i: usize) -> bool {
        self.0[i].comm
    }
}

fn s(time: u64) -> Rec {
    Rec {
        bytes: 48,
        time,
        comm: false,
    }
}

fn c(time: u64) -> Rec {
    Rec {
        bytes: 40,
        time,
        comm: true,
    }
}

/// Plans and merges: the plans (before the merge) and the merged order.
fn run(cpus: &[Cpu], budget: usize) -> (Vec<CpuPlan>, usize, Vec<(usize, usize)>) {
    let mut plans = vec![CpuPlan::default(); cpus.len()];
    let total = plan(cpus, budget, &mut plans, &mut || {});
    let before = plans.clone();
    let mut merged = Vec::new();
    while let Some(x) = next_merged(cpus, &mut plans) {
        merged.push(x);
        assert!(merged.len() <= 100_000, "the merge does not end");
    }
    (before, total, merged)
}

fn kept(p: &CpuPlan) -> Vec<usize> {
    p.restate.into_iter().chain(p.first..p.count).collect()
}

#[test]
fn everything_named_fits() {
    let cpus = vec![
        Cpu(vec![c(1), s(2), s(4), s(6)]),
        Cpu(vec![c(3), s(5), c(7), s(8)]),
    ];
    let (plans, total, merged) = run(&cpus, 1 << 20);
    assert_eq!(total, 40 + 3 * 48 + 40 + 48 + 40 + 48);
    assert_eq!(plans[0].first, 0);
    assert_eq!(plans[0].restate, None);
    assert_eq!(plans[0].dropped(), 0);
    assert_eq!(plans[1].records(), 4);
    let times: Vec<u64> = merged.iter().map(|&(c, i)| cpus[c].time(i)).collect();
    assert_eq!(times, vec![1, 2, 3, 4, 5, 6, 7, 8]);
}

#[test]
fn nameless_prefix_is_dropped() {
    // The COMM of the first two samples was overwritten in the ring.
    let cpus = vec![Cpu(vec![s(1), s(2), c(3), s(4)]), Cpu(vec![s(5), s(6)])];
    let (plans, total, merged) = run(&cpus, 1 << 20);
    assert_eq!(plans[0].first, 2);
    assert_eq!(plans[0].dropped(), 2);
    assert_eq!(plans[0].records(), 2);
    // No COMM at all: nothing of that CPU is named.
    assert_eq!(plans[1].named, 2);
    assert_eq!(plans[1].records(), 0);
    assert_eq!(plans[1].dropped(), 2);
    assert_eq!(total, 40 + 48);
    assert_eq!(merged, vec![(0, 2), (0, 3)]);
}

#[test]
fn cut_restates_the_comm() {
    // Room for the two newest samples and one COMM: CPU 0's cut falls after
    // its COMM, which is kept in front (counted in the budget).
    let cpus = vec![Cpu(vec![c(1), s(2), s(3), s(10), s(11)])];
    let (plans, total, merged) = run(&cpus, 40 + 2 * 48);
    assert_eq!(plans[0].first, 3);
    assert_eq!(plans[0].restate, Some(0));
    assert_eq!(plans[0].records(), 3);
    assert_eq!(plans[0].dropped(), 2);
    assert_eq!(total, 40 + 2 * 48);
    assert_eq!(merged, vec![(0, 0), (0, 3), (0, 4)]);
    // One byte less: only one sample (and its COMM).
    let (plans, total, _) = run(&cpus, 40 + 2 * 48 - 1);
    assert_eq!((plans[0].first, plans[0].restate, total), (4, Some(0), 88));
}

#[test]
fn newest_across_cpus_first() {
    // CPU 1's records are newer: they are kept before CPU 0's.
    let cpus = vec![Cpu(vec![c(1), s(2), s(3)]), Cpu(vec![c(10), s(11), s(12)])];
    let (plans, total, _) = run(&cpus, 40 + 2 * 48 + 48);
    assert_eq!(plans[1].records(), 3);
    assert_eq!(plans[0].records(), 0);
    assert_eq!(total, 136);
    // Nothing fits.
    let (plans, total, merged) = run(&cpus, 47);
    assert_eq!(total, 0);
    assert!(merged.is_empty());
    assert_eq!(plans[0].dropped() + plans[1].dropped(), 6);
}

fn cpus_strategy(monotone: bool) -> impl Strategy<Value = Vec<Cpu>> {
    let rec = (0usize..6, 0u64..50, prop::bool::weighted(0.2));
    prop::collection::vec(prop::collection::vec(rec, 0..40), 1..6).prop_map(move |v| {
        v.into_iter()
            .map(|recs| {
                let mut t = 0u64;
                Cpu(recs
                    .into_iter()
                    .map(|(w, dt, comm)| {
                        t += dt;
                        Rec {
                            bytes: 32 + 8 * w,
                            time: if monotone { t } else { dt },
                            comm,
                        }
                    })
                    .collect())
            })
            .collect()
    })
}

/// The invariants that hold whatever the times.
fn check_common(
    cpus: &[Cpu],
    budget: usize,
    plans: &[CpuPlan],
    total: usize,
    merged: &[(usize, usize)],
) {
    let mut sum = 0;
    for (s, p) in cpus.iter().zip(plans) {
        assert_eq!(p.count, s.count());
        assert_eq!(p.records() + p.dropped(), s.count());
        assert!(p.first >= p.named && p.first <= p.count);
        assert_eq!(
            p.named,
            (0..s.count()).find(|&i| s.is_comm(i)).unwrap_or(s.count())
        );
        match p.restate {
            Some(j) => {
                assert!(p.first < p.count && !s.is_comm(p.first));
                assert!(j < p.first && s.is_comm(j));
                assert!(
                    (j + 1..p.first).all(|k| !s.is_comm(k)),
                    "not the latest COMM"
                );
            }
            None => assert!(p.first == p.count || s.is_comm(p.first)),
        }
        sum += kept(p).iter().map(|&i| s.bytes(i)).sum::<usize>();
    }
    assert_eq!(sum, total);
    assert!(total <= budget);
    // The merge: each CPU's kept records, in their order, each once.
    for (c, p) in plans.iter().enumerate() {
        let got: Vec<usize> = merged.iter().filter(|m| m.0 == c).map(|m| m.1).collect();
        assert_eq!(got, kept(p), "cpu {c}");
        // Every record of the snapshot is named by a COMM of its CPU before it.
        if let Some(&i0) = got.first() {
            assert!(cpus[c].is_comm(i0), "cpu {c}: the first record is no COMM");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn newest_named_records_that_fit(cpus in cpus_strategy(true), frac in 0.0f64..1.2) {
        let all: usize = cpus.iter().map(|c| c.0.iter().map(|r| r.bytes).sum::<usize>()).sum();
        let budget = (all as f64 * frac) as usize;
        let (plans, total, merged) = run(&cpus, budget);
        check_common(&cpus, budget, &plans, total, &merged);
        // Merged by time.
        let times: Vec<u64> = merged.iter().map(|&(c, i)| cpus[c].time(i)).collect();
        prop_assert!(times.windows(2).all(|w| w[0] <= w[1]), "not in time order: {times:?}");
        // Newest: every named record dropped is older (time, cpu, index)
        // than every record kept in place.
        let key = |c: usize, i: usize| (cpus[c].time(i), c, i);
        let kept_min = plans.iter().enumerate()
            .flat_map(|(c, p)| (p.first..p.count).map(move |i| (c, i)))
            .map(|(c, i)| key(c, i)).min();
        let dropped: Vec<_> = plans.iter().enumerate()
            .flat_map(|(c, p)| (p.named..p.first).map(move |i| (c, i)))
            .collect();
        if let Some(m) = kept_min {
            for &(c, i) in &dropped {
                prop_assert!(key(c, i) < m, "dropped {:?} is newer than kept {:?}", key(c, i), m);
            }
        }
        // As many as fit: the newest dropped one would not.
        if let Some(&(c, i)) = dropped.iter().max_by_key(|&&(c, i)| key(c, i)) {
            let s = &cpus[c];
            let p = &plans[c];
            let old = p.restate.map_or(0, |j| s.bytes(j));
            let new = if s.is_comm(i) { 0 } else {
                (p.named..i).rev().find(|&j| s.is_comm(j)).map_or(0, |j| s.bytes(j))
            };
            prop_assert!(total - old + s.bytes(i) + new > budget, "record {c}/{i} would fit");
        }
        // With room for everything, everything named is kept.
        if budget >= all {
            prop_assert!(plans.iter().all(|p| p.first == p.named && p.restate.is_none()));
        }
    }

    #[test]
    fn any_times_keep_the_invariants(cpus in cpus_strategy(false), frac in 0.0f64..1.2) {
        let all: usize = cpus.iter().map(|c| c.0.iter().map(|r| r.bytes).sum::<usize>()).sum();
        let budget = (all as f64 * frac) as usize;
        let (plans, total, merged) = run(&cpus, budget);
        check_common(&cpus, budget, &plans, total, &merged);
    }
}
