// SPDX-License-Identifier: GPL-2.0

//! The debugfs control directory `/sys/kernel/debug/oprofile/`.
//!
//! - `tracing_on` (0600): reads `1\n` or `0\n`; accepts `0` or `1`, with or
//!   without a trailing newline. `0` stops every CPU from recording before
//!   the write returns, then stops the counters (no interrupt while off),
//!   `1` starts them and resumes. Anything else is refused with `EINVAL`
//!   and a log line (rate limited: 10 per 5 s per message), and leaves the value
//!   unchanged.
//! - `flush` (0200): writing `1` pushes everything buffered to the reader now.
//! - `stats` (0400): per-CPU counters (see `Documentation/design.md`).
//! - `event`, `sample_period`, `sample_freq`, `backtrace_depth`,
//!   `user_backtrace_depth`, `cpu_buffer_size`, `buffer_size`,
//!   `buffer_watershed`, `exclude_user`, `exclude_kernel`, `mode`, `cgroup`,
//!   `user_stack_size`, `user_stack_fit`, `pid` (0600):
//!   the setting in the parameter's syntax; a
//!   write (one value, a trailing newline allowed) changes it while
//!   recording is off (`config.rs`: `EBUSY` while on, `EINVAL` for garbage,
//!   nothing changed either way). `pid` (runtime only, 0 at load) profiles
//!   one process alone (`task_counters.rs`; `ESRCH`: no such process).
//! - `event_info` (0400): one line per event: its name, period, frequency,
//!   the context its overflows run in (`nmi`, `hardirq` or `task`) and the
//!   mode exclusions.
//! - `config` (0400): every runtime setting as `key=value` lines
//!   (`settings.rs`).
//! - `buffer_sizes` (0400): the buffer parameters in effect.
//! - `snapshot` (0600): writing `1` takes a flight-recorder snapshot
//!   (`mode=overwrite`, see `snapshot.rs`; `EINVAL` in consume mode or for
//!   anything but `1`, `ENOSPC` when the event buffer cannot take it); reads
//!   the mode and what the last snapshot did.

use core::fmt;
use kernel::{
    prelude::*,
    sync::{atomic::Relaxed, Arc},
    uaccess::UserSliceReader,
};

use crate::{
    control::{
        config::Changes,
        params::write_list,
        profiler::{Profiler, TRACING_ON},
        settings::{ConfigText, ValueText, KEYS},
    },
    shims::{
        debugfs_files::{DebugfsDir, FileSpec},
        ratelimit::pr_ratelimited,
    },
};

/// Parses what user space wrote to a boolean switch file.
pub(crate) fn parse_switch(input: &[u8]) -> Result<bool> {
    match input {
        b"0" | b"0\n" => Ok(false),
        b"1" | b"1\n" => Ok(true),
        _ => Err(EINVAL),
    }
}

/// Reads a `0`/`1` write, logging a refusal as `file`.
fn read_switch(file: &str, reader: &mut UserSliceReader) -> Result<bool> {
    // Longest valid input is two bytes; anything longer is refused unread.
    let len = reader.len();
    let mut buf = [0u8; 2];
    let input = buf.get_mut(..len).ok_or_else(|| {
        pr_ratelimited!(
            pr_warn,
            "{file}: refused a {len}-byte write (expected 0 or 1)\n"
        );
        EINVAL
    })?;
    reader.read_slice(input)?;
    parse_switch(input).inspect_err(|_| {
        pr_ratelimited!(
            pr_warn,
            "{file}: refused {:?} (expected 0 or 1)\n",
            kernel::str::BStr::from_bytes(input)
        );
    })
}

fn show_tracing_on(_p: &Arc<Profiler>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    writeln!(f, "{}", u8::from(TRACING_ON.is_on()))
}

fn store_tracing_on(p: &Arc<Profiler>, reader: &mut UserSliceReader) -> Result {
    p.set_tracing(read_switch("tracing_on", reader)?);
    Ok(())
}

fn store_flush(p: &Arc<Profiler>, reader: &mut UserSliceReader) -> Result {
    if !read_switch("flush", reader)? {
        pr_ratelimited!(pr_warn, "flush: refused 0 (write 1 to flush)\n");
        return Err(EINVAL);
    }
    p.flush();
    Ok(())
}

fn store_snapshot(p: &Arc<Profiler>, reader: &mut UserSliceReader) -> Result {
    if !read_switch("snapshot", reader)? {
        pr_ratelimited!(
            pr_warn,
            "snapshot: refused 0 (write 1 to take a snapshot)\n"
        );
        return Err(EINVAL);
    }
    p.snapshot().map(|_| ())
}

fn show_snapshot(p: &Arc<Profiler>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let s = p.buffers.snapshot_stats();
    writeln!(
        f,
        "mode={} snapshots={} records={} overwritten={} dropped={} pause_ns={} max_pause_ns={}",
        if p.buffers.overwrite() {
            "overwrite"
        } else {
            "consume"
        },
        s.seq,
        s.records,
        s.overwritten,
        s.dropped,
        s.pause_ns,
        s.max_pause_ns
    )
}

fn show_stats(p: &Arc<Profiler>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let n = p.settings().events().len();
    for s in p.buffers.cpus.iter() {
        let c = &s.counters;
        let received = c.sample_received.load(Relaxed);
        let other_cgroup = c.sample_other_cgroup.load(Relaxed);
        let while_off = c.sample_while_off.load(Relaxed);
        if received == 0 && other_cgroup == 0 && while_off == 0 && s.buffer.stats().committed == 0 {
            continue;
        }
        let rb = s.buffer.stats();
        write!(
            f,
            "cpu{} sample_received={} sample_lost_overflow={} sample_invalid_eip={} \
             sample_throttled={} backtrace_aborted={} user_backtrace_aborted={} \
             user_backtrace_truncated={} handler_avg_ns={} handler_max_ns={} \
             buffer_entries={} buffer_dropped_full={} buffer_read={} \
             sample_lost_snapshot={} comm_records={} buffer_committed={} buffer_overrun={} \
             sync_records={} sync_ns={} sync_runs={} sample_wrong_cpu={} sample_other_cgroup={} \
             user_stack_short={} sample_while_off={} table_wakes={} switch_records={} \
             event_samples=",
            s.cpu,
            received,
            c.sample_lost_overflow.load(Relaxed),
            c.sample_invalid_eip.load(Relaxed),
            c.sample_throttled.load(Relaxed),
            c.backtrace_aborted.load(Relaxed),
            c.user_backtrace_aborted.load(Relaxed),
            c.user_backtrace_truncated.load(Relaxed),
            c.handler_ns_sum
                .load(Relaxed)
                .checked_div(c.handler_calls.load(Relaxed))
                .unwrap_or(0),
            c.handler_ns_max.load(Relaxed),
            rb.entries,
            rb.dropped_full,
            rb.read,
            c.sample_lost_snapshot.load(Relaxed),
            c.comm_records.load(Relaxed),
            rb.committed,
            rb.overrun,
            c.sync_records.load(Relaxed),
            c.sync_ns.load(Relaxed),
            c.sync_runs.load(Relaxed),
            c.sample_wrong_cpu.load(Relaxed),
            other_cgroup,
            c.user_stack_short.load(Relaxed),
            while_off,
            s.tables_wanted.count.load(Relaxed),
            c.switch_records.load(Relaxed),
        )?;
        write_list(f, c.event_samples.iter().take(n).map(|a| a.load(Relaxed)))?;
        writeln!(f)?;
    }
    let eb = p.buffers.events.lock();
    writeln!(
        f,
        "event_buffer bytes_waiting={} bytes_total={} refused_full={} index_overflows={} index_walks={}",
        eb.len(),
        eb.bytes_in,
        eb.full,
        eb.index.overflows,
        eb.index.walks
    )
}

fn show_event_info(p: &Arc<Profiler>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let s = p.settings();
    for a in (0..s.events().len()).filter_map(|i| s.attr(i)) {
        writeln!(
            f,
            "{} period={} freq={} context={} exclude_user={} exclude_kernel={}",
            a.event.name(),
            a.period,
            a.freq,
            a.event.context().name(),
            u8::from(a.exclude_user),
            u8::from(a.exclude_kernel),
        )?;
    }
    Ok(())
}

/// Shows the value of key `K` of [`KEYS`].
fn show_key<const K: usize>(p: &Arc<Profiler>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let key = KEYS.get(K).copied().unwrap_or("");
    write!(f, "{}", ValueText(&p.settings(), key))
}

/// Longest write to a key's file.
const MAX_VALUE: usize = 512;

/// Changes key `K` of [`KEYS`] to the value written (one word; a trailing
/// newline allowed): see `config.rs`.
fn store_key<const K: usize>(p: &Arc<Profiler>, reader: &mut UserSliceReader) -> Result {
    let key = KEYS.get(K).copied().unwrap_or("");
    let len = reader.len();
    let mut buf = [0u8; MAX_VALUE];
    let input = buf.get_mut(..len).ok_or_else(|| {
        pr_ratelimited!(pr_warn, "{key}: refused a {len}-byte write (EINVAL)\n");
        EINVAL
    })?;
    reader.read_slice(input)?;
    let value = input.strip_suffix(b"\n").unwrap_or(input);
    if value.is_empty() || value.iter().any(|c| c.is_ascii_whitespace() || *c == b'=') {
        pr_ratelimited!(
            pr_warn,
            "{key}: refused {:?} (EINVAL)\n",
            kernel::str::BStr::from_bytes(value)
        );
        return Err(EINVAL);
    }
    let mut ch = Changes::default();
    ch.set(key.as_bytes(), value)?;
    p.configure_changes(&ch)
}

fn show_config(p: &Arc<Profiler>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    write!(f, "{}", ConfigText(&p.settings()))
}

/// What the buffers take now: `bytes` (the total), the CPUs that have
/// buffers (`cpu_buffers`) of the possible ones, those online, the
/// `cpu_buffer_size` a CPU coming online gets, and the parts: the rings
/// with the stack copy areas, the staging and scratch areas, the event
/// buffer with its meta page and index; besides, what every possible CPU
/// takes for its sampler and sync state (`bookkeeping_bytes`).
fn show_buffer_memory(p: &Arc<Profiler>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let m = p.buffers.memory();
    writeln!(
        f,
        "bytes={} cpu_buffers={} possible_cpus={} online_cpus={} cpu_buffer_size={} ring_bytes={} staging_bytes={} event_buffer_bytes={} bookkeeping_bytes={}",
        m.total(),
        m.cpu_buffers,
        p.buffers.cpus.len(),
        crate::path::buffer_memory::online_cpus(),
        m.cpu_bytes,
        m.ring_bytes,
        m.staging_bytes,
        m.event_bytes,
        m.bookkeeping_bytes
    )
}

fn show_sizes(p: &Arc<Profiler>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let c = p.settings().config;
    writeln!(
        f,
        "cpu_buffer_size={} buffer_size={} buffer_watershed={}",
        c.cpu_buffer_size, c.buffer_size, c.buffer_watershed
    )
}

/// The names of the settings' debugfs files, in the order of [`KEYS`] (the
/// C strings debugfs takes); the build fails if one differs from its key.
const KEY_FILES: [&CStr; KEYS.len()] = [
    c"event",
    c"sample_period",
    c"sample_freq",
    c"backtrace_depth",
    c"user_backtrace_depth",
    c"cpu_buffer_size",
    c"buffer_size",
    c"buffer_watershed",
    c"exclude_user",
    c"exclude_kernel",
    c"mode",
    c"cgroup",
    c"user_stack_size",
    c"user_stack_fit",
    c"pid",
];

const _: () = {
    let mut i = 0;
    while i < KEYS.len() {
        assert!(crate::format::same_bytes(
            KEYS[i].as_bytes(),
            KEY_FILES[i].to_bytes()
        ));
        i += 1;
    }
};

/// The debugfs file of setting `K` of [`KEYS`]: named after the key, showing
/// its value and changing it.
const fn key_file<const K: usize>() -> FileSpec<Arc<Profiler>> {
    FileSpec {
        name: const { KEY_FILES[K] },
        show: Some(show_key::<K>),
        store: Some(store_key::<K>),
    }
}

/// The debugfs directory and its files; removed when dropped. Each open file
/// keeps the module loaded (see [`crate::shims::debugfs_files`]).
pub(crate) struct ControlFiles {
    _dir: DebugfsDir<Arc<Profiler>>,
}

impl ControlFiles {
    pub(crate) fn new(p: &Arc<Profiler>) -> Result<Self> {
        let files = [
            FileSpec {
                name: c"tracing_on",
                show: Some(show_tracing_on),
                store: Some(store_tracing_on),
            },
            FileSpec {
                name: c"flush",
                show: None,
                store: Some(store_flush),
            },
            FileSpec {
                name: c"buffer_memory",
                show: Some(show_buffer_memory),
                store: None,
            },
            FileSpec {
                name: c"stats",
                show: Some(show_stats),
                store: None,
            },
            key_file::<0>(),
            key_file::<1>(),
            key_file::<2>(),
            key_file::<3>(),
            key_file::<4>(),
            key_file::<5>(),
            key_file::<6>(),
            key_file::<7>(),
            key_file::<8>(),
            key_file::<9>(),
            key_file::<10>(),
            key_file::<11>(),
            key_file::<12>(),
            key_file::<13>(),
            key_file::<14>(),
            FileSpec {
                name: c"event_info",
                show: Some(show_event_info),
                store: None,
            },
            FileSpec {
                name: c"config",
                show: Some(show_config),
                store: None,
            },
            FileSpec {
                name: c"buffer_sizes",
                show: Some(show_sizes),
                store: None,
            },
            FileSpec {
                name: c"snapshot",
                show: Some(show_snapshot),
                store: Some(store_snapshot),
            },
        ];
        Ok(Self {
            _dir: DebugfsDir::new(c"oprofile", p, &files)?,
        })
    }
}

#[cfg(oprofile_rs_kunit)]
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
