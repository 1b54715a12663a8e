// SPDX-License-Identifier: GPL-2.0

//! KUnit suite `oprofile_rs_ringbuf_atomics`: the ring-buffer core's atomics
//! (`ringbuf::atomics`: on x86_64 inline assembly, see
//! `Documentation/ring-buffer.md`, "The kernel's atomics on x86-64")
//! against the kernel crate's (`kernel::sync::atomic`, the reference).
//!
//! * `same_results`: every operation the core uses, with every ordering it
//!   accepts, on the shim's atomic and on a kernel `Atomic<T>` with the
//!   mapped ordering, from the same values: same results, same values after.
//! * `store_buffering`: the store-buffering litmus test (x = y = 0;
//!   CPU 0: x = 1, r0 = y; CPU 1: y = 1, r1 = x), on CPUs 0 and 1, with each
//!   full-barrier form the core relies on between the store and the load
//!   (a `SeqCst` store, `fence(SeqCst)`, a `SeqCst` `fetch_add`, a
//!   `compare_exchange`): r0 = r1 = 0 is forbidden by the LKMM (and by
//!   x86-TSO with a locked instruction between) and must never be seen. With
//!   plain `Relaxed` accesses it is allowed (TSO's store buffer); how often
//!   it was seen is printed, to show the test can see it where the machine
//!   (or emulator) reorders.

use core::ffi::{c_int, c_void};

use kernel::{
    cpu::CpuId,
    prelude::*,
    sync::atomic::{Acquire, Atomic, Full, Relaxed, Release},
};

use super::kthread::{park, wait_until, Thread};
use crate::ringbuf::atomics::{fence, AtomicBool, AtomicU32, AtomicU64, Ordering};
use crate::shims::cpu::cpu_online;

/// The orderings of `core`'s names the shim takes.
const ALL: [Ordering; 5] = [
    Ordering::Relaxed,
    Ordering::Acquire,
    Ordering::Release,
    Ordering::AcqRel,
    Ordering::SeqCst,
];
/// Those a store takes (`core` rejects the others).
const STORE: [Ordering; 3] = [Ordering::Relaxed, Ordering::Release, Ordering::SeqCst];
/// Those a load or a failed compare-and-exchange takes.
const LOAD: [Ordering; 3] = [Ordering::Relaxed, Ordering::Acquire, Ordering::SeqCst];

const U64S: [u64; 6] = [
    0,
    1,
    2,
    u64::MAX,
    0x8000_0000_0000_0000,
    0x1234_5678_9abc_def0,
];
const U32S: [u32; 5] = [0, 1, u32::MAX, 0x8000_0000, 0x1234_5678];

/// Counts and logs the first differences between the shim and the kernel.
struct Diff(u32);

impl Diff {
    fn check<T: PartialEq + core::fmt::Debug>(&mut self, what: &str, shim: T, kernel: T) {
        if shim != kernel {
            if self.0 < 10 {
                pr_err!("ringbuf atomics: {what}: shim {shim:?}, kernel {kernel:?}\n");
            }
            self.0 += 1;
        }
    }
}

/// The kernel store the shim's store with ordering `$o` stands for.
macro_rules! kernel_store {
    ($a:expr, $v:expr, $o:expr) => {
        match $o {
            Ordering::Relaxed => $a.store($v, Relaxed),
            Ordering::Release => $a.store($v, Release),
            _ => {
                $a.xchg($v, Full);
            }
        }
    };
}

fn u64_ops(d: &mut Diff) {
    for &v in &U64S {
        for &so in &STORE {
            let (s, k) = (AtomicU64::new(!v), Atomic::new(!v));
            s.store(v, so);
            kernel_store!(k, v, so);
            for &lo in &LOAD {
                let kl = if lo == Ordering::Relaxed {
                    k.load(Relaxed)
                } else {
                    k.load(Acquire)
                };
                d.check("u64 store/load", s.load(lo), kl);
            }
        }
        for &o in &ALL {
            for &add in &[0u64, 1, 2, u64::MAX, 0x8000_0000_0000_0001] {
                let (s, k) = (AtomicU64::new(v), Atomic::new(v));
                d.check("u64 fetch_add", s.fetch_add(add, o), k.fetch_add(add, Full));
                d.check(
                    "u64 after fetch_add",
                    s.load(Ordering::Relaxed),
                    k.load(Relaxed),
                );
            }
            for &fo in &LOAD {
                for &cur in &[v, v.wrapping_add(1)] {
                    let new = v ^ 0x5555_5555_5555_5555;
                    let (s, k) = (AtomicU64::new(v), Atomic::new(v));
                    d.check(
                        "u64 compare_exchange",
                        s.compare_exchange(cur, new, o, fo),
                        k.cmpxchg(cur, new, Full).map(|_| cur),
                    );
                    d.check(
                        "u64 after compare_exchange",
                        s.load(Ordering::Relaxed),
                        k.load(Relaxed),
                    );
                }
            }
        }
    }
}

fn u32_ops(d: &mut Diff) {
    for &v in &U32S {
        for &so in &STORE {
            let (s, k) = (AtomicU32::new(!v), Atomic::new(!v));
            s.store(v, so);
            kernel_store!(k, v, so);
            for &lo in &LOAD {
                d.check("u32 store/load", s.load(lo), k.load(Acquire));
            }
        }
        for &o in &ALL {
            for &fo in &LOAD {
                for &cur in &[v, v.wrapping_add(1)] {
                    let new = v ^ 0x5555_5555;
                    let (s, k) = (AtomicU32::new(v), Atomic::new(v));
                    d.check(
                        "u32 compare_exchange",
                        s.compare_exchange(cur, new, o, fo),
                        k.cmpxchg(cur, new, Full).map(|_| cur),
                    );
                    d.check(
                        "u32 after compare_exchange",
                        s.load(Ordering::Relaxed),
                        k.load(Relaxed),
                    );
                }
            }
        }
    }
}

fn bool_ops(d: &mut Diff) {
    for &v in &[false, true] {
        for &so in &STORE {
            let (s, k) = (AtomicBool::new(!v), Atomic::new(!v));
            s.store(v, so);
            kernel_store!(k, v, so);
            for &lo in &LOAD {
                d.check("bool store/load", s.load(lo), k.load(Relaxed));
            }
        }
        for &o in &ALL {
            for &new in &[false, true] {
                let (s, k) = (AtomicBool::new(v), Atomic::new(v));
                d.check("bool swap", s.swap(new, o), k.xchg(new, Full));
                d.check(
                    "bool after swap",
                    s.load(Ordering::Relaxed),
                    k.load(Relaxed),
                );
            }
            for &fo in &LOAD {
                for &cur in &[v, !v] {
                    let (s, k) = (AtomicBool::new(v), Atomic::new(v));
                    d.check(
                        "bool compare_exchange",
                        s.compare_exchange(cur, !cur, o, fo),
                        k.cmpxchg(cur, !cur, Full).map(|_| cur),
                    );
                    d.check(
                        "bool after compare_exchange",
                        s.load(Ordering::Relaxed),
                        k.load(Relaxed),
                    );
                }
            }
        }
    }
}

/// Rounds of the store-buffering test per form.
const SB_ROUNDS: u64 = 5_000;

/// How each side orders its store before its load.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Form {
    /// `Relaxed` store, `Relaxed` load: r0 = r1 = 0 allowed.
    Plain,
    /// `SeqCst` store (`xchg`), `SeqCst` load.
    SeqCstStore,
    /// `Relaxed` store, `fence(SeqCst)` (`smp_mb()`), `Relaxed` load.
    Fence,
    /// `Relaxed` store, `SeqCst` `fetch_add` of a third location, `SeqCst`
    /// load (the writer's `nest` entry on other architectures).
    FetchAdd,
    /// `Relaxed` store, failing `SeqCst` `compare_exchange` of a third
    /// location, `Relaxed` load (the control side's state change).
    CmpxchgFail,
}

const FORMS: [Form; 5] = [
    Form::Plain,
    Form::SeqCstStore,
    Form::Fence,
    Form::FetchAdd,
    Form::CmpxchgFail,
];

/// The shared state of the store-buffering test.
struct Sb {
    form: Atomic<u32>,
    /// Each side's round: a side starts round `n` once the other's is `n`.
    round: [Atomic<u64>; 2],
    /// The side's results of the current round have been published.
    done: [Atomic<u64>; 2],
    x: [AtomicU64; 2],
    third: [AtomicU64; 2],
    r: [Atomic<u64>; 2],
    /// Rounds where both loads saw 0.
    both_zero: Atomic<u64>,
    finished: [Atomic<bool>; 2],
    /// Set to make both sides stop waiting and return.
    abort: Atomic<bool>,
}

impl Sb {
    /// Spins until `cond` holds (`true`) or the test is aborted (`false`).
    fn wait(&self, cond: impl Fn() -> bool) -> bool {
        while !cond() {
            if self.abort.load(Relaxed) {
                return false;
            }
            core::hint::spin_loop();
        }
        true
    }

    fn side(&self, me: usize) {
        self.run(me);
        self.finished[me].store(true, Release);
    }

    fn run(&self, me: usize) {
        let other = 1 - me;
        let form = match self.form.load(Acquire) {
            0 => Form::Plain,
            1 => Form::SeqCstStore,
            2 => Form::Fence,
            3 => Form::FetchAdd,
            _ => Form::CmpxchgFail,
        };
        for n in 1..=SB_ROUNDS {
            // Side 0 resets the round's locations, then both start it.
            if me == 0 {
                // Wait for the other side to have read the last round.
                if !self.wait(|| self.done[other].load(Acquire) == n - 1) {
                    return;
                }
                self.x[0].store(0, Ordering::Relaxed);
                self.x[1].store(0, Ordering::Relaxed);
                let r0 = self.r[0].load(Relaxed);
                let r1 = self.r[1].load(Relaxed);
                if n > 1 && r0 == 0 && r1 == 0 {
                    self.both_zero.add(1u64, Relaxed);
                }
            }
            self.round[me].store(n, Release);
            if !self.wait(|| self.round[other].load(Acquire) >= n) {
                return;
            }
            let seen = match form {
                Form::Plain => {
                    self.x[me].store(1, Ordering::Relaxed);
                    self.x[other].load(Ordering::Relaxed)
                }
                Form::SeqCstStore => {
                    self.x[me].store(1, Ordering::SeqCst);
                    self.x[other].load(Ordering::SeqCst)
                }
                Form::Fence => {
                    self.x[me].store(1, Ordering::Relaxed);
                    fence(Ordering::SeqCst);
                    self.x[other].load(Ordering::Relaxed)
                }
                Form::FetchAdd => {
                    self.x[me].store(1, Ordering::Relaxed);
                    self.third[me].fetch_add(1, Ordering::SeqCst);
                    self.x[other].load(Ordering::SeqCst)
                }
                Form::CmpxchgFail => {
                    self.x[me].store(1, Ordering::Relaxed);
                    let _ = self.third[me].compare_exchange(
                        u64::MAX,
                        0,
                        Ordering::SeqCst,
                        Ordering::SeqCst,
                    );
                    self.x[other].load(Ordering::Relaxed)
                }
            };
            self.r[me].store(seen, Relaxed);
            self.done[me].store(n, Release);
            if me == 0 && !self.wait(|| self.done[other].load(Acquire) == n) {
                return;
            }
        }
        if me == 0 && self.r[0].load(Relaxed) == 0 && self.r[1].load(Relaxed) == 0 {
            self.both_zero.add(1u64, Relaxed);
        }
    }
}

/// One side's kthread.
///
/// # Safety
///
/// `data` must point to an `Sb` that outlives the thread.
unsafe extern "C" fn sb_thread_0(data: *mut c_void) -> c_int {
    // SAFETY: `data` is the `Sb` of `store_buffering`, which outlives this
    // thread (`Thread::start`'s contract).
    let sb = unsafe { &*data.cast::<Sb>() };
    sb.side(0);
    park();
    0
}

/// The other side's kthread.
///
/// # Safety
///
/// `data` must point to an `Sb` that outlives the thread.
unsafe extern "C" fn sb_thread_1(data: *mut c_void) -> c_int {
    // SAFETY: as in `sb_thread_0`.
    let sb = unsafe { &*data.cast::<Sb>() };
    sb.side(1);
    park();
    0
}

/// Runs the store-buffering test in `form` on CPUs 0 and 1: the rounds
/// where both loads saw 0, or `None` if it could not run or time out.
fn store_buffering(form: Form) -> Option<u64> {
    let (c0, c1) = (CpuId::from_u32(0)?, CpuId::from_u32(1)?);
    if !cpu_online(c0) || !cpu_online(c1) {
        return None;
    }
    let sb = KBox::new(
        Sb {
            form: Atomic::new(FORMS.iter().position(|&f| f == form).unwrap_or(0) as u32),
            round: [Atomic::new(0), Atomic::new(0)],
            done: [Atomic::new(0), Atomic::new(0)],
            x: [AtomicU64::new(0), AtomicU64::new(0)],
            third: [AtomicU64::new(0), AtomicU64::new(0)],
            r: [Atomic::new(1), Atomic::new(1)],
            both_zero: Atomic::new(0),
            finished: [Atomic::new(false), Atomic::new(false)],
            abort: Atomic::new(false),
        },
        GFP_KERNEL,
    )
    .ok()?;
    let ptr = core::ptr::from_ref::<Sb>(&sb).cast_mut().cast::<c_void>();
    let ok = {
        // SAFETY: both functions end with `park`; `sb` outlives the threads
        // (dropped at the end of this block, which stops them).
        let t0 = unsafe { Thread::start(sb_thread_0, ptr, c0) };
        // SAFETY: as above.
        let t1 = unsafe { Thread::start(sb_thread_1, ptr, c1) };
        let ok = t0.is_ok()
            && t1.is_ok()
            && wait_until(60_000, || {
                sb.finished[0].load(Acquire) && sb.finished[1].load(Acquire)
            });
        if !ok {
            pr_err!("ringbuf atomics: store buffering {form:?} did not run to its end\n");
            // A side waiting for the other stops waiting (and parks), so
            // that stopping the threads (dropping them) returns.
            sb.abort.store(true, Relaxed);
        }
        ok
    };
    ok.then(|| sb.both_zero.load(Relaxed))
}

#[kunit_tests(oprofile_rs_ringbuf_atomics)]
mod tests {
    use super::*;

    #[test]
    fn same_results() {
        let mut d = Diff(0);
        u64_ops(&mut d);
        u32_ops(&mut d);
        bool_ops(&mut d);
        assert_eq!(d.0, 0);
    }

    #[test]
    fn store_buffering_forbidden_with_full_barriers() {
        for &form in &FORMS {
            let n = store_buffering(form);
            pr_info!(
                "ringbuf atomics: store buffering, {form:?}: r0 = r1 = 0 in {n:?} of {SB_ROUNDS} rounds\n"
            );
            assert!(n.is_some());
            if form != Form::Plain {
                assert_eq!(n, Some(0));
            }
        }
    }
}
