// SPDX-License-Identifier: GPL-2.0

//! Module parameters, validated once at load time.
//!
//! The `module!` macro stores the raw values; [`Config::from_params`] checks
//! every one and refuses the load with `EINVAL` and one log line naming the
//! offending parameter.

use kernel::prelude::*;

/// Limits of each parameter, shared by the check and its error message.
pub(crate) mod limits {
    /// Bytes per per-CPU ring buffer (a power of two).
    pub(crate) const CPU_BUFFER_SIZE: (u64, u64) = (4096, 64 << 20);
    /// Bytes of the global event buffer.
    pub(crate) const BUFFER_SIZE: (u64, u64) = (64 << 10, 256 << 20);
    /// Sample period of the cpu-clock event in ns (10 µs .. 1 s).
    pub(crate) const SAMPLE_PERIOD: (u64, u64) = (10_000, 1_000_000_000);
    /// Kernel callchain entries recorded per sample.
    pub(crate) const BACKTRACE_DEPTH: (u64, u64) = (0, 64);
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
    /// Sample period (ns for cpu-clock, events for hardware counters).
    pub(crate) sample_period: u64,
    /// Maximum kernel callchain depth (0: none).
    pub(crate) backtrace_depth: u32,
}

/// The raw parameter values, as given to insmod.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Raw {
    pub(crate) cpu_buffer_size: u64,
    pub(crate) buffer_size: u64,
    pub(crate) buffer_watershed: u64,
    pub(crate) sample_period: u64,
    pub(crate) backtrace_depth: u64,
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
    pub(crate) fn validate(raw: Raw) -> Result<Config> {
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
        let sample_period = in_range("sample_period", raw.sample_period, limits::SAMPLE_PERIOD)?;
        let backtrace_depth = in_range(
            "backtrace_depth",
            raw.backtrace_depth,
            limits::BACKTRACE_DEPTH,
        )?;
        Ok(Config {
            cpu_buffer_size: to_usize(cpu_buffer_size)?,
            buffer_size: to_usize(buffer_size)?,
            buffer_watershed: to_usize(buffer_watershed)?,
            sample_period,
            backtrace_depth: u32::try_from(backtrace_depth).map_err(|_| EINVAL)?,
        })
    }
}

#[kunit_tests(oprofile_rs_params)]
mod tests {
    use super::*;

    fn good() -> Raw {
        Raw {
            cpu_buffer_size: 65536,
            buffer_size: 1 << 20,
            buffer_watershed: 0,
            sample_period: 1_000_000,
            backtrace_depth: 0,
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
}
