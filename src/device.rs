// SPDX-License-Identifier: GPL-2.0

//! The character device `/dev/oprofile/buffer`.
//!
//! A misc device named `oprofile!buffer`: devtmpfs turns the `!` into a
//! directory, and gives it mode 0600 (root only).

use kernel::{
    fs::{File, Kiocb},
    iov::IovIterDest,
    miscdevice::{MiscDevice, MiscDeviceOptions, MiscDeviceRegistration},
    prelude::*,
};

/// The name of the device; devtmpfs creates `/dev/oprofile/buffer`.
pub(crate) const DEVICE_NAME: &CStr = c"oprofile!buffer";

/// One open file of the device.
pub(crate) struct BufferReader;

#[vtable]
impl MiscDevice for BufferReader {
    type Ptr = KBox<Self>;

    fn open(_file: &File, _misc: &MiscDeviceRegistration<Self>) -> Result<KBox<Self>> {
        Ok(KBox::new(BufferReader, GFP_KERNEL)?)
    }

    fn read_iter(_kiocb: Kiocb<'_, Self::Ptr>, _iov: &mut IovIterDest<'_>) -> Result<usize> {
        // No producer yet: end of stream.
        Ok(0)
    }
}

/// Registers the device; it is removed when the registration is dropped.
pub(crate) fn register() -> impl PinInit<MiscDeviceRegistration<BufferReader>, Error> {
    MiscDeviceRegistration::register(MiscDeviceOptions { name: DEVICE_NAME })
}
