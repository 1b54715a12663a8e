// SPDX-License-Identifier: GPL-2.0

//! Atomic primitives used by the ring buffer.
//!
//! Everything shared in the ring buffer goes through this shim, so that the
//! very same source runs on three memory-model implementations:
//!
//! * in the kernel, the kernel's atomics (`kernel::sync::atomic`, which follow
//!   the Linux kernel memory model, LKMM) behind an adapter ([`AtomicU64`],
//!   [`AtomicU32`], [`AtomicBool`] with `core`'s method names and an
//!   [`Ordering`] with `core`'s names; see the mapping below);
//! * on the host, `core::sync::atomic`;
//! * under `--cfg loom` (host), loom's model-checked atomics.
//!
//! The core never calls a fence with an ordering: it asks for what it needs,
//! [`read_fence`] (loads before it are ordered before loads after it:
//! `smp_rmb()`) and [`write_fence`] (stores before it before stores after it:
//! `smp_wmb()`); the host uses the `Acquire` and `Release` fences, which
//! order at least that.
//!
//! # Kernel mapping of the orderings
//!
//! | core asks for | load | store | read-modify-write |
//! |---|---|---|---|
//! | `Relaxed` | `Relaxed` (`READ_ONCE`) | `Relaxed` (`WRITE_ONCE`) | `Relaxed` (`_relaxed`) |
//! | `Acquire` | `Acquire` | (not used) | `Acquire` (`_acquire`) |
//! | `Release` | (not used) | `Release` | `Release` (`_release`) |
//! | `AcqRel` | (not used) | (not used) | `Full` (fully ordered) |
//! | `SeqCst` | `Acquire`, see below | `xchg` `Full` | `Full` (fully ordered) |
//!
//! The LKMM has no sequentially consistent load. The core's `SeqCst` loads
//! are the second half of Dekker pairs (the switch loads of `reserve` after
//! its `nest` read-modify-write; `writers_active` after the control side's
//! `fence(SeqCst)`): what orders them there is the fully ordered
//! read-modify-write or full fence before them, which the LKMM provides
//! (a fully ordered RMW is an `smp_mb()` on each side). A failed
//! compare-and-exchange is unordered in the LKMM; where the core asks for
//! more than `Relaxed` on failure, the adapter adds an `smp_mb()`.
//! The orderings not used (an `Acquire` store, a `Release` load, which
//! `core` rejects at run time) map to the next stronger one.
//!
//! # The instructions on x86-64
//!
//! On x86_64 the adapter does each of those kernel operations itself, by
//! inline assembly on the `Atomic<T>`'s location (`lkmm::x86`), with the
//! instruction the C kernel uses for it: without `CONFIG_RUST_INLINE_HELPERS`
//! (GCC-built kernels: Debian's, the test kernels) every `kernel::sync::atomic`
//! operation and barrier is a call into a C helper, about 20 per record on
//! the writer's path. `READ_ONCE` and `smp_load_acquire` are a `mov` load,
//! `WRITE_ONCE` and `smp_store_release` a `mov` store, `xchg` an `xchg`,
//! `cmpxchg` a `lock cmpxchg` (fully ordered on failure too, so no added
//! `smp_mb()`), `fetch_add` a `lock xadd`, `smp_mb()` a
//! `lock add dword ptr [rsp - 4], 0`, `smp_rmb()` and `smp_wmb()` compiler
//! barriers. Why each gives the LKMM's guarantee is argued in
//! `Documentation/ring-buffer.md`, "The kernel's atomics on x86-64"; the
//! KUnit suite `oprofile_rs_ringbuf_atomics` checks them against the kernel's
//! atomics. `--cfg ringbuf_kernel_atomics` (`make OPROFILE_RS_KERNEL_ATOMICS=1`)
//! builds the kernel's atomics instead, as on other architectures
//! (`scripts/bench-ring --compare` measures both).

#[cfg(all(ringbuf_host, not(loom), not(ringbuf_nesting)))]
#[allow(unused_imports)]
pub use core::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, Ordering};

#[cfg(all(ringbuf_host, ringbuf_nesting, not(loom)))]
#[allow(unused_imports)]
pub use core::sync::atomic::{fence, Ordering};
#[cfg(all(ringbuf_host, ringbuf_nesting, not(loom)))]
pub use nesting::{set_interrupt_hook, AtomicBool, AtomicU32, AtomicU64};

#[cfg(loom)]
#[allow(unused_imports)]
pub use loom::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, Ordering};

/// The x86-64 instructions of the kernel's atomics on an `Atomic<T>`, also
/// for the module's sample path (`shims/inline_atomic.rs`).
#[cfg(all(not(ringbuf_host), target_arch = "x86_64", not(ringbuf_kernel_atomics)))]
pub(crate) use lkmm::x86;
#[cfg(not(ringbuf_host))]
pub use lkmm::{fence, AtomicBool, AtomicU32, AtomicU64, Ordering};

/// Orders the loads before it before the loads after it (seqlock-style
/// validation of a copy): `smp_rmb()` in the kernel, `fence(Acquire)` on the
/// host.
#[inline(always)]
pub(crate) fn read_fence() {
    #[cfg(ringbuf_host)]
    fence(Ordering::Acquire);
    #[cfg(not(ringbuf_host))]
    lkmm::smp_rmb();
}

/// Orders the stores before it before the stores after it: `smp_wmb()` in
/// the kernel, `fence(Release)` on the host.
#[inline(always)]
pub(crate) fn write_fence() {
    #[cfg(ringbuf_host)]
    fence(Ordering::Release);
    #[cfg(not(ringbuf_host))]
    lkmm::smp_wmb();
}

/// Adds `n` to a counter that only one context can update at a time.
///
/// Used for the per-nesting-level statistics: on one CPU, only one writer
/// runs at a given nesting level at any time (interrupts nest strictly LIFO),
/// so a plain load/store pair cannot lose an update and is much cheaper than a
/// locked read-modify-write. Readers on other CPUs see a value that is atomic
/// but possibly slightly stale.
#[inline(always)]
pub(crate) fn bump(counter: &AtomicU64, n: u64) {
    counter.store(
        counter.load(Ordering::Relaxed).wrapping_add(n),
        Ordering::Relaxed,
    );
}

/// Orders a preceding `SeqCst` read-modify-write before a following `SeqCst`
/// load of another location, for the model checker only.
///
/// In the C++20/Rust memory model (and on x86 and arm64), `SeqCst` operations
/// already form one total order, so the Dekker-style pattern in `reserve`
/// (nesting counter RMW, then switch load) needs no fence; in the LKMM the
/// fully ordered RMW is the fence. `loom` treats `SeqCst` accesses as
/// `AcqRel` (a documented limitation) but models `fence(SeqCst)`, so under
/// `--cfg loom` this is a real fence; otherwise it compiles to nothing.
#[inline(always)]
pub(crate) fn seqcst_rmw_load_order() {
    #[cfg(loom)]
    fence(Ordering::SeqCst);
}

/// Whether [`local_fetch_add`] and [`local_compare_exchange`] are CPU-local
/// (no `lock` prefix, no full barrier) in this build, so that the control
/// side's [`writers_barrier`] must do the writers' half of the Dekker pair.
///
/// Kernel on x86_64: always. Host on x86_64 Linux (not loom, not the nesting
/// model, not Miri): once the process is registered for
/// `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)` ([`local_setup`], called by
/// every `CpuBuffer::new`); if the registration fails, the writers keep the
/// locked instructions. Everywhere else: never.
#[cfg(all(not(ringbuf_host), target_arch = "x86_64"))]
#[inline(always)]
pub(crate) fn local_rmw() -> bool {
    true
}

/// See the kernel's.
#[cfg(host_local_rmw)]
#[inline(always)]
pub(crate) fn local_rmw() -> bool {
    host::registered()
}

/// See the kernel's. (Unused in host builds without `host_local_rmw`, where
/// the locked read-modify-writes are chosen at compile time.)
#[cfg(not(any(all(not(ringbuf_host), target_arch = "x86_64"), host_local_rmw)))]
#[cfg_attr(ringbuf_host, allow(dead_code))]
#[inline(always)]
pub(crate) fn local_rmw() -> bool {
    false
}

/// Prepares the CPU-local read-modify-writes (host: the `membarrier`
/// registration, once per process); a no-op elsewhere.
#[inline(always)]
pub(crate) fn local_setup() {
    #[cfg(host_local_rmw)]
    host::register();
}

/// Adds `v` to `a` and returns the previous value, atomically with respect
/// to everything that runs on the calling CPU (interrupts and NMIs included),
/// but NOT with respect to other CPUs: ftrace's `local_add_return`.
///
/// For the writers' own positions (`nest`, `head`), which only the writers
/// of the buffer's CPU change (see "CPU-local read-modify-writes" in
/// `Documentation/ring-buffer.md`). Where [`local_rmw`] is true this is one
/// `xadd` without `lock`: a single instruction, so an interrupt lands before
/// or after it, never inside; under x86's TSO its load is ordered after the
/// CPU's earlier loads and its store after its earlier stores (acquire and
/// release for other CPUs), but a later load may pass its store (no full
/// barrier: [`writers_barrier`] makes up for that on the control side).
/// Elsewhere a `SeqCst` `fetch_add` (followed, for loom, by the fence of
/// [`seqcst_rmw_load_order`]): the writer's full barrier stays in the writer.
///
/// The caller must run on the CPU that owns `a` (or be serialised with every
/// other caller by a lock or another happens-before edge): a concurrent
/// caller on another CPU can lose an update. That stays memory safe (both
/// halves are atomic accesses) but corrupts the ring's content.
#[inline(always)]
pub(crate) fn local_fetch_add(a: &AtomicU64, v: u64) -> u64 {
    #[cfg(any(not(ringbuf_host), host_local_rmw))]
    if local_rmw() {
        #[cfg(target_arch = "x86_64")]
        {
            let mut r = v;
            // SAFETY: `a.as_ptr()` is valid and 8-byte aligned for as long
            // as `a` lives, and every access to that location is atomic
            // (this instruction's load and store are single aligned 8-byte
            // accesses, as all other accesses are atomics). The asm is
            // a compiler barrier (no `nomem`/`readonly`), so the compiler
            // keeps the memory accesses around it in program order, and it
            // does not touch the stack. Atomic against other CPUs it is
            // not: see the contract above, which the callers keep.
            unsafe {
                core::arch::asm!(
                    "xadd qword ptr [{p}], {r}",
                    p = in(reg) a.as_ptr(),
                    r = inout(reg) r,
                    options(nostack),
                );
            }
            return r;
        }
    }
    locked_fetch_add(a, v)
}

/// [`local_fetch_add`] where it is not CPU-local: out of line on the host,
/// where it is the rare fallback (no `membarrier`), so that the writer's
/// fast path stays small enough to be inlined.
#[cfg_attr(host_local_rmw, cold, inline(never))]
#[cfg_attr(not(host_local_rmw), inline(always))]
fn locked_fetch_add(a: &AtomicU64, v: u64) -> u64 {
    let r = a.fetch_add(v, Ordering::SeqCst);
    seqcst_rmw_load_order();
    r
}

/// Stores `new` in `a` if it holds `current`: `Ok(current)`, or
/// `Err(value)` and nothing stored. CPU-local as [`local_fetch_add`] (one
/// `cmpxchg` without `lock` where [`local_rmw`] is true; else `AcqRel` on
/// success, `Acquire` on failure), with the same contract.
#[inline(always)]
pub(crate) fn local_compare_exchange(a: &AtomicU64, current: u64, new: u64) -> Result<u64, u64> {
    #[cfg(any(not(ringbuf_host), host_local_rmw))]
    if local_rmw() {
        #[cfg(target_arch = "x86_64")]
        {
            let prev: u64;
            // SAFETY: as in `local_fetch_add`: a valid, aligned location
            // only accessed atomically; `cmpxchg` compares `rax` with it and
            // stores `new` if equal, else loads it into `rax`, in one
            // instruction (an interrupt cannot split it). Flags are
            // clobbered (no `preserves_flags`); the asm is a compiler barrier.
            unsafe {
                core::arch::asm!(
                    "cmpxchg qword ptr [{p}], {n}",
                    p = in(reg) a.as_ptr(),
                    n = in(reg) new,
                    inout("rax") current => prev,
                    options(nostack),
                );
            }
            return if prev == current { Ok(prev) } else { Err(prev) };
        }
    }
    locked_compare_exchange(a, current, new)
}

/// [`local_compare_exchange`] where it is not CPU-local (see
/// [`locked_fetch_add`]).
#[cfg_attr(host_local_rmw, cold, inline(never))]
#[cfg_attr(not(host_local_rmw), inline(always))]
fn locked_compare_exchange(a: &AtomicU64, current: u64, new: u64) -> Result<u64, u64> {
    a.compare_exchange(current, new, Ordering::AcqRel, Ordering::Acquire)
}

/// The control side's half of the writers' Dekker pair (a writer's `nest`
/// increment, then its switch loads), for when the writers' increment is
/// CPU-local ([`local_rmw`]) and so no barrier: called after the control
/// operation changed the switch, before it loads `nest`. On return, every
/// writer either has its `nest` increment visible here, or loads the
/// switches after the change. Returns `false` if it could not make sure of
/// that (the caller must then assume writers are in flight).
///
/// * Kernel: `synchronize_rcu()`. Every writer runs in an RCU read-side
///   critical section (with preemption or interrupts off, or in an NMI, on
///   its buffer's CPU): one that began before the grace period has ended
///   (and its stores are visible) when it returns; one that begins after the
///   grace period began sees the switch change made before it. Process
///   context only (it sleeps).
/// * Host: `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)`: every thread of the
///   process that runs meanwhile executes a full barrier (an IPI), one that
///   does not passes through the scheduler's: a writer's increment before
///   that barrier is visible when the call returns, a switch load after it
///   sees the change. A signal handler (the host tests' nested writers) runs
///   on its thread, so it is covered too.
/// * Elsewhere (the writers' increment is a `SeqCst` RMW, loom gets its
///   fence): a `SeqCst` fence, as before.
pub(crate) fn writers_barrier() -> bool {
    fence(Ordering::SeqCst);
    #[cfg(all(not(ringbuf_host), target_arch = "x86_64"))]
    kernel::sync::rcu::synchronize_rcu();
    #[cfg(host_local_rmw)]
    if local_rmw() {
        return host::membarrier();
    }
    true
}

/// The host's `membarrier(2)` (x86_64 Linux), by raw system call: the host
/// crate is `no_std` and has no C library binding.
#[cfg(host_local_rmw)]
mod host {
    use core::sync::atomic::{AtomicU8, Ordering};

    const SYS_MEMBARRIER: isize = 324;
    const MEMBARRIER_CMD_PRIVATE_EXPEDITED: isize = 1 << 3;
    const MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED: isize = 1 << 4;

    /// 0: not tried yet; 1: registered; 2: registration failed. Changes
    /// once, from 0: a writer that sees 1 uses the CPU-local RMWs, and every
    /// control operation after it sees 1 too and issues the membarrier.
    static STATE: AtomicU8 = AtomicU8::new(0);

    fn syscall(cmd: isize) -> isize {
        let ret: isize;
        // SAFETY: `membarrier(cmd, 0, 0)` takes no pointers and changes no
        // memory of this process; the `syscall` instruction clobbers `rcx`
        // and `r11`, declared here, and nothing else but `rax` (the result).
        unsafe {
            core::arch::asm!(
                "syscall",
                inlateout("rax") SYS_MEMBARRIER => ret,
                in("rdi") cmd,
                in("rsi") 0isize,
                in("rdx") 0isize,
                lateout("rcx") _,
                lateout("r11") _,
                options(nostack),
            );
        }
        ret
    }

    pub(super) fn register() {
        if STATE.load(Ordering::Acquire) != 0 {
            return;
        }
        let v = if syscall(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0 {
            1
        } else {
            2
        };
        let _ = STATE.compare_exchange(0, v, Ordering::AcqRel, Ordering::Acquire);
    }

    #[inline(always)]
    pub(super) fn registered() -> bool {
        STATE.load(Ordering::Relaxed) == 1
    }

    pub(super) fn membarrier() -> bool {
        syscall(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0
    }
}

/// Declares an adapter type `$name` around the atomic `$inner` with the
/// `core::sync::atomic` methods listed (those the core uses of that type),
/// each one passing its receiver's inner atomic and arguments to the
/// flavour macro `$flavour!(method, inner, args...)`, which says what the
/// method does: the kernel's atomics with the orderings mapped (`lkmm`), or
/// `core`'s with an interrupt point first (`nesting`). The signatures and
/// documentation are shared here; the two flavours only differ in that.
#[cfg(any(not(ringbuf_host), all(ringbuf_nesting, not(loom))))]
macro_rules! adapter {
    ($flavour:ident, $(#[$attr:meta])* $name:ident($inner:ty): $t:ty { $($method:ident),* }) => {
        $(#[$attr])*
        #[repr(transparent)]
        pub struct $name($inner);

        impl $name {
            /// A new atomic holding `v`.
            pub const fn new(v: $t) -> Self {
                Self(<$inner>::new(v))
            }

            /// Loads the value.
            #[inline(always)]
            pub fn load(&self, o: Ordering) -> $t {
                $flavour!(load, self.0, o)
            }

            /// The location (kernel only: the CPU-local read-modify-writes).
            #[allow(dead_code)]
            #[inline(always)]
            pub const fn as_ptr(&self) -> *mut $t {
                self.0.as_ptr()
            }

            $(adapter!(@$method $flavour, $t);)*
        }
    };
    (@store $flavour:ident, $t:ty) => {
        /// Stores `v`.
        #[inline(always)]
        pub fn store(&self, v: $t, o: Ordering) {
            $flavour!(store, self.0, v, o)
        }
    };
    (@swap $flavour:ident, $t:ty) => {
        /// Stores `v`, returns the previous value.
        #[inline(always)]
        pub fn swap(&self, v: $t, o: Ordering) -> $t {
            $flavour!(swap, self.0, v, o)
        }
    };
    (@compare_exchange $flavour:ident, $t:ty) => {
        /// Stores `new` if the value is `current`: `Ok(current)`, or
        /// `Err(value)` and nothing stored.
        #[inline(always)]
        pub fn compare_exchange(
            &self,
            current: $t,
            new: $t,
            success: Ordering,
            failure: Ordering,
        ) -> Result<$t, $t> {
            $flavour!(compare_exchange, self.0, current, new, success, failure)
        }
    };
    (@fetch_add $flavour:ident, $t:ty) => {
        /// Adds `v` (wrapping), returns the previous value.
        #[inline(always)]
        pub fn fetch_add(&self, v: $t, o: Ordering) -> $t {
            $flavour!(fetch_add, self.0, v, o)
        }
    };
}

/// The kernel side: `core`'s method names over `kernel::sync::atomic`'s
/// `Atomic<T>` (the storage, whatever the architecture), with each access
/// done by x86-64 inline assembly ([`x86`], the default on x86_64) or by the
/// kernel's atomics (other architectures, and x86_64 built with
/// `--cfg ringbuf_kernel_atomics`: `make OPROFILE_RS_KERNEL_ATOMICS=1`).
#[cfg(not(ringbuf_host))]
mod lkmm {
    use kernel::sync::atomic::Atomic;
    #[cfg(not(all(target_arch = "x86_64", not(ringbuf_kernel_atomics))))]
    use kernel::sync::atomic::{Acquire, Full, Relaxed, Release};
    #[cfg(not(all(target_arch = "x86_64", not(ringbuf_kernel_atomics))))]
    use kernel::sync::barrier::smp_mb;

    /// The orderings the core asks for, with `core::sync::atomic`'s names;
    /// see the module documentation for what each becomes.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum Ordering {
        /// No ordering.
        Relaxed,
        /// Acquire (loads and read-modify-writes).
        Acquire,
        /// Release (stores and read-modify-writes).
        Release,
        /// Acquire and release (read-modify-writes): fully ordered.
        AcqRel,
        /// Sequentially consistent: fully ordered read-modify-writes and
        /// stores, acquire loads.
        SeqCst,
    }

    /// Runs `$body` with `$ord` bound to the kernel ordering of the
    /// read-modify-write ordering `$o`.
    #[cfg(not(all(target_arch = "x86_64", not(ringbuf_kernel_atomics))))]
    macro_rules! rmw {
        ($o:expr, |$ord:ident| $body:expr) => {
            match $o {
                Ordering::Relaxed => {
                    let $ord = Relaxed;
                    $body
                }
                Ordering::Acquire => {
                    let $ord = Acquire;
                    $body
                }
                Ordering::Release => {
                    let $ord = Release;
                    $body
                }
                Ordering::AcqRel | Ordering::SeqCst => {
                    let $ord = Full;
                    $body
                }
            }
        };
    }

    /// What each method does with the kernel's atomics (see [`adapter`]).
    #[cfg(not(all(target_arch = "x86_64", not(ringbuf_kernel_atomics))))]
    macro_rules! lkmm {
        (load, $a:expr, $o:expr) => {
            match $o {
                Ordering::Relaxed => $a.load(Relaxed),
                _ => $a.load(Acquire),
            }
        };
        (store, $a:expr, $v:expr, $o:expr) => {
            match $o {
                Ordering::Relaxed => $a.store($v, Relaxed),
                Ordering::Release => $a.store($v, Release),
                _ => {
                    $a.xchg($v, Full);
                }
            }
        };
        (swap, $a:expr, $v:expr, $o:expr) => {
            rmw!($o, |ord| $a.xchg($v, ord))
        };
        (compare_exchange, $a:expr, $current:expr, $new:expr, $success:expr, $failure:expr) => {{
            let r = rmw!($success, |ord| $a.cmpxchg($current, $new, ord));
            if r.is_err() && $failure != Ordering::Relaxed {
                // A failed cmpxchg is unordered in the LKMM.
                smp_mb(Full);
            }
            r
        }};
        (fetch_add, $a:expr, $v:expr, $o:expr) => {
            rmw!($o, |ord| $a.fetch_add($v, ord))
        };
    }

    /// What each method does with x86-64 instructions (see [`adapter`] and,
    /// for the instructions, [`x86`]): the same mapping as `lkmm!`, each
    /// kernel operation replaced by the instruction sequence the C kernel
    /// uses for it on x86-64 (`Documentation/ring-buffer.md`, "The kernel's
    /// atomics on x86-64").
    #[cfg(all(target_arch = "x86_64", not(ringbuf_kernel_atomics)))]
    macro_rules! lkmm {
        (load, $a:expr, $o:expr) => {
            match $o {
                Ordering::Relaxed => x86::load_once(&$a),
                _ => x86::load_acquire(&$a),
            }
        };
        (store, $a:expr, $v:expr, $o:expr) => {
            match $o {
                Ordering::Relaxed => x86::store_once(&$a, $v),
                Ordering::Release => x86::store_release(&$a, $v),
                _ => {
                    x86::xchg(&$a, $v);
                }
            }
        };
        // Every x86 read-modify-write is fully ordered, whatever `$o`.
        (swap, $a:expr, $v:expr, $o:expr) => {{
            let _ = $o;
            x86::xchg(&$a, $v)
        }};
        // `lock cmpxchg` is fully ordered on failure too: no `smp_mb()`.
        (compare_exchange, $a:expr, $current:expr, $new:expr, $success:expr, $failure:expr) => {{
            let _ = ($success, $failure);
            x86::cmpxchg(&$a, $current, $new)
        }};
        (fetch_add, $a:expr, $v:expr, $o:expr) => {{
            let _ = $o;
            x86::fetch_add(&$a, $v)
        }};
    }

    adapter!(lkmm,
        /// An atomic `u64` (storage words, positions, counters).
        AtomicU64(Atomic<u64>): u64 { store, compare_exchange, fetch_add }
    );
    adapter!(lkmm,
        /// An atomic `u32` (the per-CPU switch state; stored and
        /// exchanged by the control operations, `control.rs`).
        AtomicU32(Atomic<u32>): u32 { store, compare_exchange }
    );
    adapter!(lkmm,
        /// An atomic `bool` (switches, the reader lock).
        AtomicBool(Atomic<bool>): bool { store, swap, compare_exchange }
    );

    /// A fence: `smp_mb()` whatever the ordering asked for (the control
    /// operations ask for `SeqCst` only).
    #[inline(always)]
    pub fn fence(_o: Ordering) {
        #[cfg(all(target_arch = "x86_64", not(ringbuf_kernel_atomics)))]
        x86::smp_mb();
        #[cfg(not(all(target_arch = "x86_64", not(ringbuf_kernel_atomics))))]
        smp_mb(Full);
    }

    /// `smp_rmb()`.
    #[inline(always)]
    pub(crate) fn smp_rmb() {
        #[cfg(all(target_arch = "x86_64", not(ringbuf_kernel_atomics)))]
        x86::barrier();
        #[cfg(not(all(target_arch = "x86_64", not(ringbuf_kernel_atomics))))]
        smp_mb(kernel::sync::barrier::Read);
    }

    /// `smp_wmb()`.
    #[inline(always)]
    pub(crate) fn smp_wmb() {
        #[cfg(all(target_arch = "x86_64", not(ringbuf_kernel_atomics)))]
        x86::barrier();
        #[cfg(not(all(target_arch = "x86_64", not(ringbuf_kernel_atomics))))]
        smp_mb(kernel::sync::barrier::Write);
    }

    /// The kernel's atomics and barriers as the C kernel implements them on
    /// x86-64 (`arch/x86/include/asm/{atomic64_64,cmpxchg,barrier}.h`), by
    /// inline assembly on an `Atomic<T>`'s location, so that none of them is
    /// a call: without `CONFIG_RUST_INLINE_HELPERS` (kernels built with
    /// GCC, Debian's among them) each `kernel::sync::atomic` operation is a
    /// call into a C helper (`rust_helper_atomic64_read`, ...).
    ///
    /// Every function is one instruction on one naturally aligned location
    /// of 1, 4 or 8 bytes (single-copy atomic on x86-64). Why each gives the
    /// LKMM ordering of the operation it stands for (x86-TSO): see
    /// `Documentation/ring-buffer.md`, "The kernel's atomics on x86-64".
    /// Compiler ordering: an `asm!` without `nomem`/`readonly` may read and
    /// write any memory, so the compiler neither moves memory accesses
    /// across it nor keeps values in registers across it (the C kernel's
    /// `"memory"` clobber); `load_once` is `readonly` (like a volatile load:
    /// it is never merged or dropped, being not `pure`, but plain accesses
    /// may move around it, as around `READ_ONCE()`). Without
    /// `preserves_flags` the flags are clobbered (the C `"cc"` clobber).
    #[cfg(all(target_arch = "x86_64", not(ringbuf_kernel_atomics)))]
    pub(crate) mod x86 {
        use core::arch::asm;
        use kernel::sync::atomic::Atomic;

        /// The value types of the core's atomics, with their
        /// single-instruction accesses (`u64`, `u32`; `bool` as a byte).
        ///
        /// # Safety
        ///
        /// Implementors' functions must be called with a pointer valid for
        /// reads and writes of `Self` (as the implementor's access width),
        /// aligned to that width, that only atomic accesses use
        /// concurrently.
        pub(crate) unsafe trait Word: Copy + Sized {
            /// `mov` load (`READ_ONCE()`), `readonly`.
            ///
            /// # Safety
            ///
            /// See the trait.
            unsafe fn mov_load_ro(p: *mut Self) -> Self;
            /// `mov` load, compiler barrier (`smp_load_acquire()`).
            ///
            /// # Safety
            ///
            /// See the trait.
            unsafe fn mov_load(p: *mut Self) -> Self;
            /// `mov` store, compiler barrier.
            ///
            /// # Safety
            ///
            /// See the trait.
            unsafe fn mov_store(p: *mut Self, v: Self);
            /// `xchg` (implicitly locked), returns the previous value.
            ///
            /// # Safety
            ///
            /// See the trait.
            unsafe fn xchg(p: *mut Self, v: Self) -> Self;
            /// `lock cmpxchg`: returns the previous value (stored `new` iff
            /// it equals `current`).
            ///
            /// # Safety
            ///
            /// See the trait.
            unsafe fn lock_cmpxchg(p: *mut Self, current: Self, new: Self) -> Self;
        }

        /// Implements [`Word`] for an integer type: its register class, the
        /// operand modifier naming a register at its width, its memory
        /// operand size and its accumulator (`cmpxchg`'s implicit operand).
        macro_rules! word {
            ($t:ty, $class:ident, $load:literal, $store:literal, $xchg:literal, $cmpxchg:literal, $acc:tt) => {
                // SAFETY: each function is one instruction accessing `*p`
                // at `$t`'s width, as the trait's contract allows, and no
                // other memory; none touches the stack (`nostack`).
                unsafe impl Word for $t {
                    #[inline(always)]
                    unsafe fn mov_load_ro(p: *mut Self) -> Self {
                        let v: $t;
                        // SAFETY: the caller's (trait contract).
                        unsafe {
                            asm!($load, p = in(reg) p, v = lateout($class) v,
                                options(nostack, preserves_flags, readonly));
                        }
                        v
                    }

                    #[inline(always)]
                    unsafe fn mov_load(p: *mut Self) -> Self {
                        let v: $t;
                        // SAFETY: the caller's (trait contract).
                        unsafe {
                            asm!($load, p = in(reg) p, v = lateout($class) v,
                                options(nostack, preserves_flags));
                        }
                        v
                    }

                    #[inline(always)]
                    unsafe fn mov_store(p: *mut Self, v: Self) {
                        // SAFETY: the caller's (trait contract).
                        unsafe {
                            asm!($store, p = in(reg) p, v = in($class) v,
                                options(nostack, preserves_flags));
                        }
                    }

                    #[inline(always)]
                    unsafe fn xchg(p: *mut Self, v: Self) -> Self {
                        let mut v = v;
                        // SAFETY: the caller's (trait contract). `xchg`
                        // changes no flag.
                        unsafe {
                            asm!($xchg, p = in(reg) p, v = inout($class) v,
                                options(nostack, preserves_flags));
                        }
                        v
                    }

                    #[inline(always)]
                    unsafe fn lock_cmpxchg(p: *mut Self, current: Self, new: Self) -> Self {
                        let prev: $t;
                        // SAFETY: the caller's (trait contract). Flags
                        // clobbered (ZF).
                        unsafe {
                            asm!($cmpxchg, p = in(reg) p, n = in($class) new,
                                inout($acc) current => prev, options(nostack));
                        }
                        prev
                    }
                }
            };
        }

        word!(
            u64,
            reg,
            "mov {v}, qword ptr [{p}]",
            "mov qword ptr [{p}], {v}",
            "xchg qword ptr [{p}], {v}",
            "lock cmpxchg qword ptr [{p}], {n}",
            "rax"
        );
        word!(
            u32,
            reg,
            "mov {v:e}, dword ptr [{p}]",
            "mov dword ptr [{p}], {v:e}",
            "xchg dword ptr [{p}], {v:e}",
            "lock cmpxchg dword ptr [{p}], {n:e}",
            "eax"
        );
        word!(
            u8,
            reg_byte,
            "mov {v}, byte ptr [{p}]",
            "mov byte ptr [{p}], {v}",
            "xchg byte ptr [{p}], {v}",
            "lock cmpxchg byte ptr [{p}], {n}",
            "al"
        );

        /// A type the core keeps in an `Atomic<T>`, and the [`Word`] that
        /// holds it (`bool`: a byte, 0 or 1, as `Atomic<bool>` stores it).
        pub(crate) trait Value: Copy + PartialEq + kernel::sync::atomic::AtomicType {
            /// The word.
            type W: Word;
            /// The value as its word.
            fn word(self) -> Self::W;
            /// The word as a value (a word this type stored).
            fn value(w: Self::W) -> Self;
        }

        impl Value for u64 {
            type W = u64;
            #[inline(always)]
            fn word(self) -> u64 {
                self
            }
            #[inline(always)]
            fn value(w: u64) -> u64 {
                w
            }
        }

        impl Value for u32 {
            type W = u32;
            #[inline(always)]
            fn word(self) -> u32 {
                self
            }
            #[inline(always)]
            fn value(w: u32) -> u32 {
                w
            }
        }

        impl Value for bool {
            type W = u8;
            #[inline(always)]
            fn word(self) -> u8 {
                u8::from(self)
            }
            #[inline(always)]
            fn value(w: u8) -> bool {
                w != 0
            }
        }

        /// The location of `a` as its word.
        #[inline(always)]
        fn ptr<T: Value>(a: &Atomic<T>) -> *mut T::W {
            // `Atomic<T>::as_ptr` is valid and aligned for `T` for as long
            // as `a` lives; `T::W` has `T`'s size and alignment (u64, u32;
            // bool and u8: 1 byte).
            a.as_ptr().cast::<T::W>()
        }

        /// `READ_ONCE()` (`Relaxed` load): `mov`.
        #[inline(always)]
        pub(crate) fn load_once<T: Value>(a: &Atomic<T>) -> T {
            // SAFETY: `ptr(a)` is valid and aligned (see `ptr`) and every
            // access to an `Atomic<T>` is atomic.
            T::value(unsafe { T::W::mov_load_ro(ptr(a)) })
        }

        /// `smp_load_acquire()` (`Acquire` load): `mov`, compiler barrier.
        #[inline(always)]
        pub(crate) fn load_acquire<T: Value>(a: &Atomic<T>) -> T {
            // SAFETY: as in `load_once`.
            T::value(unsafe { T::W::mov_load(ptr(a)) })
        }

        /// `WRITE_ONCE()` (`Relaxed` store): `mov`.
        #[inline(always)]
        pub(crate) fn store_once<T: Value>(a: &Atomic<T>, v: T) {
            // SAFETY: as in `load_once`; `v.word()` is a valid `T` (a bool
            // stores 0 or 1).
            unsafe { T::W::mov_store(ptr(a), v.word()) }
        }

        /// `smp_store_release()` (`Release` store): compiler barrier, `mov`.
        #[inline(always)]
        pub(crate) fn store_release<T: Value>(a: &Atomic<T>, v: T) {
            // SAFETY: as in `store_once`.
            unsafe { T::W::mov_store(ptr(a), v.word()) }
        }

        /// `xchg()` (fully ordered): `xchg`.
        #[inline(always)]
        pub(crate) fn xchg<T: Value>(a: &Atomic<T>, v: T) -> T {
            // SAFETY: as in `store_once`.
            T::value(unsafe { T::W::xchg(ptr(a), v.word()) })
        }

        /// `cmpxchg()` (fully ordered, on failure too): `lock cmpxchg`.
        /// `Ok(current)` if it stored `new`, else `Err(value)`.
        #[inline(always)]
        pub(crate) fn cmpxchg<T: Value>(a: &Atomic<T>, current: T, new: T) -> Result<T, T> {
            // SAFETY: as in `store_once`.
            let prev = T::value(unsafe { T::W::lock_cmpxchg(ptr(a), current.word(), new.word()) });
            if prev == current {
                Ok(prev)
            } else {
                Err(prev)
            }
        }

        /// `atomic64_fetch_add()` (fully ordered): `lock xadd`.
        #[inline(always)]
        pub(crate) fn fetch_add(a: &Atomic<u64>, v: u64) -> u64 {
            let mut r = v;
            // SAFETY: as in `load_once`. Flags clobbered.
            unsafe {
                asm!("lock xadd qword ptr [{p}], {r}", p = in(reg) a.as_ptr(),
                    r = inout(reg) r, options(nostack));
            }
            r
        }

        /// `smp_mb()`: `lock add dword ptr [rsp - 4], 0`, as the kernel's
        /// `__smp_mb()` on x86-64 (a locked RMW of a stack word no one
        /// else uses, cheaper than `mfence`; it changes nothing).
        #[inline(always)]
        pub(crate) fn smp_mb() {
            // SAFETY: the word below the stack pointer is ours to use: the
            // asm is not `nostack`, so the compiler keeps nothing there
            // (and the kernel has no red zone); adding 0 leaves it as it
            // was, and a single instruction cannot be interrupted halfway.
            // Flags clobbered; memory clobber (no `nomem`).
            unsafe { asm!("lock add dword ptr [rsp - 4], 0") };
        }

        /// `barrier()`: `smp_rmb()` and `smp_wmb()` on x86-64, where loads
        /// are not reordered with loads nor stores with stores.
        #[inline(always)]
        pub(crate) fn barrier() {
            // SAFETY: an empty asm: a compiler barrier only.
            unsafe { asm!("", options(nostack, preserves_flags)) };
        }
    }
}

/// Host model of interrupt nesting (`--cfg ringbuf_nesting`, host only): the
/// atomics of `core` behind wrappers that call a per-thread hook before every
/// access, so that a test can run a nested writer at any atomic step of
/// another writer, as an interrupt on the buffer's CPU would
/// (`crates/ringbuf/tests/nesting.rs`). The atomic accesses are the only
/// steps at which an interrupt can change what the interrupted code sees.
#[cfg(all(ringbuf_host, ringbuf_nesting, not(loom)))]
mod nesting {
    extern crate std;

    use core::cell::Cell;
    use core::sync::atomic::Ordering;

    std::thread_local! {
        static HOOK: Cell<Option<fn()>> = const { Cell::new(None) };
    }

    /// Sets the function called before every atomic access of this thread
    /// (`None`: none). The hook may itself use the buffer (a nested writer).
    pub fn set_interrupt_hook(hook: Option<fn()>) {
        HOOK.with(|h| h.set(hook));
    }

    #[inline(always)]
    fn point() {
        if let Some(h) = HOOK.with(|h| h.get()) {
            h();
        }
    }

    /// Each method: an interrupt point, then `core`'s (see [`adapter`]).
    macro_rules! nesting {
        ($method:ident, $a:expr $(, $arg:expr)*) => {{
            point();
            $a.$method($($arg),*)
        }};
    }

    adapter!(nesting,
        /// `core`'s atomic with an interrupt point before each access.
        #[derive(Debug, Default)]
        AtomicU64(core::sync::atomic::AtomicU64): u64 { store, swap, compare_exchange, fetch_add }
    );
    adapter!(nesting,
        /// `core`'s atomic with an interrupt point before each access.
        #[derive(Debug, Default)]
        AtomicU32(core::sync::atomic::AtomicU32): u32 { store, swap, compare_exchange, fetch_add }
    );
    adapter!(nesting,
        /// `core`'s atomic with an interrupt point before each access.
        #[derive(Debug, Default)]
        AtomicBool(core::sync::atomic::AtomicBool): bool { store, swap, compare_exchange }
    );
}
