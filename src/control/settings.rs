// SPDX-License-Identifier: GPL-2.0

//! The configuration in force: the validated parameters ([`Config`]), the
//! events they name resolved to what the counters count (`default`: cycles
//! or cpu-clock), and the generation the stream's CONFIG records carry (1 at
//! load, one more at each change, see `config.rs`).

use kernel::prelude::*;

use crate::{
    control::params::{write_list, Config, EventChoice, RecordMode},
    format::{self, MAX_EVENTS},
    shims::perf::{Attr, Event},
};

/// The configuration in force (a copy is a consistent view).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Settings {
    pub(crate) config: Config,
    /// `config.events` resolved, in the same order (those past its length
    /// unused).
    pub(crate) resolved: [Event; MAX_EVENTS],
    /// The CONFIG generation: 1 at load, one more at each change.
    pub(crate) generation: u32,
}

impl Settings {
    /// The settings of `config` at `generation`, with `default` resolved to
    /// `default_event`.
    pub(crate) fn new(config: Config, default_event: Event, generation: u32) -> Self {
        let mut resolved = [Event::CpuClock; MAX_EVENTS];
        for (r, s) in resolved.iter_mut().zip(config.events.as_slice()) {
            *r = match s.choice {
                EventChoice::Default => default_event,
                EventChoice::Only(e) => e,
            };
        }
        Self {
            config,
            resolved,
            generation,
        }
    }

    /// The sampled events, in order (a SAMPLE's `event` is an index here).
    pub(crate) fn events(&self) -> &[Event] {
        self.resolved.get(..self.config.events.len()).unwrap_or(&[])
    }

    /// How the counters of event `i` sample.
    pub(crate) fn attr(&self, i: usize) -> Option<Attr> {
        let spec = self.config.events.as_slice().get(i)?;
        Some(Attr {
            event: *self.resolved.get(i)?,
            period: spec.period,
            freq: spec.freq,
            exclude_user: self.config.exclude_user,
            exclude_kernel: self.config.exclude_kernel,
        })
    }

    /// The CONFIG record of these settings, stamped `time`.
    pub(crate) fn record(&self, time: u64) -> format::Config {
        let c = &self.config;
        let mut rec = format::Config {
            time,
            generation: self.generation,
            mode: match c.mode {
                RecordMode::Consume => format::MODE_CONSUME,
                RecordMode::Overwrite => format::MODE_OVERWRITE,
            },
            backtrace_depth: c.backtrace_depth.min(u32::from(u8::MAX)) as u8,
            user_backtrace_depth: c.user_backtrace_depth.min(u32::from(u8::MAX)) as u8,
            cpu_buffer_size: c.cpu_buffer_size as u64,
            buffer_size: c.buffer_size as u64,
            buffer_watershed: c.buffer_watershed as u64,
            nr_events: self.events().len() as u8,
            cgroup: c.cgroup,
            pid: c.pid,
            ..format::Config::default()
        };
        for (i, d) in rec.events.iter_mut().enumerate() {
            let Some(a) = self.attr(i) else { break };
            let (perf_type, config) = a.event.raw();
            let mut flags = 0;
            if a.freq != 0 {
                flags |= format::EVENT_FLAG_FREQ;
            }
            if a.exclude_user {
                flags |= format::EVENT_FLAG_EXCLUDE_USER;
            }
            if a.exclude_kernel {
                flags |= format::EVENT_FLAG_EXCLUDE_KERNEL;
            }
            if a.event.is_hardware() {
                flags |= format::EVENT_FLAG_NMI;
            }
            *d = format::EventDesc {
                perf_type,
                flags,
                config,
                value: if a.freq != 0 { a.freq } else { a.period },
                name: format::EventDesc::name_field(a.event.name().as_bytes()),
            };
        }
        rec
    }
}

/// The values of the runtime-changeable keys in their parameter syntax,
/// each with its name (the debugfs files and the `config` text).
impl Settings {
    /// Writes the value of `key` (a debugfs file's name) in its
    /// parameter syntax, without a newline; an error for another key.
    pub(crate) fn write_value(
        &self,
        key: &[u8],
        f: &mut core::fmt::Formatter<'_>,
    ) -> core::fmt::Result {
        let c = &self.config;
        let specs = c.events.as_slice();
        match key {
            b"event" => write_list(f, self.events().iter().map(|e| e.name())),
            b"sample_period" => write_list(f, specs.iter().map(|s| s.period)),
            b"sample_freq" => write_list(f, specs.iter().map(|s| s.freq)),
            b"backtrace_depth" => write!(f, "{}", c.backtrace_depth),
            b"user_backtrace_depth" => write!(f, "{}", c.user_backtrace_depth),
            b"cpu_buffer_size" => write!(f, "{}", c.cpu_buffer_size),
            b"buffer_size" => write!(f, "{}", c.buffer_size),
            b"buffer_watershed" => write!(f, "{}", c.buffer_watershed),
            b"exclude_user" => write!(f, "{}", u8::from(c.exclude_user)),
            b"exclude_kernel" => write!(f, "{}", u8::from(c.exclude_kernel)),
            b"mode" => f.write_str(c.mode.name()),
            b"cgroup" => crate::path::cgroup::write_value(c.cgroup, f),
            b"user_stack_size" => write!(f, "{}", c.user_stack_size),
            b"pid" => write!(f, "{}", c.pid),
            b"user_stack_fit" => write!(f, "{}", u8::from(c.user_stack_fit)),
            _ => Err(core::fmt::Error),
        }
    }
}

/// The runtime-changeable keys, in the order the `config` text lists them:
/// the stream format's one list.
pub(crate) use crate::format::CONFIG_KEYS as KEYS;

/// The `config` text: one `key=value` line per [`KEYS`].
pub(crate) struct ConfigText<'a>(pub(crate) &'a Settings);

impl core::fmt::Display for ConfigText<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        for key in KEYS {
            write!(f, "{key}=")?;
            self.0.write_value(key.as_bytes(), f)?;
            f.write_str("\n")?;
        }
        Ok(())
    }
}

/// Writes the `config` text of `s` into `out`.
pub(crate) fn write_config_text(s: &Settings, out: &mut KVec<u8>) -> kernel::error::Result {
    struct Out<'a>(&'a mut KVec<u8>, kernel::error::Result);
    impl kernel::fmt::Write for Out<'_> {
        fn write_str(&mut self, t: &str) -> kernel::fmt::Result {
            if let Err(e) = self.0.extend_from_slice(t.as_bytes(), GFP_KERNEL) {
                self.1 = Err(e.into());
                return Err(kernel::fmt::Error);
            }
            Ok(())
        }
    }
    let mut o = Out(out, Ok(()));
    let r = kernel::fmt::Write::write_fmt(&mut o, format_args!("{}", ConfigText(s)));
    o.1?;
    r.map_err(|_| kernel::error::code::EINVAL)
}

/// One key's value and a newline (a debugfs file's text).
pub(crate) struct ValueText<'a>(pub(crate) &'a Settings, pub(crate) &'a str);

impl core::fmt::Display for ValueText<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        self.0.write_value(self.1.as_bytes(), f)?;
        f.write_str("\n")
    }
}
