// SPDX-License-Identifier: GPL-2.0

//! The memory the module's buffers take, and its cap.
//!
//! Buffers scale with the CPUs that have been online: each gets, when it
//! first comes online (`sync.rs`, `Buffers::provision`), a ring of
//! `cpu_buffer_size` bytes and, in consume mode, a sync staging area; in
//! overwrite mode a snapshot staging area of the ring's size (plus one
//! largest record) and its index instead; it keeps them when it goes
//! offline (what it recorded is still read). A possible CPU that never
//! came online has only small bookkeeping (a placeholder ring of 32 bytes,
//! its counters). The event buffer adds `buffer_size`, a meta page and its
//! record index. At 384 CPUs and the largest `cpu_buffer_size` (64 MiB)
//! that is 48 GiB in overwrite mode: a request that would take more than a
//! quarter of the machine's RAM is refused with `ENOMEM` (and a
//! rate-limited log line), at load and at run time for the online CPUs
//! (and the offline ones that have buffers), before anything is allocated
//! or changed, and again for each CPU that comes online (which is then
//! refused). The allocations made for a run-time change are charged to the
//! memory cgroup of the process that asks (`GFP_KERNEL_ACCOUNT`).

use kernel::prelude::*;

use crate::{format, path::sync_stage::STAGE_BYTES, shims::ratelimit::pr_ratelimited};

/// Bytes of a CPU's scratch areas besides its ring: the sampler's user
/// stack copy area and unwind-table lookup cache, and the sync's record
/// scratch.
pub(crate) const SCRATCH_BYTES: usize = format::MAX_USER_STACK
    + crate::path::unwind_tables::LOOKUP_CACHE_BYTES
    + format::MAX_STACK_RECORD;
/// Bytes of a snapshot index entry (`snapshot.rs`), rounded up.
const INDEX_ENTRY_BYTES: usize = 16;
/// The fewest bytes a record takes in a ring (`snapshot.rs`'s bound).
const MIN_RING_RECORD: usize = 40;
/// Bytes of the event buffer's record index per byte of it
/// (`record_index.rs`: 8 bytes per KiB and per 2 KiB).
const fn event_index_bytes(buffer_size: usize) -> usize {
    buffer_size / 1024 * 8 + buffer_size / 2048 * 8
}

/// Bytes the event buffer of `buffer_size` bytes takes, with its meta page
/// and its record index.
pub(crate) fn event_buffer_bytes(buffer_size: usize) -> usize {
    buffer_size
        .saturating_add(kernel::page::PAGE_SIZE)
        .saturating_add(event_index_bytes(buffer_size))
}

/// The CPUs online now.
pub(crate) fn online_cpus() -> usize {
    (0..kernel::cpu::nr_cpu_ids())
        .filter_map(kernel::cpu::CpuId::from_u32)
        .filter(|c| crate::shims::cpu::cpu_online(*c))
        .count()
}

/// The bytes the buffers take for `nr_cpus` CPUs with buffers (`None`:
/// more than a `usize` holds).
pub(crate) fn buffer_bytes(
    nr_cpus: usize,
    cpu_buffer_size: usize,
    buffer_size: usize,
    overwrite: bool,
) -> Option<usize> {
    let per_cpu = if overwrite {
        let staging = cpu_buffer_size.checked_add(format::MAX_STACK_RECORD)?;
        let index = (cpu_buffer_size / MIN_RING_RECORD + 1).checked_mul(INDEX_ENTRY_BYTES)?;
        cpu_buffer_size.checked_add(staging)?.checked_add(index)?
    } else {
        cpu_buffer_size.checked_add(STAGE_BYTES)?
    }
    .checked_add(SCRATCH_BYTES)?;
    nr_cpus
        .checked_mul(per_cpu)?
        .checked_add(buffer_size)?
        .checked_add(kernel::page::PAGE_SIZE)?
        .checked_add(event_index_bytes(buffer_size))
}

/// The most the buffers may take: a quarter of the machine's RAM.
pub(crate) fn cap() -> usize {
    // SAFETY: reads a counter; no precondition.
    let ram = unsafe { crate::shims::glue::oprofile_rs_totalram_bytes() };
    usize::try_from(ram / 4).unwrap_or(usize::MAX)
}

/// Checks that buffers of these sizes stay within [`cap`]: `ENOMEM` and a
/// rate-limited log line naming the sizes if not.
pub(crate) fn check(
    nr_cpus: usize,
    cpu_buffer_size: usize,
    buffer_size: usize,
    overwrite: bool,
) -> Result {
    let cap = cap();
    match buffer_bytes(nr_cpus, cpu_buffer_size, buffer_size, overwrite) {
        Some(b) if b <= cap => Ok(()),
        b => {
            pr_ratelimited!(
                pr_err,
                "buffers of {} KiB (cpu_buffer_size={cpu_buffer_size} x {nr_cpus} CPUs{}, buffer_size={buffer_size}) exceed the cap of {} KiB, a quarter of RAM (ENOMEM)\n",
                b.map_or(u64::MAX, |b| (b / 1024) as u64),
                if overwrite { ", overwrite" } else { "" },
                cap / 1024
            );
            Err(ENOMEM)
        }
    }
}

#[cfg(oprofile_rs_kunit)]
#[kunit_tests(oprofile_rs_buffer_memory)]
mod tests {
    use super::*;

    #[test]
    fn counts_every_buffer_and_refuses_past_the_cap() {
        let consume = buffer_bytes(4, 65536, 1 << 20, false);
        let overwrite = buffer_bytes(4, 65536, 1 << 20, true);
        assert_eq!(
            consume,
            Some(
                4 * (65536 + STAGE_BYTES + SCRATCH_BYTES)
                    + (1 << 20)
                    + kernel::page::PAGE_SIZE
                    + 12288
            )
        );
        assert!(overwrite > consume);
        assert_eq!(buffer_bytes(usize::MAX, 65536, 1 << 20, true), None);
        assert!(check(4, 65536, 1 << 20, true).is_ok());
        // 8192 CPUs of 64 MiB: past any test machine's quarter of RAM.
        assert_eq!(check(8192, 64 << 20, 1 << 20, false), Err(ENOMEM));
    }
}
