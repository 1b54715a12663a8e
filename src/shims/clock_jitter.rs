// SPDX-License-Identifier: GPL-2.0

//! Jittered periods for the clock events (`cpu-clock`, `task-clock`): each
//! interval drawn uniformly within an eighth of the period asked for, so
//! that the samples cannot stay in step with the scheduler tick.
//!
//! perf's clock events are an hrtimer forwarded by exactly the period: the
//! samples keep the phase, against the tick (also a fixed-period hrtimer),
//! of the moment the counter started. At 1 kHz with `HZ=250` every fourth
//! sample comes at the same distance after a tick; where that distance is
//! shorter than what the tick leaves to do on its way out (softirqs, the
//! preemption check), those samples all land there, and the profile shows
//! the interrupted program in the kernel. In the test VM the share of a
//! busy loop's samples in kernel mode went from 2 to 27 % with the start
//! time, perf's own minimal record alike (`Documentation/benchmarks.md`,
//! "Samples in step with the tick"). Drawn intervals move the phase by a
//! random walk: about 2.3 ms after 1,000 samples, so within a few seconds
//! the samples fall at every phase of the tick and its work gets its true
//! share. The mean interval stays the period asked for, and every sample
//! still stands for that period (perf's `last_period`, which the stream's
//! SAMPLE records carry, is left as it is).
//!
//! The overflow handler runs in the hrtimer's hard-IRQ context; the draw is
//! one atomic add and a mix (SplitMix64), no lock and no allocation.

use kernel::sync::atomic::Atomic;

use crate::shims::inline_atomic as atomic;

/// Periods below this (ns) are not jittered: perf does not fire a clock
/// event sooner than every 10 µs (`perf_swevent_hrtimer()`), which would
/// clip the shorter draws and lengthen the mean.
pub(crate) const MIN_JITTERED: u64 = 100_000;

/// Draws fall within `period / SPREAD` of the period, either side.
pub(crate) const SPREAD: u64 = 8;

/// The SplitMix64 increment (the golden ratio).
const GOLDEN: u64 = 0x9e37_79b9_7f4a_7c15;

/// A counter's source of intervals.
pub(crate) struct ClockJitter {
    /// SplitMix64's state: advanced by [`GOLDEN`] per draw, atomically, so
    /// that the handlers of one event on several CPUs (a counter bound to a
    /// task and its children) draw distinct values.
    state: Atomic<u64>,
}

impl ClockJitter {
    /// A source seeded with `seed` (any value; counters differ by it).
    pub(crate) fn new(seed: u64) -> Self {
        Self {
            state: Atomic::new(mix(seed)),
        }
    }

    /// The next interval for a clock event of `period` ns.
    pub(crate) fn next(&self, period: u64) -> u64 {
        if period < MIN_JITTERED {
            return period;
        }
        let s = atomic::fetch_add(&self.state, GOLDEN).wrapping_add(GOLDEN);
        jittered(period, mix(s))
    }
}

/// SplitMix64's output function.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The interval for `period` that the random word `r` picks: uniform in
/// `period ± period / SPREAD` (integers, both ends included, so that the
/// mean is `period`); `period` itself below [`MIN_JITTERED`].
pub(crate) fn jittered(period: u64, r: u64) -> u64 {
    if period < MIN_JITTERED {
        return period;
    }
    let half = period / SPREAD;
    // `half <= u64::MAX / 8`: no overflow; the width is at least 1.
    let width = 2 * half + 1;
    (period - half).saturating_add(r % width)
}

#[cfg(oprofile_rs_kunit)]
#[kernel::prelude::kunit_tests(oprofile_rs_clock_jitter)]
mod tests {
    use super::*;

    #[test]
    fn draws_stay_within_an_eighth_and_average_the_period() {
        let j = ClockJitter::new(1);
        let p = 1_000_000u64;
        let (mut sum, mut lo, mut hi) = (0u64, u64::MAX, 0u64);
        let n = 20_000u64;
        for _ in 0..n {
            let d = j.next(p);
            assert!(d >= p - p / SPREAD && d <= p + p / SPREAD);
            sum += d;
            lo = lo.min(d);
            hi = hi.max(d);
        }
        // The mean within 0.2 % (the draws' deviation is 7.2 % of the
        // period: 0.05 % over 20,000 of them).
        let mean = sum / n;
        assert!(mean.abs_diff(p) < p / 500);
        // Both ends reached nearly: the spread is used, not a constant.
        assert!(lo < p - p / SPREAD + p / 100 && hi > p + p / SPREAD - p / 100);
    }

    #[test]
    fn short_periods_and_every_word_are_handled() {
        let j = ClockJitter::new(7);
        assert_eq!(j.next(MIN_JITTERED - 1), MIN_JITTERED - 1);
        assert_eq!(jittered(10_000, u64::MAX), 10_000);
        // The ends, exactly, and no overflow at the largest period.
        assert_eq!(jittered(800_000, 0), 700_000);
        assert_eq!(jittered(800_000, 200_000), 900_000);
        assert_eq!(jittered(800_000, 200_001), 700_000);
        let big = jittered(u64::MAX, u64::MAX - 1);
        assert!(big >= u64::MAX - u64::MAX / SPREAD);
    }

    #[test]
    fn two_sources_differ() {
        let (a, b) = (ClockJitter::new(1), ClockJitter::new(2));
        let same = (0..64)
            .filter(|_| a.next(1_000_000) == b.next(1_000_000))
            .count();
        assert!(same < 4);
    }
}
