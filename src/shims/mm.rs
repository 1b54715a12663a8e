// SPDX-License-Identifier: GPL-2.0

//! Address spaces: a counted reference to a process's `mm_struct` that
//! checks one of its mappings first, and the current task's, as an
//! identity the sample path compares (the kernel crate's `Mm` needs the
//! `mm_struct` layout of the bindings and a task reference).

use core::ptr::NonNull;
use kernel::{error::from_err_ptr, prelude::*};

use crate::shims::glue::{self, RawMm};

/// A counted reference (`mmgrab`) to an address space: the struct stays
/// (so its address is not reused as another process's identity), its
/// mappings may go.
///
/// # Invariants
///
/// `ptr` holds one `mmgrab` count, released on drop.
pub(crate) struct MmRef {
    ptr: NonNull<RawMm>,
}

// SAFETY: a count on an `mm_struct` may be held and dropped (`mmdrop`) on
// any thread; the pointer is only compared and passed to the kernel.
unsafe impl Send for MmRef {}
// SAFETY: shared access only reads the pointer.
unsafe impl Sync for MmRef {}

impl MmRef {
    /// The address space of process `pid` (the caller's pid namespace) if
    /// it maps `[start, end)` executable from the file of inode `ino` (0:
    /// from no file, the vDSO):
    /// `EPERM` without `CAP_PERFMON`, `ESRCH` for no such user process,
    /// `ENOENT` for no such mapping. Sleeps.
    pub(crate) fn of_mapping(pid: u32, start: u64, end: u64, ino: u64) -> Result<Self> {
        // SAFETY: no requirement; the result is a counted mm or an ERR_PTR.
        let raw = from_err_ptr(unsafe { glue::oprofile_rs_mm_get(pid, start, end, ino) })?;
        let ptr = NonNull::new(raw).ok_or(ESRCH)?;
        // INVARIANT: `oprofile_rs_mm_get` returned it counted.
        Ok(Self { ptr })
    }

    /// The current task's address space: `ESRCH` for a kernel thread.
    pub(crate) fn of_current() -> Result<Self> {
        // SAFETY: no requirement; the result is a counted mm or null.
        let raw = unsafe { glue::oprofile_rs_current_mm_get() };
        let ptr = NonNull::new(raw).ok_or(ESRCH)?;
        // INVARIANT: `oprofile_rs_current_mm_get` returned it counted.
        Ok(Self { ptr })
    }

    /// The identity [`current`] compares with.
    pub(crate) fn id(&self) -> usize {
        self.ptr.as_ptr() as usize
    }

    /// Whether the process still runs (the address space has users).
    pub(crate) fn alive(&self) -> bool {
        // SAFETY: `ptr` is counted (the invariant): the struct is valid.
        unsafe { glue::oprofile_rs_mm_alive(self.ptr.as_ptr()) }
    }
}

impl Drop for MmRef {
    fn drop(&mut self) {
        // SAFETY: the count this holds (the invariant), released once.
        unsafe { glue::oprofile_rs_mm_drop(self.ptr.as_ptr()) };
    }
}

/// The current task's address space as an identity (0 for a kernel
/// thread), in any context: equal to [`MmRef::id`] of the same space.
pub(crate) fn current() -> usize {
    // SAFETY: reads `current->mm`, valid in any context.
    unsafe { glue::oprofile_rs_current_mm() as usize }
}
