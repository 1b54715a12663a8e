// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Marks the host build of the stream format so that it is compiled `no_std`
//! (in the kernel the same file is a module of a `no_std` crate).

fn main() {
    println!("cargo::rustc-check-cfg=cfg(format_host)");
    println!("cargo::rustc-cfg=format_host");
}
