// SPDX-License-Identifier: GPL-2.0

//! CPU-local NMI handlers and NMI IPIs (x86), which the kernel crate lacks.
//!
//! * [`Registration`]: registers an [`NmiHandler`] on the `NMI_LOCAL` chain
//!   for as long as the registration lives (a pinned object; dropping it
//!   unregisters the handler and waits for running invocations to finish).
//! * [`send_nmi`]: sends an NMI IPI to one CPU (also to the calling CPU).
//! * [`in_nmi`]: the kernel macro of the same name.
//!
//! The C side (`nmi_glue.c`, built only with the KUnit suites) only expands the
//! `register_nmi_handler()` macro body on storage owned here and forwards the
//! inline `__apic_send_IPI_mask()`.
//!
//! Every CPU-local NMI runs every handler of the chain, so a handler must only
//! claim NMIs it caused (e.g. by counting the IPIs it sent), and an NMI sent
//! with [`send_nmi`] that no handler claims is reported by the kernel as
//! "NMI received for unknown reason".

use core::ffi::{c_char, c_int, c_uint};
use core::marker::{PhantomData, PhantomPinned};

use kernel::{cpu::CpuId, prelude::*, types::Opaque};

use crate::shims::{cpu::cpu_online, perf::Regs};

mod ffi {
    use core::ffi::{c_char, c_int, c_uint, c_void};

    extern "C" {
        pub(super) fn oprofile_rs_nmi_register_local(
            action: *mut c_void,
            handler: unsafe extern "C" fn(c_uint, *mut kernel::bindings::pt_regs) -> c_int,
            name: *const c_char,
        ) -> c_int;
        pub(super) fn oprofile_rs_nmi_unregister_local(name: *const c_char);
        pub(super) fn oprofile_rs_send_nmi(cpu: c_uint);
        pub(super) fn oprofile_rs_in_nmi() -> bool;
    }
}

/// Bytes reserved for the C `struct nmiaction` (`OPROFILE_RS_NMIACTION_BYTES`
/// in `nmi_glue.h`; `nmi_glue.c` checks at compile time that it fits).
const ACTION_WORDS: usize = 64 / 8;
/// Bytes of the unique handler name (see [`Registration`]).
const NAME_BYTES: usize = 48;

/// `NMI_DONE` / `NMI_HANDLED` of `asm/nmi.h`.
const NMI_DONE: c_int = 0;
const NMI_HANDLED: c_int = 1;

/// A CPU-local NMI handler.
pub(crate) trait NmiHandler {
    /// Prefix of the handler's name (shown by the kernel's NMI duration
    /// warnings); at most 24 bytes are used.
    const NAME: &'static CStr;

    /// Called in NMI context on every CPU-local NMI while registered, on the
    /// CPU that received it. Returns whether the NMI was this handler's.
    ///
    /// `regs` are the interrupted context's registers.
    ///
    /// Must be NMI safe: no locks, no allocation, no sleeping, no printing.
    fn handle(regs: &Regs) -> bool;
}

/// Storage shared with C: the `struct nmiaction` and the name it points to.
#[repr(C)]
struct Action {
    action: [u64; ACTION_WORDS],
    name: [u8; NAME_BYTES],
}

/// A registered CPU-local NMI handler; dropping it unregisters the handler.
///
/// The name given to the kernel is `NAME` followed by the address of this
/// registration, so that it is unique: the kernel unregisters by name.
///
/// # Invariants
///
/// `inner` holds an initialised `struct nmiaction` on the `NMI_LOCAL` list,
/// whose name is the NUL-terminated string in `inner.name`, from the end of
/// [`Registration::new`] until drop.
#[pin_data(PinnedDrop)]
pub(crate) struct Registration<H: NmiHandler> {
    #[pin]
    inner: Opaque<Action>,
    _handler: PhantomData<H>,
    #[pin]
    _pin: PhantomPinned,
}

// SAFETY: the registration is only touched by `new` and `drop` (the kernel
// reads `inner` under its own NMI-safe RCU list); `H` is only a type marker.
unsafe impl<H: NmiHandler> Send for Registration<H> {}
// SAFETY: no method takes `&self`.
unsafe impl<H: NmiHandler> Sync for Registration<H> {}

/// Trampoline with the C `nmi_handler_t` signature.
///
/// # Safety
///
/// Only to be called by the kernel's NMI code, in NMI context.
unsafe extern "C" fn trampoline<H: NmiHandler>(
    _type: c_uint,
    regs: *mut kernel::bindings::pt_regs,
) -> c_int {
    // SAFETY: the NMI code passes the NMI's registers, valid during the call.
    let regs = unsafe { Regs::from_raw(regs) };
    if H::handle(&regs) {
        NMI_HANDLED
    } else {
        NMI_DONE
    }
}

/// Writes `prefix` (at most 24 bytes), `-`, the hex digits of `addr` and a NUL.
fn format_name(out: &mut [u8; NAME_BYTES], prefix: &CStr, addr: usize) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut n = 0;
    let mut put = |b: u8| {
        if let Some(slot) = out.get_mut(n) {
            *slot = b;
            n += 1;
        }
    };
    for &b in prefix.to_bytes().iter().take(24) {
        put(b);
    }
    put(b'-');
    for shift in (0..usize::BITS / 4).rev() {
        put(HEX[(addr >> (shift * 4)) & 0xf]);
    }
    // 24 + 1 + 16 < NAME_BYTES: there is room for the terminating NUL.
    put(0);
}

impl<H: NmiHandler> Registration<H> {
    /// Registers `H` on the `NMI_LOCAL` chain.
    pub(crate) fn new() -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            inner <- Opaque::try_ffi_init(|slot: *mut Action| {
                // SAFETY: `slot` points to valid, pinned, writable storage for
                // an `Action` (guaranteed by `Opaque::try_ffi_init`): taking
                // field addresses, writing the name and then borrowing the now
                // initialised bytes are fine.
                let (action, name) = unsafe {
                    let name_ptr = core::ptr::addr_of_mut!((*slot).name);
                    name_ptr.write([0; NAME_BYTES]);
                    (core::ptr::addr_of_mut!((*slot).action), &mut *name_ptr)
                };
                format_name(name, H::NAME, slot as usize);
                // SAFETY: `action` is `OPROFILE_RS_NMIACTION_BYTES` of 8-aligned
                // storage (checked against `struct nmiaction` in glue.c); it and
                // the NUL-terminated `name` stay at this address until `drop`
                // unregisters the handler (the registration is pinned).
                // `trampoline::<H>` has the `nmi_handler_t` ABI.
                let ret = unsafe {
                    ffi::oprofile_rs_nmi_register_local(
                        action.cast(),
                        trampoline::<H>,
                        name.as_ptr().cast::<c_char>(),
                    )
                };
                kernel::error::to_result(ret)
            }),
            _handler: PhantomData,
            _pin: PhantomPinned,
        }? Error)
    }
}

#[pinned_drop]
impl<H: NmiHandler> PinnedDrop for Registration<H> {
    fn drop(self: Pin<&mut Self>) {
        let inner = self.inner.get();
        // SAFETY: by the type invariant the handler is registered under the
        // unique NUL-terminated name in `inner.name`. `unregister_nmi_handler`
        // removes it and waits (synchronize_rcu) until no CPU still runs it,
        // so the storage may be freed afterwards.
        unsafe {
            ffi::oprofile_rs_nmi_unregister_local(
                core::ptr::addr_of!((*inner).name).cast::<c_char>(),
            )
        };
    }
}

/// Sends an NMI IPI to `cpu` (which may be the calling CPU).
///
/// Callable from any context. If the CPU is offline nothing happens. If no
/// registered handler claims the NMI, the kernel logs an "unknown reason" NMI.
/// Back-to-back NMIs to one CPU can merge into one: count on at most one NMI
/// in flight per CPU.
pub(crate) fn send_nmi(cpu: CpuId) {
    if !cpu_online(cpu) {
        return;
    }
    // SAFETY: `cpu` is a valid, online CPU number; sending an IPI has no
    // other precondition (the APIC code disables interrupts itself).
    unsafe { ffi::oprofile_rs_send_nmi(cpu.as_u32()) }
}

/// Whether the caller runs in NMI context.
pub(crate) fn in_nmi() -> bool {
    // SAFETY: reads the preempt count of the current CPU; no precondition.
    unsafe { ffi::oprofile_rs_in_nmi() }
}
