// SPDX-License-Identifier: GPL-2.0

//! User-space call stacks: the frame-pointer walk of the sampled task's user
//! stack, from the overflow handler (NMI or hard-IRQ context).
//!
//! The walk perf's `perf_callchain_user` (arch/x86/events/core.c) and
//! oprofile's x86 backtrace do: from the user registers' frame pointer
//! (`rbp`), each frame record is two words, the caller's frame pointer and
//! the return address, read with `copy_from_user_nmi()` (range checked,
//! `nmi_uaccess_okay()`, page faults disabled: a page that is not present
//! ends the walk, nothing sleeps or faults anything in). The policy is here,
//! in Rust ([`walk`]); C ([`crate::shims::glue`]) only finds the registers. The walk
//! is bounded whatever the user stack holds: at most the depth asked for,
//! and it stops at a frame pointer of 0 (the outermost frame), at one that
//! is not 8-aligned, not above the previous frame record (so loops and
//! descending chains end), or not inside the user address space, and at a
//! return address outside it.
//!
//! 32-bit (compat) tasks are not walked: their samples carry no user chain.
//!
//! With `user_stack_size`, [`copy_stack`] also copies the top of the user
//! stack into the sample for the tool to unwind with the binaries'
//! `.eh_frame` (perf's `--call-graph dwarf`): the way to callers of code
//! built without frame pointers, which the walk cannot follow.

use core::{cell::Cell, marker::PhantomData};

use kernel::{
    bindings,
    ffi::{c_uint, c_void},
};

use crate::shims::{glue, perf::Regs};

/// Bytes of a frame record: the caller's frame pointer, then the return
/// address.
const FRAME_LEN: u64 = 16;

/// Where a walk starts: the sampled task's user registers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct UserRegs {
    /// The user instruction pointer.
    pub(crate) ip: u64,
    /// The user stack pointer: the lowest address a frame record may be at.
    pub(crate) sp: u64,
    /// The user frame pointer (`rbp`): the innermost frame record.
    pub(crate) bp: u64,
    /// The end of the user address space (`TASK_SIZE_MAX`).
    pub(crate) limit: u64,
    /// The sample was taken in kernel mode: `ip` is where the task entered
    /// the kernel, and is recorded first (as perf does).
    pub(crate) from_kernel: bool,
}

impl UserRegs {
    /// The user registers of the task interrupted with `regs`: the
    /// interrupted ones for a user-mode sample, those the task entered the
    /// kernel with for a kernel-mode sample of a user task. `None` for a
    /// kernel thread or a user worker (no user stack), or a 32-bit task
    /// (not walked).
    pub(crate) fn of(regs: &Regs) -> Option<UserRegs> {
        let (mut ip, mut sp, mut bp, mut limit) = (0, 0, 0, 0);
        // SAFETY: `regs` are the live registers of the interrupt being
        // handled (its invariant); the pointers are valid for the writes.
        let ok = unsafe {
            glue::oprofile_rs_user_regs(regs.as_raw(), &mut ip, &mut sp, &mut bp, &mut limit)
        };
        ok.then_some(UserRegs {
            ip,
            sp,
            bp,
            limit,
            from_kernel: !regs.user_mode(),
        })
    }
}

/// Why a walk ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stop {
    /// A frame pointer or return address of 0: the outermost frame.
    End,
    /// The output is full and a frame pointer was still to follow.
    Depth,
    /// A frame pointer not 8-aligned, not above the previous frame record
    /// (or below the stack pointer), or outside the user address space; or
    /// a return address outside it.
    BadFrame,
    /// The frame record could not be read (not mapped, not present: page
    /// faults are not handled here).
    Fault,
}

impl Stop {
    /// Whether the walk was cut by garbage or a fault rather than ending or
    /// filling the output (the `user_backtrace_aborted` counter).
    pub(crate) fn aborted(self) -> bool {
        matches!(self, Stop::BadFrame | Stop::Fault)
    }
}

/// Writes the first entry of a user chain from `start` into `out`: for a
/// kernel-mode sample the address where the task entered the kernel.
/// Returns the entries written (0 or 1), or `None` if `out` had no room
/// for it.
pub(crate) fn entry(start: &UserRegs, out: &mut [u64]) -> Option<usize> {
    if !start.from_kernel {
        return Some(0);
    }
    *out.first_mut()? = start.ip;
    Some(1)
}

/// Walks the user stack from `start` into `out`: for a kernel-mode sample
/// `start.ip` first, then the return addresses of the frame records,
/// innermost first. `read(fp)` reads the frame record at `fp` (the caller's
/// frame pointer, the return address) or fails. Returns the entries written
/// and why the walk ended; at most `out.len()` records are read.
pub(crate) fn walk(
    start: &UserRegs,
    out: &mut [u64],
    mut read: impl FnMut(u64) -> Option<[u64; 2]>,
) -> (usize, Stop) {
    let Some(mut n) = entry(start, out) else {
        return (0, Stop::Depth);
    };
    let last = start.limit.saturating_sub(FRAME_LEN);
    let mut fp = start.bp;
    // The lowest address the next frame record may start at.
    let mut low = start.sp;
    loop {
        if fp == 0 {
            return (n, Stop::End);
        }
        let Some(slot) = out.get_mut(n) else {
            return (n, Stop::Depth);
        };
        if fp % 8 != 0 || fp < low || fp > last {
            return (n, Stop::BadFrame);
        }
        let Some([next, ret]) = read(fp) else {
            return (n, Stop::Fault);
        };
        if ret == 0 {
            return (n, Stop::End);
        }
        if ret >= start.limit {
            return (n, Stop::BadFrame);
        }
        *slot = ret;
        n += 1;
        // Strictly above this record (fp <= last: no overflow).
        low = fp + FRAME_LEN;
        fp = next;
    }
}

/// The current task's user memory as one sample's walks read it: in any
/// context (NMI included), without faulting pages in. A value lives for one
/// overflow, on its handler's stack ([`UserMemory::new`] per sample).
///
/// The first read goes through `copy_from_user_nmi()`, which checks that the
/// range is user space and that the current task's mm is the loaded one
/// (`nmi_uaccess_okay()`: not so in an NMI that interrupted `switch_mm`, and
/// not exported to modules); once one such read succeeded, the others read
/// with `__get_user()` (the glue), as perf's own user callchain walk reads
/// its frame records after one check: without FSRM, `copy_from_user_nmi()`
/// copies 8 or 16 bytes with a call to `rep_movs_alternative`.
///
/// # Invariants
///
/// `checked` is set only after a read through `copy_from_user_nmi()`
/// succeeded during this value's overflow handler: the loaded mm was the
/// current task's then, and stays so until the handler returns (it runs
/// with interrupts or preemption off: no `switch_mm` on this CPU
/// meanwhile). The value is neither `Send` nor `Sync` and is made per sample.
pub(crate) struct UserMemory {
    checked: Cell<bool>,
    _one_cpu: PhantomData<*const ()>,
}

impl UserMemory {
    /// The current task's memory for one sample (nothing read yet).
    pub(crate) fn new() -> Self {
        // INVARIANT: nothing read yet.
        Self {
            checked: Cell::new(false),
            _one_cpu: PhantomData,
        }
    }

    /// The frame record (saved frame pointer, return address) at `fp`.
    pub(crate) fn frame(&self, fp: u64) -> Option<[u64; 2]> {
        self.read(fp)
    }

    /// The word at `addr`.
    pub(crate) fn word(&self, addr: u64) -> Option<u64> {
        self.read(addr).map(|[w]| w)
    }

    /// `N` (1 or 2) words at user address `addr`.
    fn read<const N: usize>(&self, addr: u64) -> Option<[u64; N]> {
        const { assert!(N == 1 || N == 2) };
        let mut words = [0u64; N];
        if self.checked.get() {
            // SAFETY: `words` is valid for `N` words of writes and `N` is 1
            // or 2 (the glue reads at most 2). The glue checks that the
            // range is user space and reads with page faults disabled (a
            // fault ends the read through the exception table, nothing
            // sleeps); the current task's mm is the loaded one (INVARIANT:
            // `checked`).
            let ok =
                unsafe { glue::oprofile_rs_read_user_words(addr, words.as_mut_ptr(), N as c_uint) };
            return ok.then_some(words);
        }
        // SAFETY: `words` is valid for its size in bytes of writes.
        // copy_from_user_nmi() may be called in any context with any
        // address: it checks that the range is user space and that the
        // current mm is the loaded one (nmi_uaccess_okay()), and copies with
        // page faults disabled (a fault ends the copy through the exception
        // table, nothing sleeps).
        let left = unsafe {
            bindings::copy_from_user_nmi(
                words.as_mut_ptr().cast::<c_void>(),
                addr as usize as *const c_void,
                core::mem::size_of_val(&words),
            )
        };
        if left != 0 {
            return None;
        }
        // INVARIANT: a read through copy_from_user_nmi() succeeded, in this
        // value's handler (it is made per sample and never leaves it).
        self.checked.set(true);
        Some(words)
    }
}

/// The frame record at the user frame pointer (`start.bp`) of the current
/// task, if the walk would read it (8-aligned, at or above the stack
/// pointer, inside the user address space) and it can be read; for
/// [`fit_len`] when no walk read it.
pub(crate) fn first_frame(start: &UserRegs, mem: &UserMemory) -> Option<[u64; 2]> {
    let bp = start.bp;
    let plausible =
        bp != 0 && bp % 8 == 0 && bp >= start.sp && bp <= start.limit.saturating_sub(FRAME_LEN);
    if plausible {
        mem.frame(bp)
    } else {
        None
    }
}

/// Bytes of user stack to copy for a sample from `start` with `user_stack_size`
/// `max`, when copies fit the frame-pointer chain (`user_stack_fit`): where
/// the frame pointer holds a plausible frame record (`first`, read at
/// `start.bp`: 8-aligned, at or above the stack pointer and within `max`
/// bytes of it, its saved frame pointer 0 or above it, its return address
/// in user space and not 0), the stack from the stack pointer to the end of
/// that record, in whole words: the frames below the record (a leaf's, or
/// those of code without frame pointers called from a frame that keeps
/// one) for the unwind with `.eh_frame`, the record itself, and the chain
/// beyond, which the sample carries. Otherwise (no record, or garbage in
/// the frame pointer, as code built without frame pointers leaves there)
/// `max`: a copy as without `user_stack_fit`.
///
/// A frame pointer that only looks like one (code without frame pointers
/// keeping a stack address in `rbp`) makes the copy short: the tool then
/// cuts the stack where the copy ends (it continues along the chain only
/// from a frame whose own record is there, `tools/oprofile-rs/src/unwind.rs`),
/// it never follows the false record.
pub(crate) fn fit_len(start: &UserRegs, first: Option<[u64; 2]>, max: usize) -> usize {
    let Some([next, ret]) = first else {
        return max;
    };
    let bp = start.bp;
    let end = match bp.checked_add(FRAME_LEN) {
        Some(end) if end <= start.limit => end,
        _ => return max,
    };
    let plausible = bp % 8 == 0
        && bp >= start.sp
        && (next == 0 || next >= end)
        && ret != 0
        && ret < start.limit;
    if !plausible {
        return max;
    }
    // From the stack pointer (which need not be 8-aligned) to the record's
    // end, rounded up to whole words; at most `max`.
    match usize::try_from(end - start.sp) {
        Ok(n) if n <= max => n.div_ceil(8) * 8,
        _ => max,
    }
    .min(max)
}

/// Copies the current task's user stack from `start.sp` up into `out`, in
/// any context (NMI included), without faulting pages in (as perf's
/// `PERF_SAMPLE_STACK_USER`): at most `out.len()` words, and never past the
/// end of the user address space. Returns the bytes copied: the copy stops
/// at the first byte it could not read (a page not present, the end of the
/// stack's mapping). The words a record carries of it
/// ([`recorded_words`]) hold nothing else: their bytes past the copy are
/// zeroed (no bytes of an earlier sample's task are left in them). The
/// words after those are left as they are: no record carries them (zeroing
/// all of `out`, up to 8 KiB, was work the handler did for nothing on every
/// short copy).
pub(crate) fn copy_stack(start: &UserRegs, out: &mut [u64]) -> usize {
    let want = core::mem::size_of_val(out);
    let n = (start.limit.saturating_sub(start.sp)).min(want as u64) as usize;
    let left = if n == 0 {
        0
    } else {
        // SAFETY: `out` is valid for `want >= n` bytes of writes.
        // copy_from_user_nmi() may be called in any context with any
        // address: it checks that the range is user space and that the
        // current mm is the loaded one (nmi_uaccess_okay()), and copies with
        // page faults disabled (a fault ends the copy through the exception
        // table; what it returns is the bytes not copied).
        unsafe {
            bindings::copy_from_user_nmi(
                out.as_mut_ptr().cast::<c_void>(),
                start.sp as usize as *const c_void,
                n,
            )
        }
    };
    let copied = n.saturating_sub(left as usize);
    zero_tail(out, copied);
    copied
}

/// The words of a copy of `copied` bytes that its record carries: those
/// copied into, and at least one (the part then says the copy's size, and
/// the registers alone still unwind the sampled function).
pub(crate) fn recorded_words(copied: usize) -> usize {
    copied.div_ceil(8).max(1)
}

/// Zeroes the bytes of `out` from byte `copied` to the end of the words a
/// record carries ([`recorded_words`]): the last word copied into, past the
/// copy, or the first word when nothing was copied.
fn zero_tail(out: &mut [u64], copied: usize) {
    // A copy that ends on a word boundary left no word partly filled, except
    // the empty copy, whose one recorded word is all past it.
    if copied % 8 == 0 && copied > 0 {
        return;
    }
    if let Some(w) = out.get_mut(copied / 8) {
        let mut bytes = w.to_ne_bytes();
        if let Some(tail) = bytes.get_mut(copied % 8..) {
            tail.fill(0);
        }
        *w = u64::from_ne_bytes(bytes);
    }
}

#[cfg(oprofile_rs_kunit)]
#[kernel::prelude::kunit_tests(oprofile_rs_user_stack)]
mod tests {
    use super::*;
    use kernel::prelude::*;

    const LIMIT: u64 = 0x7fff_ffff_f000;
    const STACK: u64 = 0x7ffd_0000_0000;

    /// A fake user memory of frame records: `(address, [next, ret])`.
    fn reader<'a>(
        mem: &'a [(u64, [u64; 2])],
        reads: &'a mut usize,
    ) -> impl FnMut(u64) -> Option<[u64; 2]> + 'a {
        move |fp| {
            *reads += 1;
            mem.iter().find(|(a, _)| *a == fp).map(|(_, f)| *f)
        }
    }

    fn start(bp: u64) -> UserRegs {
        UserRegs {
            ip: 0x40_1000,
            sp: STACK,
            bp,
            limit: LIMIT,
            from_kernel: false,
        }
    }

    #[test]
    fn kernel_memory_and_unmapped_user_memory_read_nothing() {
        // A kernel address (this test's own stack) is no user address.
        let x = [5u64, 6];
        let mem = UserMemory::new();
        assert_eq!(mem.word(x.as_ptr() as u64), None);
        assert_eq!(mem.frame(x.as_ptr() as u64), None);
        // The lowest page is never mapped (mmap_min_addr); in a task
        // without user memory nothing is read either.
        assert_eq!(mem.frame(0x1000), None);
        assert_eq!(mem.word(8), None);
        // Also past a check that passed (the glue's own range check).
        mem.checked.set(true);
        assert_eq!(mem.word(x.as_ptr() as u64), None);
        assert_eq!(mem.frame(x.as_ptr() as u64), None);
        assert_eq!(mem.frame(u64::MAX - 7), None);
    }

    #[test]
    fn a_chain_of_three_frames_ends_at_zero() {
        let mem = [
            (STACK + 0x10, [STACK + 0x40, 0x40_1111]),
            (STACK + 0x40, [STACK + 0x80, 0x40_2222]),
            (STACK + 0x80, [0, 0x40_3333]),
        ];
        let mut reads = 0;
        let mut out = [0u64; 8];
        let r = walk(&start(STACK + 0x10), &mut out, reader(&mem, &mut reads));
        assert_eq!(r, (3, Stop::End));
        assert_eq!(out[..3], [0x40_1111, 0x40_2222, 0x40_3333]);
        assert_eq!(reads, 3);
    }

    #[test]
    fn kernel_mode_samples_start_with_the_entry_ip() {
        let mem = [(STACK + 0x10, [0, 0x40_1111])];
        let mut reads = 0;
        let mut out = [0u64; 8];
        let s = UserRegs {
            from_kernel: true,
            ..start(STACK + 0x10)
        };
        let r = walk(&s, &mut out, reader(&mem, &mut reads));
        assert_eq!(r, (2, Stop::End));
        assert_eq!(out[..2], [0x40_1000, 0x40_1111]);
        // Depth 1: the entry ip only.
        let r = walk(&s, &mut out[..1], reader(&mem, &mut reads));
        assert_eq!(r, (1, Stop::Depth));
        assert_eq!(
            walk(&s, &mut [], reader(&mem, &mut reads)),
            (0, Stop::Depth)
        );
    }

    #[test]
    fn a_frame_pointing_to_itself_is_read_once() {
        let fp = STACK + 0x100;
        let mem = [(fp, [fp, 0x40_1111])];
        let mut reads = 0;
        let mut out = [0u64; 64];
        let r = walk(&start(fp), &mut out, reader(&mem, &mut reads));
        assert_eq!(r, (1, Stop::BadFrame));
        assert_eq!(reads, 1);
        // A loop of two frames: the second points back below itself.
        let mem = [(fp, [fp + 0x20, 0x40_1111]), (fp + 0x20, [fp, 0x40_2222])];
        let mut reads = 0;
        let r = walk(&start(fp), &mut out, reader(&mem, &mut reads));
        assert_eq!(r, (2, Stop::BadFrame));
        assert_eq!(reads, 2);
        // Overlapping records (8 bytes up) are not above the previous one.
        let mem = [(fp, [fp + 8, 0x40_1111])];
        let r = walk(&start(fp), &mut out, reader(&mem, &mut 0));
        assert_eq!(r, (1, Stop::BadFrame));
    }

    #[test]
    fn bad_frame_pointers_read_nothing() {
        let mut out = [0u64; 16];
        for bp in [
            STACK + 3,             // misaligned
            STACK - 0x10,          // below the stack pointer
            LIMIT - 8,             // the record would cross the limit
            LIMIT,                 // not user space
            0xffff_ffff_8100_0000, // a kernel address
            u64::MAX - 7,          // wraps
        ] {
            let mut reads = 0;
            let r = walk(&start(bp), &mut out, reader(&[], &mut reads));
            assert_eq!(r, (0, Stop::BadFrame));
            assert_eq!(reads, 0);
        }
    }

    #[test]
    fn kernel_return_addresses_are_not_recorded() {
        let mem = [(STACK, [STACK + 0x10, 0xffff_ffff_8100_0000])];
        let mut out = [0u64; 4];
        let r = walk(&start(STACK), &mut out, reader(&mem, &mut 0));
        assert_eq!(r, (0, Stop::BadFrame));
        assert!(r.1.aborted());
    }

    #[test]
    fn unreadable_frames_end_the_walk() {
        let mem = [(STACK, [STACK + 0x1000, 0x40_1111])];
        let mut out = [0u64; 4];
        let r = walk(&start(STACK), &mut out, reader(&mem, &mut 0));
        assert_eq!(r, (1, Stop::Fault));
        assert!(r.1.aborted());
    }

    #[test]
    fn long_chains_stop_at_the_depth() {
        // 100 ascending records: the walk reads exactly `depth` of them.
        let mut mem = KVec::new();
        for i in 0..100u64 {
            let at = STACK + 0x20 * i;
            assert!(mem
                .push((at, [at + 0x20, 0x40_0000 + i]), GFP_KERNEL)
                .is_ok());
        }
        for depth in [1usize, 7, 64] {
            let mut out = [0u64; 64];
            let mut reads = 0;
            let r = walk(&start(STACK), &mut out[..depth], reader(&mem, &mut reads));
            assert_eq!(r, (depth, Stop::Depth));
            assert!(!r.1.aborted());
            assert_eq!(reads, depth);
            assert_eq!(out[depth - 1], 0x40_0000 + depth as u64 - 1);
        }
    }

    #[test]
    fn the_recorded_words_hold_nothing_but_the_copy() {
        let junk = 0x1122_3344_5566_7788u64;
        for copied in [0usize, 3, 8, 13, 31, 32] {
            let mut out = [junk; 4];
            zero_tail(&mut out, copied);
            let recorded = 8 * recorded_words(copied);
            for (i, w) in out.iter().enumerate() {
                for (j, b) in w.to_ne_bytes().iter().enumerate() {
                    let at = 8 * i + j;
                    // Copied bytes and the words no record carries stay;
                    // the recorded bytes past the copy are zero.
                    let kept = at < copied || at >= recorded;
                    assert_eq!(*b, if kept { junk.to_ne_bytes()[j] } else { 0 });
                }
            }
        }
        assert_eq!([0, 1, 8, 9, 8192].map(recorded_words), [1, 1, 1, 2, 1024]);
    }

    #[test]
    fn fitted_copies_end_after_a_plausible_first_record() {
        let bp = STACK + 0x30;
        let s = start(bp);
        // A record: the leaf's 0x30 bytes and the record's 16.
        assert_eq!(fit_len(&s, Some([bp + 0x40, 0x40_1111]), 1024), 0x40);
        assert_eq!(fit_len(&s, Some([0, 0x40_1111]), 1024), 0x40);
        // A stack pointer off the word grid: whole words from it.
        let odd = UserRegs { sp: STACK + 4, ..s };
        assert_eq!(fit_len(&odd, Some([0, 0x40_1111]), 1024), 0x40);
        // The record at the stack pointer itself.
        assert_eq!(fit_len(&start(STACK), Some([0, 0x40_1111]), 1024), 16);
        // Farther than the copy would reach: the whole copy.
        assert_eq!(fit_len(&s, Some([0, 0x40_1111]), 0x38), 0x38);
        assert_eq!(fit_len(&s, Some([0, 0x40_1111]), 0x40), 0x40);
    }

    #[test]
    fn anything_but_a_plausible_record_copies_it_all() {
        let bp = STACK + 0x30;
        for (regs, first) in [
            // No record read (bad frame pointer, fault, no walk).
            (start(bp), None),
            // What code without frame pointers leaves at a stack address:
            // a small number (a `struct timespec`), a saved frame pointer
            // below or inside the record, a return address of 0 or in the
            // kernel.
            (start(bp), Some([123, 456_789])),
            (start(bp), Some([bp, 0x40_1111])),
            (start(bp), Some([bp + 8, 0x40_1111])),
            (start(bp), Some([bp - 0x10, 0x40_1111])),
            (start(bp), Some([0, 0])),
            (start(bp), Some([0, LIMIT])),
            (start(bp), Some([0, 0xffff_ffff_8100_0000])),
            // Frame pointers the walk does not follow.
            (start(bp + 3), Some([0, 0x40_1111])),
            (start(STACK - 0x10), Some([0, 0x40_1111])),
            (start(LIMIT - 8), Some([0, 0x40_1111])),
            (start(u64::MAX - 7), Some([0, 0x40_1111])),
        ] {
            assert_eq!(fit_len(&regs, first, 1024), 1024);
        }
    }

    #[test]
    fn a_copy_without_user_memory_is_empty_and_its_word_zeroed() {
        // A KUnit thread has no user memory: nothing is copied, from a user
        // address, from the last bytes below the limit, or from above it.
        for sp in [STACK, LIMIT - 8, LIMIT, u64::MAX - 7] {
            let mut out = [u64::MAX; 8];
            let regs = UserRegs { sp, ..start(0) };
            assert_eq!(copy_stack(&regs, &mut out), 0);
            // The one word recorded is zero; the others are not recorded.
            assert_eq!(out[0], 0);
            assert_eq!(out[1..], [u64::MAX; 7]);
        }
    }
}
