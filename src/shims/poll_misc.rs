// SPDX-License-Identifier: GPL-2.0

//! A misc device with `poll`: the kernel crate's `MiscDevice` has no poll
//! hook, so this is a small copy of its registration and vtable (open,
//! release, read_iter, ioctl, mmap) plus `poll`, which `select`, `poll` and
//! `epoll` use. [`map_read_only`] maps pages read-only into a new mapping
//! (the policy of ftrace's ring-buffer mapping), with the kernel crate's
//! `VmaNew` and `vm_insert_page`; the mappings made get `vm_operations`
//! whose `open` and `close` tell the device each piece of a mapping that
//! comes (a split, a move) and goes (the kernel crate has no `vm_ops`).
//!
//! Files are streams (`stream_open`): `lseek`, `pread` and `pwrite` fail with
//! `ESPIPE`. The registration holds `T::RegistrationData` (what every open
//! file needs, e.g. the driver's state), which [`PollMiscDevice::open`] reads
//! with [`PollMiscRegistration::data`]. The device's private data is a `KBox<T>` created by
//! [`PollMiscDevice::open`] and dropped by `release`; `read_iter`, `ioctl`
//! and `poll` borrow it. The file operations name this module as their owner,
//! so an open file keeps the module loaded.

use core::{ffi::c_int, marker::PhantomData};
use kernel::{
    bindings,
    error::to_result,
    fs::{File, Kiocb},
    iov::IovIterDest,
    mm::virt::{flags as vm, VmaNew},
    page::{BorrowedPage, PAGE_SIZE},
    prelude::*,
    sync::poll::PollTable,
    types::{ForeignOwnable, Opaque},
    ModuleMetadata,
};

/// Poll mask bits from `include/uapi/linux/eventpoll.h` (stable UAPI; the
/// bindings cannot evaluate their `__poll_t` casts).
pub(crate) mod mask {
    /// There is data to read.
    pub(crate) const EPOLLIN: u32 = 0x0001;
    /// Normal data to read (what `select` tests together with `EPOLLIN`).
    pub(crate) const EPOLLRDNORM: u32 = 0x0040;
}

/// The operations of a pollable misc device.
pub(crate) trait PollMiscDevice: Sized + Send + Sync + 'static {
    /// What the registration keeps for `open`.
    type RegistrationData: Send + Sync;
    /// Called on `open`; the result becomes the file's private data.
    fn open(file: &File, misc: &PollMiscRegistration<Self>) -> Result<KBox<Self>>;
    /// Called on the last `close`.
    fn release(me: KBox<Self>, file: &File);
    /// `read`.
    fn read_iter(kiocb: Kiocb<'_, KBox<Self>>, iov: &mut IovIterDest<'_>) -> Result<usize>;
    /// `ioctl` (and the 32-bit `compat_ioctl`, whose arguments are the same
    /// here: the commands take no pointer-sized fields).
    fn ioctl(me: &Self, file: &File, cmd: u32, arg: usize) -> Result<isize>;
    /// `poll`: registers `table` with the wait queues that signal a change and
    /// returns the current `EPOLL*` mask.
    fn poll(me: &Self, file: &File, table: PollTable<'_>) -> u32;
    /// `mmap`: sets up the new mapping `vma` (see [`map_read_only`]). On
    /// success the mapping is live: [`Self::mapping_opened`] is called for
    /// each further piece of it (a split by `munmap` or `mprotect` of a
    /// part, a copy by `mremap`), [`Self::mapping_closed`] once for each
    /// piece that goes, the first one included. On failure neither is
    /// called for it (the kernel calls no `close` for a refused mapping).
    fn mmap(me: &Self, file: &File, vma: &VmaNew) -> Result;
    /// A live mapping of the file got one more piece (the vma's `open`).
    /// Called with the mmap lock held for writing; may sleep.
    fn mapping_opened(me: &Self);
    /// A piece of a live mapping of the file went (the vma's `close`):
    /// `munmap`, the process's exit or `exec`, the old piece of a move.
    /// Called with the mmap lock held; may sleep.
    fn mapping_closed(me: &Self);
}

/// Whether `file` was opened with read access: `FMODE_READ`, which the
/// kernel gives for `O_RDONLY` and `O_RDWR`, not for `O_WRONLY` nor for
/// access mode 3 (`open(path, 3)`: neither read nor write, ioctls only).
/// The kernel crate's `File` has no accessor for `f_mode`, and bindgen
/// cannot evaluate `FMODE_READ` (a `__force` cast), hence the C glue.
pub(crate) fn opened_for_reading(file: &File) -> bool {
    // SAFETY: `file` is a valid file (a shared reference); its read mode is
    // set by the open and never changes afterwards.
    unsafe { crate::shims::glue::oprofile_rs_file_readable(file.as_ptr().cast()) }
}

/// Fills the new mapping `vma` with pages of a window of `window` pages:
/// the mapping's page offset `o` (its mmap offset in pages) gets
/// `page(o)`, the next page `page(o + 1)`, and so on.
///
/// Read-only shared mappings only, as ftrace's ring-buffer mapping: a
/// writable or executable one, or a private one (`MAP_PRIVATE`), gets
/// `EPERM`; `mprotect` cannot make it writable or executable later (the
/// `MAY` flags are cleared), it is not inherited by `fork` nor expanded by
/// `mremap`, and core dumps leave it out. A mapping that reaches past the
/// window gets `EINVAL` (the kernel itself refuses unaligned offsets and
/// empty lengths with `EINVAL`).
///
/// The pages are inserted now (no fault handler: the mapping calls no code
/// of this module afterwards but its `open` and `close`, see
/// [`PollMiscDevice::mmap`]); each holds a page reference until it is
/// unmapped, and the mapping holds the file (so its release, and the
/// module's unload, wait for the unmap).
///
/// `VM_DONTEXPAND` and `VM_MIXEDMAP` are `VM_SPECIAL` flags: `madvise`
/// refuses `MADV_DOFORK` (and `MADV_DODUMP`) on such a mapping with
/// `EINVAL` (`mm/madvise.c`), so `VM_DONTCOPY` and `VM_DONTDUMP` stay:
/// the mapping is never inherited by `fork` nor dumped.
pub(crate) fn map_read_only<'a>(
    vma: &VmaNew,
    window: usize,
    page: impl Fn(usize) -> Option<BorrowedPage<'a>>,
) -> Result {
    if vma.writable() || vma.executable() || vma.flags() & vm::MAYSHARE == 0 {
        return Err(EPERM);
    }
    // SAFETY: the vma is being set up by this mmap call (`VmaNew`); its
    // page offset is not changed meanwhile.
    let pgoff: usize = unsafe { (*vma.as_ptr()).vm_pgoff };
    let pages = (vma.end() - vma.start()) / PAGE_SIZE;
    match pgoff.checked_add(pages) {
        Some(end) if pages > 0 && end <= window => {}
        _ => return Err(EINVAL),
    }
    vma.try_clear_maywrite()?;
    vma.try_clear_mayexec()?;
    vma.set_dontcopy();
    vma.set_dontexpand();
    vma.set_dontdump();
    let mixed = vma.set_mixedmap();
    for i in 0..pages {
        let p = page(pgoff + i).ok_or(EINVAL)?;
        mixed.vm_insert_page(vma.start() + i * PAGE_SIZE, &p)?;
    }
    Ok(())
}

/// A registered misc device whose file operations call `T`, with the data
/// its `open` reads.
///
/// # Invariants
///
/// `inner` is a `struct miscdevice` registered with `misc_register()`, whose
/// `fops` is `Vtable::<T>::FOPS`; it is deregistered exactly once, on drop.
/// `inner` is the first field of this `#[repr(C)]` struct: a pointer to it is
/// a pointer to the registration.
#[pin_data(PinnedDrop)]
#[repr(C)]
pub(crate) struct PollMiscRegistration<T: PollMiscDevice> {
    #[pin]
    inner: Opaque<bindings::miscdevice>,
    data: T::RegistrationData,
    _t: PhantomData<T>,
}

// SAFETY: `misc_deregister` may run on another thread than `misc_register`;
// the data is `Send`.
unsafe impl<T: PollMiscDevice> Send for PollMiscRegistration<T> {}
// SAFETY: no `&self` method mutates the registration; the data is `Sync`.
unsafe impl<T: PollMiscDevice> Sync for PollMiscRegistration<T> {}

impl<T: PollMiscDevice> PollMiscRegistration<T> {
    /// Registers a misc device called `name` (mode 0600: root only) whose
    /// `open` gets `data`.
    pub(crate) fn register(
        name: &'static CStr,
        data: T::RegistrationData,
    ) -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            // Before `inner`: the device can be opened once it is registered.
            data,
            inner <- Opaque::try_ffi_init(move |slot: *mut bindings::miscdevice| {
                let mut misc: bindings::miscdevice = pin_init::zeroed();
                misc.minor = bindings::MISC_DYNAMIC_MINOR as c_int;
                misc.name = name.as_char_ptr();
                misc.fops = &Vtable::<T>::FOPS;
                misc.mode = 0o600;
                // SAFETY: `slot` is valid for writes.
                unsafe { slot.write(misc) };
                // SAFETY: `slot` holds a filled-in miscdevice; it stays pinned
                // and is deregistered in `drop` before its memory goes.
                // INVARIANT: on success it is registered with our fops.
                to_result(unsafe { bindings::misc_register(slot) })
            }),
            _t: PhantomData,
        })
    }

    /// The data given to [`Self::register`].
    pub(crate) fn data(&self) -> &T::RegistrationData {
        &self.data
    }
}

#[pinned_drop]
impl<T: PollMiscDevice> PinnedDrop for PollMiscRegistration<T> {
    fn drop(self: Pin<&mut Self>) {
        // SAFETY: registered by the type invariant, deregistered only here.
        unsafe { bindings::misc_deregister(self.inner.get()) };
    }
}

struct Vtable<T>(PhantomData<T>);

impl<T: PollMiscDevice> Vtable<T> {
    const FOPS: bindings::file_operations = bindings::file_operations {
        open: Some(Self::open),
        release: Some(Self::release),
        read_iter: Some(Self::read_iter),
        unlocked_ioctl: Some(Self::ioctl),
        compat_ioctl: Some(Self::compat_ioctl),
        poll: Some(Self::poll),
        mmap: Some(Self::mmap),
        llseek: Some(bindings::noop_llseek),
        owner: <crate::LocalModule as ModuleMetadata>::THIS_MODULE.as_ptr(),
        ..pin_init::zeroed()
    };

    /// The operations of the mappings [`Self::mmap`] made.
    const VM_OPS: bindings::vm_operations_struct = bindings::vm_operations_struct {
        open: Some(Self::vma_open),
        close: Some(Self::vma_close),
        ..pin_init::zeroed()
    };

    /// The device of a mapping made by [`Self::mmap`].
    ///
    /// # Safety
    ///
    /// `vma` is a live vma whose `vm_ops` are [`Self::VM_OPS`]; the
    /// returned reference is used during the vma operation only.
    unsafe fn vma_device<'a>(vma: *mut bindings::vm_area_struct) -> &'a T {
        // SAFETY: such a vma maps a file opened by `open` (only `mmap` sets
        // these `vm_ops`, on success) and holds a reference to it in
        // `vm_file` (taken by `mmap_region` or, for a split or a copy,
        // before `open` is called; dropped after `close`); the file's
        // private data is the `KBox<T>` of `open` until its release, which
        // waits for that reference.
        unsafe { <KBox<T> as ForeignOwnable>::borrow((*(*vma).vm_file).private_data) }
    }

    /// # Safety
    ///
    /// Called by the mm for a new piece (a split, a copy) of a mapping
    /// made by [`Self::mmap`].
    unsafe extern "C" fn vma_open(vma: *mut bindings::vm_area_struct) {
        // SAFETY: a live vma with our `vm_ops`, for the call.
        T::mapping_opened(unsafe { Self::vma_device(vma) });
    }

    /// # Safety
    ///
    /// Called by the mm when a piece of a mapping made by [`Self::mmap`]
    /// goes (before it drops its file reference).
    unsafe extern "C" fn vma_close(vma: *mut bindings::vm_area_struct) {
        // SAFETY: a live vma with our `vm_ops`, for the call.
        T::mapping_closed(unsafe { Self::vma_device(vma) });
    }

    /// # Safety
    ///
    /// Called by the VFS for a file being opened on a device registered by
    /// [`PollMiscRegistration<T>`] (`misc_open` set `private_data` to it).
    unsafe extern "C" fn open(inode: *mut bindings::inode, raw: *mut bindings::file) -> c_int {
        // SAFETY: valid inode and file of an open in progress.
        let ret = unsafe { bindings::stream_open(inode, raw) };
        if ret != 0 {
            return ret;
        }
        // SAFETY: `misc_open` stored the miscdevice, which is the first field
        // of a live `#[repr(C)]` `PollMiscRegistration<T>` (type invariant;
        // misc_open keeps it registered during this call).
        let misc = unsafe { &*(*raw).private_data.cast::<PollMiscRegistration<T>>() };
        // SAFETY: the file is valid for the call; no fdget_pos region is active.
        let file = unsafe { File::from_raw_file(raw) };
        match T::open(file, misc) {
            Ok(me) => {
                // SAFETY: open may set the private data; the other callbacks
                // read it back as a `KBox<T>`.
                unsafe { (*raw).private_data = me.into_foreign() };
                0
            }
            Err(e) => e.to_errno(),
        }
    }

    /// # Safety
    ///
    /// Called by the VFS on the last close of a file opened by `open`.
    unsafe extern "C" fn release(_inode: *mut bindings::inode, raw: *mut bindings::file) -> c_int {
        // SAFETY: the private data is the `KBox<T>` of `open`, owned by release.
        let me = unsafe { <KBox<T> as ForeignOwnable>::from_foreign((*raw).private_data) };
        // SAFETY: the file is valid for the call.
        T::release(me, unsafe { File::from_raw_file(raw) });
        0
    }

    /// # Safety
    ///
    /// Called by the VFS with a valid kiocb of a file opened by `open` and an
    /// iov_iter to write to.
    unsafe extern "C" fn read_iter(
        kiocb: *mut bindings::kiocb,
        iter: *mut bindings::iov_iter,
    ) -> isize {
        // SAFETY: a valid kiocb whose file's private data is a `KBox<T>`.
        let kiocb = unsafe { Kiocb::from_raw(kiocb) };
        // SAFETY: a valid iov_iter for writing, for the duration of the call.
        let iov = unsafe { IovIterDest::from_raw(iter) };
        match T::read_iter(kiocb, iov) {
            Ok(n) => n as isize,
            Err(e) => e.to_errno() as isize,
        }
    }

    /// # Safety
    ///
    /// Called by the VFS with a file opened by `open`.
    unsafe extern "C" fn ioctl(raw: *mut bindings::file, cmd: u32, arg: usize) -> isize {
        // SAFETY: the private data is the `KBox<T>` of `open`, alive until
        // release, which cannot run during an ioctl of the file.
        let me = unsafe { <KBox<T> as ForeignOwnable>::borrow((*raw).private_data) };
        // SAFETY: the file is valid for the call.
        let file = unsafe { File::from_raw_file(raw) };
        match T::ioctl(me, file, cmd, arg) {
            Ok(n) => n,
            Err(e) => e.to_errno() as isize,
        }
    }

    /// # Safety
    ///
    /// As [`Self::ioctl`]; `arg` comes from a 32-bit process.
    unsafe extern "C" fn compat_ioctl(raw: *mut bindings::file, cmd: u32, arg: usize) -> isize {
        // A 32-bit user pointer zero-extended is the 64-bit one on x86-64
        // (`compat_ptr`).
        // SAFETY: as for `ioctl`.
        unsafe { Self::ioctl(raw, cmd, arg) }
    }

    /// # Safety
    ///
    /// Called by the VFS with a file opened by `open` and a valid (or null)
    /// poll table.
    unsafe extern "C" fn poll(
        raw: *mut bindings::file,
        table: *mut bindings::poll_table,
    ) -> bindings::__poll_t {
        // SAFETY: the private data is the `KBox<T>` of `open`, alive until
        // release, which cannot run during a poll of the file.
        let me = unsafe { <KBox<T> as ForeignOwnable>::borrow((*raw).private_data) };
        // SAFETY: the file is valid for the call.
        let file = unsafe { File::from_raw_file(raw) };
        // SAFETY: `table` is null or valid for the duration of the call.
        let table = unsafe { PollTable::from_raw(table) };
        T::poll(me, file, table)
    }

    /// # Safety
    ///
    /// Called by the VFS (`mmap_region`, mmap lock held for writing) with a
    /// file opened by `open` and a vma being set up for it.
    unsafe extern "C" fn mmap(
        raw: *mut bindings::file,
        vma: *mut bindings::vm_area_struct,
    ) -> c_int {
        // SAFETY: the private data is the `KBox<T>` of `open`, alive until
        // release, which cannot run during an mmap of the file.
        let me = unsafe { <KBox<T> as ForeignOwnable>::borrow((*raw).private_data) };
        // SAFETY: the file is valid for the call.
        let file = unsafe { File::from_raw_file(raw) };
        // SAFETY: the vma is undergoing its initial setup for this call.
        let new = unsafe { VmaNew::from_raw(vma) };
        match T::mmap(me, file, new) {
            Ok(()) => {
                // After everything that can fail: from here on the kernel
                // keeps the vma (`__mmap_new_vma`), and calls `close` for
                // it when it goes.
                // SAFETY: the vma is being set up by this mmap call (mmap
                // lock held for writing, not yet visible to anyone else);
                // setting its operations is what `->mmap` may do. The
                // operations are `'static` (a promoted constant), and this
                // module stays loaded while the vma holds the file.
                unsafe { (*vma).vm_ops = &Self::VM_OPS };
                0
            }
            Err(e) => e.to_errno(),
        }
    }
}
