// SPDX-License-Identifier: GPL-2.0

//! Module parameters, validated once at load time.
//!
//! The `module!` macro stores the raw values (`event=` is a C string
//! parameter in glue.c: the macro has no strings); [`Config::validate`] checks
//! every one and refuses the load with `EINVAL` and one log line naming the
//! offending parameter.

use kernel::prelude::*;

use crate::perf::Event;

/// Limits of each parameter, shared by the check and its error message.
pub(crate) mod limits {
    /// Bytes per per-CPU ring buffer (a power of two).
    pub(crate) const CPU_BUFFER_SIZE: (u64, u64) = (4096, 64 << 20);
    /// Bytes of the global event buffer.
    pub(crate) const BUFFER_SIZE: (u64, u64) = (64 << 10, 256 << 20);
    /// Sample period: ns for cpu-clock (10 µs .. 1 s), events for PMU events.
    pub(crate) const SAMPLE_PERIOD: (u64, u64) = (10_000, 1_000_000_000);
    /// Samples per second per CPU in frequency mode (perf's default
    /// `perf_event_max_sample_rate` is the top).
    pub(crate) const SAMPLE_FREQ: (u64, u64) = (1, 100_000);
    /// Kernel callchain entries recorded per sample (the stream format's
    /// limit).
    pub(crate) const BACKTRACE_DEPTH: (u64, u64) = (0, crate::format::MAX_DEPTH as u64);
    /// User callchain entries recorded per sample (the stream format's
    /// limit).
    pub(crate) const USER_BACKTRACE_DEPTH: (u64, u64) = (0, crate::format::MAX_USER_DEPTH as u64);
}

/// The default sample period when neither `sample_period` nor `sample_freq` is given.
pub(crate) const DEFAULT_PERIOD: u64 = 1_000_000;

/// Which event to sample.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum EventChoice {
    /// Hardware cycles where a PMU exists, else cpu-clock.
    Default,
    /// Exactly this event; the load fails if it cannot be counted.
    Only(Event),
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

/// Parses `mode=`: `consume` (or empty) or `overwrite`.
pub(crate) fn parse_mode(name: &[u8]) -> Result<RecordMode> {
    match name {
        b"" | b"consume" => Ok(RecordMode::Consume),
        b"overwrite" => Ok(RecordMode::Overwrite),
        _ => {
            pr_err!(
                "invalid mode={:?}: must be consume or overwrite\n",
                kernel::str::BStr::from_bytes(name)
            );
            Err(EINVAL)
        }
    }
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
    /// The event to sample.
    pub(crate) event: EventChoice,
    /// Sample period (ns for cpu-clock, events for hardware counters); 0 in
    /// frequency mode.
    pub(crate) sample_period: u64,
    /// Samples per second per CPU; 0 in period mode.
    pub(crate) sample_freq: u64,
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
}

/// The raw parameter values, as given to insmod.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Raw<'a> {
    pub(crate) cpu_buffer_size: u64,
    pub(crate) buffer_size: u64,
    pub(crate) buffer_watershed: u64,
    /// `event=`, as given (without the NUL).
    pub(crate) event: &'a [u8],
    pub(crate) sample_period: u64,
    pub(crate) sample_freq: u64,
    pub(crate) exclude_user: bool,
    pub(crate) exclude_kernel: bool,
    pub(crate) backtrace_depth: u64,
    pub(crate) user_backtrace_depth: u64,
    /// `mode=`, as given (without the NUL).
    pub(crate) mode: &'a [u8],
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

/// Parses `event=`: `default` (or empty) or one of [`Event::ALL`]'s names.
pub(crate) fn parse_event(name: &[u8]) -> Result<EventChoice> {
    if name.is_empty() || name == b"default" {
        return Ok(EventChoice::Default);
    }
    Event::from_name(name)
        .map(EventChoice::Only)
        .ok_or_else(|| {
            pr_err!(
                "invalid event={:?}: must be one of {}\n",
                kernel::str::BStr::from_bytes(name),
                EventNames
            );
            EINVAL
        })
}

fn in_range(name: &str, value: u64, (min, max): (u64, u64)) -> Result<u64> {
    if value < min || value > max {
        pr_err!("invalid {name}={value}: must be between {min} and {max}\n");
        return Err(EINVAL);
    }
    Ok(value)
}

fn to_usize(value: u64) -> Result<usize> {
    usize::try_from(value).map_err(|_| EINVAL)
}

impl Config {
    /// Checks the raw parameters; logs and returns `EINVAL` for the first bad one.
    pub(crate) fn validate(raw: Raw<'_>) -> Result<Config> {
        let cpu_buffer_size = in_range(
            "cpu_buffer_size",
            raw.cpu_buffer_size,
            limits::CPU_BUFFER_SIZE,
        )?;
        if !cpu_buffer_size.is_power_of_two() {
            pr_err!("invalid cpu_buffer_size={cpu_buffer_size}: must be a power of two\n");
            return Err(EINVAL);
        }
        let buffer_size = in_range("buffer_size", raw.buffer_size, limits::BUFFER_SIZE)?;
        // The default (0) means a quarter of the event buffer.
        let buffer_watershed = match raw.buffer_watershed {
            0 => buffer_size / 4,
            w if w < buffer_size => w,
            w => {
                pr_err!("invalid buffer_watershed={w}: must be below buffer_size={buffer_size}\n");
                return Err(EINVAL);
            }
        };
        let event = parse_event(raw.event)?;
        let mode = parse_mode(raw.mode)?;
        let (sample_period, sample_freq) = match (raw.sample_period, raw.sample_freq) {
            (0, 0) => (DEFAULT_PERIOD, 0),
            (p, 0) => (in_range("sample_period", p, limits::SAMPLE_PERIOD)?, 0),
            (0, f) => (0, in_range("sample_freq", f, limits::SAMPLE_FREQ)?),
            (p, f) => {
                pr_err!("invalid sample_period={p} with sample_freq={f}: give one of them\n");
                return Err(EINVAL);
            }
        };
        if raw.exclude_user && raw.exclude_kernel {
            pr_err!("invalid exclude_user=1 with exclude_kernel=1: nothing would be sampled\n");
            return Err(EINVAL);
        }
        let backtrace_depth = in_range(
            "backtrace_depth",
            raw.backtrace_depth,
            limits::BACKTRACE_DEPTH,
        )?;
        let user_backtrace_depth = in_range(
            "user_backtrace_depth",
            raw.user_backtrace_depth,
            limits::USER_BACKTRACE_DEPTH,
        )?;
        Ok(Config {
            cpu_buffer_size: to_usize(cpu_buffer_size)?,
            buffer_size: to_usize(buffer_size)?,
            buffer_watershed: to_usize(buffer_watershed)?,
            event,
            sample_period,
            sample_freq,
            exclude_user: raw.exclude_user,
            exclude_kernel: raw.exclude_kernel,
            backtrace_depth: u32::try_from(backtrace_depth).map_err(|_| EINVAL)?,
            user_backtrace_depth: u32::try_from(user_backtrace_depth).map_err(|_| EINVAL)?,
            mode,
        })
    }
}

#[cfg(oprofile_rs_kunit)]
#[kunit_tests(oprofile_rs_params)]
mod tests {
    use super::*;

    fn good() -> Raw<'static> {
        Raw {
            cpu_buffer_size: 65536,
            buffer_size: 1 << 20,
            buffer_watershed: 0,
            event: b"default",
            sample_period: 0,
            sample_freq: 0,
            exclude_user: false,
            exclude_kernel: false,
            backtrace_depth: 0,
            // The parameter's default (oprofile.rs): user stacks are on.
            user_backtrace_depth: 32,
            mode: b"consume",
        }
    }

    #[test]
    fn defaults_are_valid() {
        let c = Config::validate(good());
        assert_eq!(c.map(|c| c.buffer_watershed), Ok(1 << 18));
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
        assert_eq!(c.map(|c| c.buffer_watershed), Ok(100));
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
        for bad in [&b"CYCLES"[..], b"cycles ", b"cpu_clock", b"x"] {
            assert_eq!(parse_event(bad), Err(EINVAL));
        }
        for e in Event::ALL {
            assert_eq!(Event::from_index(e.index()), e);
        }
    }

    #[test]
    fn period_or_frequency() {
        let c = Config::validate(good());
        assert_eq!(
            c.map(|c| (c.sample_period, c.sample_freq)),
            Ok((DEFAULT_PERIOD, 0))
        );
        let c = Config::validate(Raw {
            sample_freq: 4000,
            ..good()
        });
        assert_eq!(c.map(|c| (c.sample_period, c.sample_freq)), Ok((0, 4000)));
        let both = Raw {
            sample_period: 100_000,
            sample_freq: 4000,
            ..good()
        };
        assert_eq!(Config::validate(both), Err(EINVAL));
        let too_fast = Raw {
            sample_freq: 100_001,
            ..good()
        };
        assert_eq!(Config::validate(too_fast), Err(EINVAL));
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
                sample_period: 9_999,
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
