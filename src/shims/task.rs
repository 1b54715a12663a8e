// SPDX-License-Identifier: GPL-2.0

//! Tasks: the current task's ids and name (any context), and counted
//! references to the threads of a process (what perf binds a counter to).

use core::ptr::NonNull;

use kernel::prelude::*;

use crate::shims::glue;

/// Most threads a process may have at a change to be profiled alone
/// (`E2BIG` beyond: profile it with `pid=0` and a filter).
pub(crate) const MAX_THREADS: usize = 1024;

/// pid, tgid and comm of the current task (any context, NMI included).
pub(crate) fn current_task() -> (u32, u32, [u8; 16]) {
    let (mut pid, mut tgid, mut comm) = (0u32, 0u32, [0u8; 16]);
    // SAFETY: the pointers are valid for the writes (comm: 16 bytes).
    unsafe { crate::shims::glue::oprofile_rs_current_task(&mut pid, &mut tgid, comm.as_mut_ptr()) };
    (pid, tgid, comm)
}

/// The current task's scheduler view as it leaves its CPU (see
/// `oprofile_rs_current_switch` in `glue.c`): why, its raw `__state`, the
/// ns it ran and, with `CONFIG_SCHED_INFO`, the ns it waited on run queues
/// since it was created. Meaningful only in the context-switches event's
/// overflow (`Overflow::switch_out`), where `current` is the task leaving.
pub(crate) fn current_switch() -> (crate::format::SwitchReason, u32, u64, Option<u64>) {
    let (mut state, mut exec, mut delay, mut has_delay) = (0u32, 0u64, 0u64, false);
    // SAFETY: the pointers are valid for the writes; the function only
    // reads fields of the current task.
    let code = unsafe {
        glue::oprofile_rs_current_switch(&mut state, &mut exec, &mut delay, &mut has_delay)
    };
    (
        crate::format::SwitchReason::from_code(code),
        state,
        exec,
        has_delay.then_some(delay),
    )
}

/// A task, a reference held (dropped with it).
///
/// # Invariants
///
/// `task` is a task with a reference this value owns.
pub(crate) struct TaskRef {
    task: NonNull<glue::RawTask>,
}

// SAFETY: a task reference may be dropped and used from any thread.
unsafe impl Send for TaskRef {}
// SAFETY: `&TaskRef` only gives the pointer out.
unsafe impl Sync for TaskRef {}

impl TaskRef {
    /// The task, for perf (valid while `self` lives).
    pub(crate) fn as_ptr(&self) -> *mut glue::RawTask {
        self.task.as_ptr()
    }
}

impl Drop for TaskRef {
    fn drop(&mut self) {
        // SAFETY: the reference is ours (invariant).
        unsafe { glue::oprofile_rs_task_put(self.task.as_ptr()) };
    }
}

/// The threads of process `pid` (in the pid namespace of the caller), a
/// reference held on each: `ESRCH` if there is no such process (or no
/// thread of it is left), `E2BIG` if it has more than [`MAX_THREADS`].
pub(crate) fn threads(pid: u32) -> Result<KVVec<TaskRef>> {
    let mut raw = KVVec::from_elem(core::ptr::null_mut(), MAX_THREADS, GFP_KERNEL)?;
    // SAFETY: `raw` has room for `MAX_THREADS` pointers.
    let n = unsafe { glue::oprofile_rs_process_threads(pid, raw.as_mut_ptr(), MAX_THREADS as u32) };
    if n < 0 {
        return Err(Error::from_errno(n));
    }
    let mut refs = KVVec::new();
    let reserved = refs.reserve(n as usize, GFP_KERNEL);
    for &t in raw.iter().take(n as usize) {
        let Some(task) = NonNull::new(t) else {
            continue;
        };
        // INVARIANT: `oprofile_rs_process_threads` took a reference on
        // each task it stored; it is this value's now (dropped with it,
        // also when it is not kept below).
        let t = TaskRef { task };
        if reserved.is_ok() {
            // Within the capacity reserved: no allocation.
            let _ = refs.push(t, GFP_KERNEL);
        }
    }
    reserved?;
    Ok(refs)
}
