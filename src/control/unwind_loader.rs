// SPDX-License-Identifier: GPL-2.0

//! The unwind tables the tool loads through the device (`UNWIND_TABLE`,
//! `UNWIND_MAP`, `UNWIND_RESET`; `format::unwind`, `Documentation/design.md`,
//! "In-kernel unwinding"), and the registry of mappings it publishes to the
//! sample path (`path/unwind_tables.rs`).
//!
//! Tables and mappings belong to the open file that loaded them: its last
//! close (or `UNWIND_RESET`) drops them, so a tool that dies leaves nothing
//! behind. All of them together hold at most `MAX_TOTAL_BYTES` of tables and
//! `MAX_MAPS` mappings (`ENOSPC` beyond). A mapping is taken only if the
//! process maps that range executable from that file now (checked under the
//! address space's lock), needs `CAP_PERFMON` (it decides which words of the
//! process's stack the samples record), and holds a count on the address
//! space, whose address is the identity the sample path compares: a new
//! process cannot inherit another's tables. Mappings of processes that have
//! exited are dropped at the next change; a mapping replaces those of its
//! address space it overlaps (the process unmapped them). Each change
//! publishes a new registry and frees the old one after a grace period: the
//! ioctls sleep, the sample path never waits.

use kernel::{
    alloc::KVVec,
    prelude::*,
    sync::Arc,
    uaccess::{UserPtr, UserSlice},
};

use crate::{
    format::unwind::{MAP_LEN, MAX_MAPS, MAX_ROWS, MAX_TOTAL_BYTES, ROW_LEN, TABLE_HEAD_LEN},
    path::unwind_tables::{Map, Registry, Table, IN_FORCE},
    shims::{mm::MmRef, ratelimit::pr_ratelimited},
};

/// A table and who loaded it.
struct Loaded {
    owner: usize,
    id: u32,
    table: Arc<Table>,
}

/// The tables and mappings loaded through the device's files (under the
/// profiler's `unwind` lock).
pub(crate) struct UnwindLoader {
    tables: KVec<Loaded>,
    /// Sorted by [`Map::key`], no overlaps in an address space: what the
    /// registry in force holds.
    maps: KVVec<Map>,
    /// The address space of the process that loaded each owner's first
    /// table (its file's owner): its samples ask for no tables.
    loaders: KVec<(usize, Arc<MmRef>)>,
    /// Bytes of `tables`.
    bytes: usize,
    /// The number of the next table (never 0; never reused).
    next_id: u32,
}

/// One `struct oprofile_rs_unwind_map`.
struct MapRequest {
    pid: u32,
    table: u32,
    start: u64,
    end: u64,
    bias: u64,
    inode: u64,
}

impl UnwindLoader {
    /// Nothing loaded.
    pub(crate) const fn new() -> Self {
        Self {
            tables: KVec::new(),
            maps: KVVec::new(),
            loaders: KVec::new(),
            bytes: 0,
            next_id: 1,
        }
    }

    /// `UNWIND_TABLE`: loads the table of `struct { __u64 ptr; __u64 len; }`
    /// at `arg` for `owner`; its number.
    pub(crate) fn load_table(&mut self, owner: usize, arg: usize) -> Result<u32> {
        let mut r = UserSlice::new(UserPtr::from_addr(arg), 16).reader();
        let ptr = usize::try_from(r.read::<u64>()?).map_err(|_| EFAULT)?;
        let len = r.read::<u64>()?;
        let max = TABLE_HEAD_LEN + MAX_ROWS as usize * ROW_LEN;
        let len = usize::try_from(len)
            .ok()
            .filter(|&l| (TABLE_HEAD_LEN + ROW_LEN..=max).contains(&l))
            .ok_or_else(|| {
                pr_ratelimited!(
                    pr_info,
                    "UNWIND_TABLE: {len} bytes, not a table's size (EINVAL)\n"
                );
                EINVAL
            })?;
        if self.bytes.saturating_add(len) > MAX_TOTAL_BYTES {
            pr_ratelimited!(
                pr_info,
                "UNWIND_TABLE: {len} bytes more than the {MAX_TOTAL_BYTES} the tables may hold (ENOSPC)\n"
            );
            return Err(ENOSPC);
        }
        let id = self.next_id;
        let next = id.checked_add(1).ok_or(ENOSPC)?;
        let mut bytes = KVVec::from_elem(0u8, len, GFP_KERNEL)?;
        UserSlice::new(UserPtr::from_addr(ptr), len)
            .reader()
            .read_slice(&mut bytes)?;
        let table = Table::new(bytes).map_err(|e| {
            pr_ratelimited!(pr_info, "UNWIND_TABLE: refused, {e:?} (EINVAL)\n");
            EINVAL
        })?;
        let table = Arc::new(table, GFP_KERNEL)?;
        // (A kernel thread has no address space: none to keep quiet.)
        let mut new_loader = false;
        if !self.loaders.iter().any(|(o, _)| *o == owner) {
            if let Ok(mm) = MmRef::of_current() {
                self.loaders
                    .push((owner, Arc::new(mm, GFP_KERNEL)?), GFP_KERNEL)?;
                new_loader = true;
            }
        }
        self.tables.push(Loaded { owner, id, table }, GFP_KERNEL)?;
        self.bytes += len;
        self.next_id = next;
        // A registry from the first table on, mappings or not, so that the
        // samples of every process ask for theirs ([`Self::publish`]); and
        // a new one when a loader comes, whose own samples must not ask.
        // Not at every table: each registry is a new generation, which
        // makes the CPUs ask again at once.
        if new_loader || self.tables.len() == 1 {
            self.publish();
        }
        Ok(id)
    }

    /// `UNWIND_MAP`: unwinds a mapping of a process with a table `owner`
    /// loaded, from the `struct oprofile_rs_unwind_map` at `arg`.
    pub(crate) fn map(&mut self, owner: usize, arg: usize) -> Result {
        let mut r = UserSlice::new(UserPtr::from_addr(arg), MAP_LEN).reader();
        let pid = r.read::<u32>()?;
        let table = r.read::<u32>()?;
        let req = MapRequest {
            pid,
            table,
            start: r.read::<u64>()?,
            end: r.read::<u64>()?,
            bias: r.read::<u64>()?,
            inode: r.read::<u64>()?,
        };
        let Some(t) = self
            .tables
            .iter()
            .find(|t| t.owner == owner && t.id == req.table)
        else {
            pr_ratelimited!(
                pr_info,
                "UNWIND_MAP: no table {} loaded through this file (EINVAL)\n",
                req.table
            );
            return Err(EINVAL);
        };
        let table = t.table.clone();
        let mm = MmRef::of_mapping(req.pid, req.start, req.end, req.inode)?;
        // The count already held for this address space, if any: one count
        // per address space, shared by its maps (the new one is dropped).
        let mm = match self.maps.iter().find(|m| m.mm.id() == mm.id()) {
            Some(m) => m.mm.clone(),
            None => Arc::new(mm, GFP_KERNEL)?,
        };
        let new = Map {
            mm,
            start: req.start,
            end: req.end,
            bias: req.bias,
            table,
            owner,
        };
        // The maps kept: not of exited processes, not overlapping the new one.
        let mut maps = KVVec::with_capacity(self.maps.len() + 1, GFP_KERNEL)?;
        for m in self.maps.iter() {
            let overlaps = m.mm.id() == new.mm.id() && m.start < new.end && new.start < m.end;
            if !overlaps && m.mm.alive() {
                maps.push(m.clone(), GFP_KERNEL)?;
            }
        }
        if maps.len() >= MAX_MAPS {
            pr_ratelimited!(
                pr_info,
                "UNWIND_MAP: {MAX_MAPS} mappings already (ENOSPC)\n"
            );
            return Err(ENOSPC);
        }
        let at = maps.partition_point(|m| m.key() < new.key());
        maps.insert_within_capacity(at, new).map_err(|_| ENOMEM)?;
        let registry = Registry::new(copy(&maps)?, self.loader_ids()?)?;
        let registry = KBox::new(registry, GFP_KERNEL)?;
        self.maps = maps;
        IN_FORCE.replace(Some(registry));
        Ok(())
    }

    /// `UNWIND_RESET` and the last close of a file: drops what `owner`
    /// loaded. Cannot fail: without memory for the new registry, none is in
    /// force (the walks use frame pointers) until the next change.
    pub(crate) fn reset(&mut self, owner: usize) {
        if !self.tables.iter().any(|t| t.owner == owner) {
            return;
        }
        self.maps.retain(|m| m.owner != owner && m.mm.alive());
        self.loaders.retain(|(o, _)| *o != owner);
        let mut bytes = 0;
        self.tables.retain(|t| {
            let keep = t.owner != owner;
            if keep {
                bytes += t.table.len();
            }
            keep
        });
        self.bytes = bytes;
        self.publish();
    }

    /// The identities of the loaders' address spaces, for a registry.
    fn loader_ids(&self) -> Result<KVVec<usize>> {
        let mut v = KVVec::with_capacity(self.loaders.len(), GFP_KERNEL)?;
        for (_, mm) in self.loaders.iter() {
            v.push(mm.id(), GFP_KERNEL)?;
        }
        Ok(v)
    }

    /// Puts a registry of `maps` in force; none if no table is loaded
    /// either. With tables and no mapping yet (`record` system-wide before
    /// it mapped a process, or before its command's exec), a registry
    /// without mappings: the samples of a process ask for its tables
    /// (`TablesWanted`, only while a registry is in force), where without
    /// one nothing asked and a program started after a system-wide
    /// `record` was walked by frame pointers until `record` read the
    /// stream anyway, a second later (506 of 1,441 samples whole in
    /// `ustack-shlib.sh`).
    fn publish(&self) {
        let registry = if self.maps.is_empty() && self.tables.is_empty() {
            None
        } else {
            let made = copy(&self.maps)
                .and_then(|maps| Registry::new(maps, self.loader_ids()?))
                .and_then(|r| KBox::new(r, GFP_KERNEL).map_err(Error::from));
            match made {
                Ok(r) => Some(r),
                Err(_) => {
                    pr_ratelimited!(
                        pr_warn,
                        "unwind tables: no memory for the registry; frame pointers until the next change\n"
                    );
                    None
                }
            }
        };
        IN_FORCE.replace(registry);
    }
}

/// A copy of `maps` (counted references) for a registry.
fn copy(maps: &[Map]) -> Result<KVVec<Map>> {
    let mut v = KVVec::with_capacity(maps.len(), GFP_KERNEL)?;
    for m in maps {
        v.push(m.clone(), GFP_KERNEL)?;
    }
    Ok(v)
}

impl Drop for UnwindLoader {
    fn drop(&mut self) {
        IN_FORCE.replace(None);
    }
}
