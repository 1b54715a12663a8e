// SPDX-License-Identifier: GPL-2.0

//! Rate limiting of the log lines a user can trigger.
//!
//! Every `pr_*` that a write, an open or a read can cause goes through
//! [`pr_ratelimited!`]: at most [`BURST`] lines per [`INTERVAL_NS`] and call
//! site, as the kernel's `printk_ratelimited()` (10 per 5 s), then one line
//! saying how many were suppressed. The state is a few atomics, so it works
//! in any context; it is not exact under races (two CPUs may both take the
//! last slot), which only matters to within a line.

use kernel::sync::atomic::{Atomic, Relaxed};

/// Length of a window.
pub(crate) const INTERVAL_NS: u64 = 5_000_000_000;
/// Lines printed per window and call site.
pub(crate) const BURST: u32 = 10;

/// The state of one call site.
pub(crate) struct RateLimit {
    /// Start of the current window (`ktime_get_mono_fast_ns`); 0: none yet.
    begin: Atomic<u64>,
    /// Lines printed in the current window.
    printed: Atomic<u32>,
    /// Lines suppressed in the current window.
    missed: Atomic<u32>,
}

impl RateLimit {
    /// A call site that has printed nothing yet.
    pub(crate) const fn new() -> Self {
        Self {
            begin: Atomic::new(0),
            printed: Atomic::new(0),
            missed: Atomic::new(0),
        }
    }

    /// Whether the line may be printed now. When a new window starts, returns
    /// the number of lines suppressed in the previous one as well.
    pub(crate) fn check(&self) -> (bool, u32) {
        // SAFETY: plain call; ktime_get_mono_fast_ns() is safe in any context.
        let now = unsafe { kernel::bindings::ktime_get_mono_fast_ns() }.max(1);
        let begin = self.begin.load(Relaxed);
        let mut suppressed = 0;
        if begin == 0 || now.wrapping_sub(begin) >= INTERVAL_NS {
            // One caller opens the new window; the others count in it.
            if self.begin.cmpxchg(begin, now, Relaxed).is_ok() {
                suppressed = self.missed.xchg(0, Relaxed);
                self.printed.store(0, Relaxed);
            }
        }
        if self.printed.fetch_add(1, Relaxed) < BURST {
            (true, suppressed)
        } else {
            self.missed.fetch_add(1, Relaxed);
            (false, suppressed)
        }
    }
}

/// `pr_ratelimited!(pr_warn, "fmt", args...)`: prints with the given `pr_*`
/// macro unless this call site printed [`BURST`] lines in the last
/// [`INTERVAL_NS`].
macro_rules! pr_ratelimited {
    ($pr:ident, $($arg:tt)*) => {{
        static RL: $crate::shims::ratelimit::RateLimit = $crate::shims::ratelimit::RateLimit::new();
        let (print, suppressed) = RL.check();
        if suppressed > 0 {
            kernel::$pr!("{} log lines suppressed (rate limit)\n", suppressed);
        }
        if print {
            kernel::$pr!($($arg)*);
        }
    }};
}
pub(crate) use pr_ratelimited;
