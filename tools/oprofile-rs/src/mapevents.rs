//! Exact process maps: the kernel's MMAP2, COMM, FORK and EXIT records, taken
//! while recording from one `PERF_COUNT_SW_DUMMY` event per CPU (as `perf
//! record` does), kept in the side-car with their times, and the time-ordered
//! lookup that gives each sample the mapping in force when it was taken.
//!
//! The records' times are `perf_clock()`, which is `local_clock()`: the
//! stream's clock (header field `clock` = 1), so they order against samples.
//!
//! ## The perf ABI: maintained crates, and what stays ours
//!
//! - `perf-event-open-sys` (7.1, bindgen'd from Linux 7.2's `perf_event.h`)
//!   gives the `perf_event_attr` (its bitfield setters: `set_mmap2`,
//!   `set_build_id`, ... instead of bit positions by hand), the constants
//!   (types, `PERF_SAMPLE_*`, `PERF_RECORD_*`, the misc flags,
//!   `PERF_FLAG_FD_CLOEXEC`), the system call, and where `data_head` and
//!   `data_tail` are in the ring's first page (`perf_event_mmap_page`). The
//!   attr declares `PERF_ATTR_SIZE_VER5` (112 bytes, as before): every field
//!   set is in it, so kernels from 4.1 on read all of it.
//! - `linux-perf-event-reader` (0.10) decodes the records. It is handed the
//!   very attr that was opened (`PerfEventAttr::parse` of its bytes), so
//!   where the sample id trailer and its time are follows from the attr, not
//!   from offsets written here; its `RawData::Split` takes a record that
//!   wraps around the end of the ring as two slices, without a copy.
//!
//! Measured against 0.10.2, what is still done here (`read_ring`):
//! - framing the ring. The crate decodes one record from its bytes; reading
//!   headers off a ring, checking their sizes and moving the tail is ours.
//!   A header whose size is below 8 or past what the kernel published (it
//!   publishes whole records only) leaves no way to find the next record:
//!   the rest of what the ring holds is skipped and counted
//!   ([`Collector::skipped`], `record` warns), the tail moved to the head
//!   (the old code stopped there for good, and the ring then filled up).
//! - `Mmap2Record::parse` asserts that a build-id's size is at most 20: a
//!   garbage byte panics the recorder. The size is checked first, and such a
//!   record is skipped and counted.
//! - `RawData::get(a..b)` on a split record counts the second part's end
//!   from the shortened first part: `Split(0..10, 10..20).get(4..14)` gives
//!   14 bytes, 4..18. It is right only where the data ends where the range
//!   does; spans are taken here exactly, and cut with `skip` and
//!   `split_off_prefix`.
//! - names and paths are read up to their NUL, else to the end of what the
//!   crate is given: the sample id trailer is cut off first, as before.
//! - a build-id of size 0 is none (the kernel sends none: without one it
//!   gives the device and inode, which the side-car does not keep).
//!
//! Both crates build with the workspace's toolchain (no `rust-version`
//! given; `thiserror` 2, new with the reader, wants 1.77); they add four
//! crates to the build (the two, `thiserror` 2 and `thiserror-impl` 2;
//! `byteorder`, `bitflags`, `memchr` were in it). Tests: the unit tests
//! below (synthetic rings, hostile ones included) and
//! `tests/mapevents.rs` (the events opened for real on the test machine).

use std::collections::HashMap;
use std::rc::Rc;

use byteorder::NativeEndian;
use linux_perf_event_reader::{
    Endianness, EventRecord, Mmap2FileId, PerfEventAttr, RawData, RawEventRecord, RecordParseInfo,
    RecordType,
};
use perf_event_open_sys as sys;
use sys::bindings as pb;

use crate::maps::MapEntry;

/// One record of the kernel's, as kept in the side-car (`events`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MapEvent {
    /// An executable mapping (`PERF_RECORD_MMAP2`).
    Mmap {
        time: u64,
        pid: u32,
        tid: u32,
        start: u64,
        end: u64,
        pgoff: u64,
        prot: u32,
        /// Hex build-id, where the kernel gave one (`attr.build_id`).
        build_id: Option<String>,
        path: String,
    },
    /// A command name change; `exec` when due to an exec (the address space
    /// was replaced).
    Comm {
        time: u64,
        pid: u32,
        tid: u32,
        exec: bool,
        name: String,
    },
    Fork {
        time: u64,
        pid: u32,
        ppid: u32,
        tid: u32,
        ptid: u32,
    },
    Exit {
        time: u64,
        pid: u32,
        ppid: u32,
        tid: u32,
        ptid: u32,
    },
}

impl MapEvent {
    /// A FORK (`fork`) or EXIT record's event, from either source (the
    /// side-car line or the perf ring).
    fn task(fork: bool, time: u64, pid: u32, ppid: u32, tid: u32, ptid: u32) -> MapEvent {
        if fork {
            MapEvent::Fork {
                time,
                pid,
                ppid,
                tid,
                ptid,
            }
        } else {
            MapEvent::Exit {
                time,
                pid,
                ppid,
                tid,
                ptid,
            }
        }
    }

    /// The record's time and the process (tgid) it is about.
    fn time_pid(&self) -> (u64, u32) {
        match *self {
            MapEvent::Mmap { time, pid, .. }
            | MapEvent::Comm { time, pid, .. }
            | MapEvent::Fork { time, pid, .. }
            | MapEvent::Exit { time, pid, .. } => (time, pid),
        }
    }

    pub fn time(&self) -> u64 {
        self.time_pid().0
    }

    /// The process (tgid) the record is about.
    pub fn pid(&self) -> u32 {
        self.time_pid().1
    }

    /// One side-car line (without the newline).
    pub fn to_line(&self) -> String {
        match self {
            MapEvent::Mmap {
                time,
                pid,
                tid,
                start,
                end,
                pgoff,
                prot,
                build_id,
                path,
            } => format!(
                "{time} mmap {pid} {tid} {start:x} {end:x} {pgoff:x} {prot} {} {}",
                build_id.as_deref().unwrap_or("-"),
                escape(path)
            ),
            MapEvent::Comm {
                time,
                pid,
                tid,
                exec,
                name,
            } => format!("{time} comm {pid} {tid} {} {}", *exec as u8, escape(name)),
            MapEvent::Fork {
                time,
                pid,
                ppid,
                tid,
                ptid,
            }
            | MapEvent::Exit {
                time,
                pid,
                ppid,
                tid,
                ptid,
            } => {
                let kind = if matches!(self, MapEvent::Fork { .. }) {
                    "fork"
                } else {
                    "exit"
                };
                format!("{time} {kind} {pid} {ppid} {tid} {ptid}")
            }
        }
    }

    /// Parses a side-car line; `None` for a malformed one.
    pub fn parse_line(line: &str) -> Option<MapEvent> {
        let mut it = line.splitn(3, ' ');
        let time: u64 = it.next()?.parse().ok()?;
        let kind = it.next()?;
        let rest = it.next()?;
        let num = |s: Option<&str>| s?.parse::<u32>().ok();
        let hex = |s: Option<&str>| u64::from_str_radix(s?, 16).ok();
        match kind {
            "mmap" => {
                let mut f = rest.splitn(8, ' ');
                let (pid, tid) = (num(f.next())?, num(f.next())?);
                let (start, end, pgoff) = (hex(f.next())?, hex(f.next())?, hex(f.next())?);
                let prot = num(f.next())?;
                let build_id = match f.next()? {
                    "-" => None,
                    b => Some(b.to_string()),
                };
                let path = unescape(f.next().unwrap_or(""));
                Some(MapEvent::Mmap {
                    time,
                    pid,
                    tid,
                    start,
                    end,
                    pgoff,
                    prot,
                    build_id,
                    path,
                })
            }
            "comm" => {
                let mut f = rest.splitn(4, ' ');
                let (pid, tid) = (num(f.next())?, num(f.next())?);
                let exec = f.next()? == "1";
                let name = unescape(f.next().unwrap_or(""));
                Some(MapEvent::Comm {
                    time,
                    pid,
                    tid,
                    exec,
                    name,
                })
            }
            "fork" | "exit" => {
                let mut f = rest.split(' ');
                let (pid, ppid, tid, ptid) = (
                    num(f.next())?,
                    num(f.next())?,
                    num(f.next())?,
                    num(f.next())?,
                );
                Some(MapEvent::task(kind == "fork", time, pid, ppid, tid, ptid))
            }
            _ => None,
        }
    }
}

/// Paths and names may hold any byte but NUL: `\` and newlines are escaped.
pub(crate) fn escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('\n', "\\n")
}

pub(crate) fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut it = s.chars();
    while let Some(c) = it.next() {
        if c == '\\' {
            match it.next() {
                Some('n') => out.push('\n'),
                Some(o) => out.push(o),
                None => out.push('\\'),
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The side-car `events` file's text: one record per line, in time order.
pub fn to_text(events: &[MapEvent]) -> String {
    let mut s = String::new();
    for e in events {
        s += &e.to_line();
        s.push('\n');
    }
    s
}

/// Parses the side-car `events` file (malformed lines are skipped, and
/// counted in the second value).
pub fn parse_text(text: &str) -> (Vec<MapEvent>, usize) {
    let mut bad = 0;
    let mut v = Vec::new();
    for l in text.lines().filter(|l| !l.is_empty()) {
        match MapEvent::parse_line(l) {
            Some(e) => v.push(e),
            None => bad += 1,
        }
    }
    (v, bad)
}

/// Processes started by `roots` (a command, `-p` pids): the roots and every
/// process that the FORK records show descends from them.
pub fn descendants(roots: &[u32], events: &[MapEvent]) -> Vec<u32> {
    let mut set: std::collections::HashSet<u32> = roots.iter().copied().collect();
    let mut order: Vec<u32> = roots.to_vec();
    let mut sorted: Vec<&MapEvent> = events.iter().collect();
    sorted.sort_by_key(|e| e.time());
    for e in sorted {
        if let MapEvent::Fork { pid, ppid, .. } = *e {
            if pid != ppid && set.contains(&ppid) && set.insert(pid) {
                order.push(pid);
            }
        }
    }
    order
}

// ------------------------------------------------------------------ lookup

/// A mapping in force from `time` on (until a later one covers the same
/// addresses, or the process execs).
#[derive(Debug, Clone)]
pub struct TimedMap {
    pub time: u64,
    pub map: Rc<MapEntry>,
    /// Build-id the kernel reported for the mapped file (hex).
    pub build_id: Option<Rc<str>>,
}

#[derive(Debug, Clone)]
enum Step {
    Map(TimedMap),
    /// The address space was replaced (exec, or a new process reusing the pid).
    Reset(u64),
}

impl Step {
    fn time(&self) -> u64 {
        match self {
            Step::Map(m) => m.time,
            Step::Reset(t) => *t,
        }
    }
}

/// How far a sample may precede the record of the mapping it hit (clocks of
/// different CPUs are skewed; a snapshot read late).
pub const SKEW_SLACK_NS: u64 = 50_000_000;

/// Every process's mappings over time: the `/proc` snapshot of processes
/// running at the start (in force from time 0), then the kernel's records.
#[derive(Debug, Default, Clone)]
pub struct Timeline {
    procs: HashMap<u32, Vec<Step>>,
}

impl Timeline {
    /// From `/proc/PID/maps` snapshots only (each in force at every time).
    pub fn from_snapshot(maps: HashMap<u32, Vec<MapEntry>>) -> Timeline {
        let mut t = Timeline::default();
        t.add_snapshot(maps);
        t
    }

    fn add_snapshot(&mut self, maps: HashMap<u32, Vec<MapEntry>>) {
        for (tgid, entries) in maps {
            let v = self.procs.entry(tgid).or_default();
            for m in entries {
                v.push(Step::Map(TimedMap {
                    time: 0,
                    map: Rc::new(m),
                    build_id: None,
                }));
            }
        }
    }

    /// The snapshot plus the kernel's records (any order: they are sorted).
    pub fn new(maps: HashMap<u32, Vec<MapEntry>>, events: &[MapEvent]) -> Timeline {
        let mut t = Timeline::default();
        t.add_snapshot(maps);
        let mut sorted: Vec<&MapEvent> = events.iter().collect();
        // Stable: records of one time keep their order (a FORK before the
        // child's COMM exec and MMAP2 records).
        sorted.sort_by_key(|e| e.time());
        for e in sorted {
            match e {
                MapEvent::Mmap {
                    time,
                    pid,
                    start,
                    end,
                    pgoff,
                    prot,
                    build_id,
                    path,
                    ..
                } => {
                    let perms = format!(
                        "{}{}{}p",
                        if prot & 1 != 0 { 'r' } else { '-' },
                        if prot & 2 != 0 { 'w' } else { '-' },
                        if prot & 4 != 0 { 'x' } else { '-' }
                    );
                    t.procs.entry(*pid).or_default().push(Step::Map(TimedMap {
                        time: *time,
                        map: Rc::new(MapEntry {
                            start: *start,
                            end: *end,
                            perms,
                            offset: *pgoff,
                            inode: 0,
                            path: path.clone(),
                        }),
                        build_id: build_id.as_deref().map(Rc::from),
                    }));
                }
                MapEvent::Comm {
                    time,
                    pid,
                    exec: true,
                    ..
                } => t.procs.entry(*pid).or_default().push(Step::Reset(*time)),
                MapEvent::Fork {
                    time, pid, ppid, ..
                } if pid != ppid => {
                    // A new process: the parent's address space, copied.
                    let inherited: Vec<Step> = t
                        .in_force(*ppid, *time)
                        .into_iter()
                        .map(|m| {
                            Step::Map(TimedMap {
                                time: *time,
                                ..m.clone()
                            })
                        })
                        .collect();
                    let v = t.procs.entry(*pid).or_default();
                    v.push(Step::Reset(*time));
                    v.extend(inherited);
                }
                _ => {}
            }
        }
        t
    }

    /// The mappings of `tgid` in force at `time`, oldest first (a later one
    /// may cover an earlier one's addresses).
    fn in_force(&self, tgid: u32, time: u64) -> Vec<&TimedMap> {
        let Some(steps) = self.procs.get(&tgid) else {
            return Vec::new();
        };
        let n = steps.partition_point(|s| s.time() <= time);
        let mut v = Vec::new();
        for s in steps[..n].iter().rev() {
            match s {
                Step::Reset(_) => break,
                Step::Map(m) => v.push(m),
            }
        }
        v.reverse();
        v
    }

    pub fn has(&self, tgid: u32) -> bool {
        self.procs.contains_key(&tgid)
    }

    pub fn processes(&self) -> usize {
        self.procs.len()
    }

    /// The mapping of `tgid` that holds `addr` at `time`, with an id unique
    /// in this timeline: the latest one recorded at or before `time` since
    /// the process's last exec; failing that, the first one recorded up to
    /// [`SKEW_SLACK_NS`] after `time`.
    pub fn lookup(&self, tgid: u32, time: u64, addr: u64) -> Option<(usize, &TimedMap)> {
        let steps = self.procs.get(&tgid)?;
        let n = steps.partition_point(|s| s.time() <= time);
        for (i, s) in steps[..n].iter().enumerate().rev() {
            match s {
                Step::Reset(_) => break,
                Step::Map(m) if addr >= m.map.start && addr < m.map.end => return Some((i, m)),
                _ => {}
            }
        }
        for (i, s) in steps.iter().enumerate().skip(n) {
            if s.time() > time.saturating_add(SKEW_SLACK_NS) {
                break;
            }
            if let Step::Map(m) = s {
                if addr >= m.map.start && addr < m.map.end {
                    return Some((i, m));
                }
            }
        }
        None
    }
}

// ------------------------------------------------------------------ collector

/// Reads the kernel's MMAP2/COMM/FORK/EXIT records while recording: one
/// `PERF_COUNT_SW_DUMMY` event per online CPU, each with its mmap ring.
pub struct Collector {
    rings: Vec<Ring>,
    pub events: Vec<MapEvent>,
    /// Records the kernel dropped (its ring was full): maps may be missing.
    pub lost: u64,
    /// What could not be read from the rings (never expected of a kernel):
    /// maps may be missing.
    pub skipped: Skipped,
    /// Whether the MMAP2 records carry build-ids (kernel 5.12+).
    pub build_ids: bool,
    page: usize,
    /// How the records are laid out: learnt from the very attr opened.
    info: RecordParseInfo,
    /// `events` already looked at by [`Collector::new_exec_maps`].
    exec_seen: usize,
}

/// What reading the rings skipped: a record that cannot be decoded is
/// skipped alone; where no record can be framed at all (a header whose size
/// is below 8 or past what the kernel published), the rest of the ring is.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Skipped {
    /// Records of the kinds kept that could not be decoded (truncated, a
    /// build-id size over 20, an address range that overflows).
    pub records: u64,
    /// Bytes skipped because no record could be framed there.
    pub bytes: u64,
}

impl Skipped {
    pub fn any(&self) -> bool {
        self.records > 0 || self.bytes > 0
    }
}

struct Ring {
    fd: i32,
    base: *mut u8,
    len: usize,
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: `base`/`len` are the mapping made in `open`; `fd` is ours.
        unsafe {
            libc::munmap(self.base as *mut libc::c_void, self.len);
            libc::close(self.fd);
        }
    }
}

/// Data pages of each CPU's ring (a power of two).
const RING_PAGES: usize = 64;

/// The attr of the per-CPU dummy event, as `perf record` opens its
/// side-band event: no samples, only the records of mappings (MMAP2 with
/// build-ids where asked), names (COMM, flagged at an exec) and tasks
/// (FORK/EXIT), each with the sample id trailer `pid, tid, time, cpu, res`.
fn attr(build_id: bool, page: usize) -> pb::perf_event_attr {
    let mut a = pb::perf_event_attr {
        type_: pb::PERF_TYPE_SOFTWARE,
        // The kernel reads this much: every field set here is in it (4.1+).
        size: pb::PERF_ATTR_SIZE_VER5,
        config: pb::PERF_COUNT_SW_DUMMY as u64,
        sample_type: (pb::PERF_SAMPLE_TID | pb::PERF_SAMPLE_TIME | pb::PERF_SAMPLE_CPU) as u64,
        ..Default::default()
    };
    a.set_mmap(1);
    a.set_comm(1);
    a.set_task(1);
    a.set_sample_id_all(1);
    a.set_mmap2(1);
    a.set_comm_exec(1);
    a.set_build_id(build_id as u64);
    // poll(2) wakes the recorder when half the ring is used, not at every
    // record.
    a.set_watermark(1);
    a.__bindgen_anon_2.wakeup_watermark = (RING_PAGES * page / 2) as u32;
    a
}

/// How records of events opened with `attr` are laid out (where the
/// trailer's time is), read by the record parser from the attr's bytes.
fn parse_info(attr: &pb::perf_event_attr) -> Option<RecordParseInfo> {
    // SAFETY: a plain C struct, every byte initialised (it starts zeroed).
    let bytes = unsafe {
        std::slice::from_raw_parts(
            (attr as *const pb::perf_event_attr).cast::<u8>(),
            std::mem::size_of::<pb::perf_event_attr>(),
        )
    };
    let (a, _) = PerfEventAttr::parse::<_, NativeEndian>(bytes).ok()?;
    Some(RecordParseInfo::new(&a, Endianness::NATIVE))
}

fn perf_event_open(attr: &pb::perf_event_attr, cpu: i32) -> std::io::Result<i32> {
    // The kernel may write the size it expects back into the attr.
    let mut attr = *attr;
    // SAFETY: `attr` is a valid perf_event_attr of the size it declares.
    let fd = unsafe { sys::perf_event_open(&mut attr, -1, cpu, -1, pb::PERF_FLAG_FD_CLOEXEC as _) };
    if fd < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(fd)
    }
}

/// CPUs listed in a sysfs CPU list such as `0-3,5`.
pub fn parse_cpu_list(s: &str) -> Vec<i32> {
    let mut v = Vec::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.parse::<i32>(), b.parse::<i32>()) {
                    v.extend(a..=b);
                }
            }
            None => v.extend(part.parse::<i32>().ok()),
        }
    }
    v
}

impl Collector {
    /// Opens the events on every online CPU. An error says why exact maps
    /// cannot be had (no `CONFIG_PERF_EVENTS`, `perf_event_paranoid`, no
    /// permission): the caller falls back to polling `/proc`.
    pub fn open() -> Result<Collector, String> {
        Self::open_with_faults(|_, _| None)
    }

    /// [`open`](Self::open), where `fault(build_id, cpu)` may make a
    /// `perf_event_open` call fail with the error it gives instead of being
    /// made (tests: the paths of an old or refusing kernel).
    #[doc(hidden)]
    pub fn open_with_faults(
        mut fault: impl FnMut(bool, i32) -> Option<std::io::Error>,
    ) -> Result<Collector, String> {
        let online = std::fs::read_to_string("/sys/devices/system/cpu/online")
            .map(|s| parse_cpu_list(&s))
            .unwrap_or_default();
        let cpus = if online.is_empty() {
            // SAFETY: sysconf has no preconditions.
            let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(1) as i32;
            (0..n).collect()
        } else {
            online
        };
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize;
        let info = parse_info(&attr(true, page))
            .ok_or("the perf record parser does not take the dummy event's attr")?;
        let mut c = Collector {
            rings: Vec::new(),
            events: Vec::new(),
            lost: 0,
            skipped: Skipped::default(),
            build_ids: true,
            page,
            info,
            exec_seen: 0,
        };
        let mut open = |build_id: bool, cpu: i32| match fault(build_id, cpu) {
            Some(e) => Err(e),
            None => perf_event_open(&attr(build_id, page), cpu),
        };
        for cpu in cpus {
            let fd = match open(c.build_ids, cpu) {
                Err(e) if c.build_ids && e.raw_os_error() == Some(libc::EINVAL) => {
                    // A kernel before 5.12 knows no build_id bit.
                    c.build_ids = false;
                    open(false, cpu)
                }
                r => r,
            };
            let fd = match fd {
                Ok(fd) => fd,
                // An offline CPU (hot-unplugged since the list was read).
                Err(e) if e.raw_os_error() == Some(libc::ENODEV) => continue,
                Err(e) => {
                    return Err(format!(
                        "perf_event_open(PERF_COUNT_SW_DUMMY, cpu {cpu}) failed: {e}{}",
                        match e.raw_os_error() {
                            Some(libc::ENOENT) | Some(libc::ENOSYS) =>
                                " (kernel without CONFIG_PERF_EVENTS?)",
                            Some(libc::EACCES) | Some(libc::EPERM) =>
                                " (needs root or CAP_PERFMON, or kernel.perf_event_paranoid <= 0)",
                            _ => "",
                        }
                    ))
                }
            };
            let len = page * (RING_PAGES + 1);
            // SAFETY: mapping a perf event fd as its ring buffer, as documented.
            let base = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_SHARED,
                    fd,
                    0,
                )
            };
            if base == libc::MAP_FAILED {
                let e = std::io::Error::last_os_error();
                // SAFETY: our fd.
                unsafe { libc::close(fd) };
                return Err(format!("cannot map the perf ring of cpu {cpu}: {e}"));
            }
            c.rings.push(Ring {
                fd,
                base: base as *mut u8,
                len,
            });
        }
        if c.rings.is_empty() {
            return Err("no online CPU accepted a perf event".into());
        }
        Ok(c)
    }

    pub fn cpus(&self) -> usize {
        self.rings.len()
    }

    /// The events' fds, to poll(2) on: readable once a ring is half full.
    pub fn fds(&self) -> Vec<i32> {
        self.rings.iter().map(|r| r.fd).collect()
    }

    /// Moves every record waiting in the rings into `events`.
    pub fn poll(&mut self) {
        use std::sync::atomic::{AtomicU64, Ordering};
        let page = self.page;
        let head_at = std::mem::offset_of!(pb::perf_event_mmap_page, data_head);
        let tail_at = std::mem::offset_of!(pb::perf_event_mmap_page, data_tail);
        for r in &self.rings {
            // SAFETY: the first page is the perf_event_mmap_page, whose
            // data_head and data_tail are naturally aligned u64s.
            let head_p = unsafe { &*(r.base.add(head_at) as *const AtomicU64) };
            let tail_p = unsafe { &*(r.base.add(tail_at) as *const AtomicU64) };
            let head = head_p.load(Ordering::Acquire);
            let tail = tail_p.load(Ordering::Relaxed);
            // SAFETY: the data area follows the first page; the kernel
            // writes only past `head` until `tail` is moved on.
            let data = unsafe { std::slice::from_raw_parts(r.base.add(page), r.len - page) };
            let mut lost = 0;
            let tail = read_ring(
                data,
                head,
                tail,
                &self.info,
                &mut self.events,
                &mut lost,
                &mut self.skipped,
            );
            self.lost += lost;
            tail_p.store(tail, Ordering::Release);
        }
    }

    /// The processes with executable mappings among the records since the
    /// last call (each once).
    pub fn new_exec_maps(&mut self) -> Vec<u32> {
        let mut pids = Vec::new();
        for e in self.events.get(self.exec_seen..).unwrap_or(&[]) {
            if let MapEvent::Mmap { pid, prot, .. } = e {
                if prot & libc::PROT_EXEC as u32 != 0 && !pids.contains(pid) {
                    pids.push(*pid);
                }
            }
        }
        self.exec_seen = self.events.len();
        pids
    }

    /// The records, sorted by time.
    pub fn take_sorted(&mut self) -> Vec<MapEvent> {
        self.exec_seen = 0;
        let mut v = std::mem::take(&mut self.events);
        v.sort_by_key(|e| e.time());
        v
    }
}

/// Reads the records a ring holds between `tail` and `head` (positions as
/// the kernel counts them; `data` is the ring's data area, its size a power
/// of two): those of the kinds kept go to `out`, LOST records' counts to
/// `lost`. Returns the new tail: `head`, for everything published is
/// consumed, decoded or counted in `skipped` (a record is never left half
/// read: the kernel publishes whole records only, so a header that cannot
/// be framed means the rest cannot be either).
fn read_ring(
    data: &[u8],
    head: u64,
    mut tail: u64,
    info: &RecordParseInfo,
    out: &mut Vec<MapEvent>,
    lost: &mut u64,
    skipped: &mut Skipped,
) -> u64 {
    let size = data.len() as u64;
    let unframed = |from: u64, skipped: &mut Skipped| {
        skipped.bytes += head.saturating_sub(from).min(size);
        head
    };
    if !size.is_power_of_two() || head < tail || head - tail > size {
        return unframed(tail, skipped);
    }
    // `n` bytes from ring position `pos`, across the end of the data area.
    let span = |pos: u64, n: usize| -> RawData<'_> {
        let start = (pos % size) as usize;
        match data.len() - start {
            first if first >= n => RawData::Single(&data[start..start + n]),
            first => RawData::Split(&data[start..], &data[..n - first]),
        }
    };
    while tail < head {
        let avail = head - tail;
        if avail < 8 {
            return unframed(tail, skipped);
        }
        let mut h = span(tail, 8);
        let (Ok(ty), Ok(misc), Ok(len)) = (
            h.read_u32::<NativeEndian>(),
            h.read_u16::<NativeEndian>(),
            h.read_u16::<NativeEndian>(),
        ) else {
            return unframed(tail, skipped);
        };
        let len = u64::from(len);
        if len < 8 || len > avail {
            return unframed(tail, skipped);
        }
        match decode(ty, misc, span(tail + 8, len as usize - 8), info) {
            Decoded::Kept(e) => out.push(e),
            Decoded::Lost(n) => *lost += n,
            Decoded::Other => {}
            Decoded::Bad => skipped.records += 1,
        }
        tail += len;
    }
    tail
}

enum Decoded {
    Kept(MapEvent),
    Lost(u64),
    /// A kind not kept.
    Other,
    /// A kind kept that does not decode.
    Bad,
}

/// Decodes one record's body (what follows its header).
fn decode(ty: u32, misc: u16, body: RawData, info: &RecordParseInfo) -> Decoded {
    let rt = RecordType(ty);
    if ![
        RecordType::MMAP2,
        RecordType::COMM,
        RecordType::FORK,
        RecordType::EXIT,
        RecordType::LOST,
    ]
    .contains(&rt)
    {
        return Decoded::Other;
    }
    decode_kept(rt, misc, body, info).unwrap_or(Decoded::Bad)
}

fn decode_kept(
    rt: RecordType,
    misc: u16,
    body: RawData,
    info: &RecordParseInfo,
) -> Option<Decoded> {
    // The time from the sample id trailer; the fields without it (a name
    // or path without its NUL stops there).
    let time = || RawEventRecord::new(rt, misc, body, *info).timestamp();
    let own_len = body
        .len()
        .checked_sub(info.common_data_offset_from_end.unwrap_or(0).into())?;
    let mut rest = body;
    let own = rest.split_off_prefix(own_len).ok()?;
    if rt == RecordType::MMAP2 && u32::from(misc) & pb::PERF_RECORD_MISC_MMAP_BUILD_ID != 0 {
        // The parser asserts this (a panic); the kernel's is at most 20.
        let mut at = own;
        at.skip(32).ok()?;
        if at.read_u8().ok()? > 20 {
            return None;
        }
    }
    let text = |r: RawData| String::from_utf8_lossy(&r.as_slice()).into_owned();
    Some(Decoded::Kept(
        match RawEventRecord::new(rt, misc, own, *info).parse().ok()? {
            EventRecord::Mmap2(m) => MapEvent::Mmap {
                time: time()?,
                pid: m.pid as u32,
                tid: m.tid as u32,
                start: m.address,
                end: m.address.checked_add(m.length)?,
                pgoff: m.page_offset,
                prot: m.protection,
                build_id: match m.file_id {
                    // Without one the kernel sends the device and inode.
                    Mmap2FileId::BuildId(b) if !b.is_empty() => {
                        Some(b.iter().map(|b| format!("{b:02x}")).collect())
                    }
                    _ => None,
                },
                path: text(m.path),
            },
            EventRecord::Comm(c) => MapEvent::Comm {
                time: time()?,
                pid: c.pid as u32,
                tid: c.tid as u32,
                exec: c.is_execve,
                name: text(c.name),
            },
            EventRecord::Fork(f) | EventRecord::Exit(f) => MapEvent::task(
                rt == RecordType::FORK,
                f.timestamp,
                f.pid as u32,
                f.ppid as u32,
                f.tid as u32,
                f.ptid as u32,
            ),
            EventRecord::Lost(l) => return Some(Decoded::Lost(l.count)),
            _ => return None,
        },
    ))
}

/// Decodes one perf record (header included) of the kinds kept, as the
/// events opened by [`Collector::open`] write it; `None` for another kind or
/// one that does not decode.
pub fn parse_record(ty: u32, misc: u16, rec: &[u8]) -> Option<MapEvent> {
    let info = parse_info(&attr(true, 4096))?;
    match decode(ty, misc, RawData::Single(rec.get(8..)?), &info) {
        Decoded::Kept(e) => Some(e),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const REC_MMAP2: u32 = pb::PERF_RECORD_MMAP2;
    const REC_COMM: u32 = pb::PERF_RECORD_COMM;
    const REC_FORK: u32 = pb::PERF_RECORD_FORK;
    const REC_LOST: u32 = pb::PERF_RECORD_LOST;
    const MISC_COMM_EXEC: u16 = pb::PERF_RECORD_MISC_COMM_EXEC as u16;
    const MISC_MMAP_BUILD_ID: u16 = pb::PERF_RECORD_MISC_MMAP_BUILD_ID as u16;

    fn entry(start: u64, end: u64, path: &str) -> MapEntry {
        MapEntry {
            start,
            end,
            perms: "r-xp".into(),
            offset: 0,
            inode: 0,
            path: path.into(),
        }
    }

    fn mmap(time: u64, pid: u32, start: u64, end: u64, path: &str) -> MapEvent {
        MapEvent::Mmap {
            time,
            pid,
            tid: pid,
            start,
            end,
            pgoff: 0x1000,
            prot: 5,
            build_id: None,
            path: path.into(),
        }
    }

    /// An exec of `pid` (its main thread) that names it `name`.
    fn exec(time: u64, pid: u32, name: &str) -> MapEvent {
        MapEvent::Comm {
            time,
            pid,
            tid: pid,
            exec: true,
            name: name.into(),
        }
    }

    fn path_at(t: &Timeline, pid: u32, time: u64, addr: u64) -> Option<String> {
        t.lookup(pid, time, addr).map(|(_, m)| m.map.path.clone())
    }

    #[test]
    fn each_sample_gets_the_mapping_in_force_at_its_time() {
        let snap = HashMap::from([(10, vec![entry(0x400000, 0x500000, "/bin/sh")])]);
        let events = vec![
            // Given out of order: the timeline sorts.
            mmap(300, 10, 0x7000, 0x8000, "/lib/b.so"),
            mmap(100, 10, 0x7000, 0x8000, "/lib/a.so"),
            exec(500, 10, "new"),
            mmap(510, 10, 0x400000, 0x480000, "/bin/new"),
        ];
        let t = Timeline::new(snap, &events);
        // The snapshot holds from the start until the exec.
        assert_eq!(path_at(&t, 10, 50, 0x400100).as_deref(), Some("/bin/sh"));
        assert_eq!(path_at(&t, 10, 499, 0x400100).as_deref(), Some("/bin/sh"));
        // a.so from 100, replaced by b.so at the same address from 300.
        assert_eq!(path_at(&t, 10, 100, 0x7010).as_deref(), Some("/lib/a.so"));
        assert_eq!(path_at(&t, 10, 299, 0x7010).as_deref(), Some("/lib/a.so"));
        assert_eq!(path_at(&t, 10, 300, 0x7010).as_deref(), Some("/lib/b.so"));
        // After the exec: only the new image; old mappings are gone.
        assert_eq!(path_at(&t, 10, 600, 0x400100).as_deref(), Some("/bin/new"));
        assert_eq!(path_at(&t, 10, 600, 0x7010), None);
        assert_eq!(path_at(&t, 10, 600, 0x490000), None);
        // Unknown processes, addresses outside every mapping.
        assert_eq!(path_at(&t, 11, 600, 0x400100), None);
        assert_eq!(path_at(&t, 10, 50, 0x9000), None);
        // Ids tell mappings apart (the cache keys on them).
        let id = |time| t.lookup(10, time, 0x7010).unwrap().0;
        assert_ne!(id(200), id(400));
        assert_eq!(id(300), id(400));
    }

    #[test]
    fn a_sample_shortly_before_its_mapping_record_still_finds_it() {
        // Another CPU's clock behind: the sample's stamp precedes the record.
        let t = Timeline::new(HashMap::new(), &[mmap(1_000_000, 7, 0x1000, 0x2000, "/x")]);
        assert_eq!(path_at(&t, 7, 999_000, 0x1800).as_deref(), Some("/x"));
        // ... but not one from long before.
        assert_eq!(path_at(&t, 7, 0, 0x1800).as_deref(), Some("/x"));
        let late = Timeline::new(
            HashMap::new(),
            &[mmap(10 * SKEW_SLACK_NS, 7, 0x1000, 0x2000, "/x")],
        );
        assert_eq!(path_at(&late, 7, SKEW_SLACK_NS, 0x1800), None);
    }

    #[test]
    fn a_forked_child_inherits_its_parents_maps_until_it_execs() {
        let snap = HashMap::from([(1, vec![entry(0x400000, 0x500000, "/bin/sh")])]);
        let events = vec![
            mmap(50, 1, 0x7000, 0x8000, "/lib/libc.so"),
            MapEvent::Fork {
                time: 100,
                pid: 2,
                ppid: 1,
                tid: 2,
                ptid: 1,
            },
            // The parent's later mappings are not the child's.
            mmap(150, 1, 0x9000, 0xa000, "/lib/late.so"),
            // A thread of the child: not a new process.
            MapEvent::Fork {
                time: 160,
                pid: 2,
                ppid: 2,
                tid: 3,
                ptid: 2,
            },
            exec(200, 2, "prog"),
            mmap(201, 2, 0x400000, 0x410000, "/bin/prog"),
        ];
        let t = Timeline::new(snap, &events);
        assert_eq!(path_at(&t, 2, 120, 0x400100).as_deref(), Some("/bin/sh"));
        assert_eq!(path_at(&t, 2, 170, 0x7100).as_deref(), Some("/lib/libc.so"));
        assert_eq!(path_at(&t, 2, 170, 0x9100), None);
        assert_eq!(path_at(&t, 1, 170, 0x9100).as_deref(), Some("/lib/late.so"));
        assert_eq!(path_at(&t, 2, 300, 0x400100).as_deref(), Some("/bin/prog"));
        assert_eq!(path_at(&t, 2, 300, 0x7100), None);
        // A pid reused by a new process starts from its new parent's maps.
        let mut ev2 = events.clone();
        ev2.push(MapEvent::Fork {
            time: 400,
            pid: 2,
            ppid: 1,
            tid: 2,
            ptid: 1,
        });
        let t = Timeline::new(HashMap::new(), &ev2);
        assert_eq!(path_at(&t, 2, 450, 0x400100), None);
        assert_eq!(path_at(&t, 2, 450, 0x9100).as_deref(), Some("/lib/late.so"));
        assert_eq!(descendants(&[1], &ev2), vec![1, 2]);
        assert_eq!(descendants(&[2], &ev2), vec![2]);
    }

    #[test]
    fn side_car_lines_round_trip() {
        let events = vec![
            MapEvent::Mmap {
                time: 5,
                pid: 1,
                tid: 2,
                start: 0x1000,
                end: 0x3000,
                pgoff: 0x2000,
                prot: 5,
                build_id: Some("abcd".into()),
                path: "/odd path\\with\nnewline".into(),
            },
            exec(6, 1, "a b"),
            MapEvent::Fork {
                time: 7,
                pid: 3,
                ppid: 1,
                tid: 3,
                ptid: 1,
            },
            MapEvent::Exit {
                time: 8,
                pid: 3,
                ppid: 1,
                tid: 3,
                ptid: 1,
            },
        ];
        let text = to_text(&events);
        assert_eq!(text.lines().count(), 4);
        let (back, bad) = parse_text(&(text + "garbage\n12 mmap x\n"));
        assert_eq!(back, events);
        assert_eq!(bad, 2);
    }

    #[test]
    fn perf_records_decode() {
        // MMAP2 with a build-id, as the kernel writes it (sample id trailer).
        let mut r = vec![0u8; 8];
        for v in [42u32, 43] {
            r.extend(v.to_ne_bytes());
        }
        for v in [0x7000u64, 0x1000, 0x3000] {
            r.extend(v.to_ne_bytes());
        }
        r.extend([4u8, 0, 0, 0]);
        r.extend([0xde, 0xad, 0xbe, 0xef]);
        r.extend([0u8; 16]);
        r.extend(5u32.to_ne_bytes());
        r.extend(2u32.to_ne_bytes());
        r.extend(b"/lib/x.so\0\0\0\0\0\0\0");
        for v in [42u32, 43] {
            r.extend(v.to_ne_bytes());
        }
        r.extend(123456u64.to_ne_bytes());
        r.extend([1u8, 0, 0, 0, 0, 0, 0, 0]);
        let e = parse_record(REC_MMAP2, MISC_MMAP_BUILD_ID, &r).unwrap();
        assert_eq!(
            e,
            MapEvent::Mmap {
                time: 123456,
                pid: 42,
                tid: 43,
                start: 0x7000,
                end: 0x8000,
                pgoff: 0x3000,
                prot: 5,
                build_id: Some("deadbeef".into()),
                path: "/lib/x.so".into(),
            }
        );
        // Truncated records decode to nothing rather than panic.
        for n in 0..r.len() {
            let _ = parse_record(REC_MMAP2, MISC_MMAP_BUILD_ID, &r[..n]);
            let _ = parse_record(REC_COMM, MISC_COMM_EXEC, &r[..n]);
            let _ = parse_record(REC_FORK, 0, &r[..n]);
        }
        assert_eq!(parse_cpu_list("0-3,5\n"), vec![0, 1, 2, 3, 5]);
        assert_eq!(parse_cpu_list("garbage"), Vec::<i32>::new());
        // A build-id of size 0 is none (the kernel sends none: without a
        // build-id it gives the inode instead), not an empty one, which
        // the side-car could not tell from a missing field.
        r[40] = 0;
        let e = parse_record(REC_MMAP2, MISC_MMAP_BUILD_ID, &r).unwrap();
        assert!(matches!(e, MapEvent::Mmap { build_id: None, .. }), "{e:?}");
        assert!(e.to_line().ends_with(" 5 - /lib/x.so"), "{e:?}");
        // A size over 20 (the kernel's is at most 20) is a record skipped.
        r[40] = 21;
        assert_eq!(parse_record(REC_MMAP2, MISC_MMAP_BUILD_ID, &r), None);
    }

    // ---------------------------------------------------------- the rings

    /// A record as the dummy events write it: header, `fields`, and the
    /// sample id trailer (`pid, tid, time, cpu, res`).
    fn record(ty: u32, misc: u16, fields: &[u8], pid: u32, time: u64) -> Vec<u8> {
        let mut r = Vec::new();
        r.extend(ty.to_ne_bytes());
        r.extend(misc.to_ne_bytes());
        r.extend(((8 + fields.len() + 24) as u16).to_ne_bytes());
        r.extend(fields);
        for v in [pid, pid] {
            r.extend(v.to_ne_bytes());
        }
        r.extend(time.to_ne_bytes());
        r.extend([0u8; 8]);
        r
    }

    fn fork_record(pid: u32, ppid: u32, time: u64) -> Vec<u8> {
        let mut f = Vec::new();
        for v in [pid, ppid, pid, ppid] {
            f.extend(v.to_ne_bytes());
        }
        f.extend(time.to_ne_bytes());
        record(REC_FORK, 0, &f, pid, time)
    }

    fn comm_record(pid: u32, name: &str, time: u64) -> Vec<u8> {
        let mut f = Vec::new();
        for v in [pid, pid] {
            f.extend(v.to_ne_bytes());
        }
        f.extend(name.as_bytes());
        f.resize((f.len() + 8) & !7, 0);
        record(REC_COMM, MISC_COMM_EXEC, &f, pid, time)
    }

    /// An MMAP2 record with a build-id of `id_len` bytes (0xab each).
    fn mmap2_record(pid: u32, path: &str, id_len: u8, time: u64) -> Vec<u8> {
        let mut f = Vec::new();
        for v in [pid, pid] {
            f.extend(v.to_ne_bytes());
        }
        for v in [0x7000u64, 0x1000, 0] {
            f.extend(v.to_ne_bytes());
        }
        f.extend([id_len, 0, 0, 0]);
        f.extend([0xab; 20]);
        f.extend(5u32.to_ne_bytes());
        f.extend(2u32.to_ne_bytes());
        f.extend(path.as_bytes());
        f.resize((f.len() + 8) & !7, 0);
        record(REC_MMAP2, MISC_MMAP_BUILD_ID, &f, pid, time)
    }

    fn lost_record(n: u64) -> Vec<u8> {
        let mut f = vec![0u8; 8];
        f.extend(n.to_ne_bytes());
        record(REC_LOST, 0, &f, 0, 0)
    }

    /// A ring of `size` bytes holding `bytes` from position `at` (which may
    /// be past `size`: positions only grow), and the head after them.
    fn ring(size: usize, at: u64, bytes: &[u8]) -> (Vec<u8>, u64) {
        let mut data = vec![0xeeu8; size];
        for (i, &b) in bytes.iter().enumerate() {
            data[((at + i as u64) % size as u64) as usize] = b;
        }
        (data, at + bytes.len() as u64)
    }

    struct Read {
        events: Vec<MapEvent>,
        lost: u64,
        skipped: Skipped,
        tail: u64,
    }

    fn read(data: &[u8], head: u64, tail: u64) -> Read {
        let info = parse_info(&attr(true, 4096)).unwrap();
        let (mut events, mut lost, mut skipped) = (Vec::new(), 0, Skipped::default());
        let tail = read_ring(
            data,
            head,
            tail,
            &info,
            &mut events,
            &mut lost,
            &mut skipped,
        );
        Read {
            events,
            lost,
            skipped,
            tail,
        }
    }

    #[test]
    fn records_are_read_wherever_the_ring_wraps_them() {
        let recs = [
            fork_record(20, 10, 100),
            comm_record(20, "a name", 101),
            mmap2_record(20, "/lib/x.so", 4, 102),
            lost_record(3),
            mmap2_record(20, "/lib/y.so", 0, 103),
        ];
        let bytes = recs.concat();
        let size = 512;
        assert!(bytes.len() < size);
        // Every place of the wrap: in a header, in the fixed fields, in a
        // build-id, in a path, in a trailer, between records.
        for at in (0..size as u64).step_by(8).map(|a| a + 3 * size as u64) {
            let (data, head) = ring(size, at, &bytes);
            let r = read(&data, head, at);
            assert_eq!(r.tail, head);
            assert_eq!(r.skipped, Skipped::default(), "at {at}");
            assert_eq!(r.lost, 3);
            let mmap = |path: &str, build_id: Option<&str>, time| MapEvent::Mmap {
                time,
                pid: 20,
                tid: 20,
                start: 0x7000,
                end: 0x8000,
                pgoff: 0,
                prot: 5,
                build_id: build_id.map(str::to_string),
                path: path.into(),
            };
            assert_eq!(
                r.events,
                vec![
                    MapEvent::Fork {
                        time: 100,
                        pid: 20,
                        ppid: 10,
                        tid: 20,
                        ptid: 10
                    },
                    exec(101, 20, "a name"),
                    mmap("/lib/x.so", Some("abababab"), 102),
                    mmap("/lib/y.so", None, 103),
                ],
                "at {at}"
            );
        }
    }

    #[test]
    fn a_ring_that_cannot_be_framed_is_skipped_and_counted() {
        let good = fork_record(20, 10, 100);
        let after = comm_record(20, "after", 101);
        let size = 256;
        let at = 1000;
        // A header with a size of 0, of 4, past the ring, past what the
        // kernel published: the rest of the ring is skipped (there is no
        // way to find the next record), what came before is kept.
        let mut huge = fork_record(21, 10, 100);
        huge[6..8].copy_from_slice(&u16::MAX.to_ne_bytes());
        let mut past_head = comm_record(21, "cut", 100);
        let cut = past_head.len() - 8;
        past_head.truncate(cut);
        for (name, bad) in [
            ("size 0", {
                let mut b = fork_record(21, 10, 100);
                b[6..8].fill(0);
                b
            }),
            ("size 4", {
                let mut b = fork_record(21, 10, 100);
                b[6..8].copy_from_slice(&4u16.to_ne_bytes());
                b
            }),
            ("size past the ring", huge),
            ("a record cut by the head", past_head),
            ("a header cut by the head", vec![7, 0, 0]),
        ] {
            let tail_bytes = if name.contains("cut") {
                vec![]
            } else {
                after.clone()
            };
            let bytes = [good.clone(), bad.clone(), tail_bytes].concat();
            let (data, head) = ring(size, at, &bytes);
            let r = read(&data, head, at);
            assert_eq!(r.tail, head, "{name}");
            assert_eq!(r.events.len(), 1, "{name}: {:?}", r.events);
            assert_eq!(r.events[0].pid(), 20, "{name}");
            assert_eq!(
                r.skipped,
                Skipped {
                    records: 0,
                    bytes: (bytes.len() - good.len()) as u64
                },
                "{name}"
            );
        }
        // Positions that make no sense: everything published is skipped.
        let (data, _) = ring(size, at, &good);
        for (head, tail) in [(at, at + 8), (at + 2 * size as u64, at)] {
            let r = read(&data, head, tail);
            assert_eq!(r.tail, head);
            assert!(r.events.is_empty());
            assert_eq!(r.skipped.records, 0);
            assert!(r.skipped.bytes <= size as u64);
        }
        // A data area whose size is not a power of two.
        let r = read(&data[..200], at + 56, at);
        assert_eq!((r.tail, r.skipped.bytes, r.events.len()), (at + 56, 56, 0));
    }

    #[test]
    fn a_framed_record_that_does_not_decode_is_skipped_alone() {
        // An MMAP2 too short for its fields, one with a build-id size over
        // 20, a COMM shorter than its trailer: each skipped and counted,
        // the records after them read.
        let mut short = record(REC_MMAP2, 0, &[0u8; 8], 20, 5);
        short.truncate(16);
        short[6..8].copy_from_slice(&16u16.to_ne_bytes());
        let mut big_id = mmap2_record(20, "/x", 4, 5);
        big_id[8 + 32] = 200;
        let mut tiny_comm = comm_record(20, "x", 5);
        tiny_comm.truncate(16);
        tiny_comm[6..8].copy_from_slice(&16u16.to_ne_bytes());
        // A kind not kept is passed over, not counted.
        let other = record(pb::PERF_RECORD_THROTTLE, 0, &[0u8; 16], 20, 5);
        let bytes = [short, big_id, tiny_comm, other, fork_record(22, 1, 9)].concat();
        let (data, head) = ring(512, 77 * 8, &bytes);
        let r = read(&data, head, 77 * 8);
        assert_eq!(r.tail, head);
        assert_eq!(
            r.skipped,
            Skipped {
                records: 3,
                bytes: 0
            }
        );
        assert_eq!(r.events.len(), 1);
        assert_eq!(r.events[0].pid(), 22);
    }

    proptest::proptest! {
        /// Garbage rings (any bytes, any positions) never panic, and every
        /// byte published is consumed.
        #[test]
        fn garbage_rings_are_read_without_a_panic(
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 256),
            tail in 0u64..1 << 20,
            avail in 0u64..300,
            seed_records in proptest::prelude::any::<bool>(),
        ) {
            let mut data = bytes;
            if seed_records {
                // Plausible headers among the garbage.
                let r = mmap2_record(1, "/p", 20, 1);
                let at = (tail % 256) as usize;
                for (i, b) in r.iter().enumerate().take(8) {
                    data[(at + i) % 256] = *b;
                }
            }
            let r = read(&data, tail + avail, tail);
            proptest::prop_assert_eq!(r.tail, tail + avail);
            proptest::prop_assert!(r.skipped.bytes <= avail);
        }
    }
}
