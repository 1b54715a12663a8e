// SPDX-License-Identifier: GPL-2.0

//! CPUs: whether one is online (the kernel crate's `Cpumask` has no
//! `cpu_online()`).

use kernel::{bindings, cpu::CpuId, cpumask::Cpumask};

/// Whether `cpu` is online (the kernel's `cpu_online()`).
pub(crate) fn cpu_online(cpu: CpuId) -> bool {
    // SAFETY: `__cpu_online_mask` is a valid cpumask for the kernel's
    // lifetime, only read here.
    let online = unsafe { Cpumask::from_raw(&raw const bindings::__cpu_online_mask) };
    online.test(cpu)
}
