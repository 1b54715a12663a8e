// SPDX-License-Identifier: GPL-2.0

//! Kernel shims: small safe wrappers of what the kernel crate lacks, the
//! home of the module's FFI (`glue.rs` declares the functions of `glue.c`)
//! and of most of its `unsafe`. Each file wraps one kernel facility and
//! knows nothing of profiling.
//!
//! May import: the kernel crate, `format`, `ringbuf` and each other; never
//! `path`, `control` or `kunit`.
//!
//! | file | wraps |
//! |---|---|
//! | `glue.rs`, `glue.c`, `glue.h` | inline functions and macros Rust cannot call, each saying why it exists |
//! | `perf.rs` | in-kernel perf counters and their overflow handler (NMI, hard-IRQ or task context) |
//! | `clock_jitter.rs` | drawn intervals for perf's clock events, which otherwise keep in step with the tick |
//! | `task.rs` | the current task's ids and name; counted references to a process's threads |
//! | `inline_atomic.rs` | the kernel's atomics without a call, for the sample path |
//! | `clock.rs` | the stream's clock, a monotonic clock for the suites, a "newest time" atomic |
//! | `cpu.rs` | whether a CPU is online |
//! | `mm.rs` | counted references to address spaces, the current one's identity |
//! | `hotplug.rs` | CPU hotplug callbacks (a dynamic cpuhp state) |
//! | `cpu_work.rs` | a self-rearming delayed work per possible CPU |
//! | `work_item.rs` | one work item run in process context, queued from any context |
//! | `poll_misc.rs` | a misc device with `poll`, `mmap` and a read mode per file |
//! | `debugfs_files.rs` | debugfs files with read and write callbacks |
//! | `ratelimit.rs` | rate-limited log lines |

pub(crate) mod clock;
pub(crate) mod clock_jitter;
pub(crate) mod cpu;
pub(crate) mod cpu_work;
pub(crate) mod debugfs_files;
pub(crate) mod glue;
pub(crate) mod hotplug;
pub(crate) mod inline_atomic;
pub(crate) mod mm;
pub(crate) mod perf;
pub(crate) mod poll_misc;
pub(crate) mod ratelimit;
pub(crate) mod task;
pub(crate) mod work_item;
