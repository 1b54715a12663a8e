// SPDX-License-Identifier: GPL-2.0

//! The profiler's counters by (CPU, event index), and each CPU's state as
//! the CPU hotplug callbacks left it for the work that makes and releases
//! the counters of perf's task-context software events outside the hotplug
//! lock (see `profiler.rs`).
//!
//! The table only decides; it never makes or releases a counter itself
//! (dropping one is releasing it): what it hands back, the caller drops
//! where that is allowed. The rule it keeps: a counter of a task-context
//! software event ([`HotplugCounter::made_outside_hotplug`]) is never
//! handed back to an `offline` callback, which runs under the hotplug lock.
//! It also keeps the counters standing still while recording is off
//! (`tracing_on=0`): [`CounterTable::set_running`] stops or starts every
//! live counter, and a counter that joins the table takes their state as
//! it joins, so that an idle module interrupts no CPU.
//! Its KUnit suite plays the hotplug interleavings with fake counters.

use kernel::prelude::*;

use crate::format::MAX_EVENTS;

/// What the table needs to know of a counter.
pub(crate) trait HotplugCounter {
    /// Whether it must be made and released outside the CPU hotplug lock.
    fn made_outside_hotplug(&self) -> bool;
    /// Starts (`on`) or stops it (process context; it may sleep).
    fn set_enabled(&self, on: bool);
}

impl HotplugCounter for crate::shims::perf::Counter {
    fn made_outside_hotplug(&self) -> bool {
        crate::shims::perf::Counter::made_outside_hotplug(self)
    }

    fn set_enabled(&self, on: bool) {
        crate::shims::perf::Counter::set_enabled(self, on)
    }
}

/// The counters by (CPU, event index), at `cpu * MAX_EVENTS + index`, and
/// each CPU's state as the hotplug callbacks left it for the work.
///
/// INVARIANT: a slot's `live` holds a counter that `made_outside_hotplug`
/// only while its `dead` is empty, so `went_down` always finds `dead` free
/// for it (`fill` refuses otherwise, and `wants` does not ask for one).
pub(crate) struct CounterTable<C> {
    /// `Some` while the CPU is up and samples the event.
    live: KVVec<Option<C>>,
    /// Counters of perf's task-context software events of a CPU that went
    /// down, waiting for the work to release them.
    dead: KVVec<Option<C>>,
    /// Per CPU: bumped by each of its `online` and `offline` callbacks, so
    /// that the work can tell a counter made for an earlier stay up; odd
    /// between `online` and `offline` (the CPU is up), even otherwise.
    epoch: KVVec<u32>,
    /// Whether the live counters run (recording on) or stand still.
    running: bool,
}

impl<C: HotplugCounter> CounterTable<C> {
    /// An empty table for `n` CPUs, every CPU down.
    pub(crate) fn new(n: usize) -> Result<Self> {
        let mut live = KVVec::with_capacity(n * MAX_EVENTS, GFP_KERNEL)?;
        let mut dead = KVVec::with_capacity(n * MAX_EVENTS, GFP_KERNEL)?;
        for _ in 0..n * MAX_EVENTS {
            live.push(None, GFP_KERNEL)?;
            dead.push(None, GFP_KERNEL)?;
        }
        Ok(Self {
            live,
            dead,
            epoch: KVVec::from_elem(0, n, GFP_KERNEL)?,
            running: true,
        })
    }

    /// Starts (`on`) or stops every live counter, and those that join the
    /// table from now on: stopped, a counter does not interrupt its CPU
    /// (recording off costs nothing). The caller holds the table's lock
    /// across the call, so a counter a hotplug callback or the work adds
    /// meanwhile gets the same state.
    pub(crate) fn set_running(&mut self, on: bool) {
        self.running = on;
        for c in self.live.iter().flatten() {
            c.set_enabled(on);
        }
    }

    /// Whether the live counters run (see [`CounterTable::set_running`]):
    /// a maker's hint, for a counter made stopped while they stand still.
    pub(crate) fn running(&self) -> bool {
        self.running
    }

    /// How many counters are live.
    pub(crate) fn live_count(&self) -> usize {
        self.live.iter().flatten().count()
    }

    /// `cpu` came up (its `online` callback): a new epoch.
    pub(crate) fn came_up(&mut self, cpu: u32) {
        // The next odd epoch (a new one even if `cpu` was up already).
        if let Some(e) = self.epoch.get_mut(cpu as usize) {
            *e = e.wrapping_add(1) | 1;
        }
    }

    /// Puts `c`, a counter the `online` callback made itself (a clock or a
    /// PMU event), into the slot of (`cpu`, `i`). Returns it if that is not
    /// such a counter or the slot is taken.
    pub(crate) fn set_live(&mut self, cpu: u32, i: usize, c: C) -> Option<C> {
        if c.made_outside_hotplug() {
            return Some(c);
        }
        let running = self.running;
        match self.live.get_mut(cpu as usize * MAX_EVENTS + i) {
            Some(slot) if slot.is_none() => {
                // It takes the live counters' state, whichever it was made
                // with (`running` may have changed since its maker read it).
                c.set_enabled(running);
                *slot = Some(c);
                None
            }
            _ => Some(c),
        }
    }

    /// `cpu` goes down (its `offline` callback): its counters other than
    /// the software events' are returned (for the caller to release), those
    /// are moved to `dead` for the work.
    pub(crate) fn went_down(&mut self, cpu: u32) -> [Option<C>; MAX_EVENTS] {
        let c = cpu as usize;
        // The next even epoch.
        if let Some(e) = self.epoch.get_mut(c) {
            *e = (*e | 1).wrapping_add(1);
        }
        let mut taken: [Option<C>; MAX_EVENTS] = Default::default();
        for (i, t) in taken.iter_mut().enumerate() {
            let k = c * MAX_EVENTS + i;
            let Some(counter) = self.live.get_mut(k).and_then(Option::take) else {
                continue;
            };
            if counter.made_outside_hotplug() {
                // By the invariant the slot is free.
                match self.dead.get_mut(k) {
                    Some(d) if d.is_none() => *d = Some(counter),
                    // Not reached (see the invariant); released by the
                    // caller rather than leaked, at the risk `profiler.rs`
                    // names.
                    _ => *t = Some(counter),
                }
            } else {
                *t = Some(counter);
            }
        }
        taken
    }

    /// Takes the dead counter at index `k` (`cpu * MAX_EVENTS + i`), for
    /// the work to release.
    pub(crate) fn take_dead(&mut self, k: usize) -> Option<C> {
        self.dead.get_mut(k).and_then(Option::take)
    }

    /// The epoch of `cpu`, if it is up.
    pub(crate) fn epoch_of(&self, cpu: u32) -> Option<u32> {
        self.epoch.get(cpu as usize).copied().filter(|e| e & 1 == 1)
    }

    /// The epoch of `cpu` if it is up and lacks the counter of index `i`,
    /// and the slot's previous counter has been released (else the next run
    /// of the work, queued by the callback that filled `dead`, releases it
    /// first).
    pub(crate) fn wants(&self, cpu: u32, i: usize) -> Option<u32> {
        let k = cpu as usize * MAX_EVENTS + i;
        match (self.live.get(k), self.dead.get(k)) {
            (Some(None), Some(None)) => self.epoch_of(cpu),
            _ => None,
        }
    }

    /// Moves `c`, made by the work for `cpu` at `epoch`, into its slot if
    /// the CPU has stayed up since and the slot is free (its dead counter
    /// released: the invariant); else returns it for release.
    pub(crate) fn fill(&mut self, cpu: u32, i: usize, epoch: u32, c: C) -> Option<C> {
        if self.epoch_of(cpu) != Some(epoch) {
            return Some(c);
        }
        let k = cpu as usize * MAX_EVENTS + i;
        if !matches!(self.dead.get(k), Some(None)) {
            return Some(c);
        }
        let running = self.running;
        match self.live.get_mut(k) {
            Some(slot) if slot.is_none() => {
                // It takes the live counters' state, whichever it was made
                // with (`running` may have changed since its maker read it).
                c.set_enabled(running);
                *slot = Some(c);
                None
            }
            _ => Some(c),
        }
    }
}

#[cfg(oprofile_rs_kunit)]
#[kunit_tests(oprofile_rs_counter_table)]
mod tests {
    use super::*;

    /// A counter of a task-context software event (`.0`: `true`) or a
    /// clock, running or not (`.1`).
    struct Fake(bool, core::cell::Cell<bool>);

    impl HotplugCounter for Fake {
        fn made_outside_hotplug(&self) -> bool {
            self.0
        }

        fn set_enabled(&self, on: bool) {
            self.1.set(on);
        }
    }

    /// A new counter (running, as perf makes them here).
    fn fake(soft: bool) -> Fake {
        Fake(soft, core::cell::Cell::new(true))
    }

    /// What an `offline` callback would release itself: only clocks.
    fn released_in_callback(taken: &[Option<Fake>; MAX_EVENTS]) -> (usize, usize) {
        let soft = taken.iter().flatten().filter(|c| c.0).count();
        let clocks = taken.iter().flatten().filter(|c| !c.0).count();
        (soft, clocks)
    }

    #[test]
    fn a_clock_is_released_by_the_callback_a_software_counter_by_the_work() {
        let Ok(mut t) = CounterTable::<Fake>::new(2) else {
            return;
        };
        t.came_up(1);
        assert!(t.set_live(1, 0, fake(false)).is_none());
        // The callback does not take a software counter itself.
        assert!(t.set_live(1, 1, fake(true)).is_some());
        let e = t.wants(1, 1);
        assert!(e.is_some());
        assert!(t.wants(1, 0).is_none()); // The clock's slot is taken.
        assert!(e.is_some_and(|e| t.fill(1, 1, e, fake(true)).is_none()));
        assert_eq!(t.live_count(), 2);
        let taken = t.went_down(1);
        assert_eq!(released_in_callback(&taken), (0, 1));
        assert!(t.take_dead(MAX_EVENTS + 1).is_some());
        assert!(t.take_dead(MAX_EVENTS + 1).is_none());
        assert_eq!(t.live_count(), 0);
        // Down: the work wants nothing for it.
        assert!(t.wants(1, 1).is_none());
    }

    #[test]
    fn a_counter_made_for_an_earlier_stay_up_is_refused() {
        let Ok(mut t) = CounterTable::<Fake>::new(1) else {
            return;
        };
        t.came_up(0);
        let e = t.wants(0, 0);
        assert!(e.is_some());
        let Some(e) = e else {
            return;
        };
        // The work makes the counter; meanwhile the CPU goes down and up.
        let _ = t.went_down(0);
        t.came_up(0);
        assert!(t.fill(0, 0, e, fake(true)).is_some()); // A stale epoch.
        assert!(t.wants(0, 0).is_some());
    }

    /// The interleaving `89f1fff` mends: CPU down, up, and down again while
    /// one run of the work is past its release of the dead counters and on
    /// its way to the slot. Before, the run filled the slot with `dead`
    /// still taken, and the second `offline` released a software counter
    /// inside the hotplug callback.
    #[test]
    fn down_up_down_while_the_work_runs_never_releases_a_software_counter_in_a_callback() {
        let Ok(mut t) = CounterTable::<Fake>::new(1) else {
            return;
        };
        t.came_up(0);
        let e = t.wants(0, 0);
        assert!(e.is_some_and(|e| t.fill(0, 0, e, fake(true)).is_none()));
        // Down: the live counter goes to `dead`, a work run is queued.
        assert_eq!(released_in_callback(&t.went_down(0)), (0, 0));
        // Up again before that run released it; a run already past its
        // release loop asks for the slot now.
        t.came_up(0);
        assert!(t.wants(0, 0).is_none()); // Dead not yet released.
        let e = t.epoch_of(0);
        assert!(e.is_some_and(|e| t.fill(0, 0, e, fake(true)).is_some()));
        // Down again: nothing for the callback to release.
        assert_eq!(released_in_callback(&t.went_down(0)), (0, 0));
        // The queued run releases the dead counter; up again, it is wanted.
        assert!(t.take_dead(0).is_some());
        t.came_up(0);
        assert!(t.wants(0, 0).is_some());
    }

    /// A fixed-seed walk over the callbacks and the work's steps, in any order:
    /// no callback ever releases a software counter, and no counter is
    /// lost (every one made is live, dead, or handed back).
    #[test]
    fn random_interleavings_keep_software_counters_out_of_the_callbacks() {
        let Ok(mut t) = CounterTable::<Fake>::new(2) else {
            return;
        };
        let mut seed: u32 = 0x2545_f491;
        let mut made = 0usize;
        let mut handed_back = 0usize;
        // A run of the work in flight: (cpu, index, epoch) it made a
        // counter for and has not filled yet.
        let mut in_flight: Option<(u32, usize, u32)> = None;
        for _ in 0..20_000 {
            seed ^= seed << 13;
            seed ^= seed >> 17;
            seed ^= seed << 5;
            let cpu = (seed >> 8) & 1;
            let i = (seed >> 9) as usize % 2;
            match seed % 5 {
                0 => t.came_up(cpu),
                1 => {
                    let taken = t.went_down(cpu);
                    let (soft, clocks) = released_in_callback(&taken);
                    assert_eq!(soft, 0); // No callback releases one.
                    handed_back += clocks;
                }
                2 => {
                    if t.take_dead(cpu as usize * MAX_EVENTS + i).is_some() {
                        handed_back += 1;
                    }
                }
                3 => {
                    if in_flight.is_none() {
                        if let Some(e) = t.wants(cpu, i) {
                            made += 1;
                            in_flight = Some((cpu, i, e));
                        }
                    }
                }
                _ => {
                    if let Some((c, k, e)) = in_flight.take() {
                        if t.fill(c, k, e, fake(true)).is_some() {
                            handed_back += 1;
                        }
                    }
                }
            }
        }
        let dead = (0..2 * MAX_EVENTS)
            .filter(|&k| t.take_dead(k).is_some())
            .count();
        let live = t.live_count();
        let pending = usize::from(in_flight.is_some());
        assert_eq!(made, live + dead + handed_back + pending); // None lost.
    }

    /// Recording off: every live counter stands still, and so does one a
    /// callback or the work adds while it is off; back on, all run.
    #[test]
    fn counters_stand_still_while_recording_is_off() {
        let Ok(mut t) = CounterTable::<Fake>::new(2) else {
            return;
        };
        t.came_up(0);
        assert!(t.set_live(0, 0, fake(false)).is_none());
        t.set_running(false);
        assert!(!t.running());
        // A CPU comes up while off: its clock joins stopped.
        t.came_up(1);
        assert!(t.set_live(1, 0, fake(false)).is_none());
        // The work fills a software event's slot while off: stopped too.
        let e = t.wants(1, 1);
        assert!(e.is_some_and(|e| t.fill(1, 1, e, fake(true)).is_none()));
        let states = |t: &CounterTable<Fake>| -> [Option<bool>; 3] {
            [
                t.live.first().and_then(|c| c.as_ref()).map(|c| c.1.get()),
                t.live
                    .get(MAX_EVENTS)
                    .and_then(|c| c.as_ref())
                    .map(|c| c.1.get()),
                t.live
                    .get(MAX_EVENTS + 1)
                    .and_then(|c| c.as_ref())
                    .map(|c| c.1.get()),
            ]
        };
        assert_eq!(states(&t), [Some(false), Some(false), Some(false)]);
        t.set_running(true);
        assert_eq!(states(&t), [Some(true), Some(true), Some(true)]);
        // On: a counter joins running (as made).
        let taken = t.went_down(0);
        assert_eq!(released_in_callback(&taken), (0, 1));
        t.came_up(0);
        assert!(t.set_live(0, 0, fake(false)).is_none());
        assert_eq!(states(&t)[0], Some(true));
    }
}
