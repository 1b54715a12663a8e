// SPDX-License-Identifier: GPL-2.0

//! The cgroup filter (the `cgroup` setting): only the tasks of one cgroup
//! (v2) and of its descendants are sampled, as `perf record -G` does for
//! one container or service on a busy machine.
//!
//! A value is `/` (every task: no filter), a path below the cgroup2 root of
//! the writer's cgroup namespace (as `/proc/PID/cgroup` shows it, e.g.
//! `/system.slice/nginx.service`) or a cgroup id (the inode number of its
//! directory in cgroup2, `stat -c %i`). The kernel's counters keep sampling
//! every task; the sample path tests the interrupted task against the
//! filter ([`InForce::admits_current`]) first and counts the others
//! (`sample_other_cgroup`, neither received nor lost: also not when a
//! snapshot's pause refuses samples). The stream's CONFIG records carry
//! the filter's id (stream-format.md).
//!
//! [`Cgroup`] is a counted reference; [`Filter`] owns the one in force and
//! publishes it to the sample path. A filter replaced is released only after
//! an RCU grace period, so that no sample path still tests against it; a
//! cgroup removed (`rmdir`) while it filters stays valid (its reference)
//! and matches no task any more.

use core::{
    fmt,
    mem::ManuallyDrop,
    ptr::{null_mut, NonNull},
};
use kernel::{
    prelude::*,
    sync::atomic::{Acquire, Atomic, Full},
};

use crate::{
    format::parse_u64,
    shims::{
        glue::{self, RawCgroup},
        ratelimit::pr_ratelimited,
    },
};

/// Longest path accepted (the kernel's `PATH_MAX`, its NUL included).
const PATH_MAX: usize = 4096;
/// Longest path shown: a longer one is shown as the id, so that the
/// `config` text stays within its ioctl's 4096 bytes (and a value read
/// back fits a debugfs file's write).
const SHOWN_PATH_MAX: usize = 511;

/// What a `cgroup` value names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Spec<'a> {
    /// No filter: `/`, the root, holds every task.
    Everything,
    /// A path below the cgroup2 root (it starts with `/`).
    Path(&'a [u8]),
    /// A cgroup id (not 0).
    Id(u64),
}

impl<'a> Spec<'a> {
    /// Parses a value: `EINVAL` for one that is neither a path starting
    /// with `/` (without NUL bytes, shorter than `PATH_MAX`) nor a decimal
    /// id above 0.
    pub(crate) fn parse(v: &'a [u8]) -> Result<Self> {
        let spec = match v {
            b"/" => Some(Spec::Everything),
            [b'/', ..] if v.len() < PATH_MAX && !v.contains(&0) => Some(Spec::Path(v)),
            [b'/', ..] => None,
            _ => parse_u64(v).filter(|&id| id != 0).map(Spec::Id),
        };
        spec.ok_or_else(|| {
            pr_ratelimited!(
                pr_warn,
                "cgroup={:?} is neither a path starting with / nor a cgroup id (EINVAL)\n",
                kernel::str::BStr::from_bytes(v.get(..v.len().min(64)).unwrap_or(&[]))
            );
            EINVAL
        })
    }
}

/// A counted reference to a cgroup of the default (v2) hierarchy.
///
/// # Invariants
///
/// `ptr` is a cgroup whose reference this value owns.
pub(crate) struct Cgroup {
    ptr: NonNull<RawCgroup>,
}

// SAFETY: a counted cgroup reference may be used and released from any
// thread (`cgroup_put()` is callable in any context).
unsafe impl Send for Cgroup {}
// SAFETY: the methods taking `&self` only read the cgroup (its id, its
// path), which the kernel allows concurrently.
unsafe impl Sync for Cgroup {}

impl Cgroup {
    /// The cgroup `spec` names, or `None` for every task (`/`, or the root
    /// named by another path or its id). Errors: `ENOENT` (no such cgroup,
    /// or not in the caller's cgroup namespace), `ENOTDIR` (a path to a
    /// file), `ENOMEM`, `EOPNOTSUPP` (a kernel without cgroups).
    pub(crate) fn lookup(spec: Spec<'_>) -> Result<Option<Self>> {
        let raw = match spec {
            Spec::Everything => return Ok(None),
            Spec::Path(p) => {
                let mut s = KVec::with_capacity(p.len() + 1, GFP_KERNEL)?;
                s.extend_from_slice(p, GFP_KERNEL)?;
                s.push(0, GFP_KERNEL)?;
                // SAFETY: `s` is NUL-terminated and outlives the call, which
                // only reads it.
                unsafe { glue::oprofile_rs_cgroup_get_path(s.as_ptr().cast()) }
            }
            // SAFETY: plain call; the id is any number.
            Spec::Id(id) => unsafe { glue::oprofile_rs_cgroup_get_id(id) },
        };
        let ptr = NonNull::new(kernel::error::from_err_ptr(raw)?).ok_or(ENOENT)?;
        // INVARIANT: a successful lookup took a reference for the caller.
        let c = Self { ptr };
        // SAFETY: `c.ptr` is a valid cgroup (invariant).
        if unsafe { glue::oprofile_rs_cgroup_is_root(c.ptr.as_ptr()) } {
            return Ok(None);
        }
        Ok(Some(c))
    }

    /// The cgroup a `cgroup` value names (`None`: every task), for the
    /// parameter and a runtime change alike: [`Spec::parse`]'s `EINVAL`,
    /// then [`Cgroup::lookup`]'s errors, each with a (rate-limited) log line
    /// naming the value.
    pub(crate) fn named(v: &[u8]) -> Result<Option<Self>> {
        Self::lookup(Spec::parse(v)?).inspect_err(|e| {
            pr_ratelimited!(
                pr_warn,
                "cgroup={:?}: no such cgroup here (error {})\n",
                kernel::str::BStr::from_bytes(v.get(..v.len().min(64)).unwrap_or(&[])),
                e.to_errno()
            )
        })
    }

    /// The cgroup's id (the inode number of its directory).
    pub(crate) fn id(&self) -> u64 {
        // SAFETY: `self.ptr` is a valid cgroup (invariant).
        unsafe { glue::oprofile_rs_cgroup_id(self.ptr.as_ptr()) }
    }

    /// Writes the cgroup's path below the cgroup2 root if it is at most
    /// [`SHOWN_PATH_MAX`] bytes of UTF-8 that a value can carry (no white
    /// space, control character or `=`: a cgroup's name may hold them, the
    /// `config` text's lines cannot); an error if not, or if it cannot be had
    /// (no memory, or the cgroup was removed).
    fn write_path(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut buf = KVec::<u8>::with_capacity(PATH_MAX, GFP_KERNEL).map_err(|_| fmt::Error)?;
        buf.resize(PATH_MAX, 0, GFP_KERNEL)
            .map_err(|_| fmt::Error)?;
        // SAFETY: `self.ptr` is a valid cgroup (invariant); `buf` holds
        // `PATH_MAX` writable bytes.
        let n = unsafe {
            glue::oprofile_rs_cgroup_path(self.ptr.as_ptr(), buf.as_mut_ptr().cast(), PATH_MAX)
        };
        let n = usize::try_from(n).map_err(|_| fmt::Error)?;
        let path = buf.get(..n).filter(|p| {
            p.first() == Some(&b'/')
                && p.len() <= SHOWN_PATH_MAX
                && p.iter()
                    .all(|&c| (c.is_ascii_graphic() && c != b'=') || c >= 0x80)
        });
        let path = path.and_then(|p| core::str::from_utf8(p).ok());
        f.write_str(path.ok_or(fmt::Error)?)
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        // SAFETY: the reference is ours (invariant), and not used again.
        unsafe { glue::oprofile_rs_cgroup_put(self.ptr.as_ptr()) };
    }
}

/// Writes the `cgroup` value of the filter with id `id` (0: none): `/`, the
/// cgroup's path, or its id if the path cannot be had (removed since), is
/// longer than [`SHOWN_PATH_MAX`] or holds what a value cannot.
pub(crate) fn write_value(id: u64, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    if id == 0 {
        return f.write_str("/");
    }
    match Cgroup::lookup(Spec::Id(id)) {
        Ok(Some(c)) if c.write_path(f).is_ok() => Ok(()),
        _ => write!(f, "{id}"),
    }
}

/// A filter in force, as the sample path reads it: each sampler tests
/// against the one it was given (the module's [`IN_FORCE`]; a KUnit test's
/// sampler its own, so that a filter set at load cannot refuse the test's
/// samples).
///
/// # Invariants
///
/// `ptr` is null (no filter) or a cgroup whose reference the [`Filter`]
/// owns (only [`IN_FORCE`] is ever set); a value replaced stays valid until
/// an RCU grace period after it was replaced.
pub(crate) struct InForce {
    ptr: Atomic<*mut RawCgroup>,
}

impl InForce {
    /// No filter.
    pub(crate) const fn none() -> Self {
        // INVARIANT: null.
        Self {
            ptr: Atomic::new(null_mut()),
        }
    }

    /// Whether the current task is sampled: no filter, or the task is in
    /// the filter's cgroup or below it. For the sample path (NMI, hard-IRQ
    /// or task context), which runs with preemption off.
    pub(crate) fn admits_current(&self) -> bool {
        let f = self.ptr.load(Acquire);
        if f.is_null() {
            return true;
        }
        // SAFETY: `f` is a valid cgroup (the invariant): the caller runs
        // with preemption off, an RCU read-side critical section that
        // `Filter::set` waits for before it releases a filter it replaced.
        unsafe { glue::oprofile_rs_current_in_cgroup(f) }
    }
}

/// The module's filter in force, which its samplers read.
pub(crate) static IN_FORCE: InForce = InForce::none();

/// The owner of the module's filter in force, [`IN_FORCE`]: the profiler's
/// one (`set` is serialised by its `control` lock). Dropping it removes the
/// filter.
pub(crate) struct Filter {
    _private: (),
}

impl Filter {
    /// Puts `initial` in force.
    pub(crate) fn new(initial: Option<Cgroup>) -> Self {
        let f = Self { _private: () };
        f.set(initial);
        f
    }

    /// Puts `new` in force (`None`: every task) and returns once no sample
    /// path can still test against the filter it replaced, which it then
    /// releases. Sleeps (a grace period) when it replaced one.
    pub(crate) fn set(&self, new: Option<Cgroup>) {
        let raw = new.map_or(null_mut(), |c| ManuallyDrop::new(c).ptr.as_ptr());
        // INVARIANT: `raw` is null or a reference now owned by `IN_FORCE`.
        let old = IN_FORCE.ptr.xchg(raw, Full);
        if let Some(ptr) = NonNull::new(old) {
            // Samplers that loaded `old` run with preemption off: an RCU
            // read-side critical section, which this waits for.
            kernel::sync::rcu::synchronize_rcu();
            // INVARIANT: `IN_FORCE`'s reference, replaced, now ours.
            drop(Cgroup { ptr });
        }
    }
}

impl Drop for Filter {
    fn drop(&mut self) {
        self.set(None);
    }
}

#[cfg(oprofile_rs_kunit)]
#[kunit_tests(oprofile_rs_cgroup)]
mod tests {
    use super::*;

    #[test]
    fn values() {
        assert_eq!(Spec::parse(b"/"), Ok(Spec::Everything));
        assert_eq!(Spec::parse(b"/a/b"), Ok(Spec::Path(b"/a/b")));
        assert_eq!(Spec::parse(b"42"), Ok(Spec::Id(42)));
        for bad in [
            &b""[..],
            b"0",
            b"a/b",
            b"-1",
            b"0x10",
            b"/a\0b",
            b"18446744073709551616",
        ] {
            assert_eq!(Spec::parse(bad), Err(EINVAL));
        }
        let mut long = KVec::new();
        assert!(long.push(b'/', GFP_KERNEL).is_ok());
        for _ in 1..PATH_MAX {
            assert!(long.push(b'a', GFP_KERNEL).is_ok());
        }
        assert_eq!(Spec::parse(&long), Err(EINVAL));
        assert!(matches!(
            Spec::parse(long.get(..PATH_MAX - 1).unwrap_or(&[])),
            Ok(Spec::Path(_))
        ));
    }

    #[test]
    fn lookups() {
        // The root, named any way, is no filter; a missing cgroup is ENOENT.
        assert!(matches!(Cgroup::lookup(Spec::Everything), Ok(None)));
        assert!(matches!(Cgroup::lookup(Spec::Path(b"//")), Ok(None)));
        assert!(matches!(Cgroup::lookup(Spec::Path(b"/no-such-cgroup")), Err(e) if e == ENOENT));
        assert!(matches!(Cgroup::lookup(Spec::Path(b"/cgroup.procs")), Err(e) if e == ENOTDIR));
        assert!(matches!(Cgroup::lookup(Spec::Id(u64::MAX)), Err(e) if e == ENOENT));
    }
}
