//! Exact process maps: the kernel's MMAP2, COMM, FORK and EXIT records, taken
//! while recording from one `PERF_COUNT_SW_DUMMY` event per CPU (as `perf
//! record` does), kept in the side-car with their times, and the time-ordered
//! lookup that gives each sample the mapping in force when it was taken.
//!
//! The records' times are `perf_clock()`, which is `local_clock()`: the
//! stream's clock (header field `clock` = 1), so they order against samples.

use std::collections::HashMap;
use std::rc::Rc;

use crate::symbols::MapEntry;

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
fn escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('\n', "\\n")
}

fn unescape(s: &str) -> String {
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
    /// Whether the MMAP2 records carry build-ids (kernel 5.12+).
    pub build_ids: bool,
    page: usize,
}

struct Ring {
    fd: i32,
    base: *mut u8,
    len: usize,
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: `base`/`len` are the mapping made in `open_cpu`; `fd` is ours.
        unsafe {
            libc::munmap(self.base as *mut libc::c_void, self.len);
            libc::close(self.fd);
        }
    }
}

const PERF_TYPE_SOFTWARE: u32 = 1;
const PERF_COUNT_SW_DUMMY: u64 = 9;
const SAMPLE_TID: u64 = 1 << 1;
const SAMPLE_TIME: u64 = 1 << 2;
const SAMPLE_CPU: u64 = 1 << 7;
const REC_LOST: u32 = 2;
const REC_COMM: u32 = 3;
const REC_EXIT: u32 = 4;
const REC_FORK: u32 = 7;
const REC_MMAP2: u32 = 10;
const MISC_COMM_EXEC: u16 = 1 << 13;
const MISC_MMAP_BUILD_ID: u16 = 1 << 14;
/// Data pages of each CPU's ring (a power of two).
const RING_PAGES: usize = 64;

/// `perf_event_attr` (PERF_ATTR_SIZE_VER5, 112 bytes) as bytes.
fn attr(build_id: bool) -> [u64; 14] {
    let mut a = [0u64; 14];
    a[0] = PERF_TYPE_SOFTWARE as u64 | (112u64 << 32);
    a[1] = PERF_COUNT_SW_DUMMY;
    a[3] = SAMPLE_TID | SAMPLE_TIME | SAMPLE_CPU;
    // mmap 8, comm 9, task 13, sample_id_all 18, mmap2 23, comm_exec 24, build_id 34
    let mut flags: u64 = (1 << 8) | (1 << 9) | (1 << 13) | (1 << 18) | (1 << 23) | (1 << 24);
    if build_id {
        flags |= 1 << 34;
    }
    // watermark 14: poll(2) wakes the recorder when half the ring is used
    // (wakeup_watermark, at byte 48), not at every record.
    flags |= 1 << 14;
    a[5] = flags;
    let watermark = RING_PAGES as u64 * 4096 / 2;
    a[6] = if cfg!(target_endian = "little") {
        watermark
    } else {
        watermark << 32
    };
    a
}

fn perf_event_open(attr: &[u64; 14], cpu: i32) -> std::io::Result<i32> {
    // SAFETY: `attr` is a valid perf_event_attr of the size it declares.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            attr.as_ptr(),
            -1i32,
            cpu,
            -1i32,
            8u64, // PERF_FLAG_FD_CLOEXEC
        )
    };
    if fd < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(fd as i32)
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
        let mut c = Collector {
            rings: Vec::new(),
            events: Vec::new(),
            lost: 0,
            build_ids: true,
            page,
        };
        for cpu in cpus {
            let fd = match perf_event_open(&attr(c.build_ids), cpu) {
                Err(e) if c.build_ids && e.raw_os_error() == Some(libc::EINVAL) => {
                    // A kernel before 5.12 knows no build_id bit.
                    c.build_ids = false;
                    perf_event_open(&attr(false), cpu)
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
        let page = self.page;
        for r in &self.rings {
            // SAFETY: the first page is the perf_event_mmap_page; data_head
            // (offset 1024) and data_tail (1032) are naturally aligned u64s.
            let head_p = unsafe { &*(r.base.add(1024) as *const std::sync::atomic::AtomicU64) };
            let tail_p = unsafe { &*(r.base.add(1032) as *const std::sync::atomic::AtomicU64) };
            let head = head_p.load(std::sync::atomic::Ordering::Acquire);
            let mut tail = tail_p.load(std::sync::atomic::Ordering::Relaxed);
            let size = (r.len - page) as u64;
            // SAFETY: the data area follows the first page.
            let data = unsafe { std::slice::from_raw_parts(r.base.add(page), r.len - page) };
            let read = |pos: u64, n: usize| -> Vec<u8> {
                let start = (pos % size) as usize;
                let mut v = Vec::with_capacity(n);
                let first = n.min(data.len() - start);
                v.extend_from_slice(&data[start..start + first]);
                v.extend_from_slice(&data[..n - first]);
                v
            };
            while tail + 8 <= head {
                let h = read(tail, 8);
                let ty = u32::from_ne_bytes(h[0..4].try_into().unwrap());
                let misc = u16::from_ne_bytes(h[4..6].try_into().unwrap());
                let len = u16::from_ne_bytes(h[6..8].try_into().unwrap()) as u64;
                if len < 8 || tail + len > head {
                    break;
                }
                let rec = read(tail, len as usize);
                if let Some(e) = parse_record(ty, misc, &rec) {
                    self.events.push(e);
                } else if ty == REC_LOST && rec.len() >= 24 {
                    self.lost += u64::from_ne_bytes(rec[16..24].try_into().unwrap());
                }
                tail += len;
            }
            tail_p.store(tail, std::sync::atomic::Ordering::Release);
        }
    }

    /// The records, sorted by time.
    pub fn take_sorted(&mut self) -> Vec<MapEvent> {
        let mut v = std::mem::take(&mut self.events);
        v.sort_by_key(|e| e.time());
        v
    }
}

/// Decodes one perf record (header included) of the types kept; the sample
/// id trailer is `pid, tid, time, cpu, res` (TID | TIME | CPU).
pub fn parse_record(ty: u32, misc: u16, rec: &[u8]) -> Option<MapEvent> {
    let u32_at = |o: usize| {
        rec.get(o..o + 4)
            .map(|b| u32::from_ne_bytes(b.try_into().unwrap()))
    };
    let u64_at = |o: usize| {
        rec.get(o..o + 8)
            .map(|b| u64::from_ne_bytes(b.try_into().unwrap()))
    };
    let trailer_time = || u64_at(rec.len().checked_sub(16)?);
    let cstr = |from: usize, to: usize| -> Option<String> {
        let b = rec.get(from..to)?;
        let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
        Some(String::from_utf8_lossy(&b[..end]).into_owned())
    };
    match ty {
        REC_MMAP2 => {
            let (pid, tid) = (u32_at(8)?, u32_at(12)?);
            let (addr, len, pgoff) = (u64_at(16)?, u64_at(24)?, u64_at(32)?);
            let build_id = if misc & MISC_MMAP_BUILD_ID != 0 {
                let n = (*rec.get(40)? as usize).min(20);
                Some(
                    rec.get(44..44 + n)?
                        .iter()
                        .map(|b| format!("{b:02x}"))
                        .collect(),
                )
            } else {
                None
            };
            let prot = u32_at(64)?;
            let path = cstr(72, rec.len().checked_sub(24)?)?;
            Some(MapEvent::Mmap {
                time: trailer_time()?,
                pid,
                tid,
                start: addr,
                end: addr.checked_add(len)?,
                pgoff,
                prot,
                build_id,
                path,
            })
        }
        REC_COMM => Some(MapEvent::Comm {
            time: trailer_time()?,
            pid: u32_at(8)?,
            tid: u32_at(12)?,
            exec: misc & MISC_COMM_EXEC != 0,
            name: cstr(16, rec.len().checked_sub(24)?)?,
        }),
        REC_FORK | REC_EXIT => {
            let (pid, ppid, tid, ptid) = (u32_at(8)?, u32_at(12)?, u32_at(16)?, u32_at(20)?);
            let time = u64_at(24)?;
            Some(MapEvent::task(ty == REC_FORK, time, pid, ppid, tid, ptid))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    }
}
