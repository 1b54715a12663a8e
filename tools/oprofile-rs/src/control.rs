//! `record`'s settings of the module (`-e`, `-c`, `-F`, `-g`, `--call-graph`,
//! `--cpu-buffer-size`, `--buffer-size`, `--watershed`): checked before the
//! module is touched, applied through its control interface while recording
//! is off, and put back when the recording stops (normally, on SIGINT or
//! SIGTERM, or on an error after they were applied).
//!
//! The control interface is a trait, [`Control`]: [`ModuleControl`] is the
//! module's (the device's `OPROFILE_RS_IOC_*` ioctls, falling back to the
//! debugfs files where the module has no such ioctl), tests use a fake.

use std::collections::BTreeMap;
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};

/// The runtime-changeable keys (debugfs files and `key=value` words of the
/// `config` text), in the order they are applied and put back: `event`
/// first (writing it resets every period and frequency), then the periods
/// and frequencies, then the rest.
pub use oprofile_stream::oprofile_format::CONFIG_KEYS as KEYS;

/// The depths `-g` (and `--call-graph fp`) ask for.
pub const DEFAULT_CALL_GRAPH: (u32, u32) = (32, 32);

/// The user stack bytes per sample `--call-graph dwarf` asks for without a
/// size (perf's default).
pub const DEFAULT_USER_STACK: u32 = oprofile_stream::oprofile_format::MAX_USER_STACK as u32;

/// The most user stack bytes per sample `--call-graph hybrid` asks for
/// without a size.
pub const DEFAULT_HYBRID_STACK: u32 = 1024;

/// With `--call-graph dwarf`, the CPU ring buffers are raised (unless
/// `--cpu-buffer-size` is given) to hold at least this many of the largest
/// records: a sample is kilobytes then, and the default 64 KiB buffer would
/// hold a handful.
pub const DWARF_CPU_BUFFER_RECORDS: u64 = 64;

/// With `--call-graph dwarf`, the event buffer is raised (unless
/// `--buffer-size` is given) to at least this many CPU buffers.
pub const DWARF_BUFFER_CPU_BUFFERS: u64 = 4;

/// Events a recording lists at most (`format::MAX_EVENTS`).
pub const MAX_EVENTS: usize = oprofile_stream::oprofile_format::MAX_EVENTS;

/// The module's control interface, as `record` uses it.
pub trait Control {
    /// Whether recording is on (`tracing_on`).
    fn tracing(&mut self) -> io::Result<bool>;
    /// Switches recording on or off.
    fn set_tracing(&mut self, on: bool) -> io::Result<()>;
    /// The `config` text: `key=value` lines.
    fn config(&mut self) -> io::Result<String>;
    /// Applies `key=value` changes (keys of [`KEYS`], in that order); the
    /// module takes them all or none where it can (the ioctl), one by one
    /// otherwise (debugfs). On an error, [`SetError::applied`] says how
    /// many of the first changes may have been made.
    fn set_config(&mut self, changes: &[(&'static str, String)]) -> Result<(), SetError>;
    /// How it reaches the module, for the side-car and messages.
    fn describe(&self) -> String;
}

/// A refused [`Control::set_config`].
#[derive(Debug)]
pub struct SetError {
    /// The first `applied` changes may have been made (0: none, the module
    /// took nothing).
    pub applied: usize,
    pub error: io::Error,
}

impl SetError {
    fn none(error: io::Error) -> SetError {
        SetError { applied: 0, error }
    }
}

impl std::fmt::Display for SetError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.error.fmt(f)
    }
}

/// What `record`'s options ask of the module (`None`: leave as it is).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModuleSettings {
    /// `-e`: the events, in order.
    pub events: Option<Vec<String>>,
    /// `-c`: the period of each event (one value: every event; 0: not given
    /// for that event).
    pub count: Option<Vec<u64>>,
    /// `-F`: the frequency of each event, as `count`.
    pub freq: Option<Vec<u64>>,
    /// `-g` / `--call-graph`: kernel and user callchain depths.
    pub call_graph: Option<(u32, u32)>,
    /// `--call-graph dwarf[,SIZE]`: the module's `user_stack_size`, the
    /// bytes of user stack copied into each sample (0: none). With a size,
    /// the CPU ring buffers and the event buffer are raised to hold such
    /// samples where `cpu_buffer_size` and `buffer_size` are not given.
    pub user_stack: Option<u32>,
    /// `--call-graph hybrid[,SIZE]` (true) or the other forms (false): the
    /// module's `user_stack_fit`, each copy stopped after the first frame
    /// record where the frame pointer holds a plausible one (left alone on
    /// a module without the setting unless asked for).
    pub user_stack_fit: Option<bool>,
    pub cpu_buffer_size: Option<u64>,
    pub buffer_size: Option<u64>,
    pub watershed: Option<u64>,
    /// `--all-user` / `--all-kernel`: the module's `exclude_user` and
    /// `exclude_kernel`.
    pub exclude: Option<(bool, bool)>,
    /// `--snapshot`: the module's `mode` (`overwrite`: flight recorder).
    pub mode: Option<String>,
    /// `-G`: the module's `cgroup` filter, a value of [`cgroup_value`].
    pub cgroup: Option<String>,
    /// `record -- CMD` and `record -p PID`: the module's `pid`, the process
    /// whose tasks alone are sampled, through counters bound to them (and
    /// to the tasks they create); `0` samples every task.
    pub pid: Option<u32>,
}

/// The magic number of a cgroup2 file system (`statfs`'s `f_type`).
const CGROUP2_SUPER_MAGIC: i64 = 0x6367_7270;

/// `-G CGROUP` as the module's `cgroup` value: a directory of a cgroup2 file
/// system (`/sys/fs/cgroup/system.slice/nginx.service`) gives its id (the
/// inode number, which names it whatever the mount); otherwise a path below
/// the cgroup2 root as `/proc/PID/cgroup` shows it (`/system.slice/...`),
/// or a name relative to that root as `perf record -G` takes it
/// (`system.slice/...`). `/` samples every task.
pub fn cgroup_value(arg: &str) -> Result<String> {
    // A directory first: its id carries any name.
    let path = std::path::Path::new(arg);
    if let Ok(m) = std::fs::metadata(path) {
        if m.is_dir() && is_cgroup2(path) {
            use std::os::unix::fs::MetadataExt;
            return Ok(m.ino().to_string());
        }
    }
    if arg.is_empty()
        || arg
            .chars()
            .any(|c| c.is_whitespace() || c == '=' || c == '\0')
    {
        bail!(
            "-G {:?}: not a cgroup path (for a name with white space or '=', give its directory \
             under /sys/fs/cgroup: its id is used)",
            crate::text::esc(arg)
        );
    }
    Ok(if arg.starts_with('/') {
        arg.to_string()
    } else {
        format!("/{arg}")
    })
}

/// Whether `path` is on a cgroup2 file system.
fn is_cgroup2(path: &std::path::Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: an all-zero statfs is a valid value of the plain C struct.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is NUL-terminated and `st` a writable statfs.
    let r = unsafe { libc::statfs(c.as_ptr(), &mut st) };
    r == 0 && st.f_type as i64 == CGROUP2_SUPER_MAGIC
}

/// A comma list of numbers (`-c`, `-F`).
pub fn parse_list(s: &str) -> Result<Vec<u64>, String> {
    s.split(',')
        .map(|v| {
            v.trim()
                .parse::<u64>()
                .map_err(|_| format!("{v:?} is not a number (expected N or N,N,...)"))
        })
        .collect()
}

/// A size in bytes, with an optional `K`, `M` or `G` suffix (powers of
/// 1024).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (num, mul) = match t.char_indices().last() {
        Some((i, 'k' | 'K')) => (&t[..i], 1u64 << 10),
        Some((i, 'm' | 'M')) => (&t[..i], 1 << 20),
        Some((i, 'g' | 'G')) => (&t[..i], 1 << 30),
        _ => (t, 1),
    };
    num.parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mul))
        .ok_or_else(|| format!("{s:?} is not a size (bytes, or with a K, M or G suffix)"))
}

/// `--call-graph`: `KDEPTH[,UDEPTH]` (the user depth defaults to the
/// kernel's), `fp` (the depths of `-g`) or `no` (none).
pub fn parse_call_graph(s: &str) -> Result<(u32, u32), String> {
    match s.trim() {
        "fp" => return Ok(DEFAULT_CALL_GRAPH),
        "no" | "none" => return Ok((0, 0)),
        _ => {}
    }
    let depth = |v: &str| {
        v.trim().parse::<u32>().map_err(|_| {
            format!("--call-graph {s:?}: expected KDEPTH[,UDEPTH] (numbers), fp or no")
        })
    };
    match s.split_once(',') {
        Some((k, u)) => Ok((depth(k)?, depth(u)?)),
        None => {
            let k = depth(s)?;
            Ok((k, k))
        }
    }
}

/// What `--call-graph` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallGraph {
    /// Kernel and user (frame-pointer) callchain depths.
    pub depths: (u32, u32),
    /// `dwarf`: the user stack bytes copied into each sample (the module's
    /// `user_stack_size`); `None` leaves the module's setting as it is.
    pub user_stack: Option<u32>,
    /// `hybrid`: the copies fit the frame-pointer chain (the module's
    /// `user_stack_fit`).
    pub fit: bool,
    /// `cfi`, and `record`'s default: the module walks the profiled
    /// processes' stacks with the unwind tables `record` loads
    /// ([`crate::unwind_load`]); `fp`, the depths, `dwarf` and `hybrid`
    /// turn them off.
    pub tables: bool,
}

/// `--call-graph`: `cfi` (the chains of `-g`, the user one walked with the
/// unwind tables `record` loads: the default's user walk, with kernel
/// chains), `KDEPTH[,UDEPTH]`, `fp`, `no` (see [`parse_call_graph`])
/// or `dwarf[,SIZE]` as perf takes it: the depths of `-g` (the user
/// frame-pointer chain is kept, for samples the unwind cannot help) and
/// `SIZE` bytes of user stack per sample (default 8192; a multiple of 8,
/// at most 8192; K suffix allowed) for the analyses to unwind with the
/// binaries' `.eh_frame`.
///
/// `hybrid[,SIZE]` is `dwarf` with copies that fit the frame-pointer chain
/// (the module's `user_stack_fit`): where the frame pointer holds a
/// plausible frame record, the copy stops after it (the frames below it and
/// the record; the chain goes on from there), otherwise it is SIZE bytes
/// (default [`DEFAULT_HYBRID_STACK`]).
pub fn parse_call_graph_arg(s: &str) -> Result<CallGraph, String> {
    let t = s.trim();
    let (mode, size) = match t.split_once(',') {
        Some((m, size)) => (m.trim(), Some(size)),
        None => (t, None),
    };
    let (default, fit) = match mode {
        "cfi" if size.is_none() => {
            return Ok(CallGraph {
                depths: DEFAULT_CALL_GRAPH,
                user_stack: Some(0),
                fit: false,
                tables: true,
            })
        }
        "dwarf" => (DEFAULT_USER_STACK, false),
        "hybrid" => (DEFAULT_HYBRID_STACK, true),
        _ => {
            return parse_call_graph(s).map(|depths| CallGraph {
                depths,
                user_stack: None,
                fit: false,
                tables: false,
            })
        }
    };
    let size = match size {
        None => default,
        Some(v) => user_stack_size(v).map_err(|e| format!("--call-graph {s:?}: {e}"))?,
    };
    Ok(CallGraph {
        depths: DEFAULT_CALL_GRAPH,
        user_stack: Some(size),
        fit,
        tables: false,
    })
}

/// A user stack size: bytes (or K), a multiple of 8 from 8 to 8192.
pub fn user_stack_size(v: &str) -> Result<u32, String> {
    let max = u64::from(DEFAULT_USER_STACK);
    match parse_size(v)? {
        n if n == 0 || n % 8 != 0 || n > max => Err(format!(
            "a user stack size of {n} bytes: give a multiple of 8 from 8 to {max}"
        )),
        n => Ok(n as u32),
    }
}

/// The largest record the module writes with `user_stack` bytes of user
/// stack per sample.
pub fn max_record(user_stack: u32) -> u64 {
    oprofile_stream::oprofile_format::max_record(user_stack as usize) as u64
}

/// The `config` text as a map (lines or words of `key=value`).
pub fn parse_config(text: &str) -> BTreeMap<String, String> {
    text.split(['\n', ' '])
        .filter_map(|w| w.split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

/// `list` for `n` events: one value repeated, or exactly `n`.
fn expand(what: &str, list: &[u64], n: usize) -> Result<Vec<u64>> {
    match list.len() {
        1 => Ok(vec![list[0]; n]),
        l if l == n => Ok(list.to_vec()),
        l => bail!(
            "{what}: {l} values for {n} event{}: give one value or one per event",
            if n == 1 { "" } else { "s" }
        ),
    }
}

fn join(v: &[u64]) -> String {
    v.iter().map(u64::to_string).collect::<Vec<_>>().join(",")
}

impl ModuleSettings {
    pub fn is_empty(&self) -> bool {
        *self == ModuleSettings::default()
    }

    /// Refuses what no module could take (before anything is touched):
    /// more than [`MAX_EVENTS`] events or the same event twice, `-c` and
    /// `-F` both for an event, lists of lengths that do not match, a
    /// watershed not below the buffer size.
    pub fn check(&self) -> Result<()> {
        if let Some(ev) = &self.events {
            if ev.iter().any(|e| e.trim().is_empty()) {
                bail!("-e: an empty event name");
            }
            // Names are words of the `key=value` text the module parses:
            // nothing that could end one or start another.
            if let Some(e) = ev.iter().find(|e| {
                !e.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            }) {
                bail!(
                    "-e: {:?} is not an event name (letters, digits, - and _)",
                    crate::text::esc(e)
                );
            }
            if ev.is_empty() || ev.len() > MAX_EVENTS {
                bail!("-e: {} events: give 1 to {MAX_EVENTS}", ev.len());
            }
            for (i, e) in ev.iter().enumerate() {
                if ev[..i].contains(e) {
                    bail!("-e: {} is listed twice", crate::text::esc(e));
                }
            }
        }
        let n = [
            self.events.as_ref().map(Vec::len),
            self.count.as_ref().map(Vec::len),
            self.freq.as_ref().map(Vec::len),
        ]
        .into_iter()
        .flatten()
        .max()
        .unwrap_or(1);
        if let Some(ev) = &self.events {
            for (what, l) in [("-c", &self.count), ("-F", &self.freq)] {
                if let Some(l) = l {
                    expand(what, l, ev.len())?;
                }
            }
        }
        if let (Some(c), Some(f)) = (&self.count, &self.freq) {
            let c = expand("-c", c, n)?;
            let f = expand("-F", f, n)?;
            if let Some(i) = (0..n).find(|&i| c[i] != 0 && f[i] != 0) {
                let name = self.events.as_ref().and_then(|e| e.get(i)).map_or_else(
                    || format!("event {}", i + 1),
                    |e| crate::text::esc(e).into(),
                );
                bail!(
                    "-c {} and -F {} both given for {name}: an event is sampled by period or by \
                     frequency, not both (0 in a list leaves an event out)",
                    c[i],
                    f[i]
                );
            }
        }
        if let (Some(b), Some(w)) = (self.buffer_size, self.watershed) {
            if w >= b {
                bail!("--watershed {w} must be below --buffer-size {b}");
            }
        }
        Ok(())
    }

    /// The `key=value` changes, in [`KEYS`] order, for a module whose
    /// configuration is `current`. Errors (lists that do not match the
    /// module's events) change nothing.
    pub fn changes(
        &self,
        current: &BTreeMap<String, String>,
    ) -> Result<Vec<(&'static str, String)>> {
        self.check()?;
        let cur = |k: &str| -> Result<&String> {
            current
                .get(k)
                .with_context(|| format!("the module's configuration has no {k}"))
        };
        let mut out: Vec<(&'static str, String)> = Vec::new();
        let n = match &self.events {
            Some(ev) => {
                out.push(("event", ev.join(",")));
                ev.len()
            }
            None => cur("event")?.split(',').count(),
        };
        if self.count.is_some() || self.freq.is_some() {
            let zeros = vec![0u64; n];
            let c = expand("-c", self.count.as_deref().unwrap_or(&[0]), n)?;
            let f = expand("-F", self.freq.as_deref().unwrap_or(&[0]), n)?;
            // Events neither list names keep their setting (the defaults
            // when -e changes the events).
            let (cp, cf) = if self.events.is_some() {
                (zeros.clone(), zeros)
            } else {
                let p = parse_list(cur("sample_period")?).map_err(anyhow::Error::msg)?;
                let q = parse_list(cur("sample_freq")?).map_err(anyhow::Error::msg)?;
                (
                    expand("the module's sample_period", &p, n)?,
                    expand("the module's sample_freq", &q, n)?,
                )
            };
            let mut p = Vec::with_capacity(n);
            let mut q = Vec::with_capacity(n);
            for i in 0..n {
                let (pi, qi) = match (c[i], f[i]) {
                    (0, 0) => (cp[i], cf[i]),
                    (c, 0) => (c, 0),
                    (0, f) => (0, f),
                    // check() refused it.
                    (c, f) => bail!("-c {c} and -F {f} for the same event"),
                };
                p.push(pi);
                q.push(qi);
            }
            out.push(("sample_period", join(&p)));
            out.push(("sample_freq", join(&q)));
        }
        let has_user_stack = current.contains_key("user_stack_size");
        if let Some((k, u)) = self.call_graph {
            out.push(("backtrace_depth", k.to_string()));
            out.push(("user_backtrace_depth", u.to_string()));
        }
        let (mut cpu_buffer_size, mut buffer_size) = (self.cpu_buffer_size, self.buffer_size);
        // A module older than stack copies: `-g` and the depth forms (0)
        // need nothing of it.
        if let Some(n) = self.user_stack.filter(|&n| has_user_stack || n > 0) {
            if !has_user_stack {
                bail!(
                    "--call-graph dwarf: the module has no user_stack_size setting (it predates \
                     user stack copies): load a newer oprofile-rs module"
                );
            }
            out.push(("user_stack_size", n.to_string()));
            // Samples of kilobytes: buffers that hold a few dozen of them,
            // unless the sizes are given.
            if n > 0 {
                let size = |k: &str| -> Result<u64> {
                    cur(k)?
                        .parse::<u64>()
                        .with_context(|| format!("the module's {k} is not a number"))
                };
                let record = max_record(n);
                let cpu = match cpu_buffer_size {
                    Some(v) => v,
                    None => {
                        let now = size("cpu_buffer_size")?;
                        let want = (DWARF_CPU_BUFFER_RECORDS * record).next_power_of_two();
                        if now < want {
                            cpu_buffer_size = Some(want);
                        }
                        now.max(want)
                    }
                };
                if buffer_size.is_none() {
                    let now = size("buffer_size")?;
                    let want = DWARF_BUFFER_CPU_BUFFERS.saturating_mul(cpu);
                    if now < want {
                        buffer_size = Some(want);
                    }
                }
            }
        }
        // Only `hybrid` needs the setting; the other forms turn it off
        // where the module has it.
        if let Some(fit) = self.user_stack_fit {
            if current.contains_key("user_stack_fit") {
                out.push(("user_stack_fit", u8::from(fit).to_string()));
            } else if fit {
                bail!(
                    "--call-graph hybrid: the module has no user_stack_fit setting (it predates \
                     copies fitted to the frame-pointer chain): load a newer oprofile-rs module"
                );
            }
        }
        if let Some(v) = cpu_buffer_size {
            out.push(("cpu_buffer_size", v.to_string()));
        }
        if let Some(v) = buffer_size {
            out.push(("buffer_size", v.to_string()));
        }
        if let Some(v) = self.watershed {
            out.push(("buffer_watershed", v.to_string()));
        }
        if let Some((user, kernel)) = self.exclude {
            out.push(("exclude_user", u8::from(user).to_string()));
            out.push(("exclude_kernel", u8::from(kernel).to_string()));
        }
        if let Some(m) = &self.mode {
            out.push(("mode", m.clone()));
        }
        if let Some(g) = &self.cgroup {
            out.push(("cgroup", g.clone()));
        }
        if let Some(p) = self.pid {
            if !current.contains_key("pid") {
                bail!(
                    "the module has no pid setting (it predates task-bound recording): load a \
                     newer oprofile-rs module"
                );
            }
            out.push(("pid", p.to_string()));
        }
        out.sort_by_key(|(k, _)| KEYS.iter().position(|x| x == k));
        Ok(out)
    }
}

/// Settings applied to the module: what they replaced, put back by
/// [`Applied::restore`] (or when dropped, on an error path).
pub struct Applied<C: Control> {
    ctl: C,
    /// The changes made.
    pub changes: Vec<(&'static str, String)>,
    /// The values they replaced, in [`KEYS`] order.
    pub saved: Vec<(&'static str, String)>,
    /// Recording was on before.
    was_on: bool,
    restored: bool,
    /// Applying failed after the first `n` changes (restore then puts
    /// back only those).
    failed: Option<usize>,
}

/// [`apply`]'s error when the module refused the changes: the message, and
/// the error number and keys that let the caller try again without one of
/// them (`record`'s fallback when a module predates `pid`).
#[derive(Debug)]
pub struct Refused {
    /// The error the module answered (`EINVAL`, `EBUSY`, ...).
    pub errno: Option<i32>,
    /// The changes asked for (the refused one among them).
    pub keys: Vec<&'static str>,
    msg: String,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.msg)
    }
}

impl std::error::Error for Refused {}

impl Refused {
    /// Whether a module that does not know `key` could have refused so:
    /// `EINVAL` through the ioctl ("unknown key"), `ENOENT` through debugfs
    /// (no such file), with `key` among the changes.
    pub fn may_not_know(&self, key: &str) -> bool {
        matches!(self.errno, Some(libc::EINVAL | libc::ENOENT)) && self.keys.contains(&key)
    }
}

/// What the module's refusal of a change means (the user guide's table), for
/// messages: ` (EINVAL: ...)`, or nothing for another error.
pub fn refusal_hint(e: &io::Error) -> &'static str {
    match e.raw_os_error() {
        Some(libc::EINVAL) => " (EINVAL: a value the module does not accept)",
        Some(libc::EBUSY) => {
            " (EBUSY: recording is on, or the change would lose recorded data or needs the buffer unmapped)"
        }
        Some(libc::EOPNOTSUPP) => {
            " (EOPNOTSUPP: an event this machine cannot count, or a cgroup filter on a kernel without cgroups)"
        }
        Some(libc::ENOENT) => {
            " (ENOENT: no such cgroup: give its directory under /sys/fs/cgroup, or its path as /proc/PID/cgroup shows it)"
        }
        Some(libc::ENOTDIR) => " (ENOTDIR: a cgroup path that names a file)",
        Some(libc::ESRCH) => " (ESRCH: no such process: the pid names none that runs)",
        _ => "",
    }
}

/// What to do when the module refuses `user_stack_size=n` with EINVAL:
/// the value itself, or an event buffer (or CPU buffer) too small for the
/// records it makes.
fn user_stack_hint(n: &str, changes: &[(&'static str, String)]) -> String {
    let record = n.parse::<u32>().map_or(0, max_record);
    let given = |k: &str| {
        changes
            .iter()
            .find(|(c, _)| *c == k)
            .map_or_else(|| "its current value".to_string(), |(_, v)| v.clone())
    };
    format!(
        "; user_stack_size={n} makes samples of up to {record} bytes: it must be a multiple of 8 \
         from 8 to 8192, and the module's buffers must hold such samples: raise --buffer-size \
         (now {}) or --cpu-buffer-size (now {}), or lower the SIZE of --call-graph dwarf,SIZE \
         (the kernel log, dmesg, says which size is too small and its minimum)",
        given("buffer_size"),
        given("cpu_buffer_size")
    )
}

/// `key=value key=value` for messages.
pub fn words(kv: &[(&'static str, String)]) -> String {
    kv.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Applies `want`: reads the configuration, computes the changes (an error
/// there changes nothing), switches recording off, applies them, and
/// switches recording on. On an error after the first change, what was
/// changed is put back before the error is returned.
///
/// The module refuses a change (`EBUSY`, nothing changed) when its event
/// buffer has no room for the CONFIG record that announces it: then
/// `make_room` is called (it reads the stream; whether it read anything)
/// and the change tried again.
pub fn apply<C: Control>(
    mut ctl: C,
    want: &ModuleSettings,
    make_room: &mut dyn FnMut() -> bool,
) -> Result<Applied<C>> {
    let text = ctl.config().with_context(|| {
        format!(
            "cannot read the module's configuration ({}): does the module have runtime control?",
            ctl.describe()
        )
    })?;
    let current = parse_config(&text);
    let changes = want.changes(&current)?;
    let event_changes = changes.iter().any(|(k, _)| *k == "event");
    let mut saved = Vec::new();
    for k in KEYS {
        // Writing `event` resets the periods and frequencies: they are
        // put back too.
        let implied = event_changes && matches!(k, "sample_period" | "sample_freq");
        if implied || changes.iter().any(|(c, _)| *c == k) {
            let v = current
                .get(k)
                .with_context(|| format!("the module's configuration has no {k}"))?;
            saved.push((k, v.clone()));
        }
    }
    let was_on = ctl
        .tracing()
        .with_context(|| format!("cannot read whether recording is on ({})", ctl.describe()))?;
    if was_on {
        ctl.set_tracing(false)
            .with_context(|| format!("cannot switch recording off ({})", ctl.describe()))?;
    }
    let mut a = Applied {
        ctl,
        changes,
        saved,
        was_on,
        restored: false,
        failed: None,
    };
    let mut result = a.ctl.set_config(&a.changes);
    for _ in 0..16 {
        match &result {
            Err(SetError { applied: 0, error })
                if error.raw_os_error() == Some(libc::EBUSY) && make_room() =>
            {
                result = a.ctl.set_config(&a.changes);
            }
            _ => break,
        }
    }
    if let Err(SetError { applied, error: e }) = result {
        a.failed = Some(applied);
        let mut why = refusal_hint(&e).to_string();
        if let Some((_, n)) = a.changes.iter().find(|(k, _)| *k == "user_stack_size") {
            if e.raw_os_error() == Some(libc::EINVAL) && n != "0" {
                why += &user_stack_hint(n, &a.changes);
            }
        }
        let msg = format!(
            "the module refused {}: {e}{why}",
            crate::text::esc(&words(&a.changes))
        );
        let problems = a.restore();
        let msg = if problems.is_empty() {
            format!("{msg}; its settings are as they were")
        } else {
            format!("{msg}; and {}", problems.join("; "))
        };
        return Err(Refused {
            errno: e.raw_os_error(),
            keys: a.changes.iter().map(|(k, _)| *k).collect(),
            msg,
        }
        .into());
    }
    if let Err(e) = a.ctl.set_tracing(true) {
        let problems = a.restore();
        let mut msg = format!("cannot switch recording on: {e}; the settings were put back");
        for p in problems {
            msg += &format!("; {p}");
        }
        bail!(msg);
    }
    Ok(a)
}

impl<C: Control> Applied<C> {
    /// Switches recording off (the end of the recording).
    pub fn stop_recording(&mut self) -> io::Result<()> {
        self.ctl.set_tracing(false)
    }

    /// Puts back every value changed and the recording's state before;
    /// returns what could not be put back, each with the command that
    /// would. Only the first call does anything.
    pub fn restore(&mut self) -> Vec<String> {
        if self.restored {
            return Vec::new();
        }
        self.restored = true;
        let mut problems = Vec::new();
        if let Err(e) = self.ctl.set_tracing(false) {
            problems.push(format!(
                "cannot switch recording off to put the settings back: {e}"
            ));
        }
        // After a refused change, only what may have changed; writing
        // `event` resets the periods and frequencies, so with it they are
        // put back too.
        let touched: Option<Vec<&str>> = self
            .failed
            .map(|n| self.changes.iter().take(n).map(|(k, _)| *k).collect());
        let event_back = touched.as_ref().is_none_or(|t| t.contains(&"event"));
        let todo: Vec<(&'static str, String)> = self
            .saved
            .iter()
            .filter(|(k, _)| {
                touched.as_ref().is_none_or(|t| t.contains(k))
                    || (event_back && matches!(*k, "sample_period" | "sample_freq"))
            })
            .cloned()
            .collect();
        if !todo.is_empty() && self.ctl.set_config(&todo).is_err() {
            // One by one: as much as the module takes.
            for (k, v) in todo {
                if let Err(e) = self.ctl.set_config(&[(k, v.clone())]) {
                    // A smaller buffer_size must hold what waits in the
                    // event buffer; the flight recorder's CPU buffers must
                    // be empty to leave it.
                    let busy = e.error.raw_os_error() == Some(libc::EBUSY);
                    let first = match k {
                        "buffer_size" if busy => "read what waits in /dev/oprofile/buffer, then ",
                        "mode" if busy => {
                            "take a snapshot (echo 1 > /sys/kernel/debug/oprofile/snapshot) and read it, then "
                        }
                        _ => "",
                    };
                    problems.push(format!(
                        "cannot put back {k}={v}: {e} ({first}echo {v} > /sys/kernel/debug/oprofile/{k})"
                    ));
                }
            }
        }
        if self.was_on {
            if let Err(e) = self.ctl.set_tracing(true) {
                problems.push(format!("cannot switch recording back on: {e}"));
            }
        }
        problems
    }

    pub fn control(&self) -> &C {
        &self.ctl
    }
}

impl<C: Control> Drop for Applied<C> {
    /// An error path: put the settings back and say how it went.
    fn drop(&mut self) {
        if self.restored {
            return;
        }
        let problems = self.restore();
        if problems.is_empty() {
            eprintln!(
                "oprofile-rs: the module's settings were put back ({})",
                crate::text::esc(&words(&self.saved))
            );
        }
        for p in problems {
            eprintln!("oprofile-rs: warning: {}", crate::text::esc(&p));
        }
    }
}

// ------------------------------------------------------------------ module

// The device's ioctls: the module's own definition (`src/format.rs`).
use oprofile_stream::oprofile_format::ioctl;
/// `_IO('O', 1)`: switch recording on.
pub const IOC_TRACING_ON: u64 = ioctl::TRACING_ON as u64;
/// `_IO('O', 2)`: switch recording off.
pub const IOC_TRACING_OFF: u64 = ioctl::TRACING_OFF as u64;
/// `_IO('O', 3)`: make everything recorded readable now.
pub const IOC_FLUSH: u64 = ioctl::FLUSH as u64;
/// `_IO('O', 32)`: take a flight-recorder snapshot.
pub const IOC_SNAPSHOT: u64 = ioctl::SNAPSHOT as u64;
/// `_IOR('O', 4, __u32)`: whether recording is on.
pub const IOC_GET_TRACING: u64 = ioctl::GET_TRACING as u64;
/// `_IOW('O', 33, struct oprofile_rs_config_text)`.
pub const IOC_SET_CONFIG: u64 = ioctl::SET_CONFIG as u64;
/// `_IOWR('O', 34, struct oprofile_rs_config_text)`.
pub const IOC_GET_CONFIG: u64 = ioctl::GET_CONFIG as u64;

/// `struct oprofile_rs_config_text { __u64 ptr; __u64 len; }`.
#[repr(C)]
struct ConfigText {
    ptr: u64,
    len: u64,
}

/// `bytes_waiting` of the `event_buffer` line of the debugfs `stats` text.
pub fn waiting_bytes(stats: &str) -> Option<u64> {
    stats
        .lines()
        .find(|l| l.starts_with("event_buffer "))?
        .split_whitespace()
        .find_map(|w| w.strip_prefix("bytes_waiting="))?
        .parse()
        .ok()
}

/// Why the module refused a change with `EBUSY` while recording was off,
/// where the event buffer's fill (`waiting` of `size` bytes) tells: a change
/// is announced by a CONFIG record (at most a few hundred bytes, and the
/// module keeps room for its own markers), which an event buffer this full
/// cannot take. `None` where there is room: another cause.
pub fn full_buffer_hint(waiting: u64, size: u64) -> Option<String> {
    if waiting + 4096 < size {
        return None;
    }
    Some(format!(
        " (EBUSY: the event buffer holds {waiting} of its {size} bytes unread: no room for the CONFIG record that announces a change; read /dev/oprofile/buffer first, e.g. `timeout 1 cat /dev/oprofile/buffer > old.bin`)"
    ))
}

/// The module's control interface: the device's ioctls, or the debugfs
/// files where the module answers `ENOTTY` (no such ioctl).
pub struct ModuleControl {
    dev: File,
    debugfs: PathBuf,
    /// The device took a control ioctl (`Some(true)`), answered ENOTTY
    /// (`Some(false)`: debugfs from then on), or was not asked yet.
    ioctls: Option<bool>,
}

impl ModuleControl {
    /// Control through `dev` (an open `/dev/oprofile/buffer`), else the
    /// files in `debugfs`.
    pub fn new(dev: File, debugfs: PathBuf) -> ModuleControl {
        ModuleControl {
            dev,
            debugfs,
            ioctls: None,
        }
    }

    /// An ioctl; `Ok(None)` where the device has no such command (ENOTTY).
    fn ioctl(&mut self, cmd: u64, arg: usize) -> io::Result<Option<i64>> {
        if self.ioctls == Some(false) {
            return Ok(None);
        }
        // SAFETY: the commands pass no pointer (TRACING_ON/OFF) or one to
        // memory that the caller keeps alive and sized as the command says
        // (a u32, or a ConfigText naming a live buffer of its `len`).
        let r = unsafe { libc::ioctl(self.dev.as_raw_fd(), cmd as _, arg) };
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::ENOTTY) {
                self.ioctls = Some(false);
                return Ok(None);
            }
            return Err(e);
        }
        self.ioctls = Some(true);
        Ok(Some(r as i64))
    }

    /// Makes everything recorded readable now (`flush`).
    pub fn flush(&mut self) -> io::Result<()> {
        if self.ioctl(IOC_FLUSH, 0)?.is_some() {
            return Ok(());
        }
        self.write_file("flush", "1")
    }

    /// Takes a flight-recorder snapshot (`snapshot`).
    pub fn snapshot(&mut self) -> io::Result<()> {
        if self.ioctl(IOC_SNAPSHOT, 0)?.is_some() {
            return Ok(());
        }
        self.write_file("snapshot", "1")
    }

    /// The event buffer's fill: bytes waiting unread and `buffer_size`, from
    /// the debugfs `stats` and `buffer_size` files (readable under
    /// lockdown); `None` where they cannot be read.
    pub fn event_buffer_fill(&self) -> Option<(u64, u64)> {
        let waiting = waiting_bytes(&self.read_file("stats").ok()?)?;
        let size = self.read_file("buffer_size").ok()?.trim().parse().ok()?;
        Some((waiting, size))
    }

    fn read_file(&self, name: &str) -> io::Result<String> {
        std::fs::read_to_string(self.debugfs.join(name))
    }

    fn write_file(&self, name: &str, v: &str) -> io::Result<()> {
        // One write(2) of the whole value, as `echo V > FILE`.
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(self.debugfs.join(name))?;
        f.write_all(format!("{v}\n").as_bytes())
    }
}

impl Control for ModuleControl {
    fn tracing(&mut self) -> io::Result<bool> {
        let mut v: u32 = 0;
        if self
            .ioctl(IOC_GET_TRACING, &mut v as *mut u32 as usize)?
            .is_some()
        {
            return Ok(v != 0);
        }
        Ok(self.read_file("tracing_on")?.trim() == "1")
    }

    fn set_tracing(&mut self, on: bool) -> io::Result<()> {
        let cmd = if on { IOC_TRACING_ON } else { IOC_TRACING_OFF };
        if self.ioctl(cmd, 0)?.is_some() {
            return Ok(());
        }
        self.write_file("tracing_on", if on { "1" } else { "0" })
    }

    fn config(&mut self) -> io::Result<String> {
        let mut buf = vec![0u8; 4096];
        loop {
            let mut arg = ConfigText {
                ptr: buf.as_mut_ptr() as u64,
                len: buf.len() as u64,
            };
            match self.ioctl(IOC_GET_CONFIG, &mut arg as *mut ConfigText as usize) {
                Ok(Some(n)) => {
                    let n = (n as usize).min(buf.len());
                    return Ok(String::from_utf8_lossy(&buf[..n]).into_owned());
                }
                Ok(None) => return self.read_file("config"),
                Err(e) if e.raw_os_error() == Some(libc::ERANGE) && buf.len() < (1 << 20) => {
                    let n = buf.len() * 4;
                    buf.resize(n, 0);
                }
                Err(e) => return Err(e),
            }
        }
    }

    fn set_config(&mut self, changes: &[(&'static str, String)]) -> Result<(), SetError> {
        if changes.is_empty() {
            return Ok(());
        }
        let text = changes
            .iter()
            .map(|(k, v)| format!("{k}={v}\n"))
            .collect::<String>();
        let arg = ConfigText {
            ptr: text.as_ptr() as u64,
            len: text.len() as u64,
        };
        // All or nothing.
        if self
            .ioctl(IOC_SET_CONFIG, &arg as *const ConfigText as usize)
            .map_err(SetError::none)?
            .is_some()
        {
            return Ok(());
        }
        // debugfs: one file at a time. A frequency and a period of the same
        // event may not both be set: frequencies are cleared first when both
        // change, so that neither write meets the other's old value.
        let freq_at = changes.iter().position(|(k, _)| *k == "sample_freq");
        let both = freq_at.is_some() && changes.iter().any(|(k, _)| *k == "sample_period");
        // Likewise both modes may not be excluded (see `debugfs_order`); a
        // failure in either of a swapped pair counts both as changed.
        let (order, swapped) = debugfs_order(changes);
        let mut cleared = false;
        for &i in &order {
            let (k, v) = &changes[i];
            // A cleared frequency counts as changed.
            let applied = if cleared {
                i.max(freq_at.unwrap_or(0) + 1)
            } else {
                i
            };
            if both && *k == "sample_period" {
                self.write_file("sample_freq", "0")
                    .map_err(|error| SetError { applied, error })?;
                cleared = true;
            }
            let applied = if cleared {
                i.max(freq_at.unwrap_or(0) + 1)
            } else {
                i
            };
            let applied = match swapped {
                Some(later) if changes[i].0.starts_with("exclude_") => applied.max(later + 1),
                _ => applied,
            };
            self.write_file(k, v)
                .map_err(|error| SetError { applied, error })?;
        }
        Ok(())
    }

    fn describe(&self) -> String {
        match self.ioctls {
            Some(false) => format!("debugfs {}", self.debugfs.display()),
            _ => "the device's ioctls".into(),
        }
    }
}

/// The order in which the debugfs files take `changes` (in [`KEYS`] order),
/// one at a time: as given, except that where user mode is to be excluded
/// and kernel mode let in, kernel mode goes first, so that no write finds
/// both modes excluded (refused). Also the position of the later of the two
/// where it swapped them (a failure of either counts both as made).
fn debugfs_order(changes: &[(&'static str, String)]) -> (Vec<usize>, Option<usize>) {
    let at = |key: &str| changes.iter().position(|(k, _)| *k == key);
    let mut order: Vec<usize> = (0..changes.len()).collect();
    match (at("exclude_user"), at("exclude_kernel")) {
        (Some(u), Some(k)) if changes[u].1 == "1" && changes[k].1 == "0" => {
            order.swap(u, k);
            (order, Some(u.max(k)))
        }
        _ => (order, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::rc::Rc;

    /// The module as a fake: its configuration, whether it records, and a
    /// log of the calls.
    #[derive(Debug, Default)]
    struct State {
        config: BTreeMap<String, String>,
        on: bool,
        log: Vec<String>,
        /// `set_config` with this key fails (EINVAL, or EBUSY with
        /// `refuse_busy`).
        refuse: Option<&'static str>,
        refuse_busy: bool,
        /// All or nothing (the ioctl), else one key at a time (debugfs).
        atomic: bool,
        /// Switching recording on fails (EIO).
        broken_on: bool,
        /// Reads of the stream needed before the event buffer has room
        /// for a CONFIG record (EBUSY until then).
        full: u32,
    }

    #[derive(Clone)]
    struct Fake(Rc<RefCell<State>>);

    impl Fake {
        fn new(atomic: bool) -> Fake {
            let config = parse_config(
                "event=cpu-clock,page-faults\nsample_period=1000000,1000\nsample_freq=0,0\n\
                 backtrace_depth=0\nuser_backtrace_depth=32\ncpu_buffer_size=65536\n\
                 buffer_size=1048576\nbuffer_watershed=262144\nmode=consume\n",
            );
            Fake(Rc::new(RefCell::new(State {
                config,
                on: true,
                atomic,
                ..State::default()
            })))
        }
        fn log(&self) -> Vec<String> {
            self.0.borrow().log.clone()
        }
        fn config(&self) -> BTreeMap<String, String> {
            self.0.borrow().config.clone()
        }
    }

    impl Control for Fake {
        fn tracing(&mut self) -> io::Result<bool> {
            let mut s = self.0.borrow_mut();
            s.log.push("tracing?".into());
            Ok(s.on)
        }
        fn set_tracing(&mut self, on: bool) -> io::Result<()> {
            let mut s = self.0.borrow_mut();
            if on && s.broken_on {
                return Err(io::Error::from_raw_os_error(libc::EIO));
            }
            s.log.push(if on { "on" } else { "off" }.into());
            s.on = on;
            Ok(())
        }
        fn config(&mut self) -> io::Result<String> {
            let mut s = self.0.borrow_mut();
            s.log.push("config?".into());
            Ok(s.config.iter().map(|(k, v)| format!("{k}={v}\n")).collect())
        }
        fn set_config(&mut self, changes: &[(&'static str, String)]) -> Result<(), SetError> {
            let mut s = self.0.borrow_mut();
            let err = |applied, e| SetError {
                applied,
                error: io::Error::from_raw_os_error(e),
            };
            if s.on {
                return Err(err(0, libc::EBUSY));
            }
            s.log.push(format!("set {}", words(changes)));
            if s.full > 0 {
                return Err(err(0, libc::EBUSY));
            }
            if s.atomic && changes.iter().any(|(k, _)| Some(*k) == s.refuse) {
                return Err(err(0, libc::EINVAL));
            }
            for (i, (k, v)) in changes.iter().enumerate() {
                if Some(*k) == s.refuse {
                    let e = if s.refuse_busy {
                        libc::EBUSY
                    } else {
                        libc::EINVAL
                    };
                    return Err(err(i, e));
                }
                s.config.insert(k.to_string(), v.clone());
            }
            Ok(())
        }
        fn describe(&self) -> String {
            "fake".into()
        }
    }

    fn settings() -> ModuleSettings {
        ModuleSettings {
            events: Some(vec!["cycles".into(), "page-faults".into()]),
            count: Some(vec![0, 100]),
            freq: Some(vec![4000, 0]),
            call_graph: Some((16, 8)),
            buffer_size: Some(4 << 20),
            ..ModuleSettings::default()
        }
    }

    #[test]
    fn applies_in_order_while_off_and_puts_everything_back() {
        for atomic in [true, false] {
            let fake = Fake::new(atomic);
            let before = fake.config();
            let mut a = apply(fake.clone(), &settings(), &mut || false).unwrap();
            assert_eq!(
                fake.log(),
                [
                    "config?",
                    "tracing?",
                    "off",
                    "set event=cycles,page-faults sample_period=0,100 sample_freq=4000,0 \
                     backtrace_depth=16 user_backtrace_depth=8 buffer_size=4194304",
                    "on"
                ]
            );
            let now = fake.config();
            assert_eq!(now["sample_freq"], "4000,0");
            assert_eq!(now["buffer_size"], "4194304");
            // Put back: the event list first (it resets the periods), then
            // the periods and frequencies it implied, then the rest.
            assert!(a.restore().is_empty());
            assert_eq!(
                fake.log()[5..],
                [
                    "off",
                    "set event=cpu-clock,page-faults sample_period=1000000,1000 sample_freq=0,0 \
                     backtrace_depth=0 user_backtrace_depth=32 buffer_size=1048576",
                    "on"
                ]
            );
            assert_eq!(fake.config(), before);
            // A second restore (and the drop) does nothing more.
            assert!(a.restore().is_empty());
            drop(a);
            assert_eq!(fake.log().len(), 8);
        }
    }

    #[test]
    fn excluded_modes_are_set_and_put_back() {
        let fake = Fake::new(true);
        for (k, v) in [("exclude_user", "0"), ("exclude_kernel", "1")] {
            fake.0.borrow_mut().config.insert(k.into(), v.into());
        }
        let before = fake.config();
        // --all-kernel from user mode only: both keys, last, in one change.
        let want = ModuleSettings {
            exclude: Some((true, false)),
            call_graph: Some((4, 4)),
            ..ModuleSettings::default()
        };
        let mut a = apply(fake.clone(), &want, &mut || false).unwrap();
        assert_eq!(
            fake.log()[3],
            "set backtrace_depth=4 user_backtrace_depth=4 exclude_user=1 exclude_kernel=0"
        );
        assert_eq!(
            (
                &fake.config()["exclude_user"][..],
                &fake.config()["exclude_kernel"][..]
            ),
            ("1", "0")
        );
        assert!(a.restore().is_empty());
        assert_eq!(fake.config(), before);
        // A module without the keys (older): refused before any change.
        let old = Fake::new(true);
        let e = apply(old.clone(), &want, &mut || false).err().unwrap();
        assert!(e.to_string().contains("has no exclude_user"), "{e}");
        assert_eq!(old.log(), ["config?"]);
    }

    #[test]
    fn the_recording_mode_goes_last_and_a_busy_restore_says_to_snapshot() {
        let fake = Fake::new(true);
        let before = fake.config();
        // --snapshot with a larger buffer: the mode after buffer_size (a
        // switch to overwrite mode needs the room).
        let want = ModuleSettings {
            mode: Some("overwrite".into()),
            buffer_size: Some(4 << 20),
            ..ModuleSettings::default()
        };
        let mut a = apply(fake.clone(), &want, &mut || false).unwrap();
        assert_eq!(fake.log()[3], "set buffer_size=4194304 mode=overwrite");
        assert_eq!(fake.config()["mode"], "overwrite");
        assert!(a.restore().is_empty());
        assert_eq!(fake.config(), before);
        // The module refuses to leave overwrite mode while its CPU buffers
        // hold records: the message says how to empty them.
        let fake = Fake::new(false);
        let mut a = apply(fake.clone(), &want, &mut || false).unwrap();
        {
            let mut s = fake.0.borrow_mut();
            s.refuse = Some("mode");
            s.refuse_busy = true;
        }
        let problems = a.restore();
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(
            problems[0].contains("cannot put back mode=consume")
                && problems[0].contains("take a snapshot"),
            "{problems:?}"
        );
    }

    #[test]
    fn cgroup_values() {
        // Not a directory here: a path below the cgroup2 root, or a name
        // relative to it (perf's -G).
        assert_eq!(
            cgroup_value("/system.slice/x.service").unwrap(),
            "/system.slice/x.service"
        );
        assert_eq!(cgroup_value("system.slice/x").unwrap(), "/system.slice/x");
        assert_eq!(cgroup_value("/").unwrap(), "/");
        // A directory that is not on cgroup2 is a path too.
        let dir = std::env::temp_dir();
        let d = dir.to_str().unwrap();
        assert_eq!(cgroup_value(d).unwrap(), d);
        for bad in ["", "a b", "/a=b", "a\tb", "a\0b"] {
            let e = cgroup_value(bad).unwrap_err().to_string();
            assert!(e.contains("not a cgroup path"), "{bad:?}: {e}");
        }
        // A cgroup2 directory (where this machine has one): its id.
        let root = std::path::Path::new("/sys/fs/cgroup");
        if is_cgroup2(root) {
            use std::os::unix::fs::MetadataExt;
            let ino = std::fs::metadata(root).unwrap().ino();
            assert_eq!(cgroup_value("/sys/fs/cgroup").unwrap(), ino.to_string());
        }
    }

    #[test]
    fn the_cgroup_filter_is_the_last_change() {
        let current = parse_config(
            "event=cpu-clock\nsample_period=1000000\nsample_freq=0\nbacktrace_depth=0\n\
             user_backtrace_depth=0\ncpu_buffer_size=65536\nbuffer_size=1048576\n\
             buffer_watershed=262144\nexclude_user=0\nexclude_kernel=0\nmode=consume\ncgroup=/\n",
        );
        let s = ModuleSettings {
            cgroup: Some("/box".into()),
            mode: Some("overwrite".into()),
            call_graph: Some((4, 4)),
            ..ModuleSettings::default()
        };
        let ch = s.changes(&current).unwrap();
        let keys: Vec<&str> = ch.iter().map(|(k, _)| *k).collect();
        assert_eq!(
            keys,
            ["backtrace_depth", "user_backtrace_depth", "mode", "cgroup"]
        );
        assert_eq!(ch.last().unwrap().1, "/box");
    }

    #[test]
    fn debugfs_order_lets_a_mode_in_before_excluding_the_other() {
        let ch = |kv: &[(&'static str, &str)]| -> Vec<(&'static str, String)> {
            kv.iter().map(|(k, v)| (*k, v.to_string())).collect()
        };
        let swapped = ch(&[
            ("backtrace_depth", "4"),
            ("exclude_user", "1"),
            ("exclude_kernel", "0"),
        ]);
        assert_eq!(debugfs_order(&swapped), (vec![0, 2, 1], Some(2)));
        // Not the last keys (`record --snapshot --all-kernel`: mode last).
        let with_mode = ch(&[
            ("exclude_user", "1"),
            ("exclude_kernel", "0"),
            ("mode", "overwrite"),
        ]);
        assert_eq!(debugfs_order(&with_mode), (vec![1, 0, 2], Some(1)));
        for kept in [
            ch(&[("exclude_user", "0"), ("exclude_kernel", "1")]),
            ch(&[("exclude_user", "0"), ("exclude_kernel", "0")]),
            ch(&[("backtrace_depth", "4")]),
            ch(&[]),
        ] {
            assert_eq!(debugfs_order(&kept), ((0..kept.len()).collect(), None));
        }
    }

    #[test]
    fn contradictions_are_refused_before_any_change() {
        let bad = [
            // -c and -F for the same event (one value: every event).
            ModuleSettings {
                count: Some(vec![1000]),
                freq: Some(vec![0, 4000]),
                ..ModuleSettings::default()
            },
            ModuleSettings {
                events: Some(vec!["cycles".into()]),
                count: Some(vec![1000]),
                freq: Some(vec![99]),
                ..ModuleSettings::default()
            },
            // Lists that do not match -e.
            ModuleSettings {
                events: Some(vec!["cycles".into(), "page-faults".into()]),
                count: Some(vec![1, 2, 3]),
                ..ModuleSettings::default()
            },
            // The same event twice, too many events.
            ModuleSettings {
                events: Some(vec!["cycles".into(), "cycles".into()]),
                ..ModuleSettings::default()
            },
            ModuleSettings {
                events: Some((0..9).map(|i| format!("e{i}")).collect()),
                ..ModuleSettings::default()
            },
            // A name that would smuggle another key into the text.
            ModuleSettings {
                events: Some(vec!["cycles\nbuffer_size=1".into()]),
                ..ModuleSettings::default()
            },
            ModuleSettings {
                events: Some(vec!["cycles buffer_size=1".into()]),
                ..ModuleSettings::default()
            },
            // The watershed not below the buffer.
            ModuleSettings {
                buffer_size: Some(1 << 20),
                watershed: Some(1 << 20),
                ..ModuleSettings::default()
            },
        ];
        for s in &bad {
            assert!(s.check().is_err(), "{s:?}");
            let fake = Fake::new(true);
            let e = apply(fake.clone(), s, &mut || false)
                .err()
                .expect("refused");
            assert!(
                fake.log().iter().all(|l| l.ends_with('?')),
                "{s:?}: {e}: {:?}",
                fake.log()
            );
            assert!(fake.0.borrow().on);
        }
        // A list that does not match the module's own events (2 of them,
        // no -e): known only from its configuration, still before a change.
        let s = ModuleSettings {
            count: Some(vec![1, 2, 3]),
            ..ModuleSettings::default()
        };
        assert!(s.check().is_ok());
        let fake = Fake::new(true);
        let e = apply(fake.clone(), &s, &mut || false)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("3 values for 2 events"), "{e}");
        assert_eq!(fake.log(), ["config?"]);
    }

    #[test]
    fn a_refused_change_leaves_the_module_as_it_was() {
        for atomic in [true, false] {
            let fake = Fake::new(atomic);
            fake.0.borrow_mut().refuse = Some("buffer_size");
            let before = fake.config();
            let e = apply(fake.clone(), &settings(), &mut || false)
                .err()
                .unwrap()
                .to_string();
            assert!(e.contains("the module refused"), "{e}");
            assert!(e.contains("EINVAL"), "{e}");
            assert!(e.contains("as they were"), "{e}");
            // One key at a time: the keys before buffer_size were changed,
            // and put back.
            assert_eq!(fake.config(), before, "atomic {atomic}");
            assert!(fake.0.borrow().on, "recording is on again");
        }
    }

    #[test]
    fn a_failure_to_switch_on_puts_the_settings_back() {
        let fake = Fake::new(true);
        fake.0.borrow_mut().broken_on = true;
        let before = fake.config();
        let e = apply(fake.clone(), &settings(), &mut || false)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("cannot switch recording on"), "{e}");
        assert!(e.contains("cannot switch recording back on"), "{e}");
        assert_eq!(fake.config(), before);
    }

    #[test]
    fn dropping_on_an_error_path_puts_the_settings_back() {
        let fake = Fake::new(false);
        let before = fake.config();
        {
            let _a = apply(fake.clone(), &settings(), &mut || false).unwrap();
            assert_ne!(fake.config(), before);
            // An error returned while recording drops it here.
        }
        assert_eq!(fake.config(), before);
        assert!(fake.0.borrow().on);
    }

    #[test]
    fn what_cannot_be_put_back_is_said_with_the_command_that_would() {
        let fake = Fake::new(false);
        let mut a = apply(fake.clone(), &settings(), &mut || false).unwrap();
        fake.0.borrow_mut().refuse = Some("buffer_size");
        let p = a.restore();
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(
            p[0].contains("cannot put back buffer_size=1048576")
                && p[0].contains("> /sys/kernel/debug/oprofile/buffer_size"),
            "{p:?}"
        );
        // The others were put back one by one.
        assert_eq!(fake.config()["sample_freq"], "0,0");
        assert_eq!(fake.config()["event"], "cpu-clock,page-faults");
        assert_eq!(fake.config()["backtrace_depth"], "0");
        // EBUSY for a smaller buffer_size: what waits must be read first.
        let fake = Fake::new(false);
        let mut a = apply(fake.clone(), &settings(), &mut || false).unwrap();
        {
            let mut s = fake.0.borrow_mut();
            s.refuse = Some("buffer_size");
            s.refuse_busy = true;
        }
        let p = a.restore();
        assert!(
            p[0].contains("(read what waits in /dev/oprofile/buffer, then echo 1048576 >"),
            "{p:?}"
        );
    }

    #[test]
    fn a_full_event_buffer_is_read_and_the_change_tried_again() {
        let fake = Fake::new(true);
        fake.0.borrow_mut().full = 2;
        let f = fake.clone();
        let mut reads = 0;
        let a = apply(fake.clone(), &settings(), &mut || {
            reads += 1;
            f.0.borrow_mut().full -= 1;
            true
        })
        .unwrap();
        drop(a);
        assert_eq!(reads, 2);
        let sets = fake.log().iter().filter(|l| l.starts_with("set ")).count();
        assert_eq!(sets, 3 + 1, "three tries, then the restore");
        // A reader that finds nothing to read: the refusal stands, nothing
        // changed.
        let fake = Fake::new(true);
        fake.0.borrow_mut().full = 100;
        let before = fake.config();
        let e = apply(fake.clone(), &settings(), &mut || false)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("EBUSY"), "{e}");
        assert_eq!(fake.config(), before);
        assert!(fake.0.borrow().on);
    }

    #[test]
    fn recording_off_before_stays_off() {
        let fake = Fake::new(true);
        fake.0.borrow_mut().on = false;
        let mut a = apply(
            fake.clone(),
            &ModuleSettings {
                call_graph: Some(DEFAULT_CALL_GRAPH),
                ..ModuleSettings::default()
            },
            &mut || false,
        )
        .unwrap();
        assert!(fake.0.borrow().on, "on for the recording");
        a.stop_recording().unwrap();
        assert!(a.restore().is_empty());
        assert!(!fake.0.borrow().on);
        assert_eq!(fake.config()["backtrace_depth"], "0");
    }

    #[test]
    fn periods_and_frequencies_per_event() {
        let cur = Fake::new(true).config();
        let ch = |s: ModuleSettings| {
            s.changes(&cur)
                .unwrap()
                .into_iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
        };
        // -F for the first event only: the second keeps its period.
        assert_eq!(
            ch(ModuleSettings {
                freq: Some(vec![4000, 0]),
                ..ModuleSettings::default()
            }),
            ["sample_period=0,1000", "sample_freq=4000,0"]
        );
        // One value: every event.
        assert_eq!(
            ch(ModuleSettings {
                count: Some(vec![50000]),
                ..ModuleSettings::default()
            }),
            ["sample_period=50000,50000", "sample_freq=0,0"]
        );
        // New events: those without a value get their defaults (0).
        assert_eq!(
            ch(ModuleSettings {
                events: Some(vec!["cycles".into(), "cache-misses".into()]),
                count: Some(vec![0, 100]),
                ..ModuleSettings::default()
            }),
            [
                "event=cycles,cache-misses",
                "sample_period=0,100",
                "sample_freq=0,0"
            ]
        );
        assert_eq!(
            ch(ModuleSettings {
                events: Some(vec!["task-clock".into()]),
                ..ModuleSettings::default()
            }),
            ["event=task-clock"]
        );
    }

    #[test]
    fn option_values() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("64K"), Ok(65536));
        assert_eq!(parse_size("2m"), Ok(2 << 20));
        assert_eq!(parse_size("1G"), Ok(1 << 30));
        for bad in ["", "K", "1.5M", "-1", "99999999999999999999G", "12Q"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_call_graph("16"), Ok((16, 16)));
        assert_eq!(parse_call_graph("16,4"), Ok((16, 4)));
        assert_eq!(parse_call_graph("fp"), Ok(DEFAULT_CALL_GRAPH));
        assert_eq!(parse_call_graph("no"), Ok((0, 0)));
        for bad in ["", "x", "1,", ",1", "1,2,3", "dwarf"] {
            assert!(parse_call_graph(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_list("1,0,3"), Ok(vec![1, 0, 3]));
        assert!(parse_list("1,,3").is_err());
        assert_eq!(
            parse_config("a=1\nb=x,y\n")["b"],
            "x,y",
            "lines of key=value"
        );
        assert_eq!(parse_config("a=1 b=2")["b"], "2", "or words");
    }

    #[test]
    fn call_graph_dwarf_as_perf_takes_it() {
        let dwarf = |n| CallGraph {
            depths: DEFAULT_CALL_GRAPH,
            user_stack: Some(n),
            fit: false,
            tables: false,
        };
        assert_eq!(parse_call_graph_arg("dwarf"), Ok(dwarf(8192)));
        assert_eq!(parse_call_graph_arg("dwarf,4096"), Ok(dwarf(4096)));
        assert_eq!(parse_call_graph_arg(" dwarf , 2K"), Ok(dwarf(2048)));
        assert_eq!(parse_call_graph_arg("dwarf,8"), Ok(dwarf(8)));
        assert_eq!(parse_call_graph_arg("dwarf,8k"), Ok(dwarf(8192)));
        // The other forms say nothing of the copy (`record` turns it off
        // for them: main.rs).
        for (arg, depths) in [
            ("fp", DEFAULT_CALL_GRAPH),
            ("16,4", (16, 4)),
            ("no", (0, 0)),
        ] {
            assert_eq!(
                parse_call_graph_arg(arg),
                Ok(CallGraph {
                    depths,
                    user_stack: None,
                    fit: false,
                    tables: false,
                }),
                "{arg}"
            );
        }
        for bad in [
            "dwarf,0",
            "dwarf,12",
            "dwarf,8200",
            "dwarf,16K",
            "dwarf,x",
            "dwarf,",
            "dwarf,8,8",
            "dwarf,-8",
            "dwarfs",
            "lbr",
        ] {
            let e = parse_call_graph_arg(bad).unwrap_err();
            assert!(e.contains(bad.trim()), "{bad}: {e}");
        }
        assert!(parse_call_graph_arg("dwarf,12")
            .unwrap_err()
            .contains("a multiple of 8 from 8 to 8192"));
    }

    #[test]
    fn call_graph_hybrid_fits_the_copies() {
        let hybrid = |n| CallGraph {
            depths: DEFAULT_CALL_GRAPH,
            user_stack: Some(n),
            fit: true,
            tables: false,
        };
        assert_eq!(parse_call_graph_arg("hybrid"), Ok(hybrid(1024)));
        assert_eq!(parse_call_graph_arg("hybrid,512"), Ok(hybrid(512)));
        assert_eq!(parse_call_graph_arg(" hybrid , 8K"), Ok(hybrid(8192)));
        for bad in ["hybrid,0", "hybrid,12", "hybrid,16K", "hybrid,", "hybrids"] {
            let e = parse_call_graph_arg(bad).unwrap_err();
            assert!(e.contains(bad.trim()), "{bad}: {e}");
        }
        let mut cur = stack_fake().config();
        let ch = |cur: &BTreeMap<String, String>, s: &ModuleSettings| {
            s.changes(cur).map(|c| {
                c.into_iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>()
            })
        };
        let want = |fit| ModuleSettings {
            call_graph: Some(DEFAULT_CALL_GRAPH),
            user_stack: Some(512),
            user_stack_fit: Some(fit),
            cpu_buffer_size: Some(1 << 20),
            buffer_size: Some(1 << 22),
            ..ModuleSettings::default()
        };
        // A module without the setting: hybrid is refused, the others
        // need nothing of it.
        let e = ch(&cur, &want(true)).unwrap_err().to_string();
        assert!(e.contains("no user_stack_fit setting"), "{e}");
        assert!(!ch(&cur, &want(false))
            .unwrap()
            .iter()
            .any(|c| c.starts_with("user_stack_fit")));
        cur.insert("user_stack_fit".into(), "0".into());
        let c = ch(&cur, &want(true)).unwrap();
        assert!(c.contains(&"user_stack_fit=1".to_string()), "{c:?}");
        assert!(c.contains(&"user_stack_size=512".to_string()), "{c:?}");
        let c = ch(&cur, &want(false)).unwrap();
        assert!(c.contains(&"user_stack_fit=0".to_string()), "{c:?}");
    }

    /// The fake module with the user_stack_size key.
    fn stack_fake() -> Fake {
        let fake = Fake::new(true);
        fake.0
            .borrow_mut()
            .config
            .insert("user_stack_size".into(), "0".into());
        fake
    }

    #[test]
    fn call_graph_g_turns_the_copy_off() {
        // -g (and the depth forms): the chain alone, the copy off, even on
        // a module older than copies.
        let mut cur = stack_fake().config();
        cur.remove("user_stack_size");
        let ch = |cur: &BTreeMap<String, String>, s: &ModuleSettings| {
            s.changes(cur)
                .unwrap()
                .into_iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
        };
        let g = ModuleSettings {
            call_graph: Some(DEFAULT_CALL_GRAPH),
            user_stack: Some(0),
            ..ModuleSettings::default()
        };
        assert_eq!(
            ch(&cur, &g),
            ["backtrace_depth=32", "user_backtrace_depth=32"]
        );
        cur.insert("user_stack_size".into(), "1024".into());
        assert_eq!(
            ch(&cur, &g),
            [
                "backtrace_depth=32",
                "user_backtrace_depth=32",
                "user_stack_size=0"
            ]
        );
    }

    #[test]
    fn call_graph_dwarf_sets_the_stack_size_and_raises_the_buffers() {
        let cur = stack_fake().config();
        let ch = |s: ModuleSettings| {
            s.changes(&cur)
                .unwrap()
                .into_iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
        };
        let dwarf = |n| ModuleSettings {
            call_graph: Some(DEFAULT_CALL_GRAPH),
            user_stack: Some(n),
            ..ModuleSettings::default()
        };
        // 8 KiB: samples of 9296 bytes; 64 of them in a CPU buffer (1 MiB,
        // a power of two), four CPU buffers in the event buffer; the stack
        // size after the buffers (KEYS order: a module that takes one key
        // at a time has the room first).
        assert_eq!(max_record(8192), 9296);
        assert_eq!(
            ch(dwarf(8192)),
            [
                "backtrace_depth=32",
                "user_backtrace_depth=32",
                "cpu_buffer_size=1048576",
                "buffer_size=4194304",
                "user_stack_size=8192"
            ]
        );
        // Small copies fit the buffers as they are.
        assert_eq!(
            ch(dwarf(8))[2..],
            ["cpu_buffer_size=131072", "user_stack_size=8"]
        );
        // Sizes given are kept; the event buffer follows a given CPU buffer.
        assert_eq!(
            ch(ModuleSettings {
                cpu_buffer_size: Some(256 << 10),
                ..dwarf(8192)
            })[2..],
            ["cpu_buffer_size=262144", "user_stack_size=8192"]
        );
        assert_eq!(
            ch(ModuleSettings {
                buffer_size: Some(2 << 20),
                ..dwarf(8192)
            })[2..],
            [
                "cpu_buffer_size=1048576",
                "buffer_size=2097152",
                "user_stack_size=8192"
            ]
        );
        // Larger buffers already: left as they are.
        let mut big = cur.clone();
        big.insert("cpu_buffer_size".into(), (4u64 << 20).to_string());
        big.insert("buffer_size".into(), (64u64 << 20).to_string());
        let c = dwarf(8192).changes(&big).unwrap();
        assert_eq!(c.len(), 3, "{c:?}");
        // A module without the setting: said plainly, nothing changed.
        let old = Fake::new(true);
        let e = apply(old.clone(), &dwarf(8192), &mut || false)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("no user_stack_size setting"), "{e}");
        assert_eq!(old.log(), ["config?"]);
    }

    #[test]
    fn call_graph_dwarf_is_put_back_and_a_refusal_says_which_size_to_raise() {
        let fake = stack_fake();
        let want = ModuleSettings {
            call_graph: Some(DEFAULT_CALL_GRAPH),
            user_stack: Some(8192),
            ..ModuleSettings::default()
        };
        let mut a = apply(fake.clone(), &want, &mut || false).unwrap();
        assert_eq!(fake.config()["user_stack_size"], "8192");
        assert_eq!(fake.config()["cpu_buffer_size"], "1048576");
        assert!(a.restore().is_empty());
        assert_eq!(fake.config()["user_stack_size"], "0");
        assert_eq!(fake.config()["cpu_buffer_size"], "65536");
        assert_eq!(fake.config()["buffer_size"], "1048576");
        // EINVAL: the message names the sizes to raise.
        let fake = stack_fake();
        fake.0.borrow_mut().refuse = Some("user_stack_size");
        let e = apply(
            fake.clone(),
            &ModuleSettings {
                buffer_size: Some(1 << 20),
                ..want
            },
            &mut || false,
        )
        .err()
        .unwrap()
        .to_string();
        assert!(e.contains("EINVAL"), "{e}");
        assert!(
            e.contains("user_stack_size=8192 makes samples of up to 9296 bytes")
                && e.contains(
                    "raise --buffer-size (now 1048576) or --cpu-buffer-size (now 1048576)"
                ),
            "{e}"
        );
        assert_eq!(fake.config()["user_stack_size"], "0");
    }

    /// The fake module with the pid key (0: every task).
    fn pid_fake(atomic: bool) -> Fake {
        let fake = Fake::new(atomic);
        fake.0.borrow_mut().config.insert("pid".into(), "0".into());
        fake
    }

    #[test]
    fn pid_is_set_while_recording_is_off_and_put_back() {
        for atomic in [true, false] {
            let fake = pid_fake(atomic);
            let want = ModuleSettings {
                call_graph: Some(DEFAULT_CALL_GRAPH),
                pid: Some(4321),
                ..ModuleSettings::default()
            };
            let mut a = apply(fake.clone(), &want, &mut || false).unwrap();
            assert_eq!(fake.config()["pid"], "4321");
            // Off, the change with pid last (KEYS order), on: the process
            // is bound before anything is recorded.
            assert_eq!(
                fake.log(),
                [
                    "config?",
                    "tracing?",
                    "off",
                    "set backtrace_depth=32 user_backtrace_depth=32 pid=4321",
                    "on"
                ]
            );
            a.stop_recording().unwrap();
            assert!(a.restore().is_empty());
            assert_eq!(fake.config()["pid"], "0");
            assert_eq!(a.saved.last(), Some(&("pid", "0".to_string())));
        }
    }

    #[test]
    fn pid_refusals_say_what_they_mean() {
        // A module without the key: said plainly, nothing touched.
        let old = Fake::new(true);
        let want = ModuleSettings {
            pid: Some(7),
            ..ModuleSettings::default()
        };
        let e = apply(old.clone(), &want, &mut || false).err().unwrap();
        assert!(e.to_string().contains("no pid setting"), "{e}");
        assert_eq!(old.log(), ["config?"]);
        // Refused with EINVAL ("unknown key"): the caller may try without.
        let fake = pid_fake(true);
        fake.0.borrow_mut().refuse = Some("pid");
        let e = apply(fake.clone(), &want, &mut || false).err().unwrap();
        let r = e.downcast_ref::<Refused>().expect("a typed refusal");
        assert!(r.may_not_know("pid") && !r.may_not_know("cgroup"), "{r:?}");
        assert!(
            e.to_string().contains("its settings are as they were"),
            "{e}"
        );
        assert_eq!(fake.config()["pid"], "0");
        assert!(fake.0.borrow().on);
        // EBUSY is no such refusal (one key at a time: the fake's ioctl
        // refuses with EINVAL).
        let fake = pid_fake(false);
        {
            let mut s = fake.0.borrow_mut();
            s.refuse = Some("pid");
            s.refuse_busy = true;
        }
        let e = apply(fake.clone(), &want, &mut || false).err().unwrap();
        assert!(!e.downcast_ref::<Refused>().unwrap().may_not_know("pid"));
        // ESRCH: the hint names it.
        let h = refusal_hint(&io::Error::from_raw_os_error(libc::ESRCH));
        assert!(h.contains("ESRCH: no such process"), "{h}");
    }

    #[test]
    fn ioctl_numbers_match_the_interface() {
        // _IOW('O', 33, 16 bytes), _IOWR('O', 34, 16 bytes), _IOR('O', 4, 4).
        assert_eq!(IOC_SET_CONFIG, 0x4010_4f21);
        assert_eq!(IOC_GET_CONFIG, 0xc010_4f22);
        assert_eq!(IOC_GET_TRACING, 0x8004_4f04);
        assert_eq!(IOC_TRACING_ON, 0x4f01);
        assert_eq!(std::mem::size_of::<ConfigText>(), 16);
    }

    #[test]
    fn a_full_event_buffer_is_named_in_an_ebusy_refusal() {
        let stats = "cpu0 sample_received=5 bytes_waiting=7\n\
                     event_buffer bytes_waiting=1046000 bytes_total=2000000 refused_full=3\n";
        assert_eq!(waiting_bytes(stats), Some(1_046_000));
        assert_eq!(waiting_bytes("cpu0 bytes_waiting=7\n"), None);
        assert_eq!(waiting_bytes("event_buffer bytes_waiting=x\n"), None);
        let h = full_buffer_hint(1_046_000, 1 << 20).unwrap();
        assert!(h.contains("1046000 of its 1048576 bytes unread"), "{h}");
        assert!(h.contains("read /dev/oprofile/buffer first"), "{h}");
        // Room for a CONFIG record: another cause, nothing said.
        assert_eq!(full_buffer_hint(500_000, 1 << 20), None);
        assert_eq!(full_buffer_hint(0, 65536), None);
    }
}
