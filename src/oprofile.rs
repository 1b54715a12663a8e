// SPDX-License-Identifier: GPL-2.0

//! oprofile_rs: a modern oprofile driver in Rust.
//!
//! Loading the module creates `/dev/oprofile/buffer` (the sample stream) and
//! `/sys/kernel/debug/oprofile/` (controls and statistics). See
//! `Documentation/design.md` for the architecture.

use kernel::{prelude::*, sync::Arc};

use control::{debugfs, device, params, profiler};
use path::{buffer_memory, cgroup};
use shims::{glue, poll_misc::PollMiscRegistration};

// The layers, each importing only from those below it (and from `format` and
// `ringbuf`, which import nothing of the module):
// `kunit` (test builds) > `control` > `path` > `shims`.
mod control;
// The stream format, shared with the host crate `crates/format` (hence `pub`
// items). The module writes every record but reads back only a few fields:
// the other readers serve the host decoder and, in the KUnit build (where
// unused code is reported), the suites that read back what the module wrote.
#[cfg_attr(not(oprofile_rs_kunit), allow(dead_code))]
#[allow(unreachable_pub)]
mod format;
// The KUnit suites and their helpers (NMI handlers, kthreads): test-rig builds
// only (`OPROFILE_RS_KUNIT=1`).
#[cfg(oprofile_rs_kunit)]
mod kunit;
mod path;
mod shims;
// The ring-buffer core is shared with the host crate `crates/ringbuf`; parts of
// its public API serve only the host tests and benchmarks.
#[allow(unreachable_pub)]
#[path = "ringbuf/mod.rs"]
mod ringbuf;

module! {
    type: OprofileModule,
    name: "oprofile_rs",
    authors: ["oprofile-rs developers"],
    description: "oprofile-style sampling profiler with per-CPU lock-free ring buffers",
    license: "GPL",
    params: {
        cpu_buffer_size: u64 {
            default: 65536,
            description: "Bytes per per-CPU ring buffer (power of two, 4096..64 MiB)",
        },
        buffer_size: u64 {
            default: 1048576,
            description: "Bytes of the event buffer read through /dev/oprofile/buffer (64 KiB..256 MiB)",
        },
        buffer_watershed: u64 {
            default: 0,
            description: "Wake readers when this many bytes wait (0: buffer_size/4)",
        },
        exclude_user: bool {
            default: false,
            description: "Do not sample user mode",
        },
        exclude_kernel: bool {
            default: false,
            description: "Do not sample kernel mode",
        },
        backtrace_depth: u64 {
            default: 0,
            description: "Kernel callchain entries recorded per sample (0..64)",
        },
        user_backtrace_depth: u64 {
            default: 32,
            description: "User callchain entries recorded per sample, by frame pointers (0..64; 0: none)",
        },
        user_stack_size: u64 {
            default: 0,
            description: "Bytes of user stack copied per sample for DWARF unwinding (0: none; a multiple of 8 up to 8192)",
        },
        user_stack_fit: bool {
            default: false,
            description: "Stop each user stack copy after the first frame record when the frame pointer looks like one (the hybrid)",
        },
    },
}

#[pin_data(PinnedDrop)]
struct OprofileModule {
    profiler: Arc<profiler::Profiler>,
    #[pin]
    device: PollMiscRegistration<device::BufferReader>,
    control: debugfs::ControlFiles,
}

/// The `event=` parameter (a C `charp` in glue.c: `module!` has no strings).
fn event_param() -> &'static [u8] {
    // SAFETY: glue.c returns a NUL-terminated string owned by the module
    // parameter, which is not changed after load (the file is read-only).
    unsafe { CStr::from_char_ptr(glue::oprofile_rs_event_param()) }.to_bytes()
}

/// The `mode=` parameter (a C `charp` in glue.c, as `event=`).
fn mode_param() -> &'static [u8] {
    // SAFETY: glue.c returns a NUL-terminated string owned by the module
    // parameter, which is not changed after load (the file is read-only).
    unsafe { CStr::from_char_ptr(glue::oprofile_rs_mode_param()) }.to_bytes()
}

/// The `cgroup=` parameter (a C `charp` in glue.c, as `event=`).
fn cgroup_param() -> &'static [u8] {
    // SAFETY: glue.c returns a NUL-terminated string owned by the module
    // parameter, which is not changed after load (the file is read-only).
    unsafe { CStr::from_char_ptr(glue::oprofile_rs_cgroup_param()) }.to_bytes()
}

/// The cgroup filter `cgroup=` names (none if not given): its errors fail
/// the load (`cgroup.rs`).
fn load_filter() -> Result<Option<cgroup::Cgroup>> {
    let v = cgroup_param();
    if v.is_empty() {
        return Ok(None);
    }
    cgroup::Cgroup::named(v)
}

/// The `sample_period=` parameter (a C `charp` in glue.c, as `event=`).
fn sample_period_param() -> &'static [u8] {
    // SAFETY: glue.c returns a NUL-terminated string owned by the module
    // parameter, which is not changed after load (the file is read-only).
    unsafe { CStr::from_char_ptr(glue::oprofile_rs_sample_period_param()) }.to_bytes()
}

/// The `sample_freq=` parameter (a C `charp` in glue.c, as `event=`).
fn sample_freq_param() -> &'static [u8] {
    // SAFETY: glue.c returns a NUL-terminated string owned by the module
    // parameter, which is not changed after load (the file is read-only).
    unsafe { CStr::from_char_ptr(glue::oprofile_rs_sample_freq_param()) }.to_bytes()
}

impl kernel::InPlaceModule for OprofileModule {
    fn init(_module: &'static ThisModule) -> impl PinInit<Self, Error> {
        pin_init::pin_init_scope(|| {
            let raw = params::Raw {
                cpu_buffer_size: module_parameters::cpu_buffer_size.value(),
                buffer_size: module_parameters::buffer_size.value(),
                buffer_watershed: module_parameters::buffer_watershed.value(),
                event: event_param(),
                sample_period: sample_period_param(),
                sample_freq: sample_freq_param(),
                exclude_user: module_parameters::exclude_user.value(),
                exclude_kernel: module_parameters::exclude_kernel.value(),
                backtrace_depth: module_parameters::backtrace_depth.value(),
                user_backtrace_depth: module_parameters::user_backtrace_depth.value(),
                user_stack_size: module_parameters::user_stack_size.value(),
                user_stack_fit: module_parameters::user_stack_fit.value(),
                mode: mode_param(),
            };
            let mut config = params::Config::validate(raw)?;
            // For the CPUs online now; each CPU that comes online later
            // is checked then (`Buffers::provision`).
            buffer_memory::check(
                buffer_memory::online_cpus(),
                config.cpu_buffer_size,
                config.buffer_size,
                config.mode == params::RecordMode::Overwrite,
            )?;
            let filter = load_filter()?;
            config.cgroup = filter.as_ref().map_or(0, |c| c.id());
            let profiler = profiler::Profiler::new(config, filter)?;
            Ok(try_pin_init!(Self {
                control: debugfs::ControlFiles::new(&profiler)?,
                device <- device::register(profiler.clone()),
                profiler,
            }? Error))
        })
    }
}

#[pinned_drop]
impl PinnedDrop for OprofileModule {
    fn drop(self: Pin<&mut Self>) {
        // Counters and the sync work end here; the device and debugfs files
        // go with the fields (no file is open: each holds a module reference).
        self.profiler.stop();
        pr_info!("unloaded\n");
    }
}
