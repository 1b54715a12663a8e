// SPDX-License-Identifier: GPL-2.0

//! oprofile_rs_bench: the ring-buffer writer benchmark (`ringbuf_bench.rs`)
//! as a module of its own (as ftrace ships `ring_buffer_benchmark.ko`), so
//! that no benchmark code ships in `oprofile_rs.ko`: its sources live in
//! `bench/`, outside the module's `src/`. It is built with the test rig's KUnit variant
//! (`OPROFILE_RS_KUNIT=1`), never in the module users load.
//!
//! `insmod oprofile_rs_bench.ko secs=N` runs the benchmark during the load
//! (`insmod` blocks for `N` seconds, 1..=60) and logs one
//! `oprofile_rs_bench: bench: entries=… ns/entry=…` line. The load fails with
//! `EINVAL` for `secs` out of range, `ENODEV` without CPUs 0 and 1 online,
//! `ENOMEM` or the kthread error if it cannot start, and `EIO` if records were
//! torn or went unaccounted; on success the module stays loaded (it does
//! nothing more) until `rmmod`. `scripts/bench-ring` runs it.

use kernel::prelude::*;

// The kthread helper of the KUnit suites (`src/kunit/`); `wait_until` serves
// only them.
#[allow(dead_code)]
#[path = "../src/kunit/kthread.rs"]
mod kthread;
// The ring-buffer core is shared with `oprofile_rs.ko` and the host crate
// `crates/ringbuf`; the benchmark uses part of its API.
#[allow(dead_code, unreachable_pub, unused_imports)]
#[path = "../src/ringbuf/mod.rs"]
mod ringbuf;
mod ringbuf_bench;

module! {
    type: BenchModule,
    name: "oprofile_rs_bench",
    authors: ["oprofile-rs developers"],
    description: "oprofile_rs ring-buffer writer benchmark (runs at load)",
    license: "GPL",
    params: {
        secs: u64 {
            default: 10,
            description: "Seconds of writing (1..60)",
        },
    },
}

struct BenchModule;

impl kernel::Module for BenchModule {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        ringbuf_bench::run(module_parameters::secs.value())?;
        Ok(BenchModule)
    }
}
