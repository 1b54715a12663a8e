// SPDX-License-Identifier: GPL-2.0

//! The functions of `glue.c`, declared once, with the types of `glue.h`.
//!
//! `glue.c` holds only what Rust cannot reach through the kernel crate: inline
//! functions and macros, and declarations missing from its bindings (each
//! function there says which). The safe wrappers are in `perf.rs` (counters,
//! registers, the unwinder), `clock.rs`, `task.rs`, `oprofile.rs` (the
//! `event=` parameter) and `poll_misc.rs` (a file's read mode).

use kernel::{
    bindings,
    ffi::{c_char, c_int, c_uint, c_ulong, c_void},
};

/// `struct cgroup`, opaque here (`linux/cgroup.h` is not in the bindings).
#[repr(C)]
pub(crate) struct RawCgroup {
    _opaque: [u8; 0],
}

/// `struct mm_struct`, opaque here (its layout is the kernel's business).
#[repr(C)]
pub(crate) struct RawMm {
    _opaque: [u8; 0],
}

/// `struct task_struct`, opaque here: the bindings' layout of it is not the
/// kernel's on GCC-built kernels (see `oprofile_rs_current_task`).
#[repr(C)]
pub(crate) struct RawTask {
    _opaque: [u8; 0],
}

extern "C" {
    /// Creates a pinned sampling counter calling [`oprofile_rs_perf_overflow`]
    /// with `context`, on `cpu` (`task` null) or bound to `task` (`cpu` -1,
    /// inherited by the tasks it creates); a counter or an `ERR_PTR`.
    ///
    /// [`oprofile_rs_perf_overflow`]: crate::shims::perf
    pub(crate) fn oprofile_rs_perf_create(
        cpu: c_int,
        task: *mut RawTask,
        type_: u32,
        config: u64,
        period_or_freq: u64,
        freq: bool,
        exclude_user: bool,
        exclude_kernel: bool,
        disabled: bool,
        context: *mut c_void,
    ) -> *mut bindings::perf_event;
    /// The threads of process `pid` (caller's pid namespace), a reference
    /// held on each, in `out` (room for `max`): how many, or `-ESRCH`
    /// (none), or `-E2BIG` (more than `max`, none held).
    pub(crate) fn oprofile_rs_process_threads(pid: u32, out: *mut *mut RawTask, max: u32) -> c_int;
    /// `put_task_struct(task)`.
    pub(crate) fn oprofile_rs_task_put(task: *mut RawTask);
    /// `perf_event_release_kernel()`.
    pub(crate) fn oprofile_rs_perf_release(event: *mut bindings::perf_event);
    /// `perf_event_enable()` (`on`) or `perf_event_disable()`.
    pub(crate) fn oprofile_rs_perf_enable(event: *mut bindings::perf_event, on: bool);
    /// Calls `frame(ctx, addr)` for each return address of the kernel stack
    /// of `regs` (the interrupted address first) until it returns false;
    /// whether the unwinder failed before the outermost frame.
    pub(crate) fn oprofile_rs_unwind_kernel(
        regs: *mut bindings::pt_regs,
        frame: unsafe extern "C" fn(ctx: *mut c_void, addr: c_ulong) -> bool,
        ctx: *mut c_void,
    ) -> bool;
    /// `instruction_pointer(regs)`.
    pub(crate) fn oprofile_rs_regs_ip(regs: *mut bindings::pt_regs) -> c_ulong;
    /// `user_mode(regs)`.
    pub(crate) fn oprofile_rs_regs_user_mode(regs: *mut bindings::pt_regs) -> bool;
    /// The user registers (ip, sp, bp) a user stack walk starts from, and
    /// the end of the user address space; false if there is no 64-bit user
    /// context (kernel thread, compat task).
    pub(crate) fn oprofile_rs_user_regs(
        regs: *mut bindings::pt_regs,
        ip: *mut u64,
        sp: *mut u64,
        bp: *mut u64,
        limit: *mut u64,
    ) -> bool;
    /// Reads `n` (1 or 2) words at a user address of the current task
    /// into `out`, in any context, without faulting pages in; false if it
    /// cannot (not user space, a page not present). The current task's mm
    /// must be the loaded one (`user_stack::UserMemory`).
    pub(crate) fn oprofile_rs_read_user_words(addr: u64, out: *mut u64, n: c_uint) -> bool;
    /// `local_clock()`.
    pub(crate) fn oprofile_rs_clock() -> u64;
    /// The machine's RAM in bytes (`totalram_pages()`).
    pub(crate) fn oprofile_rs_totalram_bytes() -> u64;
    /// `cond_resched()`: process context, no spinlock held.
    pub(crate) fn oprofile_rs_cond_resched();
    /// The current task's pid, tgid and comm (16 bytes).
    pub(crate) fn oprofile_rs_current_task(pid: *mut u32, tgid: *mut u32, comm: *mut c_char);
    /// The current task's switch-out reason code (`format::SwitchReason`),
    /// raw `__state`, run time and run-queue wait (ns; `has_run_delay`
    /// false without `CONFIG_SCHED_INFO`): for the context-switches
    /// overflow, where the current task is the one leaving its CPU.
    pub(crate) fn oprofile_rs_current_switch(
        state: *mut u32,
        exec_runtime: *mut u64,
        run_delay: *mut u64,
        has_run_delay: *mut bool,
    ) -> u8;
    /// The `event=` module parameter: a NUL-terminated string.
    pub(crate) fn oprofile_rs_event_param() -> *const c_char;
    /// The `mode=` module parameter: a NUL-terminated string.
    pub(crate) fn oprofile_rs_mode_param() -> *const c_char;
    /// The `sample_period=` module parameter: a NUL-terminated string.
    pub(crate) fn oprofile_rs_sample_period_param() -> *const c_char;
    /// The `sample_freq=` module parameter: a NUL-terminated string.
    pub(crate) fn oprofile_rs_sample_freq_param() -> *const c_char;
    /// The `cgroup=` module parameter: a NUL-terminated string.
    pub(crate) fn oprofile_rs_cgroup_param() -> *const c_char;
    /// `cgroup_get_from_path(path)`: a counted reference or an `ERR_PTR`.
    pub(crate) fn oprofile_rs_cgroup_get_path(path: *const c_char) -> *mut RawCgroup;
    /// `cgroup_get_from_id(id)`: a counted reference or an `ERR_PTR`.
    pub(crate) fn oprofile_rs_cgroup_get_id(id: u64) -> *mut RawCgroup;
    /// `cgroup_put(cgrp)`.
    pub(crate) fn oprofile_rs_cgroup_put(cgrp: *mut RawCgroup);
    /// `cgroup_id(cgrp)`.
    pub(crate) fn oprofile_rs_cgroup_id(cgrp: *mut RawCgroup) -> u64;
    /// Whether `cgrp` has no parent.
    pub(crate) fn oprofile_rs_cgroup_is_root(cgrp: *mut RawCgroup) -> bool;
    /// `cgroup_path(cgrp, buf, len)`: the path's length, or a negative errno.
    pub(crate) fn oprofile_rs_cgroup_path(
        cgrp: *mut RawCgroup,
        buf: *mut c_char,
        len: usize,
    ) -> c_int;
    /// Whether the current task is in `ancestor` or below it.
    pub(crate) fn oprofile_rs_current_in_cgroup(ancestor: *mut RawCgroup) -> bool;
    /// `file->f_mode & FMODE_READ` of a `struct file *` (passed as `void`:
    /// `bindings::file` holds a zero-sized array Rust does not call FFI-safe).
    pub(crate) fn oprofile_rs_file_readable(file: *const c_void) -> bool;
    /// The address space of process `pid`, counted (`mmgrab`), if it maps
    /// `[start, end)` executable from the file with inode number `ino` (0:
    /// from no file, the vDSO); an
    /// `ERR_PTR` (`-EPERM`, `-ESRCH`, `-ENOENT`, `-EINTR`) otherwise. Sleeps.
    pub(crate) fn oprofile_rs_mm_get(pid: u32, start: u64, end: u64, ino: u64) -> *mut RawMm;
    /// `mmdrop(mm)`: releases a count of `oprofile_rs_mm_get`.
    pub(crate) fn oprofile_rs_mm_drop(mm: *mut RawMm);
    /// Whether `mm` (counted) still has users.
    pub(crate) fn oprofile_rs_mm_alive(mm: *mut RawMm) -> bool;
    /// `current->mm`: null for a kernel thread. Any context.
    pub(crate) fn oprofile_rs_current_mm() -> *mut RawMm;
    /// `current->mm`, counted (`mmgrab`): null for a kernel thread.
    pub(crate) fn oprofile_rs_current_mm_get() -> *mut RawMm;
}
