// SPDX-License-Identifier: GPL-2.0

//! debugfs files that keep the module loaded while they are open.
//!
//! The kernel crate's `debugfs` builds its file operations in the kernel
//! crate, which cannot name the module that uses them: their `owner` is
//! null, so an open debugfs file pins nothing. `rmmod` then succeeds with a
//! file open, and the close runs `full_proxy_release` on freed module text
//! (an oops). This is a small replacement for the part we use: a directory of
//! text files, each with a `show` callback (read, through `seq_file`) and/or
//! a `store` callback (write), whose `file_operations` name this module as
//! their owner. debugfs' open proxy takes a reference on the owner
//! (`fops_get`) for as long as the file is open, so `rmmod` answers "in use"
//! (`EWOULDBLOCK`) until the last such file is closed.
//!
//! Where debugfs is not built in or is disabled (`debugfs=off`), the
//! directory is simply absent (the device's ioctls still control
//! recording); any other failure to create it fails the load.

use core::{ffi::c_int, marker::PhantomData, ptr};
use kernel::{
    bindings,
    error::from_err_ptr,
    fmt,
    prelude::*,
    seq_file::SeqFile,
    seq_print,
    uaccess::{UserPtr, UserSlice, UserSliceReader},
    ModuleMetadata,
};

/// Formats a file's content (`read`).
pub(crate) type ShowFn<T> = fn(&T, &mut fmt::Formatter<'_>) -> fmt::Result;
/// Takes a write; `Ok` means the whole write was taken.
pub(crate) type StoreFn<T> = fn(&T, &mut UserSliceReader) -> Result;

/// One file: its name and what reading and writing it do. The mode follows:
/// 0600 with both, 0400 with `show` only, 0200 with `store` only.
pub(crate) struct FileSpec<T> {
    /// File name in the directory.
    pub(crate) name: &'static CStr,
    /// What a read shows.
    pub(crate) show: Option<ShowFn<T>>,
    /// What a write does.
    pub(crate) store: Option<StoreFn<T>>,
}

/// What a file's inode points to (`i_private`).
struct Entry<T> {
    data: T,
    show: Option<ShowFn<T>>,
    store: Option<StoreFn<T>>,
}

/// A debugfs directory and its files, removed on drop.
///
/// # Invariants
///
/// `dir` is null (no debugfs) or a directory created by `debugfs_create_dir`
/// and removed, with its files, only in `drop`. The `i_private` of each file
/// in it points to an element of `entries`, whose buffer is neither moved nor
/// freed before `dir` is removed (`entries` is never changed after creation).
pub(crate) struct DebugfsDir<T: Sync + 'static> {
    dir: *mut bindings::dentry,
    entries: KVec<Entry<T>>,
}

// SAFETY: the dentry pointer is only used to remove the directory, which any
// thread may do; the entries are `Sync` data shared with the file callbacks.
unsafe impl<T: Sync + Send + 'static> Send for DebugfsDir<T> {}
// SAFETY: no `&self` method exists that touches the directory.
unsafe impl<T: Sync + Send + 'static> Sync for DebugfsDir<T> {}

impl<T: Clone + Sync + 'static> DebugfsDir<T> {
    /// Creates `/sys/kernel/debug/<name>/` with `files`, each given a clone
    /// of `data`.
    pub(crate) fn new(name: &'static CStr, data: &T, files: &[FileSpec<T>]) -> Result<Self> {
        let mut entries = KVec::with_capacity(files.len(), GFP_KERNEL)?;
        for f in files {
            entries.push(
                Entry {
                    data: data.clone(),
                    show: f.show,
                    store: f.store,
                },
                GFP_KERNEL,
            )?;
        }
        // SAFETY: `name` is NUL-terminated; a null parent is debugfs' root.
        let dir = unsafe { bindings::debugfs_create_dir(name.as_char_ptr(), ptr::null_mut()) };
        let dir = match from_err_ptr(dir) {
            Ok(dir) => dir,
            Err(e) if e == ENODEV => {
                pr_info!(
                    "debugfs is not available: no control files (the device's ioctls still work)\n"
                );
                // INVARIANT: a null `dir` is allowed.
                return Ok(Self {
                    dir: ptr::null_mut(),
                    entries,
                });
            }
            Err(e) => {
                pr_err!("cannot create debugfs directory {name:?}: {e:?}\n");
                return Err(e);
            }
        };
        // INVARIANT: `dir` was just created; `entries` is complete and will
        // not change, so the pointers given to debugfs below stay valid.
        let me = Self { dir, entries };
        for (f, e) in files.iter().zip(me.entries.iter()) {
            let (mode, fops): (u16, &'static bindings::file_operations) = match (f.show, f.store) {
                (Some(_), Some(_)) => (0o600, &Fops::<T>::READ_WRITE),
                (Some(_), None) => (0o400, &Fops::<T>::READ_ONLY),
                (None, _) => (0o200, &Fops::<T>::WRITE_ONLY),
            };
            // SAFETY: `f.name` is NUL-terminated, `me.dir` is a live debugfs
            // directory, and `e` outlives the file (type invariant); the
            // fops expect `i_private` to be an `Entry<T>`, which it is.
            let file = unsafe {
                bindings::debugfs_create_file_full(
                    f.name.as_char_ptr(),
                    mode,
                    me.dir,
                    ptr::from_ref(e).cast_mut().cast(),
                    ptr::null(),
                    fops,
                )
            };
            if let Err(err) = from_err_ptr(file) {
                pr_err!("cannot create debugfs file {:?}: {err:?}\n", f.name);
                // `me` is dropped: the directory and the files made so far go.
                return Err(err);
            }
        }
        Ok(me)
    }
}

impl<T: Sync + 'static> Drop for DebugfsDir<T> {
    fn drop(&mut self) {
        if !self.dir.is_null() {
            // SAFETY: created by `debugfs_create_dir` and removed only here
            // (type invariant). This waits for callbacks in progress; no file
            // is open (each open file holds a reference on this module).
            unsafe { bindings::debugfs_remove(self.dir) };
        }
    }
}

/// Formats an entry's `show` into a `seq_file`.
struct Shown<'a, T>(&'a Entry<T>);

impl<T> fmt::Display for Shown<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.show {
            Some(show) => show(&self.0.data, f),
            None => Ok(()),
        }
    }
}

struct Fops<T>(PhantomData<T>);

impl<T: Sync + 'static> Fops<T> {
    const OWNER: *mut bindings::module =
        <crate::LocalModule as ModuleMetadata>::THIS_MODULE.as_ptr();

    const READ_WRITE: bindings::file_operations = bindings::file_operations {
        owner: Self::OWNER,
        open: Some(Self::open),
        read: Some(bindings::seq_read),
        write: Some(Self::write),
        llseek: Some(bindings::seq_lseek),
        release: Some(bindings::single_release),
        ..pin_init::zeroed()
    };
    const READ_ONLY: bindings::file_operations = bindings::file_operations {
        owner: Self::OWNER,
        open: Some(Self::open),
        read: Some(bindings::seq_read),
        llseek: Some(bindings::seq_lseek),
        release: Some(bindings::single_release),
        ..pin_init::zeroed()
    };
    const WRITE_ONLY: bindings::file_operations = bindings::file_operations {
        owner: Self::OWNER,
        open: Some(Self::open),
        write: Some(Self::write),
        llseek: Some(bindings::noop_llseek),
        release: Some(bindings::single_release),
        ..pin_init::zeroed()
    };

    /// # Safety
    ///
    /// Called by debugfs' open proxy for a file created by [`DebugfsDir::new`]
    /// with these operations: `inode`'s `i_private` is a live `Entry<T>`.
    unsafe extern "C" fn open(inode: *mut bindings::inode, file: *mut bindings::file) -> c_int {
        // SAFETY: `inode` is valid for the call; `single_open` stores the
        // entry as the `seq_file`'s private data, which `show` and `write`
        // read back while the file is open (and the module, thus the entry,
        // alive).
        unsafe { bindings::single_open(file, Some(Self::show), (*inode).i_private) }
    }

    /// # Safety
    ///
    /// `seq` is the live `seq_file` of a file opened by [`Self::open`].
    unsafe extern "C" fn show(seq: *mut bindings::seq_file, _v: *mut c_void) -> c_int {
        // SAFETY: `open` set the private data to a live `Entry<T>`.
        let entry = unsafe { &*(*seq).private.cast::<Entry<T>>() };
        // SAFETY: `seq` is live for the call.
        let seq = unsafe { SeqFile::from_raw(seq) };
        seq_print!(seq, "{}", Shown(entry));
        0
    }

    /// # Safety
    ///
    /// Called by debugfs' write proxy for a file opened by [`Self::open`];
    /// `buf` is a user pointer valid for `count` bytes or not at all.
    unsafe extern "C" fn write(
        file: *mut bindings::file,
        buf: *const c_char,
        count: usize,
        _ppos: *mut bindings::loff_t,
    ) -> isize {
        // SAFETY: `single_open` set the private data to a `seq_file` whose
        // private data is the live `Entry<T>` of `open`.
        let entry = unsafe {
            &*(*(*file).private_data.cast::<bindings::seq_file>())
                .private
                .cast::<Entry<T>>()
        };
        let Some(store) = entry.store else {
            return EPERM.to_errno() as isize;
        };
        let mut reader = UserSlice::new(UserPtr::from_ptr(buf.cast_mut().cast()), count).reader();
        match store(&entry.data, &mut reader) {
            // Callers cap writes at `isize::MAX` (`rw_verify_area`).
            Ok(()) => count as isize,
            Err(e) => e.to_errno() as isize,
        }
    }
}
