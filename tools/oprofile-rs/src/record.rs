//! `record`: copy `/dev/oprofile/buffer` to a file and capture the side-car.

use std::collections::{HashMap, HashSet};
use std::fs::{File, OpenOptions};
use std::io::{ErrorKind as IoKind, Read, Write};
use std::ops::Range;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use oprofile_stream::{decode_record, ErrorKind, Header};

use crate::control::{words, ModuleControl, ModuleSettings};
use crate::sidecar::{sidecar_dir, Sidecar, SIDECAR_VERSION};

#[derive(Debug, Clone)]
pub struct RecordOptions {
    pub output: PathBuf,
    pub device: PathBuf,
    pub debugfs: PathBuf,
    /// Where `kallsyms`, `modules` and `<pid>/maps` are read (`/proc`).
    pub proc_root: PathBuf,
    /// Where the kernel's and its modules' build-ids are read (`/sys`:
    /// `kernel/notes`, `module/NAME/notes/.note.gnu.build-id`).
    pub sys_root: PathBuf,
    /// This tool, run as the trampoline that holds the command before its
    /// exec (its own path, so that the held process's name is
    /// `oprofile-rs`; tests of the library give the tool's path).
    pub self_exe: PathBuf,
    pub duration: Option<Duration>,
    /// Command to start (and stop recording when it exits).
    pub command: Vec<String>,
    /// Initial read buffer size (grown on EINVAL).
    pub buffer_size: usize,
    /// Show a progress line on stderr.
    pub progress: bool,
    /// How often the maps of seen processes are re-read (polling only).
    pub maps_interval: Duration,
    /// Where process maps come from.
    pub maps: MapsSource,
    /// `-p`: processes the recording is about (it stops when they have all
    /// exited); analyses keep them and their descendants by default.
    pub pids: Vec<u32>,
    /// `-a`: the recording is of the whole machine; the command (if any)
    /// only says when it ends, and analyses are not limited to it.
    pub system_wide: bool,
    /// `--snapshot`: flight recorder. The module records in overwrite mode
    /// for the recording (`mode=overwrite` is added to `settings`); a
    /// snapshot is taken at each SIGUSR2 and when recording stops, each one
    /// a section of the output stream.
    pub snapshot: bool,
    /// `--keep-backlog`: the records the module buffered before the
    /// recording started go into the output too (by default they are read
    /// and left out, see [`Scanner::skip_backlog`]; the flight recorder
    /// keeps them always: its snapshots are of the CPU buffers).
    pub keep_backlog: bool,
    /// `-e`, `-c`, `-F`, `-g`, buffer sizes: set before recording, put back
    /// after ([`crate::control`]).
    pub settings: ModuleSettings,
    /// Load unwind tables for the processes recorded, for the module's
    /// user stack walk ([`crate::unwind_load`]): the default; off with
    /// `-g`, `--call-graph fp`, the depths, `dwarf` and `hybrid`.
    pub unwind_tables: bool,
}

use crate::control::{IOC_FLUSH, IOC_SNAPSHOT};

/// SIGUSR2s received (`record --snapshot`): each asks for a snapshot.
static SNAPSHOT_REQUESTS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

extern "C" fn on_sigusr2(_: libc::c_int) {
    // Async-signal-safe: one atomic add.
    SNAPSHOT_REQUESTS.fetch_add(1, Ordering::SeqCst);
}

/// Makes SIGUSR2 ask for a snapshot (instead of ending the process).
fn catch_sigusr2() -> Result<()> {
    // SAFETY: a zeroed sigaction with a handler that only does an atomic
    // add; SA_RESTART so that other system calls are not interrupted.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_sigusr2 as extern "C" fn(libc::c_int) as usize;
        sa.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut sa.sa_mask);
        if libc::sigaction(libc::SIGUSR2, &sa, std::ptr::null_mut()) != 0 {
            return Err(std::io::Error::last_os_error()).context("cannot catch SIGUSR2");
        }
    }
    Ok(())
}

/// Asks the module for a snapshot through `dev`.
fn take_snapshot(dev: &File) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: an argument-less ioctl on an open file.
    let r = unsafe { libc::ioctl(dev.as_raw_fd(), IOC_SNAPSHOT as _) };
    if r < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Where `record` gets the process maps from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum MapsSource {
    /// The kernel's records where perf_event_open allows, else polling.
    #[default]
    Auto,
    /// The kernel's MMAP2/COMM/FORK/EXIT records (perf dummy events), with a
    /// /proc snapshot of the processes running at the start; fail if the
    /// kernel does not allow them.
    Events,
    /// Re-read /proc/PID/maps of every process seen every 0.5 s (misses
    /// short-lived processes, libraries loaded and unloaded between reads,
    /// and exec: the last copy wins).
    Poll,
}

impl RecordOptions {
    pub fn new(output: PathBuf) -> RecordOptions {
        RecordOptions {
            output,
            device: PathBuf::from("/dev/oprofile/buffer"),
            debugfs: PathBuf::from("/sys/kernel/debug/oprofile"),
            proc_root: PathBuf::from("/proc"),
            sys_root: PathBuf::from("/sys"),
            self_exe: std::env::current_exe().unwrap_or_else(|_| PathBuf::from("/proc/self/exe")),
            duration: None,
            command: Vec::new(),
            buffer_size: 1 << 20,
            progress: false,
            maps_interval: Duration::from_millis(500),
            maps: MapsSource::Auto,
            pids: Vec::new(),
            system_wide: false,
            snapshot: false,
            keep_backlog: false,
            settings: ModuleSettings::default(),
            unwind_tables: false,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    Signal,
    Duration,
    CommandExited,
    /// Every process of `-p` exited.
    TargetsExited,
}

#[derive(Debug, Clone)]
pub struct RecordSummary {
    pub bytes: u64,
    pub samples: u64,
    pub lost: u64,
    /// Samples after which perf throttled their counter.
    pub throttled: u64,
    /// Samples carrying a copy of the task's user stack (`--call-graph
    /// dwarf`; the analyses unwind them).
    pub user_stacks: u64,
    pub processes: usize,
    pub maps_captured: usize,
    /// tgid → why its maps could not be captured (only processes with
    /// user-mode samples, the ones that need maps).
    pub maps_missing: Vec<(u32, String)>,
    pub elapsed: Duration,
    pub stop: StopReason,
    pub command_status: Option<std::process::ExitStatus>,
    pub warnings: Vec<String>,
    /// Snapshots taken (`--snapshot`).
    pub snapshots: u32,
    /// The module's settings `record` changed and put back (`-e`, `-c`,
    /// ...), in words; `None` if it changed none or could not put them back
    /// (then `warnings` say what is left).
    pub settings_restored: Option<String>,
}

/// The words of `restored` (`KEY=VALUE ...`) but `pid=`; `None` if none.
fn user_settings(restored: &str) -> Option<String> {
    let user: Vec<&str> = restored
        .split(' ')
        .filter(|w| !w.is_empty() && !w.starts_with("pid="))
        .collect();
    (!user.is_empty()).then(|| user.join(" "))
}

impl RecordSummary {
    /// The settings put back that the user asked for, in words: `pid`, the
    /// command's own binding by `record`, is left out. `None` if none.
    pub fn user_settings_restored(&self) -> Option<String> {
        user_settings(self.settings_restored.as_deref()?)
    }

    pub fn line(&self, output: &Path) -> String {
        let mut s = format!(
            "recorded {} bytes in {:.1}s to {}: {} samples, {} lost, {} processes ({} maps captured",
            self.bytes,
            self.elapsed.as_secs_f64(),
            output.display(),
            self.samples,
            self.lost,
            self.processes,
            self.maps_captured
        );
        if !self.maps_missing.is_empty() {
            s += &format!(", {} missing", self.maps_missing.len());
        }
        s += ")";
        if self.throttled > 0 {
            s += &format!(
                ", perf throttled the sampling {} times (see report)",
                self.throttled
            );
        }
        if self.snapshots > 0 {
            s += &format!(", {} snapshots", self.snapshots);
        }
        if self.user_stacks > 0 {
            s += &format!(
                ", {} with a user stack copy (report says how many unwound with .eh_frame)",
                self.user_stacks
            );
        }
        s
    }
}

/// Incremental stream scanner: counts records as bytes arrive. It runs for
/// every record while recording, so it reads only the fields it needs
/// (no callchains, no names), decodes in place (bytes are copied only when
/// a record straddles two pieces), and looks a process up only when it
/// differs from the previous sample's.
#[derive(Default)]
pub struct Scanner {
    pending: Vec<u8>,
    header: Option<Header>,
    offset: u64,
    pub samples: u64,
    pub lost: u64,
    /// SAMPLEs with the THROTTLED flag.
    pub throttled: u64,
    /// SAMPLEs with a user stack copy.
    pub user_stacks: u64,
    pub seen: HashSet<u32>,
    /// tgids with at least one user-mode sample: the only ones that need maps.
    pub user: HashSet<u32>,
    /// tgids with a user-mode sample taken after the stream was opened (the
    /// header's `start_time`); the others' samples were all buffered by the
    /// module before the recording started.
    pub user_since_start: HashSet<u32>,
    /// The previous sample's tgid, and whether it is already in `user` and
    /// `user_since_start` (the sets are only touched when these change).
    last: Option<(u32, bool, bool)>,
    new_tgids: Vec<u32>,
    /// tgids sampled since [`Scanner::take_sampled`].
    sampled: HashSet<u32>,
    /// First decoding problem; scanning stops there (the bytes are still saved).
    pub error: Option<String>,
    /// Whether [`Scanner::feed_into`] leaves out the backlog: the SAMPLE and
    /// LOST records older than the stream's opening (its header's
    /// `start_time`), which the module buffered before the recording
    /// started. Every other record (COMM, CONFIG, TRACING, ...) is kept:
    /// later samples need them.
    pub skip_backlog: bool,
    /// Backlog left out: SAMPLE records, and the samples LOST records
    /// counted.
    pub skipped_samples: u64,
    pub skipped_lost: u64,
    /// Set while `record` reads the backlog, before the command starts:
    /// once older records showed there is a backlog (the module's buffers
    /// were full of them when it lost samples), every LOST record read then
    /// is the backlog's, whatever its time. Modules before 2026-11-30
    /// stamped a LOST record with the time their sync noticed the loss, so
    /// the losses of a module nobody read for a while (its buffers full)
    /// came in records stamped after the stream's opening, when the backlog
    /// is drained; counted as the recording's, they made an idle minute
    /// look like a recording that lost four samples in five. Today's stamp
    /// the latest sample lost, older than the opening for the backlog's.
    pub reading_backlog: bool,
}

/// Adds `r` to `kept`, merged with the range before it when adjacent.
#[inline]
fn keep_range(kept: &mut Option<Vec<Range<usize>>>, r: Range<usize>) {
    if let Some(k) = kept.as_mut() {
        match k.last_mut() {
            Some(last) if last.end == r.start => last.end = r.end,
            _ => k.push(r),
        }
    }
}

impl Scanner {
    /// A scanner that leaves out the backlog ([`Scanner::skip_backlog`]).
    pub fn skipping_backlog() -> Scanner {
        Scanner {
            skip_backlog: true,
            ..Default::default()
        }
    }

    /// Writes `data` (the next bytes of the stream) to `out` and counts its
    /// records; with [`Scanner::skip_backlog`], only what is kept is written,
    /// and only whole records (a record cut at the end of `data` is written
    /// with the bytes that complete it). Returns the bytes written.
    pub fn feed_into(&mut self, data: &[u8], out: &mut dyn Write) -> Result<u64> {
        if !self.skip_backlog || self.error.is_some() {
            out.write_all(data).context("write failed")?;
            self.feed(data)?;
            return Ok(data.len() as u64);
        }
        self.feed_with(data, Some(out))
    }

    /// [`Scanner::feed_into`] of what `record` reads before its command
    /// starts: while the settings are applied (the event buffer had no room
    /// for their CONFIG record) and the backlog rounds. Every LOST record
    /// read then is the backlog's once the records showed there is one
    /// ([`Scanner::reading_backlog`]), whatever its time: the settings'
    /// `tracing_on=0` reports the losses of the CPU buffers the backlog
    /// filled, stamped after the stream's opening (a CI run counted 1,266
    /// such losses as the recording's, beside its 1,784 samples).
    pub fn feed_backlog_into(&mut self, data: &[u8], out: &mut dyn Write) -> Result<u64> {
        let was = std::mem::replace(&mut self.reading_backlog, true);
        let r = self.feed_into(data, out);
        self.reading_backlog = was;
        r
    }

    pub fn feed(&mut self, data: &[u8]) -> Result<()> {
        self.feed_with(data, None).map(|_| ())
    }

    /// Scans `data` after what is pending (in place when nothing is: bytes
    /// are copied only when a record straddles two pieces); with `out`,
    /// writes the records kept there. Returns the bytes written.
    fn feed_with(&mut self, data: &[u8], out: Option<&mut dyn Write>) -> Result<u64> {
        if self.error.is_some() {
            return Ok(0);
        }
        if self.pending.is_empty() {
            let (used, written) = self.scan(data, out)?;
            if self.error.is_none() {
                self.pending.extend_from_slice(&data[used..]);
            }
            return Ok(written);
        }
        let mut buf = std::mem::take(&mut self.pending);
        buf.extend_from_slice(data);
        let (used, written) = self.scan(&buf, out)?;
        if self.error.is_none() {
            buf.drain(..used);
            self.pending = buf;
        }
        Ok(written)
    }

    /// Counts the whole records at the start of `buf`; the bytes used, and
    /// the bytes written to `out`. With `out`, the backlog's records are
    /// left out of the counts and of what is written (after a decoding
    /// problem, everything from there is written: the bytes are still saved).
    fn scan(&mut self, buf: &[u8], out: Option<&mut dyn Write>) -> Result<(usize, u64)> {
        let mut kept: Option<Vec<Range<usize>>> = out.is_some().then(Vec::new);
        let used = self.scan_records(buf, &mut kept)?;
        let mut written = 0u64;
        if let (Some(out), Some(kept)) = (out, kept) {
            for r in kept {
                out.write_all(&buf[r.clone()]).context("write failed")?;
                written += r.len() as u64;
            }
        }
        Ok((used, written))
    }

    /// [`Scanner::scan`]'s walk: with `kept`, the ranges of `buf` to write
    /// (adjacent ones merged).
    fn scan_records(&mut self, buf: &[u8], kept: &mut Option<Vec<Range<usize>>>) -> Result<usize> {
        let mut pos = 0usize;
        if self.header.is_none() {
            match oprofile_stream::parse_header(buf) {
                Ok(h) => {
                    pos = h.header_size as usize;
                    keep_range(kept, 0..pos);
                    self.header = Some(h);
                }
                Err(e) if matches!(e.kind, ErrorKind::TruncatedHeader { .. }) => return Ok(0),
                Err(e) => bail!("the device does not produce an oprofile-rs stream: {e}"),
            }
        }
        let (endian, start) = self
            .header
            .as_ref()
            .map(|h| (h.endian, h.start_time))
            .unwrap_or((oprofile_stream::Endian::native(), 0));
        // The walk for the stream's byte order: the machine's own, what
        // the module writes, gets its reads compiled for it (a run-time
        // order cost a test and a conditional move per field read, a
        // third of the walk's instructions per SAMPLE).
        if endian == oprofile_stream::Endian::native() {
            self.scan_from::<true>(buf, pos, kept, endian, start)
        } else {
            self.scan_from::<false>(buf, pos, kept, endian, start)
        }
    }

    /// [`Scanner::scan_records`]'s walk of the records from `pos`, in byte
    /// order `endian` (the machine's own where `NATIVE`).
    #[inline(always)]
    fn scan_from<const NATIVE: bool>(
        &mut self,
        buf: &[u8],
        mut pos: usize,
        kept: &mut Option<Vec<Range<usize>>>,
        endian: oprofile_stream::Endian,
        start: u64,
    ) -> Result<usize> {
        use oprofile_stream::oprofile_format::{self as format, Fields};
        let endian = if NATIVE {
            oprofile_stream::Endian::native()
        } else {
            endian
        };
        let keep = keep_range;
        while pos < buf.len() {
            let rest = &buf[pos..];
            // The common record, a SAMPLE without a user stack in the
            // machine's order, read without `frame`'s error values (with
            // the inline `sample`, the scan's 161 instructions a record
            // became 87: `examples/scan_cost` under callgrind).
            if NATIVE {
                if let Some((size, s)) = format::native_sample_scan(rest) {
                    self.scanned(kept, s, pos..pos + size, start);
                    pos += size;
                    continue;
                }
            }
            // Checked as `parse` checks it; of a SAMPLE (most records: a
            // full decode cost the recorder about 300 instructions a record)
            // only the few fields the scan needs are read, the other types
            // are decoded. A record that cannot be read stops the scan
            // (everything from there is kept).
            macro_rules! undecodable {
                () => {{
                    // The stream crate's decoder words the error.
                    let why = match decode_record(rest, endian, self.offset + pos as u64) {
                        Err(e) => e.to_string(),
                        Ok(_) => "undecodable record".to_string(),
                    };
                    self.error = Some(why);
                    self.pending.clear();
                    keep(kept, pos..buf.len());
                    return Ok(buf.len());
                }};
            }
            let framed = match format::frame(endian, rest) {
                Ok(f) => f,
                Err(format::RecordError::Truncated) => break,
                Err(_) => undecodable!(),
            };
            let size = framed.bytes.len();
            if let Some(s) = framed.sample_scan(endian) {
                self.scanned(kept, s, pos..pos + size, start);
                pos += size;
                continue;
            }
            let fields = match framed.fields(endian) {
                Ok(f) => f,
                Err(_) => undecodable!(),
            };
            let backlog = kept.is_some()
                && match &fields {
                    // A switch-out goes with its SAMPLE (same time): a
                    // SWITCH kept alone is a block without stacks.
                    Some(Fields::Switch(sw)) => sw.time < start,
                    Some(Fields::Lost(l)) => {
                        l.time < start
                            || (self.reading_backlog
                                && self.skipped_samples + self.skipped_lost > 0)
                    }
                    _ => false,
                };
            match fields {
                Some(Fields::Lost(l)) if backlog => self.skipped_lost += l.count,
                Some(Fields::Lost(l)) => self.lost += l.count,
                _ => {}
            }
            if !backlog {
                keep(kept, pos..pos + size);
            }
            pos += size;
        }
        self.offset += pos as u64;
        Ok(pos)
    }

    /// Counts the SAMPLE at `at` of the buffer scanned (`s` its fields),
    /// or leaves it out as the backlog's (with `kept`: a time before
    /// `start`).
    #[inline(always)]
    fn scanned(
        &mut self,
        kept: &mut Option<Vec<Range<usize>>>,
        s: oprofile_stream::oprofile_format::SampleScan,
        at: Range<usize>,
        start: u64,
    ) {
        if kept.is_some() && s.time < start {
            self.skipped_samples += 1;
            return;
        }
        keep_range(kept, at);
        self.samples += 1;
        self.throttled += u64::from(s.throttled);
        self.user_stacks += u64::from(s.user_stack != 0);
        // A kernel-mode sample with a user part needs the process's maps
        // as a user-mode one does.
        let no_user_part = s.kernel && s.user_depth == 0 && s.user_stack == 0;
        self.sample(s.tgid, no_user_part, s.time >= start);
    }

    #[inline(always)]
    fn sample(&mut self, tgid: u32, kernel: bool, since_start: bool) {
        // The common case, inline: the previous sample's process, nothing
        // new to note of it.
        if let Some((t, user, recent)) = self.last {
            if t == tgid && (kernel || (user && (recent || !since_start))) {
                return;
            }
        }
        self.sample_noted(tgid, kernel, since_start);
    }

    /// [`Scanner::sample`] where something is to be noted.
    #[inline(never)]
    fn sample_noted(&mut self, tgid: u32, kernel: bool, since_start: bool) {
        let (mut user, mut recent) = match self.last {
            Some((t, u, r)) if t == tgid => (u, r),
            _ => {
                // Every process is tracked from its first sample, even a
                // kernel-mode one: its maps are read while it still lives,
                // should user-mode samples of it follow.
                if tgid != 0 && self.seen.insert(tgid) {
                    self.new_tgids.push(tgid);
                }
                self.sampled.insert(tgid);
                (false, false)
            }
        };
        if !kernel {
            if !user {
                self.user.insert(tgid);
                user = true;
            }
            if since_start && !recent {
                self.user_since_start.insert(tgid);
                recent = true;
            }
        }
        self.last = Some((tgid, user, recent));
    }

    /// Process ids seen for the first time since the last call.
    pub fn take_new_tgids(&mut self) -> Vec<u32> {
        std::mem::take(&mut self.new_tgids)
    }

    /// Process ids sampled since the last call.
    pub fn take_sampled(&mut self) -> HashSet<u32> {
        // The next sample's process is noted again, whatever the last was.
        self.last = None;
        std::mem::take(&mut self.sampled)
    }

    pub fn processes(&self) -> usize {
        self.seen.len()
    }

    /// True if `tgid` has at least one user-mode sample or user callchain so
    /// far.  Only those processes need maps: kernel-mode samples and kernel
    /// callchains (kernel threads, system calls) are symbolised through
    /// kallsyms.
    pub fn needs_maps(&self, tgid: u32) -> bool {
        self.user.contains(&tgid)
    }
}

/// Keeps the latest non-empty `/proc/<tgid>/maps` of every tracked process.
pub struct MapsTracker {
    proc_root: PathBuf,
    pub maps: HashMap<u32, String>,
    /// Copies of JIT perf maps (`/tmp/perf-<pid>.map`, read through the
    /// process's root, with its pid in its own pid namespace).
    pub perf_maps: HashMap<u32, String>,
    /// Mount namespaces of processes in another one than the recorder's.
    pub namespaces: HashMap<u32, String>,
    alive: HashSet<u32>,
    errors: HashMap<u32, String>,
    last_refresh: Instant,
    interval: Duration,
    /// False when the kernel's records give the maps: only the extras (JIT
    /// perf maps, mount namespaces) are read.
    pub keep_maps: bool,
    /// Parent of each process read (for `-p` descendants while polling).
    pub parents: HashMap<u32, u32>,
    /// Processes sampled since the last refresh: a refresh re-reads those
    /// only (one that ran nothing since cannot have new maps that matter
    /// before it runs again, and then it is sampled again).
    sampled: HashSet<u32>,
    /// The pid each process knows itself by (`NSpid`), read once.
    nspids: HashMap<u32, String>,
    /// This recorder's mount namespace, read once.
    own_mnt_ns: Option<Option<PathBuf>>,
}

impl MapsTracker {
    pub fn new(proc_root: PathBuf, interval: Duration) -> MapsTracker {
        MapsTracker {
            proc_root,
            maps: HashMap::new(),
            perf_maps: HashMap::new(),
            namespaces: HashMap::new(),
            alive: HashSet::new(),
            errors: HashMap::new(),
            last_refresh: Instant::now(),
            interval,
            keep_maps: true,
            parents: HashMap::new(),
            sampled: HashSet::new(),
            nspids: HashMap::new(),
            own_mnt_ns: None,
        }
    }

    fn read(&mut self, tgid: u32) {
        let dir = self.proc_root.join(tgid.to_string());
        // The parent, once (for `-p` descendants: the one it was born to).
        // A kernel thread has no maps, no JIT map and no mount namespace
        // of its own: it is never read again (a machine has hundreds).
        if !self.parents.contains_key(&tgid) {
            if let Ok(st) = std::fs::read_to_string(dir.join("stat")) {
                if is_kernel_thread(&st) {
                    self.alive.remove(&tgid);
                    return;
                }
                if let Some(pp) = parent_from_stat(&st) {
                    self.parents.insert(tgid, pp);
                }
            }
        }
        if !self.keep_maps {
            if dir.is_dir() {
                self.read_extras(tgid);
            } else {
                self.alive.remove(&tgid);
            }
            return;
        }
        match std::fs::read_to_string(self.proc_root.join(tgid.to_string()).join("maps")) {
            // A zombie's (or a kernel thread's) maps are empty: that is no
            // snapshot, and it never replaces a real one.
            Ok(text) if text.is_empty() => {
                if !self.maps.contains_key(&tgid) {
                    self.errors.insert(
                        tgid,
                        "its maps were empty when read (the process had exited: a zombie)".into(),
                    );
                }
            }
            Ok(text) => {
                self.maps.insert(tgid, text);
                self.errors.remove(&tgid);
                self.read_extras(tgid);
            }
            Err(e) => {
                self.alive.remove(&tgid);
                if !self.maps.contains_key(&tgid) {
                    let why = if e.kind() == IoKind::NotFound {
                        "process exited before its maps could be read".into()
                    } else {
                        e.to_string()
                    };
                    self.errors.insert(tgid, why);
                }
            }
        }
    }

    /// The process's mount namespace when it differs from ours, and its JIT
    /// perf map, if it writes one.
    fn read_extras(&mut self, tgid: u32) {
        let dir = self.proc_root.join(tgid.to_string());
        let ns = |d: &Path| std::fs::read_link(d.join("ns/mnt")).ok();
        let ours = self
            .own_mnt_ns
            .get_or_insert_with(|| ns(&self.proc_root.join("self")))
            .clone();
        if let (Some(theirs), Some(ours)) = (ns(&dir), ours) {
            if theirs != ours {
                self.namespaces
                    .insert(tgid, theirs.to_string_lossy().into_owned());
            }
        }
        // The pid the process knows itself by (NSpid's last field) names the file.
        let nspid = match self.nspids.get(&tgid) {
            Some(n) => n.clone(),
            None => {
                let n = std::fs::read_to_string(dir.join("status"))
                    .ok()
                    .and_then(|st| {
                        st.lines()
                            .find_map(|l| l.strip_prefix("NSpid:"))
                            .and_then(|v| v.split_whitespace().last().map(str::to_string))
                    })
                    .unwrap_or_else(|| tgid.to_string());
                self.nspids.insert(tgid, n.clone());
                n
            }
        };
        if let Ok(b) = std::fs::read(dir.join(format!("root/tmp/perf-{nspid}.map"))) {
            if !b.is_empty() {
                self.perf_maps
                    .insert(tgid, String::from_utf8_lossy(&b).into_owned());
            }
        }
    }

    /// Starts tracking `tgid` (read at once).
    pub fn track(&mut self, tgid: u32) {
        if self.alive.insert(tgid) || !self.maps.contains_key(&tgid) {
            self.read(tgid);
        }
    }

    /// Processes the stream sampled (see [`Scanner::take_sampled`]).
    pub fn note_sampled(&mut self, tgids: impl IntoIterator<Item = u32>) {
        self.sampled.extend(tgids);
    }

    /// Re-reads the maps of live processes sampled since the last refresh
    /// if the interval has passed; with `force`, of every live process.
    pub fn refresh(&mut self, force: bool) {
        if !force && self.last_refresh.elapsed() < self.interval {
            return;
        }
        self.last_refresh = Instant::now();
        let sampled = std::mem::take(&mut self.sampled);
        let live: Vec<u32> = self
            .alive
            .iter()
            .copied()
            .filter(|t| force || sampled.contains(t))
            .collect();
        for t in live {
            self.read(t);
        }
    }

    /// Processes whose maps could not be read, among those `needed` says need
    /// them, with the reason.
    pub fn missing(&self, needed: impl Fn(u32) -> bool) -> Vec<(u32, String)> {
        let mut v: Vec<_> = self
            .errors
            .iter()
            .filter(|(t, _)| needed(**t))
            .map(|(t, e)| (*t, e.clone()))
            .collect();
        v.sort();
        v
    }
}

/// The parent pid in a `/proc/PID/stat` line (the field after `(comm) state`).
pub fn parent_from_stat(stat: &str) -> Option<u32> {
    stat_fields(stat)?.nth(1)?.parse().ok()
}

/// The fields of a `/proc/PID/stat` line after `(comm)` (which may hold
/// spaces and parentheses): state, ppid, pgrp, session, tty_nr, tpgid,
/// flags, ...
fn stat_fields(stat: &str) -> Option<std::str::SplitWhitespace<'_>> {
    Some(stat[stat.rfind(')')? + 1..].split_whitespace())
}

/// Whether a `/proc/PID/stat` line is a kernel thread's (`PF_KTHREAD` in
/// its flags, the seventh field after `(comm)`).
pub fn is_kernel_thread(stat: &str) -> bool {
    const PF_KTHREAD: u64 = 0x0020_0000;
    stat_fields(stat)
        .and_then(|mut f| f.nth(6))
        .and_then(|f| f.parse::<u64>().ok())
        .is_some_and(|f| f & PF_KTHREAD != 0)
}

/// Whether process `pid` runs (exists and is no zombie), through `proc_root`.
fn running(proc_root: &Path, pid: u32) -> bool {
    match std::fs::read_to_string(proc_root.join(pid.to_string()).join("stat")) {
        Ok(st) => stat_fields(&st)
            .and_then(|mut f| f.next())
            .is_some_and(|state| state != "Z" && state != "X"),
        Err(_) => false,
    }
}

/// `/proc/PID/maps` of every process running now (kernel threads' are empty).
fn snapshot_all(proc_root: &Path) -> HashMap<u32, String> {
    let mut out = HashMap::new();
    let Ok(rd) = std::fs::read_dir(proc_root) else {
        return out;
    };
    for e in rd.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        if let Ok(b) = std::fs::read(e.path().join("maps")) {
            if !b.is_empty() {
                out.insert(pid, String::from_utf8_lossy(&b).into_owned());
            }
        }
    }
    out
}

/// This process's vDSO image (the same for every 64-bit process of the
/// running kernel), read from memory where `/proc/self/maps` places it.
pub fn own_vdso() -> Option<Vec<u8>> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    let m = crate::maps::parse_maps(&maps)
        .into_iter()
        .find(|m| m.path == "[vdso]")?;
    // SAFETY: getauxval has no preconditions.
    let base = unsafe { libc::getauxval(libc::AT_SYSINFO_EHDR) };
    if base != m.start || m.end <= m.start || m.end - m.start > (64 << 20) {
        return None;
    }
    // SAFETY: the [vdso] mapping of this process, readable for its lifetime.
    let image =
        unsafe { std::slice::from_raw_parts(base as *const u8, (m.end - m.start) as usize) };
    Some(image.to_vec())
}

/// Room for a distribution kernel's `/proc/kallsyms` (Debian's: 10 MB).
const KALLSYMS_HINT: usize = 16 << 20;

/// A `/proc` file's text. Its size is unknown (0) until read: the buffer
/// starts at `hint` bytes of address space (pages are touched only as
/// filled) instead of doubling from nothing, and valid UTF-8 is taken
/// without a copy. Reading Debian's 10 MB `/proc/kallsyms` this way took
/// 1.1 s instead of 1.7 s in the test VM.
fn read_proc_text(path: &Path, hint: usize) -> Result<String, String> {
    let mut b = Vec::with_capacity(hint);
    File::open(path)
        .and_then(|mut f| f.read_to_end(&mut b))
        .map_err(|e| e.to_string())?;
    Ok(String::from_utf8(b).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()))
}

/// The loaded modules of `/proc/modules` text: (name, load address).
fn module_bases(text: &str) -> std::collections::BTreeSet<(&str, &str)> {
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            Some((*f.first()?, *f.get(5)?))
        })
        .collect()
}

fn kallsyms_usable(text: &str) -> bool {
    text.lines().any(|l| {
        l.split_whitespace()
            .next()
            .is_some_and(|a| a.chars().any(|c| c != '0'))
    })
}

/// Hands what the CPUs hold to the reader: the device's
/// `OPROFILE_RS_IOC_FLUSH` (it works under `lockdown=integrity`, where
/// debugfs cannot be written), else `1` to `<debugfs>/flush`.
fn flush(dev: &File, debugfs: &Path) -> Result<(), String> {
    // SAFETY: an argument-less ioctl on an open file.
    if unsafe { libc::ioctl(dev.as_raw_fd(), IOC_FLUSH as _) } == 0 {
        return Ok(());
    }
    let p = debugfs.join("flush");
    OpenOptions::new()
        .write(true)
        .open(&p)
        .and_then(|mut f| f.write_all(b"1\n"))
        .map_err(|e| format!("cannot write 1 to {}: {e}", p.display()))
}

/// What the recording loop must notice besides the device's data, which
/// wakes it (see [`loop_nap`]).
#[derive(Debug, Clone, Copy, Default)]
struct Wakes {
    /// Maps are polled from `/proc` (no kernel records): new processes
    /// are seen only by looking.
    polled_maps: bool,
    /// The exits of the command and the `-p` targets wake it (their pidfds,
    /// and the signal handlers' eventfd); without, they are looked for.
    exits: bool,
    /// The progress line is drawn.
    progress: bool,
}

/// How long the recording loop sleeps at most when nothing wakes it.
///
/// Unwind tables need no nap of their own: the module wakes the loop
/// through the device when its samples find tables missing (debugfs
/// `table_wakes`): a new process's, or a library's its process just mapped
/// (a `dlopen`), whose map record the loop then reads
/// ([`crate::mapevents::Collector::new_exec_maps`]). The kernel's map
/// records alone wake nobody (their rings wake the loop when half full):
/// with 1 s naps, 25 % of a 3-second program's samples were cut after its
/// dlopen; napping 100 ms for 2 s after each process's first tables
/// instead cost the recorder 20 wake-ups per process, which in the test VM
/// weighed more than the tables' walk (bench-overhead).
fn loop_nap(w: Wakes) -> Duration {
    if w.polled_maps || !w.exits {
        Duration::from_millis(100)
    } else if w.progress {
        Duration::from_millis(200)
    } else {
        Duration::from_secs(1)
    }
}

/// Waits up to `ms` for `dev` or one of `others` to be readable (or to
/// hang up); whether `dev` is readable or hung up (a pipe's writer gone).
fn wait_any(dev: &File, others: &[i32], ms: i32) -> bool {
    use std::os::fd::AsRawFd;
    let mut p: Vec<libc::pollfd> = std::iter::once(dev.as_raw_fd())
        .chain(others.iter().copied())
        .map(|fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    // SAFETY: valid pollfds for the duration of the call.
    let r = unsafe { libc::poll(p.as_mut_ptr(), p.len() as libc::nfds_t, ms.max(0)) };
    r > 0 && p[0].revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0
}

/// A pidfd of process `pid` (readable when it exits); `None` where the
/// kernel has none (before 5.3) or the process is gone.
/// Waits until process `pid` runs a program other than this tool (the
/// trampoline's exec), at most `max`; whether it does.
fn wait_exec(proc_root: &Path, pid: u32, max: Duration) -> bool {
    let own = std::fs::read_link("/proc/self/exe").ok();
    let start = Instant::now();
    loop {
        match std::fs::read_link(proc_root.join(format!("{pid}/exe"))) {
            Ok(exe) if Some(&exe) != own.as_ref() => return true,
            Ok(_) if start.elapsed() < max => std::thread::sleep(Duration::from_millis(2)),
            _ => return false,
        }
    }
}

fn pidfd_open(pid: u32) -> Option<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new fd.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    // SAFETY: a new fd of ours on success.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// The eventfd that [`wake`] signals (-1: none), so that a signal handler
/// ends the loop's sleep at once.
static WAKE_FD: std::sync::Mutex<i32> = std::sync::Mutex::new(-1);

/// Ends the sleep of a running [`record`] (for signal handlers that set its
/// stop flag).
pub fn wake() {
    if let Ok(fd) = WAKE_FD.lock() {
        if *fd >= 0 {
            let one = 1u64;
            // SAFETY: an 8-byte write to our eventfd.
            unsafe { libc::write(*fd, (&one as *const u64).cast(), 8) };
        }
    }
}

/// Owns the eventfd of [`wake`] while recording.
struct Waker(Option<OwnedFd>);

impl Waker {
    fn new() -> Waker {
        // SAFETY: no preconditions; a new fd or -1.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if fd < 0 {
            return Waker(None);
        }
        // SAFETY: the new fd is ours.
        let owned = unsafe { OwnedFd::from_raw_fd(fd) };
        match WAKE_FD.lock() {
            Ok(mut g) if *g < 0 => {
                *g = fd;
                Waker(Some(owned))
            }
            // Another record() of this process owns it: look instead.
            _ => Waker(None),
        }
    }

    fn fd(&self) -> Option<i32> {
        self.0.as_ref().map(|f| f.as_raw_fd())
    }
}

impl Drop for Waker {
    fn drop(&mut self) {
        if self.0.is_some() {
            if let Ok(mut g) = WAKE_FD.lock() {
                *g = -1;
            }
        }
    }
}

enum ReadOutcome {
    Data(usize),
    Empty,
}

fn read_some(dev: &mut File, buf: &mut Vec<u8>) -> Result<ReadOutcome> {
    loop {
        match dev.read(buf) {
            Ok(0) => return Ok(ReadOutcome::Empty),
            Ok(n) => return Ok(ReadOutcome::Data(n)),
            Err(e) if e.kind() == IoKind::WouldBlock => return Ok(ReadOutcome::Empty),
            Err(e) if e.kind() == IoKind::Interrupted => continue,
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) && buf.len() < (64 << 20) => {
                // The next record does not fit: grow the buffer.
                let n = buf.len() * 2;
                buf.resize(n, 0);
            }
            Err(e) => return Err(e).context("read from the device failed"),
        }
    }
}

/// The command of `record -- COMMAND`, started held before its exec (as
/// perf starts its workload): the module can be told to sample its process
/// (`pid=`) before the command runs, so that its start is recorded.
///
/// It is this tool itself, run as a trampoline (`oprofile-rs __held-exec
/// GO STATUS -- COMMAND...`, [`held_exec`]) through `std`'s `posix_spawn`
/// path: the process waits on the pipe GO until [`Held::release`] writes a
/// byte, then execs COMMAND in place (same pid); a pipe closed unreleased
/// ([`Held`] dropped) ends it without running the command. A `pre_exec`
/// hook would be simpler, but `std` then forks and reports the child's
/// errors through an `AF_UNIX` socketpair, which a kernel without
/// networking (`CONFIG_NET=n`, as the test kernels) refuses with `ENOSYS`.
/// The exec's failure comes back through STATUS (closed on exec), as
/// `std` reports it.
struct Held {
    pid: u32,
    child: Option<Child>,
    /// The write end of the pipe the trampoline waits on.
    go: Option<OwnedFd>,
    /// The read end of the pipe the trampoline reports its exec's failure
    /// through (EOF: the exec succeeded).
    status: Option<OwnedFd>,
}

/// Whether `name` names a file to exec, as `execvp` looks: a path with a
/// `/` as it is, else in a `PATH` directory (true without `PATH`: exec
/// decides).
fn program_exists(name: &str) -> bool {
    if name.contains('/') {
        return Path::new(name).exists();
    }
    match std::env::var_os("PATH") {
        Some(path) => {
            !name.is_empty() && std::env::split_paths(&path).any(|d| d.join(name).is_file())
        }
        None => true,
    }
}

/// A pipe whose ends are closed on exec: (read, write).
fn cloexec_pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0i32; 2];
    // SAFETY: pipe2 writes two new fds into the array on success.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: two new fds of ours.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Sets or clears `fd`'s close-on-exec flag.
fn set_cloexec(fd: i32, on: bool) -> std::io::Result<()> {
    // SAFETY: F_SETFD on an fd of ours.
    if unsafe { libc::fcntl(fd, libc::F_SETFD, if on { libc::FD_CLOEXEC } else { 0 }) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// The first word of the trampoline's arguments (see [`Held`]).
pub const HELD_EXEC: &str = "__held-exec";

impl Held {
    /// Starts `command` held, through the trampoline `exe` (this tool);
    /// its pid once its process exists. An error if it could not be
    /// started (a command that cannot be executed fails at
    /// [`Held::release`], as its exec does).
    fn spawn(exe: &Path, command: &[String], trace: bool) -> std::io::Result<Held> {
        let (go_r, go_w) = cloexec_pipe()?;
        let (st_r, st_w) = cloexec_pipe()?;
        // The trampoline's ends, inherited: open across this spawn only (the
        // one spawn of this process; no other thread starts processes).
        set_cloexec(go_r.as_raw_fd(), false)?;
        set_cloexec(st_w.as_raw_fd(), false)?;
        let child = Command::new(exe)
            .arg(HELD_EXEC)
            .arg(go_r.as_raw_fd().to_string())
            .arg(st_w.as_raw_fd().to_string())
            .arg(if trace { "trace" } else { "run" })
            .arg("--")
            .args(command)
            .spawn();
        // Ours are closed: the trampoline's are the only ones left, so its
        // read of GO ends when `go_w` is closed, and ours of STATUS when it
        // execs.
        drop((go_r, st_w));
        let child = child?;
        Ok(Held {
            pid: child.id(),
            child: Some(child),
            go: Some(go_w),
            status: Some(st_r),
        })
    }

    /// Lets the command exec; its `Child` once it has, and whether it is
    /// stopped at its exec for this process to trace ([`Held::spawn`]
    /// with `trace`: the caller must then [`resume`] it), or why it could
    /// not.
    fn release(mut self) -> std::io::Result<(Child, bool)> {
        if let Some(go) = self.go.take() {
            let mut f = File::from(go);
            // A trampoline gone meanwhile: its status says why below.
            let _ = f.write_all(&[1]);
        }
        // The trampoline's word on its trace (`T` or `N`), then the
        // exec's errno if it failed, then EOF (its exec closed the pipe).
        let mut said = [0u8; 5];
        let mut got = 0;
        if let Some(st) = self.status.take() {
            let mut f = File::from(st);
            while got < said.len() {
                match f.read(&mut said[got..]) {
                    Ok(0) => break,
                    Ok(n) => got += n,
                    Err(e) if e.kind() == IoKind::Interrupted => {}
                    Err(_) => break,
                }
            }
        }
        let mut child = self
            .child
            .take()
            .ok_or_else(|| std::io::Error::other("no command"))?;
        match (got, said) {
            (5, [_, e @ ..]) => {
                let _ = child.wait();
                Err(std::io::Error::from_raw_os_error(i32::from_ne_bytes(e)))
            }
            (1, [b'T', ..]) => match wait_exec_stop(child.id()) {
                true => Ok((child, true)),
                // Not stopped as expected (killed meanwhile): as untraced.
                false => Ok((child, false)),
            },
            (1, [b'N', ..]) => Ok((child, false)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                Err(std::io::Error::other("the command's trampoline failed"))
            }
        }
    }
}

impl Drop for Held {
    /// Not released: the trampoline reads EOF and ends without running the
    /// command; reaped here.
    fn drop(&mut self) {
        self.go = None;
        self.status = None;
        if let Some(mut c) = self.child.take() {
            let _ = c.wait();
        }
    }
}

/// Waits until process `pid`, traced by this one (`PTRACE_TRACEME`), stops
/// at its exec's `SIGTRAP`; whether it did (false: it is gone, or stopped
/// otherwise, and is then let go).
fn wait_exec_stop(pid: u32) -> bool {
    let mut status = 0;
    loop {
        // SAFETY: waitpid with a valid out pointer.
        let r = unsafe { libc::waitpid(pid as i32, &mut status, libc::__WALL) };
        if r == pid as i32 {
            break;
        }
        if r < 0 && std::io::Error::last_os_error().kind() == IoKind::Interrupted {
            continue;
        }
        return false;
    }
    if libc::WIFSTOPPED(status) && libc::WSTOPSIG(status) == libc::SIGTRAP {
        return true;
    }
    if libc::WIFSTOPPED(status) {
        resume(pid);
    }
    false
}

/// Lets a command stopped at its exec ([`Held::release`]) go on, untraced,
/// without the signal that stopped it.
fn resume(pid: u32) {
    // SAFETY: PTRACE_DETACH of our tracee; no pointers are passed.
    unsafe {
        libc::ptrace(libc::PTRACE_DETACH, pid as libc::pid_t, 0usize, 0usize);
    }
}

/// The trampoline of [`Held`]: `ARGS` are `GO STATUS MODE -- COMMAND...`
/// (after [`HELD_EXEC`]). Waits for a byte on the fd GO (on EOF exits 125
/// without running COMMAND). With MODE `trace` it asks to be traced by its
/// parent (`PTRACE_TRACEME`: its exec then stops it before the command's
/// first instruction, until the parent, which loads the command's unwind
/// tables meanwhile, lets it go) and writes `T`, or `N` if that was refused
/// (or MODE is `run`), to the fd STATUS. Then it execs COMMAND; if the exec
/// fails, writes its errno (4 bytes, native order) to STATUS and exits 127.
/// Returns only the exit status.
pub fn held_exec(args: &[std::ffi::OsString]) -> i32 {
    use std::os::unix::process::CommandExt;
    let fd = |i: usize| {
        args.get(i)
            .and_then(|a| a.to_str())
            .and_then(|a| a.parse::<i32>().ok())
            .filter(|&fd| fd > 2)
    };
    let (Some(go), Some(st)) = (fd(0), fd(1)) else {
        return 2;
    };
    let trace = match args.get(2).and_then(|a| a.to_str()) {
        Some("trace") => true,
        Some("run") => false,
        _ => return 2,
    };
    if args.get(3).is_none_or(|a| a != "--") || args.len() < 5 {
        return 2;
    }
    // SAFETY: the fds were made for this process by its parent (`Held`)
    // and are used only here.
    let (go, st) = unsafe { (File::from_raw_fd(go), OwnedFd::from_raw_fd(st)) };
    let mut go = go;
    let mut b = [0u8; 1];
    loop {
        match go.read(&mut b) {
            Ok(1) => break,
            Err(e) if e.kind() == IoKind::Interrupted => {}
            _ => return 125,
        }
    }
    drop(go);
    if set_cloexec(st.as_raw_fd(), true).is_err() {
        return 2;
    }
    // SAFETY: PTRACE_TRACEME takes no pointers.
    let traced = trace && unsafe { libc::ptrace(libc::PTRACE_TRACEME, 0, 0usize, 0usize) } == 0;
    let mut f = File::from(st);
    if f.write_all(if traced { b"T" } else { b"N" }).is_err() {
        return 2;
    }
    let e = Command::new(&args[4]).args(&args[5..]).exec();
    let errno = e.raw_os_error().unwrap_or(libc::EINVAL);
    let _ = f.write_all(&errno.to_ne_bytes());
    127
}

fn stop_child(child: &mut Child) -> Option<std::process::ExitStatus> {
    if let Ok(Some(st)) = child.try_wait() {
        return Some(st);
    }
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(2) {
        if let Ok(Some(st)) = child.try_wait() {
            return Some(st);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    child.wait().ok()
}

/// Records until `stop` is set, the duration elapses or the command exits.
pub fn record(opts: &RecordOptions, stop: Arc<AtomicBool>) -> Result<RecordSummary> {
    let start = Instant::now();
    let mut warnings = Vec::new();
    let sc_dir = sidecar_dir(&opts.output);
    let mut info = vec![
        format!("sidecar-version: {SIDECAR_VERSION}"),
        format!("tool: oprofile-rs {}", env!("CARGO_PKG_VERSION")),
        format!("device: {}", opts.device.display()),
    ];
    if let Ok(r) = std::fs::read_to_string(opts.proc_root.join("sys/kernel/osrelease")) {
        info.push(format!("kernel-release: {}", r.trim()));
    }

    // Settings no module could take are refused before anything is touched.
    opts.settings.check()?;
    // The flight recorder: the module records in overwrite mode for the
    // recording (a switch at run time; put back after it).
    let mut settings = opts.settings.clone();
    if opts.snapshot {
        settings.mode = Some("overwrite".into());
    }
    // Targets of -p must exist (checked first: kallsyms takes a while).
    for &p in &opts.pids {
        if !running(&opts.proc_root, p) {
            bail!("-p {p}: no such process");
        }
    }
    // A command that cannot be found is said before the module is touched
    // (its exec would fail only once it is released, the module set up).
    if let Some(c) = opts.command.first() {
        if !program_exists(c) {
            return Err(std::io::Error::from_raw_os_error(libc::ENOENT))
                .with_context(|| format!("cannot start {c}"));
        }
    }
    if let Some(g) = &opts.settings.cgroup {
        info.push(format!(
            "cgroup: {g} (only its tasks and its descendants' are sampled)"
        ));
    }
    if opts.snapshot {
        catch_sigusr2()?;
        info.push(
            "snapshots: flight recorder (mode=overwrite), one per SIGUSR2 and one at the end"
                .into(),
        );
    }
    let cannot_open = || {
        format!(
            "cannot open {} (is the oprofile-rs module loaded? are you root?)",
            opts.device.display()
        )
    };
    // The device is opened last (below); a missing one fails at once.
    std::fs::metadata(&opts.device).with_context(cannot_open)?;
    // Side-car: kernel symbols first, while everything is loaded.
    let mut sc = Sidecar::default();
    match read_proc_text(&opts.proc_root.join("kallsyms"), KALLSYMS_HINT) {
        Ok(k) => {
            if kallsyms_usable(&k) {
                info.push("kallsyms: captured".into());
            } else {
                let w = "kallsyms: captured but every address is 0 (kernel.kptr_restrict; record as root): kernel symbols unavailable";
                info.push(w.into());
                warnings.push(w.into());
            }
            sc.kallsyms = Some(k);
        }
        Err(e) => {
            info.push(format!("kallsyms: not captured: {e}"));
            warnings.push(format!("cannot capture kallsyms: {e}"));
        }
    }
    match read_proc_text(&opts.proc_root.join("modules"), 64 << 10) {
        Ok(m) => {
            info.push("modules: captured".into());
            sc.modules = Some(m);
        }
        Err(e) => info.push(format!("modules: not captured: {e}")),
    }

    sc.build_ids = crate::sidecar::kernel_build_ids(&opts.sys_root);
    info.push(match sc.build_ids.get("kernel") {
        Some(id) => format!("build-ids: kernel {id}, {} modules", sc.build_ids.len() - 1),
        None => format!(
            "build-ids: kernel's not captured ({} unreadable), {} modules",
            opts.sys_root.join("kernel/notes").display(),
            sc.build_ids.len()
        ),
    });

    match own_vdso() {
        Some(v) => {
            info.push(format!("vdso: captured ({} bytes)", v.len()));
            sc.vdso = Some(v);
        }
        None => info.push("vdso: not captured".into()),
    }

    // Exact maps: the kernel's records, opened before anything is started.
    let real_proc = opts.proc_root == Path::new("/proc");
    let mut collector = match opts.maps {
        MapsSource::Poll => None,
        MapsSource::Events if !real_proc => {
            bail!(
                "--maps events needs --proc-root /proc (the kernel's records are of this machine)"
            )
        }
        MapsSource::Auto if !real_proc => None,
        MapsSource::Events | MapsSource::Auto => match crate::mapevents::Collector::open() {
            Ok(c) => Some(c),
            Err(e) if opts.maps == MapsSource::Events => {
                bail!("exact process maps unavailable: {e}")
            }
            Err(e) => {
                let w = format!(
                    "exact process maps unavailable ({e}): polling /proc/PID/maps instead \
                     (short-lived processes, libraries loaded and unloaded between reads and \
                     exec can be symbolised wrongly or not at all)"
                );
                warnings.push(w);
                None
            }
        },
    };
    let mut tracker = MapsTracker::new(opts.proc_root.clone(), opts.maps_interval);
    match &collector {
        Some(c) => {
            tracker.keep_maps = false;
            // Processes already running: their maps now; later changes
            // and new processes come from the kernel's records.
            sc.maps = snapshot_all(&opts.proc_root);
            let snapshot = sc.maps.len();
            info.push(format!(
                "maps: exact (perf MMAP2/COMM/FORK/EXIT records on {} CPUs, build-ids {}; \
                 /proc snapshot of {} processes running at the start)",
                c.cpus(),
                if c.build_ids { "yes" } else { "no" },
                snapshot
            ));
        }
        None => info.push(format!(
            "maps: polled /proc/PID/maps every {:.1} s",
            opts.maps_interval.as_secs_f64()
        )),
    }
    // The unwind tables for the module's walk of the recorded processes'
    // stacks (`unwind_load.rs`): loaded as processes are seen, dropped when
    // the loader's control file closes at the end. System-wide, those of
    // the binaries the processes map and of the processes running are
    // loaded before the stream is opened (`TableLoader::prefetch`): a
    // program running at the start is unwound from its first sample, and
    // those loads are not in the recording. A FIFO as the device has no
    // reader yet (`ENXIO` without waiting): opened, and the tables loaded,
    // once the reader is, below.
    let system_wide = opts.system_wide || (opts.command.is_empty() && opts.pids.len() != 1);
    let open_tables = |info: &mut Vec<String>, nonblocking: bool| {
        use crate::unwind_load::TableLoader;
        let opened = if nonblocking {
            TableLoader::open_nonblocking(&opts.device)
        } else {
            TableLoader::open(&opts.device)
        };
        match opened {
            Ok(mut l) => {
                if system_wide {
                    l.prefetch(&opts.proc_root);
                }
                Ok(Some(l))
            }
            Err(e) if nonblocking && e.raw_os_error() == Some(libc::ENXIO) => Err(()),
            Err(e) => {
                info.push(format!("unwind-tables: none ({e})"));
                Ok(None)
            }
        }
    };
    let (mut tables, tables_later) = match opts.unwind_tables {
        false => (None, false),
        true => match open_tables(&mut info, true) {
            Ok(t) => (t, false),
            Err(()) => (None, true),
        },
    };
    // The device last: the stream may hold samples from its opening on, and
    // every process alive from then on is covered by the snapshot or the
    // kernel's records (a process that started and exited between the
    // opening and the map tracking's start would have neither).
    // The settings applied below (`-e`, `-c`, ...): declared before the
    // device so that, on an error path, they are put back after the
    // reader's file is closed.
    let mut applied = None;
    let mut pre: Vec<u8> = Vec::new();
    let mut dev = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&opts.device)
        .with_context(cannot_open)?;
    // The command, started held before its exec: the module is told to
    // sample its process (`pid=`) before it runs, so that its start (exec,
    // dynamic loading) is recorded. (Not when the recording was stopped
    // already: see where it is released.)
    let mut held = None;
    if !opts.command.is_empty() && !stop.load(Ordering::SeqCst) {
        held = Some(
            // Stopped at its exec while its tables are loaded, where the
            // tables are wanted and this process may trace it unasked
            // (root: a traced exec of a set-user-ID program keeps its
            // rights only under a tracer with CAP_SYS_PTRACE).
            // SAFETY: geteuid has no preconditions.
            Held::spawn(
                &opts.self_exe,
                &opts.command,
                opts.unwind_tables && unsafe { libc::geteuid() } == 0,
            )
            .with_context(|| format!("cannot start {}", opts.command[0]))?,
        );
    }
    // Whom the module samples: the command alone, the one -p process, or
    // every task (-a, no command, several -p processes).
    let bound = match (&held, opts.pids.as_slice()) {
        _ if opts.system_wide => None,
        (Some(h), _) => Some(h.pid),
        (None, &[p]) if opts.command.is_empty() => Some(p),
        _ => None,
    };
    let what = match opts.pids.len() {
        _ if held.is_some() => "the command's",
        1 => "the process's",
        _ => "the processes'",
    };
    // Says why every task is sampled after all, at once and in the
    // side-car.
    let fall_back = |why: &str, info: &mut Vec<String>| {
        let note = format!(
            "{why}: recording every task (system-wide); {what} samples are kept by the analyses"
        );
        eprintln!("oprofile-rs: note: {}", crate::text::esc(&note));
        info.push(format!("profiled-note: {note}"));
    };
    if opts.pids.len() > 1 && !opts.system_wide {
        fall_back(
            "the module binds its counters to one process, and -p names several",
            &mut info,
        );
    }
    let open_ctl = || -> Result<ModuleControl> {
        // A control file of its own (`O_WRONLY`: no reader slot), so that
        // the settings can be put back after the reader is closed: the
        // module refuses a new buffer_size while a reader that mapped the
        // buffer has it open.
        let ctl_file = OpenOptions::new()
            .write(true)
            .open(&opts.device)
            .with_context(|| format!("cannot open {} for control", opts.device.display()))?;
        Ok(ModuleControl::new(ctl_file, opts.debugfs.clone()))
    };
    if let Some(p) = bound {
        settings.pid = Some(p);
        // A module older than `pid` (no such key in its configuration),
        // or none that can be asked while nothing else is to be changed:
        // the recording is of every task, as before.
        let only_pid = ModuleSettings {
            pid: None,
            ..settings.clone()
        }
        .is_empty();
        use crate::control::Control;
        let config = open_ctl().and_then(|mut c| {
            c.config().map_err(|e| {
                anyhow::anyhow!(
                    "the module's settings cannot be read through {}: {e}",
                    c.describe()
                )
            })
        });
        match config {
            Ok(text) if !crate::control::parse_config(&text).contains_key("pid") => {
                settings.pid = None;
                fall_back(
                    "the module has no pid setting (it predates task-bound recording)",
                    &mut info,
                );
            }
            Err(e) if only_pid => {
                settings.pid = None;
                fall_back(&format!("{e:#}"), &mut info);
            }
            _ => {}
        }
    }
    // The settings asked for: recording off, applied, recording on; put
    // back at the end (or, on an error, when `applied` is dropped).
    if !settings.is_empty() {
        // Bytes read to make room for the CONFIG record (the event buffer
        // filled up since the open): written first.
        let mut scratch = vec![0u8; opts.buffer_size.max(4096)];
        let mut make_room = || {
            let mut got = false;
            while pre.len() < (256 << 20) {
                match read_some(&mut dev, &mut scratch) {
                    Ok(ReadOutcome::Data(n)) => {
                        pre.extend_from_slice(&scratch[..n]);
                        got = true;
                    }
                    _ => break,
                }
            }
            got
        };
        let a = match crate::control::apply(open_ctl()?, &settings, &mut make_room) {
            // A module that does not know `pid` ("unknown key"): the
            // rest without it (everything was put back).
            Err(e)
                if settings.pid.is_some()
                    && e.downcast_ref::<crate::control::Refused>()
                        .is_some_and(|r| r.may_not_know("pid")) =>
            {
                settings.pid = None;
                fall_back(&format!("{e:#}"), &mut info);
                if settings.is_empty() {
                    None
                } else {
                    Some(crate::control::apply(
                        open_ctl()?,
                        &settings,
                        &mut make_room,
                    )?)
                }
            }
            r => Some(r?),
        };
        if let Some(a) = a {
            use crate::control::Control;
            info.push(format!(
                "settings: {} (through {}; they replaced {})",
                words(&a.changes),
                a.control().describe(),
                words(&a.saved)
            ));
            applied = Some(a);
        }
    }
    info.push(match settings.pid {
        Some(p) => format!(
            "profiled: pid {p} and the tasks it creates (the module's counters are bound to them)"
        ),
        None => "profiled: every task (system-wide)".into(),
    });
    if tables_later {
        tables = open_tables(&mut info, false).unwrap_or(None);
    }
    if let (Some(l), Some(c)) = (tables.as_mut(), opts.command.first()) {
        l.prepare(c);
    }
    macro_rules! load_tables {
        ($pid:expr) => {
            if let Some(l) = tables.as_mut() {
                l.load_process(&opts.proc_root, $pid);
            }
        };
    }
    if sc_dir.exists() {
        std::fs::remove_dir_all(&sc_dir)
            .with_context(|| format!("cannot replace {}", sc_dir.display()))?;
    }
    let mut out = std::io::BufWriter::with_capacity(
        1 << 20,
        File::create(&opts.output)
            .with_context(|| format!("cannot create {}", opts.output.display()))?,
    );
    for &p in &opts.pids {
        tracker.track(p);
        load_tables!(p);
    }
    let mut bytes = 0u64;
    let mut scanner = Scanner {
        skip_backlog: !opts.snapshot && !opts.keep_backlog,
        ..Default::default()
    };
    if !pre.is_empty() {
        bytes += scanner.feed_backlog_into(&pre, &mut out)?;
        for t in scanner.take_new_tgids() {
            tracker.track(t);
            load_tables!(t);
        }
        tracker.note_sampled(scanner.take_sampled());
        info.push(format!(
            "read before the settings: {} bytes (the event buffer had no room for the CONFIG record)",
            pre.len()
        ));
    }
    if !opts.pids.is_empty() {
        info.push(format!(
            "pids: {}",
            opts.pids
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(",")
        ));
    }

    let pb = if opts.progress {
        let pb =
            indicatif::ProgressBar::with_draw_target(None, indicatif::ProgressDrawTarget::stderr());
        pb.set_style(
            indicatif::ProgressStyle::with_template("{spinner} {elapsed} {msg}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
        );
        Some(pb)
    } else {
        None
    };

    let mut buf = vec![0u8; opts.buffer_size.max(4096)];
    // Zero-copy where the device offers it (Documentation/mmap.md): the
    // opening by read(), then the records in place; else read().
    let mapped = match crate::mapped::Mapped::new(&dev) {
        Ok(m) => {
            let mut opening = Vec::new();
            m.read_opening(&mut dev, &mut opening)
                .context("read of the stream's opening failed")?;
            bytes += scanner.feed_into(&opening, &mut out)?;
            info.push(format!("reader: mmap ({}-byte ring)", m.data_size()));
            Some(m)
        }
        Err(e) => {
            info.push(format!("reader: read() (no mapping: {e})"));
            None
        }
    };
    // The next data from the device, through `mapped` or `read`, handed to
    // `take`; whether there was any.
    let pull = |dev: &mut File,
                buf: &mut Vec<u8>,
                take: &mut dyn FnMut(&[u8]) -> Result<()>|
     -> Result<bool> {
        if let Some(m) = &mapped {
            return Ok(m
                .take(|d| take(d))
                .context("consume from the mapping failed")?
                > 0);
        }
        match read_some(dev, buf)? {
            ReadOutcome::Data(n) => {
                take(&buf[..n])?;
                Ok(true)
            }
            ReadOutcome::Empty => Ok(false),
        }
    };
    // Reads what the device holds now into the output.
    macro_rules! drain {
        () => {
            while pull(&mut dev, &mut buf, &mut |d: &[u8]| {
                bytes += scanner.feed_into(d, &mut out)?;
                for t in scanner.take_new_tgids() {
                    tracker.track(t);
                    load_tables!(t);
                }
                tracker.note_sampled(scanner.take_sampled());
                Ok(())
            })? {}
        };
    }
    // The backlog: what the module buffered before the stream's opening
    // (recording is on from the module's load, and nobody may have read
    // for a while) is read and left out before the command starts, so that
    // the recording is of what happens from now on, and the command's
    // first samples do not find the CPU buffers full of old ones while the
    // backlog is read. A flush moves what the CPU buffers hold; rounds go
    // on while they still find old records (a full event buffer takes
    // part of it per round). `--keep-backlog` keeps it (the records are
    // then in the stream, as `cat /dev/oprofile/buffer` gives them).
    if scanner.skip_backlog {
        scanner.reading_backlog = true;
        for _ in 0..8 {
            if stop.load(Ordering::SeqCst) {
                break;
            }
            let old = (scanner.skipped_samples, scanner.skipped_lost);
            // (No flush: a file or a pipe as the device, or no permission;
            // the records still come through the reads.)
            let _ = flush(&dev, &opts.debugfs);
            drain!();
            if (scanner.skipped_samples, scanner.skipped_lost) == old {
                break;
            }
        }
        scanner.reading_backlog = false;
        if scanner.skipped_samples + scanner.skipped_lost > 0 {
            info.push(format!(
                "backlog-skipped: {} samples and {} lost, buffered before the recording started (--keep-backlog keeps them)",
                scanner.skipped_samples, scanner.skipped_lost
            ));
        }
    }
    // A SIGINT or SIGTERM during the set-up (kallsyms, maps, settings,
    // backlog: seconds on a slow machine) ends the recording before the
    // command is started, not by starting it and killing it at once.
    let mut child = match held.take() {
        None if opts.command.is_empty() => None,
        Some(h) if !stop.load(Ordering::SeqCst) => {
            let (c, stopped) = match h.release() {
                Ok(c) => c,
                Err(e) => {
                    let _ = std::fs::remove_file(&opts.output);
                    return Err(e).with_context(|| format!("cannot start {}", opts.command[0]));
                }
            };
            tracker.track(c.id());
            // Its tables once it runs its own program (the exec the
            // trampoline was held before): stopped there, before its first
            // instruction, when traced; else as soon as its exec is seen
            // (its first samples meanwhile are walked by frame pointers).
            if stopped {
                load_tables!(c.id());
                resume(c.id());
            } else if wait_exec(&opts.proc_root, c.id(), Duration::from_millis(500)) {
                load_tables!(c.id());
            }
            info.push(format!(
                "command-start: {}",
                if stopped {
                    "stopped at its exec while its tables were loaded"
                } else {
                    "not stopped at its exec (tables loaded as it ran)"
                }
            ));
            info.push(format!(
                "command: {} (pid {})",
                opts.command.join(" "),
                c.id()
            ));
            Some(c)
        }
        h => {
            // Held, it ends without running (its pipe closed).
            drop(h);
            info.push(format!(
                "command: {} (not started: the recording was stopped before)",
                opts.command.join(" ")
            ));
            warnings.push(format!(
                "stopped before the command started: {} was not run",
                opts.command.join(" ")
            ));
            None
        }
    };
    let roots: Vec<u32> = match &child {
        Some(c) => vec![c.id()],
        None => opts.pids.clone(),
    };
    // What the loop sleeps on besides the device (see there), and how long
    // at most: the device's watershed wakes it, not a timer, unless maps
    // are polled (every 100 ms then, to see new processes while they live),
    // a pidfd is missing (the command's or a -p process's exit is then
    // noticed by looking), or the progress line wants updates.
    let wake = Waker::new();
    let mut waits: Vec<i32> = wake.fd().into_iter().collect();
    let mut pidfds = Vec::new();
    let mut have_all_pidfds = true;
    for p in child
        .iter()
        .map(|c| c.id())
        .chain(opts.pids.iter().copied())
    {
        match pidfd_open(p) {
            Some(fd) => {
                waits.push(fd.as_raw_fd());
                pidfds.push(fd);
            }
            None => have_all_pidfds = false,
        }
    }
    if let Some(c) = &collector {
        waits.extend(c.fds());
    }
    let wakes = Wakes {
        polled_maps: tracker.keep_maps,
        exits: have_all_pidfds && wake.fd().is_some(),
        progress: pb.is_some(),
    };
    let mut command_status = None;
    let mut last_progress = Instant::now() - Duration::from_secs(1);
    let mut snapshots = 0u32;
    // SIGUSR2s since the handler was installed (before the device was
    // opened): one that came while the side-car was read counts too.
    let mut snapshots_asked = 0;
    // One snapshot: what the CPUs hold goes to the device, then here. When
    // the module's event buffer is too full to take it (ENOSPC), read it
    // and try again.
    macro_rules! snapshot {
        () => {{
            let mut tries = 0;
            loop {
                match take_snapshot(&dev) {
                    Ok(()) => {
                        snapshots += 1;
                        break;
                    }
                    Err(e) if e.raw_os_error() == Some(libc::ENOSPC) && tries < 3 => {
                        tries += 1;
                        drain!();
                    }
                    Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                        bail!("the module refused a snapshot (EINVAL): it is not in overwrite mode")
                    }
                    Err(e) => {
                        warnings.push(format!("a snapshot failed: {e}"));
                        break;
                    }
                }
            }
            drain!();
        }};
    }
    let stop_reason = loop {
        if opts.snapshot {
            let asked = SNAPSHOT_REQUESTS.load(Ordering::SeqCst);
            if asked != snapshots_asked {
                // Several signals before we got here make one snapshot.
                snapshots_asked = asked;
                snapshot!();
            }
        }
        if stop.load(Ordering::SeqCst) {
            break StopReason::Signal;
        }
        if opts.duration.is_some_and(|d| start.elapsed() >= d) {
            break StopReason::Duration;
        }
        if let Some(c) = child.as_mut() {
            tracker.refresh(false);
            if let Ok(Some(st)) = c.try_wait() {
                command_status = Some(st);
                break StopReason::CommandExited;
            }
        }
        if !opts.pids.is_empty() && !opts.pids.iter().any(|&p| running(&opts.proc_root, p)) {
            break StopReason::TargetsExited;
        }
        if let Some(c) = collector.as_mut() {
            c.poll();
            // New code mapped (dlopen) by a process with tables: its new
            // mappings' tables.
            for pid in c.new_exec_maps() {
                if tables.as_ref().is_some_and(|l| l.knows(pid)) {
                    load_tables!(pid);
                }
            }
        }
        let got = pull(&mut dev, &mut buf, &mut |d: &[u8]| {
            bytes += scanner.feed_into(d, &mut out)?;
            for t in scanner.take_new_tgids() {
                tracker.track(t);
                load_tables!(t);
            }
            tracker.note_sampled(scanner.take_sampled());
            Ok(())
        })?;
        // Sleep in poll(2) until the module reports data (the watershed, a
        // flush, a nearly full buffer), the command or the -p processes
        // exit (their pidfds), the map records' rings fill up to half, a
        // signal (the wake eventfd) or the duration ends; at most `nap`.
        // A file that polls readable with nothing to read (not the device)
        // gets 20 ms naps instead.
        let nap = loop_nap(wakes);
        let mut ms = nap.as_millis() as i32;
        if let Some(d) = opts.duration {
            let left = d.saturating_sub(start.elapsed());
            ms = ms.min(left.as_millis() as i32 + 1);
        }
        if !got && wait_any(&dev, &waits, ms) {
            std::thread::sleep(Duration::from_millis(20));
        }
        tracker.refresh(false);
        if let Some(pb) = &pb {
            if last_progress.elapsed() >= Duration::from_millis(200) {
                last_progress = Instant::now();
                pb.set_message(format!(
                    "{} written, {} samples, {} lost, {} processes{}",
                    indicatif::HumanBytes(bytes),
                    scanner.samples,
                    scanner.lost,
                    scanner.processes(),
                    if opts.snapshot {
                        format!(", {snapshots} snapshots (SIGUSR2 takes one)")
                    } else {
                        String::new()
                    }
                ));
                pb.tick();
            }
        }
    };

    // Stop: flush the kernel's buffers (flight recorder: the last
    // snapshot) and drain what is left.
    tracker.refresh(true);
    if let Some(a) = applied.as_mut() {
        // The recording ends here (the settings are put back below, once
        // what was recorded is read).
        if let Err(e) = a.stop_recording() {
            warnings.push(format!("cannot switch recording off: {e}"));
        }
    }
    if opts.snapshot {
        drain!();
        snapshot!();
        info.push(format!("snapshots-taken: {snapshots}"));
    } else if let Err(e) = flush(&dev, &opts.debugfs) {
        warnings.push(format!(
            "{e}: samples still in the per-CPU buffers are not included"
        ));
    }
    drain!();
    drop(mapped);
    // Unmapped, read and closed: the buffer sizes can be put back.
    drop(dev);
    let mut settings_restored = None;
    if let Some(mut a) = applied.take() {
        let problems = a.restore();
        if problems.is_empty() {
            info.push(format!("settings-restored: {}", words(&a.saved)));
            settings_restored = Some(words(&a.saved));
        } else {
            info.push(format!("settings-not-restored: {}", problems.join("; ")));
            warnings.extend(problems);
        }
    }
    out.flush().context("write failed")?;
    let mut map_events = Vec::new();
    if let Some(c) = collector.as_mut() {
        c.poll();
        map_events = c.take_sorted();
        info.push(format!("map-records: {}", map_events.len()));
        if c.lost > 0 {
            let w = format!(
                "the kernel dropped {} map records (its perf ring was full): some mappings may be missing",
                c.lost
            );
            info.push(format!("map-records-lost: {}", c.lost));
            warnings.push(w);
        }
        if c.skipped.any() {
            info.push(format!(
                "map-records-skipped: {} records, {} bytes",
                c.skipped.records, c.skipped.bytes
            ));
            warnings.push(format!(
                "{} map records could not be decoded and {} bytes of the perf rings \
                 could not be read (corrupt): some mappings may be missing",
                c.skipped.records, c.skipped.bytes
            ));
        }
    }
    drop(collector);
    if let Some(l) = tables.take() {
        let st = &l.stats;
        info.push(format!(
            "unwind-tables: {} processes, {} mappings, {} tables ({} bytes, {} from the cache), {} binaries without, {} mappings refused; before the recording: {} tables of the binaries processes mapped, {} running processes{}",
            st.processes,
            st.maps,
            st.tables,
            st.table_bytes,
            st.cached,
            st.no_table,
            st.refused,
            st.prefetched,
            st.prefetched_processes,
            st.disabled.as_deref().map(|d| format!("; stopped: {d}")).unwrap_or_default()
        ));
    }
    if let Some(c) = child.as_mut() {
        if command_status.is_none() {
            command_status = stop_child(c);
        }
    }
    if let Some(pb) = pb {
        pb.finish_and_clear();
    }
    if let Some(e) = &scanner.error {
        warnings.push(format!(
            "the recorded stream is corrupt ({e}); the counts stop there"
        ));
    }

    // Only processes with user-mode samples need maps; a kernel thread (or a
    // process seen only in kernel mode) that exited early is not missing anything.
    let missing = if map_events.is_empty() && sc.maps.is_empty() {
        tracker.missing(|t| scanner.needs_maps(t))
    } else {
        // Exact maps: missing are the user-mode processes that neither the
        // snapshot nor a record covers.
        let covered: HashSet<u32> = map_events.iter().map(|e| e.pid()).collect();
        let mut v: Vec<(u32, String)> = scanner
            .user
            .iter()
            .filter(|t| !covered.contains(t) && !sc.maps.contains_key(t))
            .map(|t| (*t, "no map record and not running at the start".to_string()))
            .collect();
        v.sort();
        v
    };
    // A process whose user-mode samples all predate the stream's opening
    // (the module buffers from its loading on) had exited before the
    // recording started: nothing could have caught its maps.
    let missing: Vec<(u32, String)> = missing
        .into_iter()
        .map(|(t, why)| {
            if scanner.user_since_start.contains(&t) {
                (t, why)
            } else {
                (
                    t,
                    "its samples were buffered before the recording started, \
                     and it had exited by then"
                        .to_string(),
                )
            }
        })
        .collect();
    let processes_with_maps = if map_events.is_empty() && sc.maps.is_empty() {
        tracker.maps.len()
    } else {
        // Of the processes sampled, those the snapshot or a record covers.
        let mut s: HashSet<u32> = sc.maps.keys().copied().collect();
        s.extend(
            map_events
                .iter()
                .filter(|e| matches!(e, crate::mapevents::MapEvent::Mmap { .. }))
                .map(|e| e.pid()),
        );
        scanner.seen.iter().filter(|t| s.contains(t)).count()
    };
    info.push(format!("maps-captured: {processes_with_maps}"));
    for (t, why) in &missing {
        info.push(format!("maps-missing: {t}: {why}"));
    }
    if let Ok(ns) = std::fs::read_link(opts.proc_root.join("self/ns/pid")) {
        info.push(format!(
            "pid-namespace: {} (the recorder's; the stream's pids are the kernel's global ones)",
            ns.display()
        ));
    }
    if !tracker.namespaces.is_empty() {
        info.push(format!(
            "other-mount-namespaces: {} processes (binaries read through /proc/PID/root)",
            tracker.namespaces.len()
        ));
    }
    // Modules loaded (or reloaded elsewhere) while recording: their
    // symbols from a second capture.
    if let (Some(start), Ok(end)) = (
        &sc.modules,
        read_proc_text(&opts.proc_root.join("modules"), 64 << 10),
    ) {
        if module_bases(start) != module_bases(&end) {
            match read_proc_text(&opts.proc_root.join("kallsyms"), KALLSYMS_HINT) {
                Ok(k) => {
                    info.push("kallsyms-end: captured (modules changed while recording)".into());
                    // The build-ids of the modules loaded meanwhile.
                    for (n, id) in crate::sidecar::kernel_build_ids(&opts.sys_root) {
                        sc.build_ids.entry(n).or_insert(id);
                    }
                    sc.kallsyms_end = Some(k);
                    sc.modules_end = Some(end);
                }
                Err(e) => warnings.push(format!(
                    "modules changed while recording, and kallsyms cannot be read again ({e}): \
                     the samples of modules loaded meanwhile are [unknown]"
                )),
            }
        }
    }
    info.push(format!("samples: {}", scanner.samples));
    info.push(format!("lost: {}", scanner.lost));
    info.push(format!("throttled: {}", scanner.throttled));
    info.push(String::new());
    if tracker.keep_maps {
        sc.maps = std::mem::take(&mut tracker.maps);
    } else {
        sc.events = Some(crate::mapevents::to_text(&map_events));
    }
    if !roots.is_empty() && !opts.system_wide {
        // While polling there are no FORK records: the parents read from
        // /proc name the descendants seen.
        let mut target = roots.clone();
        if map_events.is_empty() {
            loop {
                let before = target.len();
                for (c, p) in &tracker.parents {
                    if target.contains(p) && !target.contains(c) {
                        target.push(*c);
                    }
                }
                if target.len() == before {
                    break;
                }
            }
        }
        sc.target = Some(target);
    }
    sc.perf_maps = std::mem::take(&mut tracker.perf_maps);
    sc.namespaces = std::mem::take(&mut tracker.namespaces);
    sc.info = Some(info.join("\n"));
    let maps_captured = processes_with_maps;
    sc.save(&sc_dir)
        .with_context(|| format!("cannot write side-car {}", sc_dir.display()))?;
    Ok(RecordSummary {
        bytes,
        samples: scanner.samples,
        lost: scanner.lost,
        throttled: scanner.throttled,
        user_stacks: scanner.user_stacks,
        processes: scanner.processes(),
        maps_captured,
        maps_missing: missing,
        elapsed: start.elapsed(),
        stop: stop_reason,
        command_status,
        warnings,
        snapshots,
        settings_restored,
    })
}

#[cfg(test)]
mod tests {
    use super::{loop_nap, user_settings, Wakes};
    use std::time::Duration;

    #[test]
    fn the_loop_sleeps_long_unless_it_must_look() {
        // Woken by the device (its data, the module's requests for unwind
        // tables), the exits' pidfds and the signals' eventfd, the loop
        // sleeps a second: each wake-up costs the recorder's CPU, which the
        // profiled machine pays (bench-overhead).
        let quiet = Wakes {
            exits: true,
            ..Default::default()
        };
        assert_eq!(loop_nap(quiet), Duration::from_secs(1));
        let progress = Wakes {
            progress: true,
            ..quiet
        };
        assert_eq!(loop_nap(progress), Duration::from_millis(200));
        // New processes seen only by reading /proc, exits only by looking.
        let polled = Wakes {
            polled_maps: true,
            ..quiet
        };
        assert_eq!(loop_nap(polled), Duration::from_millis(100));
        assert_eq!(loop_nap(Wakes::default()), Duration::from_millis(100));
    }

    #[test]
    fn the_restored_settings_leave_the_commands_pid_out() {
        assert_eq!(user_settings("pid=0"), None);
        assert_eq!(user_settings(""), None);
        assert_eq!(
            user_settings("sample_period=1000000 pid=0 user_stack_size=0").as_deref(),
            Some("sample_period=1000000 user_stack_size=0")
        );
        // A value that merely contains "pid=" is the user's.
        assert_eq!(
            user_settings("cgroup=/pid=3").as_deref(),
            Some("cgroup=/pid=3")
        );
    }
}
