// SPDX-License-Identifier: GPL-2.0

//! Module parameters, validated once at load time.
//!
//! The `module!` macro stores the raw values (`event=`, `sample_period=`,
//! `sample_freq=` and `mode=` are C string parameters in glue.c: the macro
//! has no strings); [`Config::validate`] checks every one and refuses the
//! load with `EINVAL` and one log line naming the offending parameter. The
//! parsers serve the runtime changes too (`config.rs`), whose log lines a
//! user can trigger: every one is rate limited.

use kernel::prelude::*;

use crate::{
    format::parse_u64,
    shims::{perf::Event, ratelimit::pr_ratelimited},
};

/// Limits of each parameter, shared by the check and its error message: a
/// number setting's from the table of settings (`format::SETTINGS`), the
/// list settings' per value here.
pub(crate) mod limits {
    /// The range of number setting `key` in the table of settings; the build
    /// fails for a key that is not one (only used in constants).
    const fn range(key: &str) -> (u64, u64) {
        match crate::format::setting(key) {
            Some(crate::format::Setting { range: Some(r), .. }) => r,
            _ => kernel::build_error!("not a number setting"),
        }
    }

    /// Bytes per per-CPU ring buffer (a power of two).
    pub(crate) const CPU_BUFFER_SIZE: (u64, u64) = range("cpu_buffer_size");
    /// Bytes of the global event buffer.
    pub(crate) const BUFFER_SIZE: (u64, u64) = range("buffer_size");
    /// Sample period of the clocks (cpu-clock, task-clock, and `default`,
    /// which may be cpu-clock): ns, 10 µs .. 1 s.
    pub(crate) const CLOCK_PERIOD: (u64, u64) = (10_000, 1_000_000_000);
    /// Sample period of the counting events (PMU and the other software
    /// events): events.
    pub(crate) const COUNT_PERIOD: (u64, u64) = (1, 1_000_000_000);
    /// Samples per second per CPU in frequency mode (perf's default
    /// `perf_event_max_sample_rate` is the top).
    pub(crate) const SAMPLE_FREQ: (u64, u64) = (1, 100_000);
    /// Kernel callchain entries recorded per sample (the stream format's
    /// limit).
    pub(crate) const BACKTRACE_DEPTH: (u64, u64) = range("backtrace_depth");
    /// User callchain entries recorded per sample (the stream format's
    /// limit).
    pub(crate) const USER_BACKTRACE_DEPTH: (u64, u64) = range("user_backtrace_depth");
    /// Bytes of user stack copied per sample (a multiple of 8; 0: none).
    pub(crate) const USER_STACK_SIZE: (u64, u64) = range("user_stack_size");
}

/// Events sampled at once, at most (the stream format's CONFIG record).
pub(crate) const MAX_EVENTS: usize = crate::format::MAX_EVENTS;

/// The default sample period of the cycles-like events and the clocks (ns).
pub(crate) const DEFAULT_PERIOD: u64 = 1_000_000;

/// Which event to sample.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum EventChoice {
    /// Hardware cycles where a PMU exists, else cpu-clock.
    Default,
    /// Exactly this event; the load fails if it cannot be counted.
    Only(Event),
}

impl EventChoice {
    /// The name `event=` gives it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            EventChoice::Default => "default",
            EventChoice::Only(e) => e.name(),
        }
    }

    /// The period when neither a period nor a frequency is given: 1,000,000
    /// for the cycles-like events and the clocks (ns), fewer for the rarer
    /// software events (`Documentation/user-guide.md`).
    pub(crate) fn default_period(self) -> u64 {
        match self {
            EventChoice::Only(Event::PageFaults) => 1000,
            EventChoice::Only(Event::ContextSwitches) => 100,
            EventChoice::Only(Event::CpuMigrations) => 1,
            _ => DEFAULT_PERIOD,
        }
    }

    /// The range of its period.
    fn period_range(self) -> (u64, u64) {
        match self {
            EventChoice::Default => limits::CLOCK_PERIOD,
            EventChoice::Only(e) if e.is_clock() => limits::CLOCK_PERIOD,
            EventChoice::Only(_) => limits::COUNT_PERIOD,
        }
    }
}

/// How the per-CPU buffers are used (`mode=`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RecordMode {
    /// Producer/consumer: the sync drains them into the event buffer.
    Consume,
    /// Flight recorder: they keep the newest records, overwriting the
    /// oldest; a snapshot moves them to the event buffer.
    Overwrite,
}

impl RecordMode {
    /// Its name (`mode=`).
    pub(crate) fn name(self) -> &'static str {
        match self {
            RecordMode::Consume => "consume",
            RecordMode::Overwrite => "overwrite",
        }
    }
}

/// Parses `mode=`: `consume` (or empty) or `overwrite`.
pub(crate) fn parse_mode(name: &[u8]) -> Result<RecordMode> {
    match name {
        b"" | b"consume" => Ok(RecordMode::Consume),
        b"overwrite" => Ok(RecordMode::Overwrite),
        _ => {
            pr_ratelimited!(
                pr_err,
                "invalid mode={:?}: must be consume or overwrite\n",
                kernel::str::BStr::from_bytes(name)
            );
            Err(EINVAL)
        }
    }
}

/// One sampled event and how it samples: exactly one of `period` and
/// `freq` is non-zero.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct EventSpec {
    pub(crate) choice: EventChoice,
    /// A sample every `period` events (ns for the clocks); 0 in frequency
    /// mode.
    pub(crate) period: u64,
    /// Samples per second per CPU (perf adjusts the period); 0 in period
    /// mode.
    pub(crate) freq: u64,
}

/// The sampled events (`event=` with `sample_period=`/`sample_freq=`).
///
/// # Invariants
///
/// `1 <= len <= MAX_EVENTS`; the first `len` specs are valid (in range,
/// one of period and frequency), no event twice, `default` only alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct EventList {
    len: usize,
    specs: [EventSpec; MAX_EVENTS],
}

impl EventList {
    /// The events, in the order given (a SAMPLE's `event` indexes it).
    pub(crate) fn as_slice(&self) -> &[EventSpec] {
        self.specs.get(..self.len).unwrap_or(&[])
    }

    /// How many.
    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

/// A parsed `event=` list: the choices, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Names {
    len: usize,
    choices: [EventChoice; MAX_EVENTS],
}

impl Names {
    fn as_slice(&self) -> &[EventChoice] {
        self.choices.get(..self.len).unwrap_or(&[])
    }

    /// The names of `list`'s events.
    pub(crate) fn of(list: &EventList) -> Names {
        let mut names = Names {
            len: list.len,
            choices: [EventChoice::Default; MAX_EVENTS],
        };
        for (c, s) in names.choices.iter_mut().zip(list.as_slice()) {
            *c = s.choice;
        }
        names
    }
}

/// A parsed `sample_period=`/`sample_freq=` list: one value (for every
/// event) or one per event; 0 means not given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Values {
    len: usize,
    values: [u64; MAX_EVENTS],
}

impl Values {
    /// The value for event `i` of `n`: the one value, or the `i`th.
    fn get(&self, i: usize) -> u64 {
        let at = if self.len == 1 { 0 } else { i };
        self.values.get(at).copied().unwrap_or(0)
    }
}

/// The names `event=` accepts, for its error message: `default` and those
/// of [`Event::ALL`].
struct EventNames;

impl kernel::fmt::Display for EventNames {
    fn fmt(&self, f: &mut kernel::fmt::Formatter<'_>) -> kernel::fmt::Result {
        f.write_str("default")?;
        Event::ALL
            .iter()
            .try_for_each(|e| write!(f, ", {}", e.name()))
    }
}

/// Parses one name of `event=`: `default` (or empty) or one of
/// [`Event::ALL`]'s names.
pub(crate) fn parse_event(name: &[u8]) -> Result<EventChoice> {
    if name.is_empty() || name == b"default" {
        return Ok(EventChoice::Default);
    }
    Event::from_name(name)
        .map(EventChoice::Only)
        .ok_or_else(|| {
            pr_ratelimited!(
                pr_err,
                "invalid event {:?}: must be one of {}\n",
                kernel::str::BStr::from_bytes(name),
                EventNames
            );
            EINVAL
        })
}

/// Parses `event=`: a comma list of 1..[`MAX_EVENTS`] names, none twice,
/// `default` (or the empty list) only alone.
pub(crate) fn parse_events(text: &[u8]) -> Result<Names> {
    let mut names = Names {
        len: 0,
        choices: [EventChoice::Default; MAX_EVENTS],
    };
    if text.is_empty() {
        names.len = 1;
        return Ok(names);
    }
    for item in text.split(|&c| c == b',') {
        if item.is_empty() {
            pr_ratelimited!(
                pr_err,
                "invalid event={:?}: an empty name\n",
                kernel::str::BStr::from_bytes(text)
            );
            return Err(EINVAL);
        }
        let choice = parse_event(item)?;
        if names.as_slice().contains(&choice) {
            pr_ratelimited!(
                pr_err,
                "invalid event={:?}: {} twice\n",
                kernel::str::BStr::from_bytes(text),
                choice.name()
            );
            return Err(EINVAL);
        }
        let Some(slot) = names.choices.get_mut(names.len) else {
            pr_ratelimited!(
                pr_err,
                "invalid event={:?}: more than {MAX_EVENTS} events\n",
                kernel::str::BStr::from_bytes(text)
            );
            return Err(EINVAL);
        };
        *slot = choice;
        names.len += 1;
    }
    if names.len > 1 && names.as_slice().contains(&EventChoice::Default) {
        pr_ratelimited!(
            pr_err,
            "invalid event={:?}: default must be alone\n",
            kernel::str::BStr::from_bytes(text)
        );
        return Err(EINVAL);
    }
    Ok(names)
}

/// Parses a `sample_period=`/`sample_freq=` list (`name` for the message):
/// `None` for the empty text (not given), else 1..[`MAX_EVENTS`] decimal
/// numbers separated by commas.
pub(crate) fn parse_values(name: &str, text: &[u8]) -> Result<Option<Values>> {
    if text.is_empty() {
        return Ok(None);
    }
    let mut v = Values {
        len: 0,
        values: [0; MAX_EVENTS],
    };
    for item in text.split(|&c| c == b',') {
        let (Some(n), Some(slot)) = (parse_u64(item), v.values.get_mut(v.len)) else {
            pr_ratelimited!(
                pr_err,
                "invalid {name}={:?}: must be 1..{MAX_EVENTS} decimal numbers separated by commas\n",
                kernel::str::BStr::from_bytes(text)
            );
            return Err(EINVAL);
        };
        *slot = n;
        v.len += 1;
    }
    Ok(Some(v))
}

fn in_range(name: &str, value: u64, (min, max): (u64, u64)) -> Result<u64> {
    if value < min || value > max {
        pr_ratelimited!(
            pr_err,
            "invalid {name}={value}: must be between {min} and {max}\n"
        );
        return Err(EINVAL);
    }
    Ok(value)
}

fn to_usize(value: u64) -> Result<usize> {
    usize::try_from(value).map_err(|_| EINVAL)
}

/// The event list of `names` with the periods and frequencies given
/// (`None`: not given), each list one value or one per event.
///
/// `current` is the list in force (at runtime): an event of the same list
/// keeps its setting where neither list says otherwise. A period given for
/// an event (non-zero) puts it in period mode unless a frequency is given
/// in the same change, and the other way round; both non-zero is `EINVAL`;
/// neither: the event's default period.
pub(crate) fn event_list(
    names: &Names,
    periods: Option<&Values>,
    freqs: Option<&Values>,
    current: Option<&EventList>,
) -> Result<EventList> {
    let n = names.len;
    for (name, v) in [("sample_period", periods), ("sample_freq", freqs)] {
        if let Some(v) = v {
            if v.len != 1 && v.len != n {
                pr_ratelimited!(
                    pr_err,
                    "invalid {name}: {} values for {n} events (give one, or one per event)\n",
                    v.len
                );
                return Err(EINVAL);
            }
        }
    }
    let same = current.filter(|c| {
        c.len == n
            && c.as_slice()
                .iter()
                .zip(names.as_slice())
                .all(|(s, c)| s.choice == *c)
    });
    let mut list = EventList {
        len: n,
        specs: [EventSpec {
            choice: EventChoice::Default,
            period: DEFAULT_PERIOD,
            freq: 0,
        }; MAX_EVENTS],
    };
    for (i, (&choice, spec)) in names
        .as_slice()
        .iter()
        .zip(list.specs.iter_mut())
        .enumerate()
    {
        let cur = same
            .and_then(|c| c.as_slice().get(i))
            .map_or((0, 0), |s| (s.period, s.freq));
        let (p, f) = match (periods.map(|v| v.get(i)), freqs.map(|v| v.get(i))) {
            (Some(p), Some(f)) => (p, f),
            (Some(p), None) => (p, if p != 0 { 0 } else { cur.1 }),
            (None, Some(f)) => (if f != 0 { 0 } else { cur.0 }, f),
            (None, None) => cur,
        };
        let ranged = |name: &str, v: u64, (min, max): (u64, u64)| {
            if v < min || v > max {
                pr_ratelimited!(
                    pr_err,
                    "invalid {name}={v} for event {}: must be between {min} and {max}\n",
                    choice.name()
                );
                return Err(EINVAL);
            }
            Ok(v)
        };
        let (period, freq) = match (p, f) {
            (0, 0) => (choice.default_period(), 0),
            (p, 0) => (ranged("sample_period", p, choice.period_range())?, 0),
            (0, f) => (0, ranged("sample_freq", f, limits::SAMPLE_FREQ)?),
            (p, f) => {
                pr_ratelimited!(
                    pr_err,
                    "invalid sample_period={p} with sample_freq={f} for event {}: give one of them\n",
                    choice.name()
                );
                return Err(EINVAL);
            }
        };
        *spec = EventSpec {
            choice,
            period,
            freq,
        };
    }
    // INVARIANT: `names` is a valid list, each spec checked above.
    Ok(list)
}

/// Validated configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Config {
    /// Bytes per per-CPU ring buffer, a power of two.
    pub(crate) cpu_buffer_size: usize,
    /// Bytes of the global event buffer.
    pub(crate) buffer_size: usize,
    /// Readers are woken when this many bytes wait in the event buffer.
    pub(crate) buffer_watershed: usize,
    /// `buffer_watershed` was not given: a quarter of `buffer_size`, which
    /// it follows.
    pub(crate) watershed_auto: bool,
    /// The events to sample, each with its period or frequency.
    pub(crate) events: EventList,
    /// Do not sample user mode.
    pub(crate) exclude_user: bool,
    /// Do not sample kernel mode.
    pub(crate) exclude_kernel: bool,
    /// Maximum kernel callchain depth (0: none).
    pub(crate) backtrace_depth: u32,
    /// Maximum user callchain depth (0: none).
    pub(crate) user_backtrace_depth: u32,
    /// Consume or overwrite (flight recorder).
    pub(crate) mode: RecordMode,
    /// The cgroup filter's id (0: every task; see `cgroup.rs`, which holds
    /// the cgroup itself).
    pub(crate) cgroup: u64,
    /// Bytes of user stack copied per sample (0: none; see
    /// `user_stack.rs`).
    pub(crate) user_stack_size: u32,
    /// Each copy stops after the first frame record when the frame
    /// pointer's record looks like one (`user_stack.rs`, [`fit_len`]).
    ///
    /// [`fit_len`]: crate::path::user_stack::fit_len
    pub(crate) user_stack_fit: bool,
    /// The profiled process (0: every task, on every CPU; see
    /// `task_counters.rs`): runtime only, 0 at load.
    pub(crate) pid: u32,
}

/// The raw parameter values, as given to insmod.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Raw<'a> {
    pub(crate) cpu_buffer_size: u64,
    pub(crate) buffer_size: u64,
    pub(crate) buffer_watershed: u64,
    /// `event=`, as given (without the NUL).
    pub(crate) event: &'a [u8],
    /// `sample_period=`, as given (without the NUL).
    pub(crate) sample_period: &'a [u8],
    /// `sample_freq=`, as given (without the NUL).
    pub(crate) sample_freq: &'a [u8],
    pub(crate) exclude_user: bool,
    pub(crate) exclude_kernel: bool,
    pub(crate) backtrace_depth: u64,
    pub(crate) user_backtrace_depth: u64,
    pub(crate) user_stack_size: u64,
    pub(crate) user_stack_fit: bool,
    /// `mode=`, as given (without the NUL).
    pub(crate) mode: &'a [u8],
}

/// Checks `cpu_buffer_size`.
pub(crate) fn check_cpu_buffer_size(v: u64) -> Result<usize> {
    let v = in_range("cpu_buffer_size", v, limits::CPU_BUFFER_SIZE)?;
    if !v.is_power_of_two() {
        pr_ratelimited!(
            pr_err,
            "invalid cpu_buffer_size={v}: must be a power of two\n"
        );
        return Err(EINVAL);
    }
    to_usize(v)
}

/// Checks `buffer_size`.
pub(crate) fn check_buffer_size(v: u64) -> Result<usize> {
    to_usize(in_range("buffer_size", v, limits::BUFFER_SIZE)?)
}

/// The watershed `given` (0: a quarter of the buffer) for a buffer of
/// `buffer_size` bytes, which it must stay below.
pub(crate) fn watershed(given: u64, buffer_size: usize) -> Result<usize> {
    match given {
        0 => Ok(buffer_size / 4),
        w if w < buffer_size as u64 => to_usize(w),
        w => {
            pr_ratelimited!(
                pr_err,
                "invalid buffer_watershed={w}: must be below buffer_size={buffer_size}\n"
            );
            Err(EINVAL)
        }
    }
}

/// Checks `exclude_user` and `exclude_kernel` together: not both.
pub(crate) fn check_exclusions(exclude_user: bool, exclude_kernel: bool) -> Result {
    if exclude_user && exclude_kernel {
        pr_ratelimited!(
            pr_err,
            "invalid exclude_user=1 with exclude_kernel=1: nothing would be sampled\n"
        );
        return Err(EINVAL);
    }
    Ok(())
}

/// A boolean value (`exclude_user`, `exclude_kernel` at run time): `0`,
/// `n`, `N` or `1`, `y`, `Y`, as the kernel's bool parameters take them.
pub(crate) fn parse_bool(name: &str, v: &[u8]) -> Result<bool> {
    match v {
        b"0" | b"n" | b"N" => Ok(false),
        b"1" | b"y" | b"Y" => Ok(true),
        _ => {
            pr_ratelimited!(
                pr_err,
                "invalid {name}={:?}: 0 or 1\n",
                kernel::str::BStr::from_bytes(v)
            );
            Err(EINVAL)
        }
    }
}

/// Checks `user_stack_size`: 0, or a multiple of 8 up to the format's
/// [`crate::format::MAX_USER_STACK`].
pub(crate) fn check_user_stack_size(v: u64) -> Result<u32> {
    let v = in_range("user_stack_size", v, limits::USER_STACK_SIZE)?;
    if v % 8 != 0 {
        pr_ratelimited!(
            pr_err,
            "invalid user_stack_size={v}: must be a multiple of 8\n"
        );
        return Err(EINVAL);
    }
    u32::try_from(v).map_err(|_| EINVAL)
}

/// The smallest `cpu_buffer_size` for `user_stack_size` bytes of stack per
/// sample: room for two of the largest records (a power of two).
pub(crate) fn min_cpu_buffer_size(user_stack_size: u32) -> usize {
    if user_stack_size == 0 {
        return limits::CPU_BUFFER_SIZE.0 as usize;
    }
    // The ring adds a header word per record.
    (2 * (crate::format::max_record(user_stack_size as usize) + 8))
        .next_power_of_two()
        .max(limits::CPU_BUFFER_SIZE.0 as usize)
}

/// Checks `cpu_buffer_size` and `user_stack_size` together: the CPU
/// buffers must hold two of the largest records.
pub(crate) fn check_user_stack_room(cpu_buffer_size: usize, user_stack_size: u32) -> Result {
    let min = min_cpu_buffer_size(user_stack_size);
    if cpu_buffer_size < min {
        pr_ratelimited!(
            pr_err,
            "invalid user_stack_size={user_stack_size} with cpu_buffer_size={cpu_buffer_size}: needs cpu_buffer_size of at least {min}\n"
        );
        return Err(EINVAL);
    }
    Ok(())
}

/// Checks a callchain depth.
pub(crate) fn check_depth(name: &str, v: u64, range: (u64, u64)) -> Result<u32> {
    u32::try_from(in_range(name, v, range)?).map_err(|_| EINVAL)
}

impl Config {
    /// Checks the raw parameters; logs and returns `EINVAL` for the first bad one.
    pub(crate) fn validate(raw: Raw<'_>) -> Result<Config> {
        let cpu_buffer_size = check_cpu_buffer_size(raw.cpu_buffer_size)?;
        let buffer_size = check_buffer_size(raw.buffer_size)?;
        // The default (0) means a quarter of the event buffer.
        let buffer_watershed = watershed(raw.buffer_watershed, buffer_size)?;
        let names = parse_events(raw.event)?;
        let periods = parse_values("sample_period", raw.sample_period)?;
        let freqs = parse_values("sample_freq", raw.sample_freq)?;
        let events = event_list(&names, periods.as_ref(), freqs.as_ref(), None)?;
        let mode = parse_mode(raw.mode)?;
        check_exclusions(raw.exclude_user, raw.exclude_kernel)?;
        let user_stack_size = check_user_stack_size(raw.user_stack_size)?;
        check_user_stack_room(cpu_buffer_size, user_stack_size)?;
        Ok(Config {
            cpu_buffer_size,
            buffer_size,
            buffer_watershed,
            watershed_auto: raw.buffer_watershed == 0,
            events,
            exclude_user: raw.exclude_user,
            exclude_kernel: raw.exclude_kernel,
            backtrace_depth: check_depth(
                "backtrace_depth",
                raw.backtrace_depth,
                limits::BACKTRACE_DEPTH,
            )?,
            user_backtrace_depth: check_depth(
                "user_backtrace_depth",
                raw.user_backtrace_depth,
                limits::USER_BACKTRACE_DEPTH,
            )?,
            mode,
            // Looked up by the caller (`cgroup=`, `cgroup.rs`).
            cgroup: 0,
            user_stack_size,
            user_stack_fit: raw.user_stack_fit,
            pid: 0,
        })
    }
}

/// Writes `items` separated by commas.
pub(crate) fn write_list<T: core::fmt::Display>(
    f: &mut core::fmt::Formatter<'_>,
    items: impl Iterator<Item = T>,
) -> core::fmt::Result {
    for (i, v) in items.enumerate() {
        if i > 0 {
            f.write_str(",")?;
        }
        write!(f, "{v}")?;
    }
    Ok(())
}

#[cfg(oprofile_rs_kunit)]
#[kunit_tests(oprofile_rs_params)]
mod tests {
    use super::*;

    /// The load parameters at their defaults, as the table of settings
    /// (`format::SETTINGS`) gives them.
    fn good() -> Raw<'static> {
        let d = |key| crate::format::setting(key).map_or(&b"?"[..], |s| s.default.as_bytes());
        // Not a number: out of every range, so that validation fails.
        let n = |key| parse_u64(d(key)).unwrap_or(u64::MAX);
        Raw {
            cpu_buffer_size: n("cpu_buffer_size"),
            buffer_size: n("buffer_size"),
            buffer_watershed: n("buffer_watershed"),
            event: d("event"),
            sample_period: d("sample_period"),
            sample_freq: d("sample_freq"),
            exclude_user: n("exclude_user") == 1,
            exclude_kernel: n("exclude_kernel") == 1,
            backtrace_depth: n("backtrace_depth"),
            user_backtrace_depth: n("user_backtrace_depth"),
            user_stack_size: n("user_stack_size"),
            user_stack_fit: n("user_stack_fit") == 1,
            mode: d("mode"),
        }
    }

    /// (choice, period, freq) of each event of `c`.
    fn specs(c: Result<Config>) -> Result<KVec<(EventChoice, u64, u64)>> {
        let mut v = KVec::new();
        for s in c?.events.as_slice() {
            v.push((s.choice, s.period, s.freq), GFP_KERNEL)?;
        }
        Ok(v)
    }

    #[test]
    fn defaults_are_valid() {
        let c = Config::validate(good());
        assert_eq!(c.as_ref().map(|c| c.buffer_watershed), Ok(1 << 18));
        // User stacks are on by default, kernel stacks off.
        assert_eq!(
            c.map(|c| (c.user_backtrace_depth, c.backtrace_depth)),
            Ok((32, 0))
        );
    }

    #[test]
    fn cpu_buffer_size_must_be_power_of_two_in_range() {
        for bad in [0, 4095, 5000, 128 << 20] {
            assert_eq!(
                Config::validate(Raw {
                    cpu_buffer_size: bad,
                    ..good()
                }),
                Err(EINVAL)
            );
        }
        assert!(Config::validate(Raw {
            cpu_buffer_size: 4096,
            ..good()
        })
        .is_ok());
    }

    #[test]
    fn user_stack_size_is_words_up_to_8k_and_fits_the_cpu_buffers() {
        for bad in [1, 4, 9, 8193, 8200, 16384, u64::MAX] {
            assert_eq!(
                Config::validate(Raw {
                    user_stack_size: bad,
                    ..good()
                })
                .map(|c| c.user_stack_size),
                Err(EINVAL)
            );
        }
        for ok in [0u32, 8, 512, 8192] {
            assert_eq!(
                Config::validate(Raw {
                    user_stack_size: u64::from(ok),
                    ..good()
                })
                .map(|c| c.user_stack_size),
                Ok(ok)
            );
        }
        // Two of the largest records: 9.3 KiB each with 8 KiB copies.
        assert_eq!(min_cpu_buffer_size(0), 4096);
        assert_eq!(min_cpu_buffer_size(512), 4096);
        assert_eq!(min_cpu_buffer_size(4096), 16384);
        assert_eq!(min_cpu_buffer_size(8192), 32768);
        for (cpu, stack, ok) in [
            (16384, 8192, false),
            (32768, 8192, true),
            (8192, 4096, false),
        ] {
            let r = Config::validate(Raw {
                cpu_buffer_size: cpu,
                user_stack_size: stack,
                ..good()
            });
            assert_eq!((cpu, stack, r.is_ok()), (cpu, stack, ok));
        }
    }

    #[test]
    fn watershed_must_be_below_buffer_size() {
        assert_eq!(
            Config::validate(Raw {
                buffer_watershed: 1 << 20,
                ..good()
            }),
            Err(EINVAL)
        );
        let c = Config::validate(Raw {
            buffer_watershed: 100,
            ..good()
        });
        assert_eq!(
            c.map(|c| (c.buffer_watershed, c.watershed_auto)),
            Ok((100, false))
        );
    }

    #[test]
    fn events_by_name() {
        assert_eq!(parse_event(b""), Ok(EventChoice::Default));
        assert_eq!(parse_event(b"default"), Ok(EventChoice::Default));
        assert_eq!(parse_event(b"cycles"), Ok(EventChoice::Only(Event::Cycles)));
        assert_eq!(
            parse_event(b"branch-misses"),
            Ok(EventChoice::Only(Event::BranchMisses))
        );
        assert_eq!(
            parse_event(b"cpu-clock"),
            Ok(EventChoice::Only(Event::CpuClock))
        );
        assert_eq!(
            parse_event(b"page-faults"),
            Ok(EventChoice::Only(Event::PageFaults))
        );
        assert_eq!(
            parse_event(b"cpu-migrations"),
            Ok(EventChoice::Only(Event::CpuMigrations))
        );
        for bad in [&b"CYCLES"[..], b"cycles ", b"cpu_clock", b"x"] {
            assert_eq!(parse_event(bad), Err(EINVAL));
        }
        for e in Event::ALL {
            assert_eq!(Event::from_name(e.name().as_bytes()), Some(e));
        }
    }

    #[test]
    fn event_lists() {
        let n = parse_events(b"cpu-clock,page-faults");
        assert_eq!(n.map(|n| n.len), Ok(2),);
        let all = b"cycles,instructions,cache-references,cache-misses,branch-instructions,\
                    branch-misses,cpu-clock,task-clock";
        assert_eq!(parse_events(all).map(|n| n.len), Ok(MAX_EVENTS));
        assert_eq!(
            parse_events(b"").map(|n| n.as_slice().first().copied()),
            Ok(Some(EventChoice::Default))
        );
        for bad in [
            &b","[..],
            b"cpu-clock,",
            b",cpu-clock",
            b"cpu-clock,,page-faults",
            b"cpu-clock,cpu-clock",
            b"default,cpu-clock",
            b"cpu-clock,default",
            b"cpu-clock page-faults",
            b"cycles,instructions,cache-references,cache-misses,branch-instructions,\
              branch-misses,cpu-clock,task-clock,page-faults",
        ] {
            assert_eq!(parse_events(bad), Err(EINVAL));
        }
    }

    #[test]
    fn value_lists() {
        assert_eq!(parse_values("p", b""), Ok(None));
        let v = parse_values("p", b"1000000,1");
        assert_eq!(
            v.map(|v| v.map(|v| (v.len, v.get(0), v.get(1)))),
            Ok(Some((2, 1_000_000, 1)))
        );
        let one = parse_values("p", b"7");
        assert_eq!(
            one.map(|v| v.map(|v| (v.get(0), v.get(5)))),
            Ok(Some((7, 7)))
        );
        for bad in [
            &b","[..],
            b"1,",
            b"1,,2",
            b"-1",
            b"+1",
            b"1 ",
            b"0x10",
            b"18446744073709551616",
            b"1,2,3,4,5,6,7,8,9",
            b"1\n",
        ] {
            assert_eq!(parse_values("p", bad), Err(EINVAL));
        }
        assert_eq!(parse_u64(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_u64(b"99999999999999999999"), None);
    }

    #[test]
    fn period_or_frequency() {
        assert_eq!(
            specs(Config::validate(good())).ok().as_deref(),
            Some(&[(EventChoice::Default, DEFAULT_PERIOD, 0)][..])
        );
        let c = Config::validate(Raw {
            sample_freq: b"4000",
            ..good()
        });
        assert_eq!(
            specs(c).ok().as_deref(),
            Some(&[(EventChoice::Default, 0, 4000)][..])
        );
        let both = Raw {
            sample_period: b"100000",
            sample_freq: b"4000",
            ..good()
        };
        assert_eq!(Config::validate(both), Err(EINVAL));
        let too_fast = Raw {
            sample_freq: b"100001",
            ..good()
        };
        assert_eq!(Config::validate(too_fast), Err(EINVAL));
    }

    #[test]
    fn per_event_periods() {
        let cpu = EventChoice::Only(Event::CpuClock);
        let pf = EventChoice::Only(Event::PageFaults);
        let two = Raw {
            event: b"cpu-clock,page-faults",
            ..good()
        };
        // Defaults per event.
        assert_eq!(
            specs(Config::validate(two)).ok().as_deref(),
            Some(&[(cpu, DEFAULT_PERIOD, 0), (pf, 1000, 0)][..])
        );
        // One list each, 0 = not given; a period of 1 is fine for page
        // faults but not for the clock.
        let c = Config::validate(Raw {
            sample_period: b"0,1",
            sample_freq: b"2000,0",
            ..two
        });
        assert_eq!(
            specs(c).ok().as_deref(),
            Some(&[(cpu, 0, 2000), (pf, 1, 0)][..])
        );
        for (p, f) in [
            (&b"1"[..], &b""[..]),
            (b"100000,1,1", b""),
            (b"", b"1,2,3"),
            (b"100000,100", b"0,100"),
            (b"0,0", b"0,100001"),
            (b"1000000001,1", b""),
            (b"100000,1000000001", b""),
        ] {
            assert_eq!(
                Config::validate(Raw {
                    sample_period: p,
                    sample_freq: f,
                    ..two
                }),
                Err(EINVAL)
            );
        }
    }

    #[test]
    fn runtime_changes_keep_what_is_not_said() {
        let c = Config::validate(Raw {
            event: b"cpu-clock,page-faults",
            sample_period: b"200000,10",
            ..good()
        });
        let Ok(c) = c else {
            assert!(c.is_ok());
            return;
        };
        let names = parse_events(b"cpu-clock,page-faults");
        let Ok(names) = names else { return };
        let freq = parse_values("f", b"500,0").ok().flatten();
        // A frequency for the first event switches only it to frequency mode.
        let l = event_list(&names, None, freq.as_ref(), Some(&c.events));
        let got = l.map(|l| {
            let s = l.as_slice();
            (
                s.first().map(|s| (s.period, s.freq)),
                s.get(1).map(|s| (s.period, s.freq)),
            )
        });
        assert_eq!(got, Ok((Some((0, 500)), Some((10, 0)))));
        // Another list: every event back to its default.
        let other = parse_events(b"page-faults,cpu-clock");
        let Ok(other) = other else { return };
        let l = event_list(&other, None, None, Some(&c.events));
        let got = l.map(|l| l.as_slice().iter().map(|s| s.period).sum::<u64>());
        assert_eq!(got, Ok(1000 + DEFAULT_PERIOD));
    }

    #[test]
    fn cannot_exclude_both_modes() {
        let both = Raw {
            exclude_user: true,
            exclude_kernel: true,
            ..good()
        };
        assert_eq!(Config::validate(both), Err(EINVAL));
        let user_only = Raw {
            exclude_kernel: true,
            ..good()
        };
        assert_eq!(
            Config::validate(user_only).map(|c| c.exclude_kernel),
            Ok(true)
        );
    }

    #[test]
    fn modes_by_name() {
        assert_eq!(parse_mode(b""), Ok(RecordMode::Consume));
        assert_eq!(parse_mode(b"consume"), Ok(RecordMode::Consume));
        assert_eq!(parse_mode(b"overwrite"), Ok(RecordMode::Overwrite));
        for bad in [
            &b"Overwrite"[..],
            b"overwrite ",
            b"1",
            b"flight",
            b"consume\n",
        ] {
            assert_eq!(parse_mode(bad), Err(EINVAL));
        }
    }

    #[test]
    fn period_and_depth_ranges() {
        assert_eq!(
            Config::validate(Raw {
                sample_period: b"9999",
                ..good()
            }),
            Err(EINVAL)
        );
        assert_eq!(
            Config::validate(Raw {
                backtrace_depth: 65,
                ..good()
            }),
            Err(EINVAL)
        );
        assert!(Config::validate(Raw {
            backtrace_depth: 64,
            ..good()
        })
        .is_ok());
    }

    #[test]
    fn user_depth_range() {
        for bad in [65, 1000, u64::MAX] {
            assert_eq!(
                Config::validate(Raw {
                    user_backtrace_depth: bad,
                    ..good()
                }),
                Err(EINVAL)
            );
        }
        for ok in [0, 1, 64] {
            assert_eq!(
                Config::validate(Raw {
                    user_backtrace_depth: ok,
                    ..good()
                })
                .map(|c| c.user_backtrace_depth),
                Ok(ok as u32)
            );
        }
    }
}
