// SPDX-License-Identifier: GPL-2.0

//! Marks the host build of the ring buffer so that it is compiled `no_std`
//! (in the kernel the same file is a module of a `no_std` crate), and says
//! whether it uses the CPU-local read-modify-writes (`host_local_rmw`:
//! x86_64 Linux, not under loom, the nesting model or Miri; see
//! `src/ringbuf/atomics.rs`).

use std::env;

fn main() {
    println!("cargo::rustc-check-cfg=cfg(ringbuf_host)");
    println!("cargo::rustc-check-cfg=cfg(host_local_rmw)");
    println!("cargo::rustc-cfg=ringbuf_host");
    let is = |key: &str, want: &str| env::var(key).is_ok_and(|v| v == want);
    let set = |key: &str| env::var_os(key).is_some();
    if is("CARGO_CFG_TARGET_ARCH", "x86_64")
        && is("CARGO_CFG_TARGET_OS", "linux")
        && !set("CARGO_CFG_LOOM")
        && !set("CARGO_CFG_RINGBUF_NESTING")
        && !set("CARGO_CFG_MIRI")
    {
        println!("cargo::rustc-cfg=host_local_rmw");
    }
}
