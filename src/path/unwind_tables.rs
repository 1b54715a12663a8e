// SPDX-License-Identifier: GPL-2.0

//! In-kernel unwinding of user stacks with the tables the tool loads
//! (`format::unwind`, `Documentation/design.md`, "In-kernel unwinding"):
//! the callers of code built without frame pointers, and of leaf functions,
//! found in the overflow handler without copying the stack.
//!
//! The tool reduces each binary's `.eh_frame` to rows of three rules and
//! loads them (`control/unwind_loader.rs`) for the executable mappings of
//! the processes it profiles. The loader publishes a [`Registry`] of those
//! mappings, sorted by address space and address, through [`IN_FORCE`]; the
//! sample path reads it under RCU (preemption off) and a replaced registry
//! is freed after a grace period, as the cgroup filter is.
//!
//! [`walk`] is the walk itself, over a lookup and memory reads given to it
//! (the handler's read the task's memory with `copy_from_user_nmi()`, the
//! suites' a test stack). Per frame: the row of the instruction pointer
//! (the sampled one, then each return address minus one) gives the
//! canonical frame address (CFA: the stack pointer or the frame pointer
//! plus an offset); the return address is the word below it; the caller's
//! stack pointer is the CFA, its frame pointer the word the row names or
//! the callee's. The walk is bounded whatever the tables or the stack
//! hold: the output's length, a CFA strictly above the stack pointer and
//! inside the user address space, a return address inside it. Where an
//! address is in no mapping with a table (the vDSO, JIT code, a library
//! loaded since), the walk goes on with the frame-pointer walk from the
//! registers it has; where the table has no rule, or a frame cannot be
//! read, it ends with [`CHAIN_CUT`], which the tool shows as a cut stack.

use core::ptr::{null_mut, NonNull};
use kernel::{
    alloc::KVVec,
    prelude::*,
    sync::{
        atomic::{Acquire, Atomic, Full, Relaxed, Release},
        Arc,
    },
};

use crate::{
    format::unwind::{self, Row, CHAIN_CUT},
    path::user_stack::{self, Stop, UserRegs},
    shims::{
        inline_atomic as atomic,
        mm::{self, MmRef},
    },
};

/// A loaded table: its bytes, head and rows, as the ioctl took them.
///
/// # Invariants
///
/// `bytes` passed `unwind::check`: a head, whole rows, valid rules,
/// strictly increasing addresses, the last one `UNKNOWN`.
pub(crate) struct Table {
    bytes: KVVec<u8>,
}

impl Table {
    /// The table of `bytes` (a head and rows), or why they are refused.
    pub(crate) fn new(bytes: KVVec<u8>) -> Result<Self, unwind::TableError> {
        unwind::check(&bytes)?;
        // INVARIANT: `check` accepted them.
        Ok(Self { bytes })
    }

    /// Bytes it takes (what the loader's cap counts).
    pub(crate) fn len(&self) -> usize {
        self.bytes.len()
    }

    /// The row holding `addr` (the binary's own address): `None` below the
    /// first row.
    fn find(&self, addr: u64) -> Option<Row> {
        unwind::find(self.bytes.get(unwind::TABLE_HEAD_LEN..)?, addr)
    }
}

/// One executable mapping of an address space unwound with a table.
#[derive(Clone)]
pub(crate) struct Map {
    /// The address space (counted).
    pub(crate) mm: Arc<MmRef>,
    /// `[start, end)`: the mapping's addresses.
    pub(crate) start: u64,
    pub(crate) end: u64,
    /// Run-time address minus the table's address.
    pub(crate) bias: u64,
    pub(crate) table: Arc<Table>,
    /// Who loaded it (an open file's identity): its close drops it.
    pub(crate) owner: usize,
}

impl Map {
    /// The order of the registry: address space, then address.
    pub(crate) fn key(&self) -> (usize, u64) {
        (self.mm.id(), self.start)
    }
}

/// What a registry says of an address of an address space.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Lookup {
    /// A mapping with a table holds it: its row (`UNKNOWN` below the
    /// table's first row).
    Row(Row),
    /// No mapping with a table holds it.
    Unmapped,
}

/// Entries of a [`LookupCache`] (a power of two).
const CACHE_LEN: usize = 64;

/// Bytes of a CPU's [`LookupCache`] (`buffer_memory.rs` counts them).
pub(crate) const LOOKUP_CACHE_BYTES: usize = core::mem::size_of::<LookupCache>();

/// One remembered lookup.
#[derive(Clone, Copy)]
struct CacheEntry {
    /// The registry's generation (0: empty).
    generation: u64,
    mm: usize,
    addr: u64,
    found: Lookup,
}

/// An empty [`CacheEntry`].
const EMPTY_ENTRY: CacheEntry = CacheEntry {
    generation: 0,
    mm: 0,
    addr: 0,
    found: Lookup::Unmapped,
};

/// A CPU's last lookups, for the sample path: the same few addresses (the
/// sampled loop's, its callers' return addresses) come back sample after
/// sample, and a hit costs a compare where a lookup costs two binary
/// searches. Direct-mapped by address; an entry holds for one registry (its
/// generation), so a change of the tables empties it. Owned by the CPU's
/// scratch space (one user at a time).
pub(crate) struct LookupCache {
    entries: [CacheEntry; CACHE_LEN],
}

impl LookupCache {
    /// An empty cache, on the heap, made in place (not on the stack and
    /// moved: the profiler's constructor, where this is inlined, has a deep
    /// frame already).
    pub(crate) fn new_boxed() -> Result<KBox<Self>> {
        KBox::init(
            init!(Self {
                entries <- pin_init::init_array_from_fn(|_| EMPTY_ENTRY),
            }),
            GFP_KERNEL_ACCOUNT,
        )
    }

    /// `reg.lookup(mm, addr)`, remembered.
    pub(crate) fn lookup(&mut self, reg: &Registry, mm: usize, addr: u64) -> Lookup {
        // Return addresses differ in their low bits; mix in a few higher.
        let slot = ((addr ^ (addr >> 6) ^ (addr >> 12)) as usize) & (CACHE_LEN - 1);
        let Some(e) = self.entries.get_mut(slot) else {
            return reg.lookup(mm, addr);
        };
        if e.generation == reg.generation && e.mm == mm && e.addr == addr {
            return e.found;
        }
        let found = reg.lookup(mm, addr);
        *e = CacheEntry {
            generation: reg.generation,
            mm,
            addr,
            found,
        };
        found
    }
}

/// The row `UNKNOWN` (no rule), for addresses a table does not cover.
const NO_RULE: Row = Row {
    addr: 0,
    rule: unwind::UNKNOWN,
    bp: 0,
    cfa: 0,
};

/// The mappings unwound with tables, as the sample path reads them.
///
/// # Invariants
///
/// `maps` is sorted by [`Map::key`], and the mappings of one address space
/// do not overlap. `generation` is not 0 and no other registry has it.
pub(crate) struct Registry {
    maps: KVVec<Map>,
    /// The address spaces of the processes that loaded the tables (the
    /// tools): their samples ask for none ([`TablesWanted`]).
    loaders: KVVec<usize>,
    generation: u64,
}

/// The last registry generation given out.
static GENERATION: Atomic<u64> = Atomic::new(0);

impl Registry {
    /// A registry of `maps`, which the caller sorted by [`Map::key`] without
    /// overlaps in an address space (checked: `EINVAL` otherwise), loaded by
    /// the processes of address spaces `loaders` (identities: [`MmRef::id`]).
    pub(crate) fn new(maps: KVVec<Map>, loaders: KVVec<usize>) -> Result<Self> {
        for w in maps.windows(2) {
            if let [a, b] = w {
                if a.key() >= b.key() || (a.mm.id() == b.mm.id() && a.end > b.start) {
                    return Err(EINVAL);
                }
            }
        }
        // INVARIANT: checked above; the counter's next value (64 bits: it
        // does not wrap to 0 in practice).
        let generation = GENERATION.fetch_add(1, Full).wrapping_add(1);
        Ok(Self {
            maps,
            loaders,
            generation,
        })
    }

    /// The registry's identity: a later registry has a greater one.
    pub(crate) fn generation(&self) -> u64 {
        self.generation
    }

    /// Whether address space `mm` has any mapping here.
    pub(crate) fn knows(&self, mm: usize) -> bool {
        let i = self.maps.partition_point(|m| m.mm.id() < mm);
        self.maps.get(i).is_some_and(|m| m.mm.id() == mm)
    }

    /// The row for `addr` in address space `mm`.
    pub(crate) fn lookup(&self, mm: usize, addr: u64) -> Lookup {
        // The first mapping after (mm, addr); the one before it may hold it.
        let i = self.maps.partition_point(|m| m.key() <= (mm, addr));
        let Some(m) = i.checked_sub(1).and_then(|i| self.maps.get(i)) else {
            return Lookup::Unmapped;
        };
        if m.mm.id() != mm || addr >= m.end {
            return Lookup::Unmapped;
        }
        Lookup::Row(m.table.find(addr.wrapping_sub(m.bias)).unwrap_or(NO_RULE))
    }
}

/// The registry in force: null (no tables: the sample path walks frame
/// pointers) or a [`Registry`] owned here, valid until a grace period after
/// it is replaced ([`InForce::replace`]).
pub(crate) struct InForce {
    ptr: Atomic<*mut Registry>,
}

/// The module's registry in force, which its samplers read.
pub(crate) static IN_FORCE: InForce = InForce {
    ptr: Atomic::new(null_mut()),
};

/// What the registry in force has for the current task
/// ([`InForce::with_current`]).
pub(crate) enum Current<'a> {
    /// No tables are loaded, the task has no user address space, or it is a
    /// process that loads tables.
    NoTables,
    /// Tables are loaded, none for the task's address space: the registry's
    /// generation.
    Unknown(u64),
    /// The registry, which has mappings of the task's address space, and
    /// that space's identity.
    Known(&'a Registry, usize),
}

impl InForce {
    /// Calls `f` with what the registry in force has for the current task.
    /// For the sample path (NMI, hard-IRQ or task context, preemption off).
    pub(crate) fn with_current<R>(&self, f: impl FnOnce(Current<'_>) -> R) -> R {
        let p = self.ptr.load(Acquire);
        // SAFETY: `p` is null or a registry `replace` keeps valid until a
        // grace period after it replaced it; the caller runs with
        // preemption off, an RCU read-side critical section `replace` waits
        // for, and the reference does not leave `f`.
        let Some(reg) = (unsafe { p.as_ref() }) else {
            // No tables loaded: not even the current task is looked at.
            return f(Current::NoTables);
        };
        match mm::current() {
            0 => f(Current::NoTables),
            mm if reg.knows(mm) => f(Current::Known(reg, mm)),
            // The tool that loads tables has none of its own (its samples
            // would ask for them at every change).
            mm if reg.loaders.contains(&mm) => f(Current::NoTables),
            _ => f(Current::Unknown(reg.generation)),
        }
    }

    /// Puts `new` in force and frees the registry it replaced once no
    /// sample path can read it any more (a grace period: sleeps). Callers
    /// serialise (the loader's lock).
    pub(crate) fn replace(&self, new: Option<KBox<Registry>>) {
        let raw = new.map_or(null_mut(), KBox::into_raw);
        let old = self.ptr.xchg(raw, Full);
        if let Some(old) = NonNull::new(old) {
            kernel::sync::rcu::synchronize_rcu();
            // SAFETY: `old` came from `KBox::into_raw` here, and no reader
            // can hold it after the grace period.
            drop(unsafe { KBox::from_raw(old.as_ptr()) });
        }
    }
}

/// A CPU's request for tables, which its sync passes on to the reader
/// (`sync.rs` wakes it): the sample path met an address space, or an
/// executable address of one, that the registry has no table for, and
/// kicks the CPU's sync to run at once (`sampler.rs`). `record` loads
/// tables when woken (a new process's, a `dlopen`ed library's), so they
/// come right after the first sample that needs them, and nothing wakes
/// the tool while none is missing.
///
/// Code with no table to load (JIT code, a binary without `.eh_frame`, the
/// tool itself) must not wake it at every sync: after a request, the next
/// one of the same registry generation waits [`FIRST_BACKOFF`], then twice
/// as long each time, up to [`MAX_BACKOFF`]; a new generation (tables
/// changed) asks at once. Asking once per generation only was not enough: a
/// `dlopen` after some code without a table had asked found its request
/// already made, and waited for `record`'s one-second nap.
pub(crate) struct TablesWanted {
    /// The generation of the last request (0: none; no registry has it).
    generation: Atomic<u64>,
    /// The sample clock's time before which no request of that generation
    /// is made.
    next: Atomic<u64>,
    /// The wait that came after the last request, in ns.
    backoff: Atomic<u64>,
    /// 1: asked and not taken yet.
    pending: Atomic<u32>,
    /// Requests made (debugfs `stats`, `table_wakes`).
    pub(crate) count: Atomic<u64>,
}

/// The wait after a generation's first request, 100 ms: each request kicks
/// the sync at once, and code without a table must not kick it at every
/// sample.
pub(crate) const FIRST_BACKOFF: u64 = 100_000_000;

/// The longest wait between two requests of one generation (`record` naps
/// a second when nothing wakes it).
pub(crate) const MAX_BACKOFF: u64 = 1_600_000_000;

impl TablesWanted {
    /// No request.
    pub(crate) const fn new() -> Self {
        Self {
            generation: Atomic::new(0),
            next: Atomic::new(0),
            backoff: Atomic::new(0),
            pending: Atomic::new(0),
            count: Atomic::new(0),
        }
    }

    /// The sample path, at time `now`: tables of the registry of
    /// `generation` are missing. (Racing calls on one CPU, an NMI in an
    /// interrupt, may both ask: one more wake-up.)
    pub(crate) fn ask(&self, generation: u64, now: u64) {
        let wait = if self.generation.load(Relaxed) != generation {
            self.generation.store(generation, Relaxed);
            FIRST_BACKOFF
        } else if now < self.next.load(Relaxed) {
            return;
        } else {
            self.backoff
                .load(Relaxed)
                .saturating_mul(2)
                .clamp(FIRST_BACKOFF, MAX_BACKOFF)
        };
        self.backoff.store(wait, Relaxed);
        self.next.store(now.saturating_add(wait), Relaxed);
        self.count.add(1, Relaxed);
        self.pending.store(1, Release);
    }

    /// Whether a request waits for the sync (the sample path's test).
    pub(crate) fn is_pending(&self) -> bool {
        // Without a call: asked after every record (`inline_atomic.rs`).
        atomic::load(&self.pending) != 0
    }

    /// The sync: whether a request came since the last call.
    pub(crate) fn take(&self) -> bool {
        self.pending.load(Relaxed) != 0 && self.pending.xchg(0, Acquire) != 0
    }
}

/// Walks the user stack from `start` into `out` with tables: for a
/// kernel-mode sample `start.ip` first, then the return addresses, innermost
/// first. `lookup(addr)` gives the row for an address of the task;
/// `word(addr)` reads the user word at `addr`, `pair(addr)` the two words at
/// `addr` (a saved frame pointer and the return address above it). Returns
/// the entries written and why the walk ended; a cut (`Stop::BadFrame`,
/// `Stop::Fault`) ends the output with [`CHAIN_CUT`] where it has room.
pub(crate) fn walk(
    start: &UserRegs,
    out: &mut [u64],
    mut lookup: impl FnMut(u64) -> Lookup,
    mut word: impl FnMut(u64) -> Option<u64>,
    mut pair: impl FnMut(u64) -> Option<[u64; 2]>,
) -> (usize, Stop) {
    let Some(mut n) = user_stack::entry(start, out) else {
        return (0, Stop::Depth);
    };
    let (mut ip, mut sp, mut bp) = (start.ip, start.sp, start.bp);
    // Where the frame pointer `bp` stands for was saved, not read yet: code
    // without frame pointers saves rbp as any other callee-saved register,
    // and no later rule may need it. Read where one does (a CFA from rbp,
    // the frame-pointer walk); a frame record's saved rbp comes with its
    // return address in one read. (Read at every such frame, it was half
    // the walk's user reads: 1.9 of 5.8 a sample of the bundled workload.)
    let mut bp_at: Option<u64> = None;
    // `bp`, read if it is still at `bp_at`; false if it cannot be read.
    macro_rules! resolve_bp {
        () => {
            match bp_at.take() {
                None => true,
                Some(at) => match word(at) {
                    Some(saved) => {
                        bp = saved;
                        true
                    }
                    None => false,
                },
            }
        };
    }
    let mut first = true;
    let stop = loop {
        // A return address is looked up at its call (ip - 1): the call may
        // be a function's last instruction.
        let at = if first { ip } else { ip.wrapping_sub(1) };
        let row = match lookup(at) {
            Lookup::Row(row) => row,
            Lookup::Unmapped => {
                // No table here: the frame pointers, from these registers.
                if !resolve_bp!() {
                    break Stop::Fault;
                }
                let rest = UserRegs {
                    ip,
                    sp,
                    bp,
                    limit: start.limit,
                    from_kernel: false,
                };
                let tail = out.get_mut(n..).unwrap_or(&mut []);
                let (m, stop) = user_stack::walk(&rest, tail, &mut pair);
                return (n + m, stop);
            }
        };
        if row.rule == unwind::END {
            break Stop::End;
        }
        if row.rule == unwind::CFA_BP && !resolve_bp!() {
            break Stop::Fault;
        }
        let Some(cfa) = unwind::cfa(&row, sp, bp) else {
            break Stop::BadFrame;
        };
        // The return address is at CFA - 8, at or above the stack pointer:
        // so the stack pointer grows with every frame and the walk ends.
        if cfa < sp.saturating_add(8) || cfa > start.limit {
            break Stop::BadFrame;
        }
        if n >= out.len() {
            break Stop::Depth;
        }
        let ret = if row.bp == -2 {
            // The common frame record: [saved rbp, return address] (a CFA
            // below 16 holds none: garbage registers).
            let Some(at) = cfa.checked_sub(16) else {
                break Stop::BadFrame;
            };
            let Some([saved, ret]) = pair(at) else {
                break Stop::Fault;
            };
            bp = saved;
            bp_at = None;
            ret
        } else {
            // (cfa >= sp + 8 >= 8, checked above: no underflow.)
            let Some(ret) = word(cfa - 8) else {
                break Stop::Fault;
            };
            if row.bp != 0 {
                // Read if a later rule needs it.
                bp_at = Some(cfa.wrapping_add_signed(8 * i64::from(row.bp)));
            }
            ret
        };
        if ret == 0 {
            break Stop::End;
        }
        if ret >= start.limit {
            break Stop::BadFrame;
        }
        if let Some(slot) = out.get_mut(n) {
            *slot = ret;
            n += 1;
        }
        sp = cfa;
        ip = ret;
        first = false;
    };
    if stop.aborted() {
        if let Some(slot) = out.get_mut(n) {
            *slot = CHAIN_CUT;
            n += 1;
        }
    }
    (n, stop)
}

#[cfg(oprofile_rs_kunit)]
#[kernel::prelude::kunit_tests(oprofile_rs_unwind_tables)]
mod tests {
    use super::*;

    const LIMIT: u64 = 0x7fff_ffff_f000;
    const STACK: u64 = 0x7ffe_0000_0000;

    fn row(addr: u32, rule: u8, cfa: u16, bp: i8) -> Row {
        Row {
            addr,
            rule,
            bp,
            cfa,
        }
    }

    /// A test stack: words from `STACK`.
    fn reader(stack: &[u64]) -> impl FnMut(u64) -> Option<u64> + '_ {
        move |a| {
            let i = a.checked_sub(STACK)? / 8;
            if a % 8 != 0 {
                return None;
            }
            stack.get(usize::try_from(i).ok()?).copied()
        }
    }

    fn regs(ip: u64, sp: u64, bp: u64) -> UserRegs {
        UserRegs {
            ip,
            sp,
            bp,
            limit: LIMIT,
            from_kernel: false,
        }
    }

    /// The tables of a program: `leaf` at 0x1000 (no frame: CFA = sp + 8),
    /// `mid` at 0x2000 (push rbp; mov rbp, rsp: CFA = bp + 16, rbp saved at
    /// CFA - 16), `outer` at 0x3000 (sub rsp, 24: CFA = sp + 32), `_start`
    /// at 0x4000 (the end), nothing from 0x5000.
    fn lookup(addr: u64) -> Lookup {
        let rows = [
            row(0x1000, unwind::CFA_SP, 8, 0),
            row(0x2000, unwind::CFA_BP, 16, -2),
            row(0x3000, unwind::CFA_SP, 32, 0),
            row(0x4000, unwind::END, 0, 0),
            row(0x5000, unwind::UNKNOWN, 0, 0),
        ];
        if !(0x1000..0x6000).contains(&addr) {
            return Lookup::Unmapped;
        }
        let i = rows.partition_point(|r| u64::from(r.addr) <= addr);
        Lookup::Row(rows.get(i.wrapping_sub(1)).copied().unwrap_or(NO_RULE))
    }

    #[test]
    fn tables_are_asked_for_at_a_slowing_pace() {
        const MS: u64 = 1_000_000;
        let w = TablesWanted::new();
        assert!(!w.take());
        w.ask(5, 1000 * MS);
        w.ask(5, 1001 * MS);
        assert!(w.take());
        assert!(!w.take());
        // The same tables still missing: not before 100 ms, then 200 ms...
        w.ask(5, 1099 * MS);
        assert!(!w.take());
        w.ask(5, 1100 * MS);
        assert!(w.take());
        w.ask(5, 1299 * MS);
        assert!(!w.take());
        w.ask(5, 1300 * MS);
        assert!(w.take());
        // ... up to 1.6 s apart.
        let mut t = 1300 * MS;
        for _ in 0..8 {
            t += MAX_BACKOFF;
            w.ask(5, t);
            assert!(w.take());
        }
        w.ask(5, t + MAX_BACKOFF - 1);
        assert!(!w.take());
        // Tables changed, some still missing: at once.
        w.ask(6, t + 1);
        assert!(w.take());
        assert_eq!(w.count.load(Relaxed), 12);
    }

    #[test]
    fn callers_of_a_leaf_without_frame_pointers() {
        // leaf (sp = STACK) <- mid (its record at STACK + 8) <- outer
        // (frame of 32 bytes) <- _start.
        let stack = [
            0x2010,     // STACK + 0: leaf's return address into mid
            STACK + 48, // STACK + 8: mid's saved rbp (garbage: outer has no frame pointer)
            0x3010,     // STACK + 16: mid's return address into outer
            0,
            0,
            0,
            0x4004, // STACK + 48: outer's return address (CFA = STACK + 24 + 32 = STACK + 56)
            0,
        ];
        let mut out = [0u64; 8];
        let mut w = reader(&stack);
        let mut p = {
            let mut w2 = reader(&stack);
            move |a: u64| Some([w2(a)?, w2(a + 8)?])
        };
        // mid's frame pointer is its record's address.
        let (n, stop) = walk(
            &regs(0x1004, STACK, STACK + 8),
            &mut out,
            lookup,
            &mut w,
            &mut p,
        );
        assert_eq!(stop, Stop::End);
        assert_eq!(out.get(..n), Some(&[0x2010, 0x3010, 0x4004][..]));
    }

    #[test]
    fn a_frame_without_a_rule_cuts_the_stack() {
        let stack = [0x5010u64, 0, 0, 0];
        let mut out = [0u64; 8];
        let mut p = |_| None;
        let (n, stop) = walk(
            &regs(0x1004, STACK, 0),
            &mut out,
            lookup,
            reader(&stack),
            &mut p,
        );
        assert_eq!(stop, Stop::BadFrame);
        assert_eq!(out.get(..n), Some(&[0x5010, CHAIN_CUT][..]));
    }

    #[test]
    fn an_unreadable_frame_cuts_the_stack() {
        let mut out = [0u64; 8];
        let mut p = |_| None;
        let (n, stop) = walk(&regs(0x1004, STACK, 0), &mut out, lookup, |_| None, &mut p);
        assert_eq!(stop, Stop::Fault);
        assert_eq!(out.get(..n), Some(&[CHAIN_CUT][..]));
    }

    #[test]
    fn garbage_never_walks_down_the_stack() {
        // A CFA at or below the stack pointer + 8 (cfa 0 with CFA_SP, or
        // an rbp below sp) ends the walk.
        let bad = |_| Lookup::Row(row(0, unwind::CFA_BP, 0, 0));
        let mut out = [0u64; 8];
        let mut p = |_| None;
        let (n, stop) = walk(
            &regs(0x1004, STACK + 64, STACK),
            &mut out,
            bad,
            |_| Some(0x1234),
            &mut p,
        );
        assert_eq!(stop, Stop::BadFrame);
        assert_eq!(out.get(..n), Some(&[CHAIN_CUT][..]));
        // A loop (every frame returning to itself with a frame of 8 bytes)
        // stops at the output's length, or at the limit.
        let lp = |_| Lookup::Row(row(0, unwind::CFA_SP, 8, 0));
        let (n, stop) = walk(
            &regs(0x1004, STACK, 0),
            &mut out,
            lp,
            |_| Some(0x1004),
            &mut p,
        );
        assert_eq!((n, stop), (8, Stop::Depth));
        // A return address outside user space.
        let (n, stop) = walk(
            &regs(0x1004, STACK, 0),
            &mut out,
            lookup,
            |_| Some(LIMIT),
            &mut p,
        );
        assert_eq!(stop, Stop::BadFrame);
        assert_eq!(out.get(..n), Some(&[CHAIN_CUT][..]));
        // The bottom: a stack pointer of 0 and a frame record below 16.
        let rec = |_| Lookup::Row(row(0, unwind::CFA_SP, 8, -2));
        let (n, stop) = walk(
            &regs(0x1004, 0, 0),
            &mut out,
            rec,
            |_| Some(1),
            |_| Some([1, 2]),
        );
        assert_eq!(stop, Stop::BadFrame);
        assert_eq!(out.get(..n), Some(&[CHAIN_CUT][..]));
        // The top of user space: no overflow.
        let top = |_| Lookup::Row(row(0, unwind::CFA_SP, u16::MAX, 0));
        let (_, stop) = walk(
            &regs(0x1004, u64::MAX - 8, 0),
            &mut out,
            top,
            |_| Some(1),
            &mut p,
        );
        assert_eq!(stop, Stop::BadFrame);
    }

    #[test]
    fn no_table_goes_on_along_the_frame_pointers() {
        // From 0x9000 (no table) the frame-pointer walk: its record at
        // STACK + 16 returns into outer at 0x3010... which it follows as
        // frame pointers do (no tables once handed over).
        let stack = [0u64, 0, 0, 0x7777, 0];
        let mut out = [0u64; 8];
        let mut p = {
            let mut w2 = reader(&stack);
            move |a: u64| Some([w2(a)?, w2(a + 8)?])
        };
        let (n, stop) = walk(
            &regs(0x9000, STACK, STACK + 16),
            &mut out,
            lookup,
            |_| None,
            &mut p,
        );
        assert_eq!(stop, Stop::End);
        assert_eq!(out.get(..n), Some(&[0x7777][..]));
    }

    #[test]
    fn a_saved_frame_pointer_is_read_where_a_rule_needs_it() {
        // f at 0x1000 saved rbp among its registers (CFA = sp + 24, rbp at
        // CFA - 24) and returns into g at 0x2000, whose CFA is rbp + 16
        // (its frame record), which returns to the end at 0x3000; h at
        // 0x4000 has no frame pointer (CFA = sp + 8).
        let rows = |addr: u64| {
            let r = match addr {
                0x1000..0x2000 => row(0x1000, unwind::CFA_SP, 24, -3),
                0x2000..0x3000 => row(0x2000, unwind::CFA_BP, 16, -2),
                0x3000..0x4000 => row(0x3000, unwind::END, 0, 0),
                0x4000..0x5000 => row(0x4000, unwind::CFA_SP, 8, 0),
                _ => return Lookup::Unmapped,
            };
            Lookup::Row(r)
        };
        let stack = [
            STACK + 32, // STACK + 0: f's saved rbp: g's frame record
            0,
            0x2010, // STACK + 16: f's return address into g
            0,
            0,      // STACK + 32: g's record: the saved rbp...
            0x3004, // ...and its return address
        ];
        let mut out = [0u64; 8];
        let mut reads = KVec::<u64>::new();
        let mut r = reader(&stack);
        let word = |a| {
            let _ = reads.push(a, GFP_KERNEL);
            r(a)
        };
        let mut p = {
            let mut w2 = reader(&stack);
            move |a: u64| Some([w2(a)?, w2(a + 8)?])
        };
        let (n, stop) = walk(&regs(0x1004, STACK, 0), &mut out, rows, word, &mut p);
        assert_eq!(stop, Stop::End);
        assert_eq!(out.get(..n), Some(&[0x2010, 0x3004][..]));
        // The return address, then the saved rbp when g's rule needed it.
        assert_eq!(reads.as_slice(), &[STACK + 16, STACK]);
        // f returning into h (no frame pointer): its saved rbp is never
        // read, and an unreadable one no longer cuts the stack there.
        let stack = [0u64, 0, 0x4010, 0x3004];
        let mut r = reader(&stack);
        let word = |a| if a == STACK { None } else { r(a) };
        let (n, stop) = walk(&regs(0x1004, STACK, 0), &mut out, rows, word, &mut p);
        assert_eq!(stop, Stop::End);
        assert_eq!(out.get(..n), Some(&[0x4010, 0x3004][..]));
        // Where a rule needs it and it cannot be read: cut there.
        let stack = [0u64, 0, 0x2010, 0];
        let mut r = reader(&stack);
        let word = |a| if a == STACK { None } else { r(a) };
        let (n, stop) = walk(&regs(0x1004, STACK, 0), &mut out, rows, word, &mut p);
        assert_eq!(stop, Stop::Fault);
        assert_eq!(out.get(..n), Some(&[0x2010, CHAIN_CUT][..]));
    }

    #[test]
    fn kernel_mode_samples_record_the_entry_first() {
        let stack = [0u64];
        let mut out = [0u64; 4];
        let mut start = regs(0x4001, STACK, 0);
        start.from_kernel = true;
        let mut p = |_| None;
        let (n, stop) = walk(&start, &mut out, lookup, reader(&stack), &mut p);
        assert_eq!(stop, Stop::End);
        assert_eq!(out.get(..n), Some(&[0x4001][..]));
        let (n, stop) = walk(&start, &mut [], lookup, reader(&stack), &mut p);
        assert_eq!((n, stop), (0, Stop::Depth));
    }
}
