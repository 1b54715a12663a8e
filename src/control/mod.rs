// SPDX-License-Identifier: GPL-2.0

//! The control plane: what users drive. Load parameters, settings changed at
//! run time, the debugfs files, the device, the counters, and the profiler's
//! lifecycle (start, stop, CPU hotplug).
//!
//! May import: `path`, `shims`, `format`, `ringbuf` and each other (without
//! a circle); never `kunit`.
//!
//! | file | part |
//! |---|---|
//! | `params.rs` | the parameters' syntax, limits and load-time validation |
//! | `settings.rs` | the configuration in force and its generation |
//! | `config.rs` | changes at run time (`config`, the debugfs files, `SET_CONFIG`) |
//! | `debugfs.rs` | `/sys/kernel/debug/oprofile/`: switches, settings, statistics |
//! | `device.rs` | `/dev/oprofile/buffer`: read, poll, mmap, ioctls |
//! | `profiler.rs` | the profiler: start, stop, `tracing_on`, CPU hotplug, the periodic sync |
//! | `counter_table.rs` | the per-CPU counters, one per (CPU, event) |
//! | `task_counters.rs` | counters bound to one process (`pid=N`) |
//! | `unwind_loader.rs` | the unwind tables loaded through the device, published to the sample path |

pub(crate) mod config;
pub(crate) mod counter_table;
pub(crate) mod debugfs;
pub(crate) mod device;
pub(crate) mod params;
pub(crate) mod profiler;
pub(crate) mod settings;
pub(crate) mod task_counters;
pub(crate) mod unwind_loader;
