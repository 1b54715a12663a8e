// SPDX-License-Identifier: GPL-2.0

//! The debugfs control directory `/sys/kernel/debug/oprofile/`.
//!
//! `tracing_on` reads `1\n` or `0\n`; it accepts `0` or `1`, with or without a
//! trailing newline. Anything else is refused with `EINVAL` and a log line,
//! and leaves the value unchanged.

use core::sync::atomic::{AtomicBool, Ordering};
use kernel::{debugfs, prelude::*, uaccess::UserSliceReader};

/// State behind the control files.
pub(crate) struct Control {
    /// The global record switch (`tracing_on`).
    pub(crate) tracing_on: AtomicBool,
}

impl Control {
    pub(crate) fn new() -> Self {
        Self { tracing_on: AtomicBool::new(true) }
    }
}

/// Parses what user space wrote to a boolean switch file.
pub(crate) fn parse_switch(input: &[u8]) -> Result<bool> {
    match input {
        b"0" | b"0\n" => Ok(false),
        b"1" | b"1\n" => Ok(true),
        _ => Err(EINVAL),
    }
}

fn show_tracing_on(c: &Control, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
    writeln!(f, "{}", u8::from(c.tracing_on.load(Ordering::Acquire)))
}

fn store_tracing_on(c: &Control, reader: &mut UserSliceReader) -> Result {
    // Longest valid input is two bytes; anything longer is refused unread.
    let len = reader.len();
    let mut buf = [0u8; 2];
    let input = buf.get_mut(..len).ok_or_else(|| {
        pr_warn!("tracing_on: refused a {len}-byte write (expected 0 or 1)\n");
        EINVAL
    })?;
    reader.read_slice(input)?;
    let on = parse_switch(input).inspect_err(|_| {
        pr_warn!("tracing_on: refused {:?} (expected 0 or 1)\n", kernel::str::BStr::from_bytes(input));
    })?;
    // Release: everything before the switch is visible to whoever sees it.
    c.tracing_on.store(on, Ordering::Release);
    Ok(())
}

/// The debugfs directory and its files; removed when dropped.
#[pin_data]
pub(crate) struct ControlFiles {
    #[pin]
    tracing_on: debugfs::File<Control>,
    // Dropped last: the files live in it.
    _dir: debugfs::Dir,
}

impl ControlFiles {
    pub(crate) fn new() -> impl PinInit<Self, Error> {
        let dir = debugfs::Dir::new(c"oprofile");
        try_pin_init!(Self {
            tracing_on <- dir.read_write_callback_file(
                c"tracing_on",
                Control::new(),
                &show_tracing_on,
                &store_tracing_on,
            ),
            _dir: dir,
        }? Error)
    }
}

#[kunit_tests(oprofile_rs_control)]
mod tests {
    use super::*;

    #[test]
    fn switch_accepts_only_0_and_1() {
        assert_eq!(parse_switch(b"0"), Ok(false));
        assert_eq!(parse_switch(b"1\n"), Ok(true));
        for bad in [&b""[..], b"2", b"-1", b"abc", b"\n", b"01", b"1 "] {
            assert_eq!(parse_switch(bad), Err(EINVAL));
        }
    }
}
