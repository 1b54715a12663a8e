// SPDX-License-Identifier: GPL-2.0

//! Marks the host build of the snapshot planner so that it is compiled
//! `no_std` (in the kernel the same file is a module of a `no_std` crate).

fn main() {
    println!("cargo::rustc-check-cfg=cfg(snapshot_plan_host)");
    println!("cargo::rustc-cfg=snapshot_plan_host");
}
