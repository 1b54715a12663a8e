// SPDX-License-Identifier: GPL-2.0

//! Kernel threads bound to one CPU, for the in-kernel tests and the
//! benchmark of the ring buffer (the kernel crate has no kthread wrapper),
//! and waiting for what they do.

use core::ffi::{c_int, c_void};

use kernel::{
    bindings,
    cpu::CpuId,
    prelude::*,
    time::{delay::fsleep, Delta},
};

/// Waits for `kthread_stop` (a kthread stopped that way must not exit first).
pub(crate) fn park() {
    // SAFETY: only called from kthreads.
    while !unsafe { bindings::kthread_should_stop() } {
        fsleep(Delta::from_millis(1));
    }
}

/// Waits, sleeping a millisecond at a time, until `done` holds or `timeout_ms`
/// have passed; returns whether it holds. (The KUnit tests' wait; the
/// benchmark waits as long as its run takes.)
pub(crate) fn wait_until(timeout_ms: u32, done: impl Fn() -> bool) -> bool {
    for _ in 0..timeout_ms {
        if done() {
            return true;
        }
        fsleep(Delta::from_millis(1));
    }
    done()
}

/// A started kthread bound to one CPU, stopped (`kthread_stop`) on drop.
///
/// # Invariants
///
/// `self.0` is a kthread that only exits after `kthread_stop` (its function
/// ends with [`park`]).
pub(crate) struct Thread(*mut bindings::task_struct);

impl Thread {
    /// Creates and wakes a kthread running `f(data)` bound to `cpu`.
    ///
    /// # Safety
    ///
    /// `f` must end by calling [`park`], and whatever `data` points to must
    /// stay valid for `f` until the returned `Thread` is dropped.
    pub(crate) unsafe fn start(
        f: unsafe extern "C" fn(*mut c_void) -> c_int,
        data: *mut c_void,
        cpu: CpuId,
    ) -> Result<Thread> {
        // SAFETY: `f` has the kthread ABI; the name is a NUL-terminated format
        // with one `%u` (the CPU), as `kthread_create_on_cpu` expects.
        let task = unsafe {
            bindings::kthread_create_on_cpu(
                Some(f),
                data,
                cpu.as_u32(),
                c"oprofile_rs/%u".as_char_ptr(),
            )
        };
        let task = kernel::error::from_err_ptr(task)?;
        // SAFETY: `task` is a valid, newly created kthread.
        unsafe { bindings::wake_up_process(task) };
        Ok(Thread(task))
    }
}

impl Drop for Thread {
    fn drop(&mut self) {
        // SAFETY: by the type invariant the kthread has not exited yet.
        unsafe { bindings::kthread_stop(self.0) };
    }
}
