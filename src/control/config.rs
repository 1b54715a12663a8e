// SPDX-License-Identifier: GPL-2.0

//! Runtime configuration changes (oprofilefs's control files): the text a
//! debugfs file write or `OPROFILE_RS_IOC_SET_CONFIG` carries, parsed and
//! checked into a new [`Config`], and [`Profiler::configure`], which applies
//! it all or nothing while recording is off.
//!
//! The text is one or more `key=value` words separated by spaces, tabs or
//! newlines, keys as the debugfs files ([`KEYS`]), each at most once, values
//! in the parameters' syntax. A debugfs file's write is its one value (a
//! trailing newline allowed). What is not said stays, except that a new
//! `event` list resets every period and frequency not given with it to the
//! event's default, and a period given (non-zero) for an event puts it in
//! period mode unless a frequency is given for it in the same change (and
//! the other way round; see [`event_list`]).
//!
//! Errors: `EINVAL` (nothing changed) for a key, a value or a combination
//! that is not valid; `EBUSY` (nothing changed) while `tracing_on` is 1, and
//! for a change the module cannot make now without losing recorded data: a
//! new `buffer_size` while the device's reader has the event buffer mapped
//! or is copying from it, or too small for what waits in it; in the flight
//! recorder (`mode=overwrite`) event, period, frequency, excluded-mode,
//! `cgroup` or `mode` changes while the CPU buffers hold records not yet snapshotted
//! (take a snapshot first; a `cpu_buffer_size` change keeps them, as many
//! of the newest as fit, the others counted overwritten); in consume mode a
//! `mode` change while records wait to be synced that still find no room
//! (a switch first syncs them, as a flush does); and when the event buffer
//! has no room for the CONFIG record (read the stream first).
//!
//! `mode` switches between consume mode and the flight recorder at run
//! time: the CPU buffers change mode, the periodic syncs stop or start, the
//! staging areas of the mode left are freed and those of the other one
//! allocated (before anything changes), and the stream's CONFIG record says
//! which mode the records after it were recorded in. Overwrite mode needs a
//! larger `buffer_size` (a snapshot's framing): `EINVAL` below it.
//! `ENOMEM` when the new buffers cannot be allocated; `EOPNOTSUPP` when an
//! event cannot be counted on this machine.
//!
//! All or nothing: a refused change (any of the errors here) leaves every
//! key as it was (the `config` text, `GET_CONFIG`, the files), writes no
//! CONFIG record, and recording goes on (or stays off) as `tracing_on` says.
//! What can fail is prepared first: the values checked, the cgroup looked
//! up, every allocation made, the event buffer's room for the CONFIG record
//! checked. Then three steps, each all or nothing itself and undone if a
//! later one fails: the counters of the new events or modes on every online
//! CPU (and with them the CPU buffers' mode), the CPU buffers' size, the
//! event buffer (replaced) with the CONFIG record appended; then what cannot
//! fail (the filter, depths, watershed, stack copies, the settings in
//! force). The undo of a step re-makes what was there: it can fail only as
//! nothing else does after a tracing_on=0 (an allocation, a CPU buffer that
//! stays busy), and says so in the log (for the counters: nothing is
//! sampled until a change of the events or modes succeeds). A shrink of the
//! CPU buffers in overwrite mode that is undone keeps only what the smaller
//! buffers held (the others are counted overwritten), should the event
//! buffer's swap be refused after it (a reader mapped it since the check).
//!
//! The CONFIG generation is one more per change, wrapping from `u32::MAX`
//! to 0 ([`next_generation`]; `Documentation/stream-format.md`).
//!
//! `cgroup` (the filter, `cgroup.rs`) is looked up before anything changes:
//! `ENOENT` for a path or id that names no cgroup (in the writer's cgroup
//! namespace), `ENOTDIR` for a path to a file, `EOPNOTSUPP` on a kernel
//! without cgroups.

use kernel::prelude::*;

use crate::{
    control::{
        params::{self, limits, Config, Names, RecordMode},
        profiler::{Profiler, TRACING_ON},
        settings::{Settings, KEYS},
    },
    format,
    format::parse_u64,
    path::sync::{CpusReadLock, ModeStorage},
    shims::ratelimit::pr_ratelimited,
};

/// Longest text of one change (the SET ioctl's limit).
pub(crate) const MAX_TEXT: usize = 4096;

/// The values a change gives, by key (`None`: not given).
#[derive(Default)]
pub(crate) struct Changes<'a> {
    values: [Option<&'a [u8]>; KEYS.len()],
}

impl<'a> Changes<'a> {
    /// The value given for `key`.
    fn get(&self, key: &str) -> Option<&'a [u8]> {
        let i = KEYS.iter().position(|k| *k == key)?;
        self.values.get(i).copied().flatten()
    }

    /// Whether anything is given for one of `keys`.
    fn any(&self, keys: &[&str]) -> bool {
        keys.iter().any(|k| self.get(k).is_some())
    }

    /// Gives `value` for `key`: `EINVAL` for an unknown key, one given
    /// twice, or an empty value.
    pub(crate) fn set(&mut self, key: &[u8], value: &'a [u8]) -> Result {
        let Some(i) = KEYS.iter().position(|k| k.as_bytes() == key) else {
            pr_ratelimited!(
                pr_warn,
                "config: unknown key {:?} (EINVAL)\n",
                kernel::str::BStr::from_bytes(key)
            );
            return Err(EINVAL);
        };
        let slot = self.values.get_mut(i).ok_or(EINVAL)?;
        if slot.is_some() || value.is_empty() {
            pr_ratelimited!(
                pr_warn,
                "config: {} given twice or empty (EINVAL)\n",
                kernel::str::BStr::from_bytes(key)
            );
            return Err(EINVAL);
        }
        *slot = Some(value);
        Ok(())
    }

    /// Parses `key=value` words separated by white space.
    pub(crate) fn parse(text: &'a [u8]) -> Result<Self> {
        let mut ch = Changes::default();
        let mut words = 0;
        for word in text
            .split(|c| matches!(c, b' ' | b'\n' | b'\t'))
            .filter(|w| !w.is_empty())
        {
            let Some(eq) = word.iter().position(|&c| c == b'=') else {
                pr_ratelimited!(
                    pr_warn,
                    "config: {:?} is not key=value (EINVAL)\n",
                    kernel::str::BStr::from_bytes(word)
                );
                return Err(EINVAL);
            };
            let (key, value) = (
                word.get(..eq).unwrap_or(&[]),
                word.get(eq + 1..).unwrap_or(&[]),
            );
            ch.set(key, value)?;
            words += 1;
        }
        if words == 0 {
            pr_ratelimited!(pr_warn, "config: nothing to change (EINVAL)\n");
            return Err(EINVAL);
        }
        Ok(ch)
    }
}

/// A decimal number value of `key`.
fn number(key: &str, v: &[u8]) -> Result<u64> {
    parse_u64(v).ok_or_else(|| {
        pr_ratelimited!(
            pr_warn,
            "config: {key}={:?} is not a decimal number (EINVAL)\n",
            kernel::str::BStr::from_bytes(v)
        );
        EINVAL
    })
}

/// The configuration `cur` with `ch` applied, checked: `EINVAL` for
/// anything not valid (the `cgroup` key, which needs a lookup, is
/// [`Profiler::configure_changes`]'s).
pub(crate) fn changed(cur: &Config, ch: &Changes<'_>) -> Result<Config> {
    let mut c = *cur;
    if ch.any(&["event", "sample_period", "sample_freq"]) {
        let names = match ch.get("event") {
            Some(text) => params::parse_events(text)?,
            None => Names::of(&cur.events),
        };
        let periods = ch
            .get("sample_period")
            .map(|v| params::parse_values("sample_period", v))
            .transpose()?
            .flatten();
        let freqs = ch
            .get("sample_freq")
            .map(|v| params::parse_values("sample_freq", v))
            .transpose()?
            .flatten();
        c.events = params::event_list(&names, periods.as_ref(), freqs.as_ref(), Some(&cur.events))?;
    }
    if let Some(v) = ch.get("backtrace_depth") {
        c.backtrace_depth = params::check_depth(
            "backtrace_depth",
            number("backtrace_depth", v)?,
            limits::BACKTRACE_DEPTH,
        )?;
    }
    if let Some(v) = ch.get("user_backtrace_depth") {
        c.user_backtrace_depth = params::check_depth(
            "user_backtrace_depth",
            number("user_backtrace_depth", v)?,
            limits::USER_BACKTRACE_DEPTH,
        )?;
    }
    if let Some(v) = ch.get("cpu_buffer_size") {
        c.cpu_buffer_size = params::check_cpu_buffer_size(number("cpu_buffer_size", v)?)?;
    }
    if let Some(v) = ch.get("user_stack_size") {
        c.user_stack_size = params::check_user_stack_size(number("user_stack_size", v)?)?;
    }
    params::check_user_stack_room(c.cpu_buffer_size, c.user_stack_size)?;
    if let Some(v) = ch.get("user_stack_fit") {
        c.user_stack_fit = params::parse_bool("user_stack_fit", v)?;
    }
    if let Some(v) = ch.get("buffer_size") {
        c.buffer_size = params::check_buffer_size(number("buffer_size", v)?)?;
    }
    if let Some(v) = ch.get("exclude_user") {
        c.exclude_user = params::parse_bool("exclude_user", v)?;
    }
    if let Some(v) = ch.get("exclude_kernel") {
        c.exclude_kernel = params::parse_bool("exclude_kernel", v)?;
    }
    params::check_exclusions(c.exclude_user, c.exclude_kernel)?;
    if let Some(v) = ch.get("mode") {
        c.mode = params::parse_mode(v)?;
    }
    if let Some(v) = ch.get("pid") {
        let pid = number("pid", v)?;
        c.pid = u32::try_from(pid)
            .ok()
            .filter(|p| i32::try_from(*p).is_ok())
            .ok_or_else(|| {
                pr_ratelimited!(pr_warn, "config: pid={pid} is not a process id (EINVAL)\n");
                EINVAL
            })?;
    }
    match ch.get("buffer_watershed") {
        Some(v) => {
            let w = number("buffer_watershed", v)?;
            c.buffer_watershed = params::watershed(w, c.buffer_size)?;
            c.watershed_auto = w == 0;
        }
        // A default watershed follows the buffer; one given must stay below.
        None if c.watershed_auto => c.buffer_watershed = c.buffer_size / 4,
        None => c.buffer_watershed = params::watershed(c.buffer_watershed as u64, c.buffer_size)?,
    }
    Ok(c)
}

impl Profiler {
    /// Applies the change `text` (see the file's documentation), all or
    /// nothing. Serialised with the other configuration writers, `tracing_on`,
    /// `flush` and snapshots (the `control` lock).
    pub(crate) fn configure(&self, text: &[u8]) -> Result {
        let ch = Changes::parse(text)?;
        self.configure_changes(&ch)
    }

    /// Applies `ch`, all or nothing.
    ///
    /// Locking (see [`Profiler`]): `control`, then `hotplug` (the
    /// registration), both held throughout; the CPU hotplug lock is taken
    /// only inside the registration's drop and creation (the callbacks take
    /// leaf locks only, never these two), and no leaf lock is held across
    /// them.
    pub(crate) fn configure_changes(&self, ch: &Changes<'_>) -> Result {
        let _control = self.control.lock();
        if TRACING_ON.is_on() {
            pr_ratelimited!(
                pr_info,
                "config: refused while recording is on (EBUSY): write 0 to tracing_on first\n"
            );
            return Err(EBUSY);
        }
        let cur = self.settings();
        let mut new = changed(&cur.config, ch)?;
        // The cgroup filter named, looked up (a reference held) before
        // anything changes: `None` if not given, `Some(None)` for every task.
        let filter = match ch.get("cgroup") {
            Some(v) => Some(crate::path::cgroup::Cgroup::named(v)?),
            None => None,
        };
        if let Some(f) = &filter {
            new.cgroup = f.as_ref().map_or(0, |c| c.id());
        }
        if new == cur.config {
            return Ok(());
        }
        let events_changed = new.events != cur.config.events;
        let mode_changed = new.mode != cur.config.mode;
        let to_overwrite = new.mode == RecordMode::Overwrite;
        // The counters are made anew for new events and for new modes
        // excluded (perf's attributes), and around a switch of the
        // recording mode (the CPUs' periodic syncs start or stop with them).
        // And for another process profiled alone (`pid`), or none: its
        // threads get the counters instead of the CPUs (`task_counters.rs`).
        let counters_changed = events_changed
            || mode_changed
            || new.pid != cur.config.pid
            || (new.exclude_user, new.exclude_kernel)
                != (cur.config.exclude_user, cur.config.exclude_kernel);
        // The process's threads, references held, before anything changes:
        // ESRCH for no such process, E2BIG for too many threads.
        let threads = if new.pid != 0 && counters_changed {
            Some(crate::shims::task::threads(new.pid).inspect_err(|e| {
                let why = if *e == ESRCH {
                    "no such process"
                } else if *e == E2BIG {
                    "more threads than can be profiled alone (set pid=0 and filter)"
                } else {
                    "its threads cannot be listed"
                };
                pr_ratelimited!(
                    pr_info,
                    "config: pid={}: {why} (error {})\n",
                    new.pid,
                    e.to_errno()
                )
            })?)
        } else {
            None
        };
        let overwrite = self.buffers.overwrite();
        if mode_changed && !overwrite && self.buffers.cpus_hold_records() {
            // Consume mode: what waits to be synced (a LOST record that the
            // full event buffer refused at tracing_on=0, in a sync's staging
            // area) moves now if the stream was read since, as a flush would
            // move it, not only at the CPU's next periodic sync: a user who
            // read the stream and switches at once is not refused.
            self.buffers.sync_all();
            self.buffers.wake_readers();
        }
        let recorded_differently = counters_changed || new.cgroup != cur.config.cgroup;
        if (mode_changed || (overwrite && recorded_differently)) && self.buffers.cpus_hold_records()
        {
            if overwrite {
                pr_ratelimited!(
                    pr_info,
                    "config: the CPU buffers hold records of the current events and modes (EBUSY): take a snapshot first\n"
                );
            } else {
                // A LOST record that the full event buffer did not take at
                // tracing_on=0 waits in a sync's staging area.
                pr_ratelimited!(
                    pr_info,
                    "config: records wait for room in the event buffer (EBUSY): read the stream first\n"
                );
            }
            return Err(EBUSY);
        }
        let min = self.buffers.min_buffer_size(to_overwrite);
        if new.buffer_size < min {
            pr_ratelimited!(
                pr_warn,
                "config: buffer_size={} is too small for this machine's CPUs{}: at least {min} (EINVAL)\n",
                new.buffer_size,
                if to_overwrite { " in overwrite mode" } else { "" }
            );
            return Err(EINVAL);
        }
        // The buffers stay within their cap (a quarter of RAM, ENOMEM): for
        // the CPUs online and the offline ones that have buffers (a CPU
        // that comes online later is checked then).
        crate::path::buffer_memory::check(
            crate::path::buffer_memory::online_cpus().max(self.buffers.cpu_buffers()),
            new.cpu_buffer_size,
            new.buffer_size,
            to_overwrite,
        )?;
        // Everything that allocates, before anything changes.
        let new_events = if new.buffer_size != cur.config.buffer_size {
            Some(crate::path::event_buffer::EventBuffer::new(
                new.buffer_size,
            )?)
        } else {
            None
        };
        // New CPU buffers; in overwrite mode the snapshots' staging areas
        // for new CPU buffers or a switch to it; the syncs' staging areas for
        // a switch to consume mode; and what a switch back needs, should a
        // later step fail. For the CPUs that have buffers: one that gets
        // them meanwhile (it comes online) is topped up at the resize step.
        let resized = new.cpu_buffer_size != cur.config.cpu_buffer_size;
        let storages = if resized {
            Some(self.buffers.cpu_storages(new.cpu_buffer_size)?)
        } else {
            None
        };
        let mut mode_storage = if mode_changed || (to_overwrite && resized) {
            Some(
                self.buffers
                    .mode_storage(to_overwrite, new.cpu_buffer_size)?,
            )
        } else {
            None
        };
        let mut undo_storage = if mode_changed {
            Some(
                self.buffers
                    .mode_storage(overwrite, cur.config.cpu_buffer_size)?,
            )
        } else {
            None
        };
        let mut hotplug = self.hotplug.lock();
        let next = next_settings(&cur, new, |c, g| self.resolve(c, g));
        // Refused (EBUSY) before anything changes if the event buffer has
        // no room for the CONFIG record, or cannot be replaced now.
        let (_, len) = encoded(&next)?;
        self.buffers.check_swap(new_events.as_ref(), len)?;

        // The steps that can fail, each all or nothing, each undone if a
        // later one fails: the counters (and with them the mode), the CPU
        // buffers' size, the event buffer with the CONFIG record.
        // A CPU that comes online from here on gets buffers of the new size
        // (and in overwrite mode a staging area for them).
        self.buffers.set_cpu_bytes(new.cpu_buffer_size);
        if counters_changed {
            // Every counter goes (the registration's drop brings every CPU
            // down), every CPU comes up with the new events or modes (and
            // its periodic sync in consume mode).
            drop(hotplug.take());
            self.unbind_tasks();
            let mut made = Ok(());
            if mode_changed {
                if let Some(storage) = mode_storage.take() {
                    made = self.buffers.switch_mode(storage);
                }
            }
            let switched = mode_changed && made.is_ok();
            if made.is_ok() {
                self.set_counted(next);
                made = self.register().map(|r| *hotplug = Some(r));
            }
            if let (Ok(()), Some(threads)) = (&made, &threads) {
                made = self.bind_tasks(threads, &next);
            }
            if let Err(e) = made {
                pr_ratelimited!(
                    pr_warn,
                    "config: the new events or modes cannot be sampled (error {}): nothing changed\n",
                    e.to_errno()
                );
                let undo = if switched { undo_storage.take() } else { None };
                self.buffers.set_cpu_bytes(cur.config.cpu_buffer_size);
                self.restore_counters(&mut hotplug, &cur, undo);
                return Err(e);
            }
        }
        // No CPU gets its buffers (comes online) until the change is done
        // or undone: what was allocated before covers every CPU that has
        // buffers once topped up here. Released before the counters are
        // restored (the registration takes it).
        let cpus_lock = CpusReadLock::lock();
        let mut storages = storages;
        let stepped = self
            .top_up(
                storages.as_mut(),
                mode_storage.as_mut(),
                new.cpu_buffer_size,
                &cpus_lock,
            )
            .and_then(|()| storages.map(|st| self.buffers.resize_cpus(st)).transpose());
        let old_storages = match stepped {
            Ok(old) => old,
            Err(e) => {
                self.buffers.set_cpu_bytes(cur.config.cpu_buffer_size);
                drop(cpus_lock);
                if counters_changed {
                    self.restore_counters(&mut hotplug, &cur, undo_storage.take());
                }
                return Err(e);
            }
        };
        // The record stamped now: after the records a sync may have moved
        // meanwhile (a LOST record that waited, of the configuration before).
        let (rec, len) = encoded(&next)?;
        let swapped = rec
            .get(..len)
            .ok_or(EINVAL)
            .and_then(|rec| self.buffers.swap_events(new_events, rec));
        match swapped {
            // Freed outside the event buffer's lock.
            Ok(old_events) => drop(old_events),
            Err(e) => {
                // A reader mapped the event buffer or started a copy since
                // the check above.
                if let Some(old) = old_storages {
                    if self.buffers.resize_cpus(old).is_err() {
                        pr_ratelimited!(
                            pr_err,
                            "config: the CPU buffers cannot be given their old size back\n"
                        );
                    }
                }
                self.buffers.set_cpu_bytes(cur.config.cpu_buffer_size);
                drop(cpus_lock);
                if counters_changed {
                    self.restore_counters(&mut hotplug, &cur, undo_storage.take());
                }
                return Err(e);
            }
        }
        // Freed: the CPU buffers' old storage.
        drop(old_storages);

        // Nothing fails from here on.
        if let Some(ModeStorage::Overwrite(staging)) = mode_storage.take() {
            // New CPU buffers in overwrite mode, no switch: their snapshot
            // staging areas.
            self.buffers.set_snapshot_staging(staging);
        }
        drop(cpus_lock);
        if let Some(f) = filter {
            // Recording is off: the samples after the record above are the
            // new filter's.
            self.filter.set(f);
        }
        *self.settings.lock() = next;
        self.set_counted(next);
        self.buffers.set_watershed(next.config.buffer_watershed);
        self.buffers.set_depths(
            next.config.backtrace_depth,
            next.config.user_backtrace_depth,
        );
        self.buffers
            .set_user_stack(next.config.user_stack_size, next.config.user_stack_fit);
        if events_changed {
            self.buffers.reset_event_counts();
        }
        drop(hotplug);
        self.buffers.wake_readers();
        Ok(())
    }

    /// Gives the CPUs that got buffers since the change allocated its own
    /// (they came online meanwhile) their part of it: storage of the new
    /// size `bytes` if theirs is of another, and in overwrite mode a
    /// snapshot staging area for it. With the CPU hotplug lock held, so
    /// that none comes online before what this tops up is installed.
    fn top_up(
        &self,
        storages: Option<&mut KVVec<Option<crate::path::sampler::Storage>>>,
        mode_storage: Option<&mut ModeStorage>,
        bytes: usize,
        cpus_lock: &CpusReadLock,
    ) -> Result {
        if let Some(st) = storages {
            self.buffers.top_up_storages(st, bytes, cpus_lock)?;
        }
        if let Some(ModeStorage::Overwrite(staging)) = mode_storage {
            self.buffers.top_up_staging(staging, bytes, cpus_lock)?;
        }
        Ok(())
    }

    /// Undoes a configuration change's counter step: the counters of the
    /// settings in force `cur` again (every CPU brought down and up), the
    /// CPU buffers switched back to their mode with `undo` if the change
    /// switched them. `RUNNING` is untouched: recording resumes with them
    /// as `tracing_on` says. What cannot be undone (nothing but an
    /// allocation failure or a CPU buffer that stays busy can stop it) is
    /// logged: then nothing is sampled until a change of the events or
    /// modes succeeds.
    fn restore_counters(
        &self,
        hotplug: &mut Option<crate::shims::hotplug::Registration<Profiler>>,
        cur: &Settings,
        undo: Option<ModeStorage>,
    ) {
        drop(hotplug.take());
        self.unbind_tasks();
        if let Some(storage) = undo {
            if self.buffers.switch_mode(storage).is_err() {
                pr_ratelimited!(
                    pr_err,
                    "config: the CPU buffers cannot be switched back to {} mode\n",
                    cur.config.mode.name()
                );
            }
        }
        self.set_counted(*cur);
        match self.register() {
            Ok(r) => *hotplug = Some(r),
            Err(e) => pr_ratelimited!(
                pr_err,
                "config: the previous events cannot be sampled again either (error {}): nothing is sampled\n",
                e.to_errno()
            ),
        }
        // The process profiled alone before, bound again to its threads of
        // now (the tasks it created meanwhile are not: see
        // `task_counters.rs`).
        if cur.config.pid != 0 {
            let bound =
                crate::shims::task::threads(cur.config.pid).and_then(|t| self.bind_tasks(&t, cur));
            if let Err(e) = bound {
                pr_ratelimited!(
                    pr_err,
                    "config: pid={} cannot be profiled again (error {}): nothing is sampled\n",
                    cur.config.pid,
                    e.to_errno()
                );
            }
        }
    }
}

/// The generation of the change after `generation`: one more, wrapping
/// from `u32::MAX` to 0 (see `Documentation/stream-format.md`: a reader
/// tells a change from a restatement by a different number).
pub(crate) fn next_generation(generation: u32) -> u32 {
    generation.wrapping_add(1)
}

/// The settings of a change from `cur` to `new`, at the next generation:
/// the events resolved anew by `resolve` (`default`: a probe of the
/// machine) if they changed, else as `cur` has them.
fn next_settings(
    cur: &Settings,
    new: Config,
    resolve: impl FnOnce(Config, u32) -> Settings,
) -> Settings {
    let generation = next_generation(cur.generation);
    if new.events != cur.config.events {
        resolve(new, generation)
    } else {
        Settings {
            config: new,
            generation,
            ..*cur
        }
    }
}

/// The CONFIG record of `s`, stamped now, and its length.
fn encoded(s: &Settings) -> Result<([u8; format::CONFIG_MAX_LEN], usize)> {
    let mut rec = [0u8; format::CONFIG_MAX_LEN];
    let len = s
        .record(crate::shims::clock::now())
        .encode(format::Endian::native(), &mut rec)
        .ok_or(EINVAL)?;
    Ok((rec, len))
}

#[cfg(oprofile_rs_kunit)]
#[kunit_tests(oprofile_rs_config)]
mod tests {
    use super::*;
    use crate::control::params::{EventChoice, Raw};
    use crate::shims::perf::Event;

    fn load() -> Result<Config> {
        Config::validate(Raw {
            cpu_buffer_size: 65536,
            buffer_size: 1 << 20,
            buffer_watershed: 0,
            event: b"cpu-clock,page-faults",
            sample_period: b"200000,10",
            sample_freq: b"",
            exclude_user: false,
            exclude_kernel: false,
            backtrace_depth: 0,
            user_backtrace_depth: 32,
            user_stack_size: 0,
            user_stack_fit: false,
            mode: b"consume",
        })
    }

    fn apply(text: &[u8]) -> Result<Config> {
        changed(&load()?, &Changes::parse(text)?)
    }

    /// The `config` text (`GET_CONFIG`) read back as a change (`SET_CONFIG`)
    /// gives the configuration it shows, every key changed at once: a key of
    /// the table of settings (`format::SETTINGS`) that [`changed`] forgot to
    /// read would keep its old value here. (`cgroup` is read where the
    /// filter is looked up, not by [`changed`]: 0 on both sides.)
    #[test]
    fn the_config_text_read_back_is_the_same_config() {
        // Every key away from `load()`'s, made by the load-time path (not
        // by `changed`, which is under test).
        let other = Config::validate(Raw {
            cpu_buffer_size: 131072,
            buffer_size: 2 << 20,
            buffer_watershed: 4096,
            event: b"cpu-clock",
            sample_period: b"300000",
            sample_freq: b"",
            exclude_user: false,
            exclude_kernel: true,
            backtrace_depth: 5,
            user_backtrace_depth: 7,
            user_stack_size: 1024,
            user_stack_fit: true,
            mode: b"overwrite",
        })
        .map(|c| Config { pid: 1, ..c });
        let base = load();
        let (Ok(base), Ok(other)) = (&base, &other) else {
            assert!(base.is_ok() && other.is_ok());
            return;
        };
        let (base, other) = (*base, *other);
        assert_ne!(base, other);
        let mut text = KVec::new();
        let settings = Settings::new(other, Event::CpuClock, 1);
        assert!(crate::control::settings::write_config_text(&settings, &mut text).is_ok());
        let back = Changes::parse(&text).and_then(|ch| changed(&base, &ch));
        assert_eq!(back, Ok(other));
    }

    #[test]
    fn generation_wraps_at_u32_max() {
        assert_eq!(next_generation(1), 2);
        assert_eq!(next_generation(u32::MAX - 1), u32::MAX);
        assert_eq!(next_generation(u32::MAX), 0);
        let Ok(c) = load() else {
            assert!(load().is_ok());
            return;
        };
        // A change of the settings at u32::MAX (a depth: the events kept;
        // then the events: resolved anew) is at generation 0, then 1, and
        // its CONFIG record says so.
        let at_max = Settings::new(c, Event::CpuClock, u32::MAX);
        let deeper = apply(b"backtrace_depth=4");
        let Ok(deeper) = deeper else {
            assert!(deeper.is_ok());
            return;
        };
        let next = next_settings(&at_max, deeper, |_, _| at_max);
        assert_eq!((next.generation, next.config.backtrace_depth), (0, 4));
        let events = Changes::parse(b"event=page-faults").and_then(|ch| changed(&deeper, &ch));
        let Ok(events) = events else {
            assert!(events.is_ok());
            return;
        };
        let mut asked = None;
        let after = next_settings(&next, events, |c, g| {
            asked = Some(g);
            Settings::new(c, Event::CpuClock, g)
        });
        assert_eq!((asked, after.generation), (Some(1), 1));
        assert_eq!(after.events(), &[Event::PageFaults]);
        let Ok((rec, len)) = encoded(&next) else {
            assert!(encoded(&next).is_ok());
            return;
        };
        let read = format::Config::read(format::Endian::native(), rec.get(..len).unwrap_or(&[]));
        assert_eq!(read.map(|r| r.generation), Some(0));
    }

    #[test]
    fn text_is_key_value_words() {
        for bad in [
            &b""[..],
            b"  \n\t ",
            b"backtrace_depth",
            b"=4",
            b"bogus=1",
            b"backtrace_depth=",
            b"backtrace_depth=1 backtrace_depth=2",
            b"backtrace_depth=1\0",
        ] {
            assert_eq!(apply(bad), Err(EINVAL));
        }
        let c = apply(b"backtrace_depth=4\nuser_backtrace_depth=0\tbuffer_watershed=1000 ");
        assert_eq!(
            c.map(|c| (
                c.backtrace_depth,
                c.user_backtrace_depth,
                c.buffer_watershed
            )),
            Ok((4, 0, 1000))
        );
    }

    #[test]
    fn user_stack_size_changes_with_room_in_the_cpu_buffers() {
        // 64 KiB CPU buffers at load.
        assert_eq!(
            apply(b"user_stack_size=8192").map(|c| c.user_stack_size),
            Ok(8192)
        );
        for bad in [
            &b"user_stack_size=12"[..],
            b"user_stack_size=8193",
            b"user_stack_size=",
            b"user_stack_size=8192 cpu_buffer_size=16384",
        ] {
            assert_eq!(apply(bad), Err(EINVAL));
        }
        assert_eq!(
            apply(b"cpu_buffer_size=16384 user_stack_size=4096")
                .map(|c| (c.cpu_buffer_size, c.user_stack_size)),
            Ok((16384, 4096))
        );
    }

    #[test]
    fn numbers_are_checked() {
        for bad in [
            &b"backtrace_depth=65"[..],
            b"backtrace_depth=-1",
            b"backtrace_depth=0x1",
            b"cpu_buffer_size=5000",
            b"cpu_buffer_size=18446744073709551616",
            b"buffer_size=1",
            b"buffer_watershed=1048576",
        ] {
            assert_eq!(apply(bad), Err(EINVAL));
        }
    }

    #[test]
    fn watershed_follows_the_buffer_unless_given() {
        let c = apply(b"buffer_size=262144");
        assert_eq!(c.map(|c| c.buffer_watershed), Ok(65536));
        // Given, it stays, and must stay below a new buffer size.
        let c = load().and_then(|c| changed(&c, &Changes::parse(b"buffer_watershed=100000")?));
        let Ok(c) = c else {
            assert!(c.is_ok());
            return;
        };
        let ch = Changes::parse(b"buffer_size=65536");
        assert_eq!(ch.and_then(|ch| changed(&c, &ch)), Err(EINVAL));
        let ch = Changes::parse(b"buffer_size=65536 buffer_watershed=0");
        assert_eq!(
            ch.and_then(|ch| changed(&c, &ch))
                .map(|c| c.buffer_watershed),
            Ok(16384)
        );
    }

    #[test]
    fn excluded_modes() {
        let modes = |text: &[u8]| apply(text).map(|c| (c.exclude_user, c.exclude_kernel));
        assert_eq!(modes(b"exclude_kernel=1"), Ok((false, true)));
        assert_eq!(modes(b"exclude_user=y\n"), Ok((true, false)));
        assert_eq!(
            modes(b"exclude_user=N exclude_kernel=0"),
            Ok((false, false))
        );
        for bad in [
            &b"exclude_user=1 exclude_kernel=1"[..],
            b"exclude_user=2",
            b"exclude_user=yes",
            b"exclude_kernel=true",
            b"exclude_kernel=-1",
            b"exclude_kernel=01",
        ] {
            assert_eq!(modes(bad), Err(EINVAL));
        }
        // From user mode only: excluding user mode too is refused, swapping
        // the two in one change is not.
        let Ok(user_only) = apply(b"exclude_kernel=1") else {
            return;
        };
        let from = |text: &[u8]| {
            Changes::parse(text)
                .and_then(|ch| changed(&user_only, &ch))
                .map(|c| (c.exclude_user, c.exclude_kernel))
        };
        assert_eq!(from(b"exclude_user=1"), Err(EINVAL));
        assert_eq!(from(b"exclude_user=1 exclude_kernel=0"), Ok((true, false)));
    }

    #[test]
    fn recording_mode() {
        let mode = |text: &[u8]| apply(text).map(|c| c.mode);
        assert_eq!(mode(b"mode=overwrite"), Ok(RecordMode::Overwrite));
        assert_eq!(mode(b"mode=consume"), Ok(RecordMode::Consume));
        for bad in [
            &b"mode=Overwrite"[..],
            b"mode=1",
            b"mode=overwrite,consume",
            b"mode=",
        ] {
            assert_eq!(mode(bad), Err(EINVAL));
        }
    }

    #[test]
    fn events_and_periods() {
        let pf = EventChoice::Only(Event::PageFaults);
        // A new list: the defaults, unless given with it.
        let c = apply(b"event=page-faults");
        let s = c.map(|c| c.events.as_slice().first().map(|s| (s.choice, s.period)));
        assert_eq!(s, Ok(Some((pf, 1000))));
        let c = apply(b"event=page-faults sample_period=7");
        let s = c.map(|c| c.events.as_slice().first().map(|s| s.period));
        assert_eq!(s, Ok(Some(7)));
        // The same list: a frequency for the first switches only it.
        let c = apply(b"sample_freq=100,0");
        let s = c.map(|c| {
            let e = c.events.as_slice();
            (
                e.first().map(|s| (s.period, s.freq)),
                e.get(1).map(|s| (s.period, s.freq)),
            )
        });
        assert_eq!(s, Ok((Some((0, 100)), Some((10, 0)))));
        // Lists of the wrong length, both modes for one event.
        for bad in [
            &b"sample_period=1,2,3"[..],
            b"sample_freq=1,2,3",
            b"sample_period=0,5 sample_freq=0,5",
            b"event=page-faults sample_period=1,2",
            b"event=",
        ] {
            assert_eq!(apply(bad), Err(EINVAL));
        }
    }
}
