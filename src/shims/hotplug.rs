// SPDX-License-Identifier: GPL-2.0

//! CPU hotplug callbacks, which the kernel crate does not offer: a
//! [`Registration`] calls [`HotplugHandler::online`] for every CPU that is or
//! comes online and [`HotplugHandler::offline`] for every CPU that goes
//! offline, until it is dropped.
//!
//! cpuhp callbacks carry no context pointer unless the state is
//! multi-instance: one dynamic multi-instance state with one instance, as
//! `cpuhp_setup_state_multi()` and `cpuhp_state_add_instance()` (inline
//! functions) make it.

use core::{ffi::c_int, marker::PhantomPinned};
use kernel::{bindings, c_str, error::to_result, prelude::*, types::Opaque};

/// What happens when CPUs come and go.
pub(crate) trait HotplugHandler: Sync {
    /// CPU `cpu` came online (also every online CPU at registration); runs
    /// on that CPU, under the hotplug lock. An error at registration fails
    /// it (the CPUs brought up until then are brought down again); later,
    /// it keeps the CPU from coming online.
    fn online(&self, cpu: u32) -> Result;
    /// CPU `cpu` goes offline (also every online CPU when the registration
    /// is dropped); runs on that CPU, under the hotplug lock.
    fn offline(&self, cpu: u32);
}

/// The instance of the state: what a callback finds its handler through.
///
/// # Invariants
///
/// `handler` is valid while `node` is an instance of a state (see
/// [`Registration::new`]).
#[pin_data]
struct Node<H> {
    #[pin]
    node: Opaque<bindings::hlist_node>,
    handler: *const H,
    #[pin]
    _pin: PhantomPinned,
}

/// A registration of CPU hotplug callbacks; removed when dropped.
///
/// # Invariants
///
/// `node.node` is the instance of the multi-instance state `state`, whose
/// callbacks are [`online::<H>`] and [`offline::<H>`].
pub(crate) struct Registration<H: HotplugHandler> {
    node: Pin<KBox<Node<H>>>,
    state: bindings::cpuhp_state,
}

// SAFETY: the registration is removed through the cpuhp API, which any
// thread may call; `H` is `Sync` and only shared.
unsafe impl<H: HotplugHandler> Send for Registration<H> {}
// SAFETY: `Registration` has no `&self` methods.
unsafe impl<H: HotplugHandler> Sync for Registration<H> {}

/// The multi-instance callbacks' type, which the bindings lack: they declare
/// `__cpuhp_setup_state`'s callbacks with the single-instance type, and C
/// casts the multi-instance ones to it.
type MultiFn = unsafe extern "C" fn(cpu: u32, node: *mut bindings::hlist_node) -> c_int;
type SingleFn = unsafe extern "C" fn(cpu: u32) -> c_int;

/// The handler of the instance `node`.
///
/// # Safety
///
/// `node` is the `node` of a [`Node<H>`] that is an instance of a state.
unsafe fn handler_of<'a, H: HotplugHandler>(node: *mut bindings::hlist_node) -> &'a H {
    // CAST: `Opaque<T>` is `repr(transparent)` over `T`.
    let node = node.cast::<Opaque<bindings::hlist_node>>();
    // SAFETY: `node` is the `node` field of a live `Node<H>`.
    let n = unsafe { &*kernel::container_of!(node, Node<H>, node) };
    // SAFETY: the handler is valid while `n` is an instance (invariant).
    unsafe { &*n.handler }
}

/// # Safety
///
/// Called by the cpuhp core with the `node` of a live `Registration<H>`.
unsafe extern "C" fn online<H: HotplugHandler>(cpu: u32, node: *mut bindings::hlist_node) -> c_int {
    // SAFETY: see the function's safety section.
    match unsafe { handler_of::<H>(node) }.online(cpu) {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

/// # Safety
///
/// As [`online`].
unsafe extern "C" fn offline<H: HotplugHandler>(
    cpu: u32,
    node: *mut bindings::hlist_node,
) -> c_int {
    // SAFETY: see the function's safety section.
    unsafe { handler_of::<H>(node) }.offline(cpu);
    0
}

impl<H: HotplugHandler> Registration<H> {
    /// Registers `handler` and brings every online CPU up with it: when this
    /// returns `Ok`, `handler.online` ran for each.
    ///
    /// # Safety
    ///
    /// `handler` must stay valid (not moved, not dropped) until the returned
    /// registration is dropped.
    pub(crate) unsafe fn new(handler: &H) -> Result<Self> {
        let (up, down): (MultiFn, MultiFn) = (online::<H>, offline::<H>);
        // SAFETY: a function pointer cast, as `cpuhp_setup_state_multi`
        // does: for a multi-instance state the cpuhp core calls these with
        // their own (two-argument) type.
        let (up, down) = unsafe {
            (
                core::mem::transmute::<MultiFn, SingleFn>(up),
                core::mem::transmute::<MultiFn, SingleFn>(down),
            )
        };
        let node = KBox::pin_init(
            // INVARIANT: the caller keeps `handler` alive as long as the
            // registration, which removes the instance when dropped.
            pin_init!(Node {
                node: Opaque::uninit(),
                handler,
                _pin: PhantomPinned,
            }),
            GFP_KERNEL,
        )?;
        // SAFETY: the name is a static string; a dynamic multi-instance
        // state invokes nothing at setup.
        let state = unsafe {
            bindings::__cpuhp_setup_state(
                bindings::cpuhp_state_CPUHP_AP_ONLINE_DYN,
                c_str!("oprofile_rs:online").as_char_ptr(),
                false,
                Some(up),
                Some(down),
                true,
            )
        };
        to_result(state)?;
        // SAFETY: `node` is pinned and lives until the instance is removed
        // (by the registration's `drop`). This calls `online` for every
        // online CPU, and on a failure `offline` for those that came up.
        let ret = unsafe { bindings::__cpuhp_state_add_instance(state, node.node.get(), true) };
        if let Err(e) = to_result(ret) {
            // SAFETY: `state` has no instance.
            unsafe { bindings::__cpuhp_remove_state(state, false) };
            return Err(e);
        }
        // INVARIANT: `node` is the instance of `state`.
        Ok(Self { node, state })
    }
}

impl<H: HotplugHandler> Drop for Registration<H> {
    fn drop(&mut self) {
        // SAFETY: `node` is the instance of `state` (invariant). This calls
        // `offline` for every online CPU; then no callback runs any more.
        unsafe {
            bindings::__cpuhp_state_remove_instance(self.state, self.node.node.get(), true);
            bindings::__cpuhp_remove_state(self.state, false);
        }
    }
}
