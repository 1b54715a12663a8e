// SPDX-License-Identifier: GPL-2.0

//! The KUnit suites of `oprofile_rs.ko` that need more than the file they
//! test, and their helpers. Compiled only into the test rig's module
//! (`make OPROFILE_RS_KUNIT=1`, `scripts/build-module --kunit`); the suites
//! run at every load.
//!
//! | file | suite / helper |
//! |---|---|
//! | `atomics.rs` | `oprofile_rs_ringbuf_atomics`: the ring core's atomics (x86-64 inline assembly) against the kernel's; store buffering with full barriers |
//! | `ringbuf_stress.rs` | `oprofile_rs_ringbuf_stress`: the ring buffer under task, hard-IRQ and NMI writers |
//! | `quiesce.rs` | `oprofile_rs_quiesce`: `tracing_on=0` waits for a hard-IRQ or NMI writer's open record |
//! | `sampler_nmi.rs` | `oprofile_rs_sampler_nmi`: the sample path in NMI context, read back with the format's readers; a handler across a snapshot's pause |
//! | `stream.rs` | `oprofile_rs_stream`: the module's stream header and records read back with the format's readers |
//! | `nmi.rs`, `nmi_glue.c` | CPU-local NMI handlers and self-NMI IPIs (the kernel crate has none) |
//! | `kthread.rs` | kernel threads bound to a CPU (also used by `bench/`, the benchmark module) |
//!
//! Unit suites of one file stay in that file (`params.rs`, `debugfs.rs`,
//! `event_buffer.rs`, `sync_stage.rs`, `counter_table.rs`).

mod atomics;
mod kthread;
mod nmi;
mod quiesce;
mod ringbuf_stress;
pub(crate) mod sampler_nmi;
mod stream;
