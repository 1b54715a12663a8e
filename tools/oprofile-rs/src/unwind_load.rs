//! `record`'s side of in-kernel unwinding: the unwind tables of the
//! profiled processes' executable mappings, built from their binaries'
//! `.eh_frame` ([`crate::unwind_table`]) and loaded into the module
//! (`OPROFILE_RS_IOC_UNWIND_TABLE`, `_UNWIND_MAP`; `Documentation/design.md`,
//! "In-kernel unwinding"), so that the module's walk of each sample's user
//! stack finds the callers of code without frame pointers and of leaf
//! functions.
//!
//! Tables belong to the file they were loaded through: the loader keeps
//! its own control file of the device open for the recording, and its close
//! (the end of `record`, or its death) drops them. A table is built once
//! per binary (device, inode) and mapped for every process that maps it.
//! Processes are loaded when `record` first sees them (the command after
//! its exec, `-p` targets, any process a sample names), and again when a
//! map record says one of them mapped new code (`dlopen`).
//!
//! Nothing here is fatal: a module without the ioctls (older), a binary
//! without `.eh_frame`, a process that exited, a mapping that changed in
//! between: each leaves those samples to the frame-pointer walk and is
//! counted in [`LoadStats`], which `record` writes to the side-car.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use oprofile_stream::oprofile_format::{ioctl, unwind};

use crate::archive_read::Fnv;
use crate::maps::{parse_maps, MapEntry};

/// What loading did, for the side-car and `record`'s summary.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct LoadStats {
    /// Processes whose mappings were loaded at least once.
    pub processes: u64,
    /// Mappings the module took.
    pub maps: u64,
    /// Tables built and loaded, and their bytes.
    pub tables: u64,
    pub table_bytes: u64,
    /// Binaries without usable call frame information (or unreadable).
    pub no_table: u64,
    /// Tables read from the cache instead of built.
    pub cached: u64,
    /// Of `tables`: loaded at the start for the binaries running processes
    /// mapped ([`TableLoader::prefetch`]).
    pub prefetched: u64,
    /// Of `processes`: those loaded then (running, state R).
    pub prefetched_processes: u64,
    /// Mappings the module refused (changed or gone in between, ...).
    pub refused: u64,
    /// Why loading stopped altogether, if it did (the module has no such
    /// ioctls, or refused one for a reason that would repeat).
    pub disabled: Option<String>,
}

/// A binary whose table is loaded.
struct Binary {
    /// The module's number for its table.
    id: u32,
    /// Its loadable segments: (file offset, file size, virtual address).
    segments: Vec<Segment>,
}

/// The tables loaded through one control file of the device.
pub struct TableLoader {
    ctl: File,
    /// By (inode, path) of the binary: the module's table number and the
    /// binary's loadable segments, or `None` where no table could be built
    /// or loaded.
    tables: HashMap<(u64, String), Option<Binary>>,
    /// Per process, the mappings (start, end) already loaded or refused.
    done: HashMap<u32, HashSet<(u64, u64)>>,
    /// Where built tables are kept across recordings ([`cache_dir`]):
    /// `None` to build every time.
    cache: Option<PathBuf>,
    pub stats: LoadStats,
}

impl TableLoader {
    /// A loader with a control file of `device` of its own (`O_WRONLY`:
    /// no reader slot).
    pub fn open(device: &Path) -> std::io::Result<TableLoader> {
        Self::open_flags(device, 0)
    }

    /// [`TableLoader::open`] without waiting: a FIFO as the device (the
    /// tests') has no reader before `record` opens it, and a plain open
    /// for writing would wait for one (`ENXIO` instead).
    pub fn open_nonblocking(device: &Path) -> std::io::Result<TableLoader> {
        Self::open_flags(device, libc::O_NONBLOCK)
    }

    fn open_flags(device: &Path, flags: i32) -> std::io::Result<TableLoader> {
        use std::os::unix::fs::OpenOptionsExt;
        let ctl = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(flags)
            .open(device)?;
        Ok(TableLoader {
            ctl,
            tables: HashMap::new(),
            done: HashMap::new(),
            cache: Some(cache_dir()),
            stats: LoadStats::default(),
        })
    }

    /// Builds and loads, ahead of its mapping, the table of the program
    /// `path` (resolved against `PATH` without a `/`) and the vDSO's: so
    /// that a command started next is unwound with tables from its first
    /// samples on, once [`TableLoader::load_process`] maps them (only the
    /// mapping is then left to do).
    pub fn prepare(&mut self, path: &str) {
        use std::os::unix::fs::MetadataExt;
        let found = if path.contains('/') {
            Some(std::path::PathBuf::from(path))
        } else {
            std::env::var_os("PATH").and_then(|p| {
                std::env::split_paths(&p)
                    .map(|d| d.join(path))
                    .find(|f| f.is_file())
            })
        };
        let mut keys = vec![];
        if let Some(f) = found.and_then(|f| f.canonicalize().ok()) {
            if let (Ok(md), Some(name)) = (std::fs::metadata(&f), f.to_str()) {
                keys.push(((md.ino(), name.to_string()), Source::File(f.clone())));
            }
        }
        keys.push(((0, "[vdso]".to_string()), Source::Vdso));
        for (key, source) in keys {
            if self.active() && !self.tables.contains_key(&key) {
                let b = self.load_table(source);
                self.tables.insert(key, b);
            }
        }
    }

    /// Builds and loads, ahead of their mappings, the tables of the
    /// binaries the processes running now map executable (the vDSO
    /// included), those most processes map first (the C library, the
    /// loader, a shell), at most [`PREFETCH_TABLES`] tables and
    /// [`PREFETCH_BYTES`] bytes: a system-wide recording then loads them
    /// before its window, and a process first sampled in it only has its
    /// mappings to load. Its maps are read, nothing is mapped (the
    /// processes are loaded as they are sampled, as before). Stops after
    /// [`PREFETCH_TIME`] (tables not in the cache yet take a while to
    /// build).
    pub fn prefetch(&mut self, proc_root: &Path) {
        let t = std::time::Instant::now();
        let (tables0, bytes0) = (self.stats.tables, self.stats.table_bytes);
        let processes0 = self.stats.processes;
        let (order, running) = prefetch_order(proc_root, std::process::id());
        for (key, _, source) in order {
            if !self.active()
                || self.stats.tables - tables0 >= PREFETCH_TABLES
                || self.stats.table_bytes - bytes0 >= PREFETCH_BYTES
                || t.elapsed() >= PREFETCH_TIME
            {
                break;
            }
            if !self.tables.contains_key(&key) {
                let b = self.load_table(source);
                self.tables.insert(key, b);
            }
        }
        self.stats.prefetched += self.stats.tables - tables0;
        // The processes running now (state R), whose samples come first:
        // their mappings too, so that they are unwound from their first
        // sample, whenever `record` gets to read it (on a loaded machine,
        // a second of a running program's samples was walked by frame
        // pointers before it did).
        for pid in running.into_iter().take(PREFETCH_PROCESSES) {
            if !self.active() || t.elapsed() >= PREFETCH_TIME {
                break;
            }
            self.load_process(proc_root, pid);
        }
        self.stats.prefetched_processes += self.stats.processes - processes0;
    }

    /// Whether it still loads tables.
    pub fn active(&self) -> bool {
        self.stats.disabled.is_none()
    }

    /// Whether `pid`'s mappings were loaded (see [`TableLoader::load_process`]).
    pub fn knows(&self, pid: u32) -> bool {
        self.done.contains_key(&pid)
    }

    /// Loads the executable file mappings of process `pid` (as
    /// `proc_root/PID/maps` lists them now) not loaded yet.
    pub fn load_process(&mut self, proc_root: &Path, pid: u32) {
        // Not this recorder's own: its stacks are of no interest, and its
        // big static binary's table would cost it the most.
        if !self.active() || pid == std::process::id() {
            return;
        }
        let Ok(text) = std::fs::read_to_string(proc_root.join(format!("{pid}/maps"))) else {
            return;
        };
        let first = !self.done.contains_key(&pid);
        let maps = parse_maps(&text);
        for m in maps.iter().filter(|m| unwound(m)) {
            if !self.done.entry(pid).or_default().insert((m.start, m.end)) {
                continue;
            }
            self.load_map(proc_root, pid, m);
            if !self.active() {
                return;
            }
        }
        if first && self.done.contains_key(&pid) {
            self.stats.processes += 1;
        }
    }

    fn load_map(&mut self, proc_root: &Path, pid: u32, m: &MapEntry) {
        let key = (m.inode, m.path.clone());
        if !self.tables.contains_key(&key) {
            let b = self.load_table(Source::of(proc_root, pid, m));
            self.tables.insert(key.clone(), b);
        }
        let Some(Some(b)) = self.tables.get(&key) else {
            return;
        };
        let id = b.id;
        let Some(bias) = bias_of(&b.segments, m) else {
            self.stats.refused += 1;
            return;
        };
        let mut req = [0u8; unwind::MAP_LEN];
        req[0..4].copy_from_slice(&pid.to_ne_bytes());
        req[4..8].copy_from_slice(&id.to_ne_bytes());
        req[8..16].copy_from_slice(&m.start.to_ne_bytes());
        req[16..24].copy_from_slice(&m.end.to_ne_bytes());
        req[24..32].copy_from_slice(&bias.to_ne_bytes());
        req[32..40].copy_from_slice(&m.inode.to_ne_bytes());
        match self.ioctl(ioctl::UNWIND_MAP, req.as_ptr() as usize) {
            Ok(_) => self.stats.maps += 1,
            Err(e) => match e.raw_os_error() {
                // Gone or changed since the maps were read: that mapping
                // or process only.
                Some(libc::ENOENT) | Some(libc::ESRCH) | Some(libc::EINTR) => {
                    self.stats.refused += 1
                }
                _ => self.disable(format!("the module refused a mapping: {e}")),
            },
        }
    }

    /// Builds (or finds in the cache) and loads the table of a binary.
    fn load_table(&mut self, source: Source) -> Option<Binary> {
        let cached = self.cache.as_deref().and_then(|dir| {
            let name = source.cache_name()?;
            Some((dir.join(name), source.clone()))
        });
        let (bytes, segments) = match cached.as_ref().and_then(|(f, _)| read_cached(f)) {
            Some(hit) => {
                self.stats.cached += 1;
                hit
            }
            None => {
                let built = source.bytes().and_then(|b| {
                    let t = crate::unwind_table::build(&b)?;
                    Ok((t, segments(&b)))
                });
                match built {
                    Ok((t, segs)) if !t.rows.is_empty() && !segs.is_empty() => {
                        let bytes = t.bytes();
                        if let Some((f, _)) = &cached {
                            write_cached(f, &bytes, &segs);
                        }
                        (bytes, segs)
                    }
                    _ => {
                        self.stats.no_table += 1;
                        return None;
                    }
                }
            }
        };
        let arg: [u64; 2] = [bytes.as_ptr() as u64, bytes.len() as u64];
        match self.ioctl(ioctl::UNWIND_TABLE, arg.as_ptr() as usize) {
            Ok(id) => {
                self.stats.tables += 1;
                self.stats.table_bytes += bytes.len() as u64;
                Some(Binary {
                    id: u32::try_from(id).ok()?,
                    segments,
                })
            }
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                // This table only (the module's checks; a bug of ours).
                self.stats.no_table += 1;
                None
            }
            Err(e) => {
                self.disable(format!("the module refused a table: {e}"));
                None
            }
        }
    }

    fn disable(&mut self, why: String) {
        self.stats.disabled.get_or_insert(why);
    }

    fn ioctl(&mut self, cmd: u32, arg: usize) -> std::io::Result<i64> {
        // SAFETY: `arg` points to memory the caller keeps alive and sized
        // as `cmd` says (the table's ptr/len pair naming a live buffer, or
        // a whole map request).
        let r = unsafe { libc::ioctl(self.ctl.as_raw_fd(), cmd as _, arg) };
        if r < 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::ENOTTY) {
                self.disable("the module has no unwind tables (an older module)".into());
            }
            return Err(e);
        }
        Ok(i64::from(r))
    }
}

/// At most this many tables, and about this many bytes of them (the last
/// one may pass it), are loaded by [`TableLoader::prefetch`]: a quarter of
/// what the module holds (`unwind::MAX_TOTAL_BYTES`), so that the
/// processes sampled later still find room for theirs.
pub const PREFETCH_TABLES: u64 = 64;
pub const PREFETCH_BYTES: u64 = (unwind::MAX_TOTAL_BYTES / 4) as u64;

/// [`TableLoader::prefetch`] stops loading after this long.
pub const PREFETCH_TIME: std::time::Duration = std::time::Duration::from_secs(2);

/// At most this many running processes are loaded by
/// [`TableLoader::prefetch`] (each mapping loaded republishes the module's
/// registry of them: a cost that grows with the mappings already there).
pub const PREFETCH_PROCESSES: usize = 64;

/// What [`TableLoader::prefetch`] loads: the binaries the processes under
/// `proc_root` but `me` map executable (the vDSO included), with how many
/// processes map each and where to read it (through the first such
/// process's root), most-mapped first, then by inode and path; and the
/// processes that run now (state R), by pid.
type Prefetch = (Vec<((u64, String), u32, Source)>, Vec<u32>);

/// See [`Prefetch`].
fn prefetch_order(proc_root: &Path, me: u32) -> Prefetch {
    let Ok(dir) = std::fs::read_dir(proc_root) else {
        return (Vec::new(), Vec::new());
    };
    let mut seen: HashMap<(u64, String), (u32, Source)> = HashMap::new();
    let mut running = Vec::new();
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(proc_root.join(format!("{pid}/maps"))) else {
            continue;
        };
        // The state follows the command's closing parenthesis (which the
        // command itself may hold).
        let stat = std::fs::read_to_string(proc_root.join(format!("{pid}/stat")));
        if stat
            .as_deref()
            .ok()
            .and_then(|s| s.rsplit_once(')'))
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('R'))
        {
            running.push(pid);
        }
        let mut mine = HashSet::new();
        for m in parse_maps(&text).iter().filter(|m| unwound(m)) {
            let key = (m.inode, m.path.clone());
            if mine.insert(key.clone()) {
                seen.entry(key)
                    .or_insert_with(|| (0, Source::of(proc_root, pid, m)))
                    .0 += 1;
            }
        }
    }
    let mut order: Vec<_> = seen.into_iter().map(|(k, (n, s))| (k, n, s)).collect();
    order.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    running.sort_unstable();
    (order, running)
}

/// Whether mapping `m` is one the loader gives a table: executable, of a
/// file (with an inode) or the vDSO.
fn unwound(m: &MapEntry) -> bool {
    m.perms.contains('x') && ((m.is_file() && m.inode != 0) || m.path == "[vdso]")
}

/// Where a binary's bytes come from.
#[derive(Clone, Debug)]
enum Source {
    /// A file, as the process sees it (`/proc/PID/root/PATH`) or found on
    /// `PATH`.
    File(PathBuf),
    /// The vDSO: the kernel's, the same image in every process (this one's).
    Vdso,
}

impl Source {
    /// The binary of process `pid`'s mapping `m` as the process sees it
    /// (its mount namespace); the vDSO is the kernel's, the same image in
    /// every process: this one's.
    fn of(proc_root: &Path, pid: u32, m: &MapEntry) -> Source {
        if m.path == "[vdso]" {
            Source::Vdso
        } else {
            Source::File(proc_root.join(format!("{pid}/root{}", m.path)))
        }
    }

    fn bytes(&self) -> Result<Vec<u8>, String> {
        match self {
            Source::File(f) => std::fs::read(f).map_err(|e| e.to_string()),
            Source::Vdso => crate::record::own_vdso().ok_or_else(|| "no vDSO".to_string()),
        }
    }

    /// The name of its table in the cache: a hash of what identifies the
    /// file's content (device, inode, size, modification time, path), or of
    /// the vDSO's bytes (a new kernel, a new name); `None` if unknown.
    fn cache_name(&self) -> Option<String> {
        use std::os::unix::fs::MetadataExt;
        let mut h = Fnv::new();
        match self {
            Source::File(f) => {
                let md = std::fs::metadata(f).ok()?;
                for v in [
                    md.dev(),
                    md.ino(),
                    md.size(),
                    md.mtime() as u64,
                    md.mtime_nsec() as u64,
                ] {
                    h.write(&v.to_ne_bytes());
                }
                h.write(
                    std::fs::canonicalize(f)
                        .ok()?
                        .as_os_str()
                        .as_encoded_bytes(),
                );
            }
            Source::Vdso => h.write(&crate::record::own_vdso()?),
        }
        Some(format!("{:016x}.{}.tbl", h.0, CACHE_VERSION))
    }
}

/// The cache files' layout version (in their names and heads).
const CACHE_VERSION: u32 = 1;

/// Where built tables are kept: `$XDG_CACHE_HOME/oprofile-rs/unwind`, or
/// `~/.cache/oprofile-rs/unwind`.
pub fn cache_dir() -> PathBuf {
    crate::archive_read::cache_dir()
        .parent()
        .map_or_else(|| PathBuf::from("/tmp"), Path::to_path_buf)
        .join("unwind")
}

/// A cached table: `ORUT`, the version, the segments (count, then offset,
/// size, address, executable as four u64s each), the table's bytes; or
/// `None` if absent or not such a file (built again then).
fn read_cached(f: &Path) -> Option<(Vec<u8>, Vec<Segment>)> {
    let b = std::fs::read(f).ok()?;
    let word =
        |i: usize| -> Option<u64> { Some(u64::from_ne_bytes(b.get(i..i + 8)?.try_into().ok()?)) };
    if b.get(..4)? != b"ORUT" || u32::from_ne_bytes(b.get(4..8)?.try_into().ok()?) != CACHE_VERSION
    {
        return None;
    }
    let n = usize::try_from(word(8)?).ok().filter(|&n| n <= 64)?;
    let mut segs = Vec::with_capacity(n);
    for i in 0..n {
        let at = 16 + 32 * i;
        segs.push(Segment {
            off: word(at)?,
            size: word(at + 8)?,
            addr: word(at + 16)?,
            exec: word(at + 24)? != 0,
        });
    }
    let table = b.get(16 + 32 * n..)?.to_vec();
    // The module checks it too; a damaged file is built again here.
    unwind::check(&table).ok()?;
    Some((table, segs))
}

/// Writes a cached table (atomically: a file of its own, renamed); errors
/// leave the cache as it was.
fn write_cached(f: &Path, table: &[u8], segs: &[Segment]) {
    let Some(dir) = f.parent() else { return };
    if std::fs::create_dir_all(dir).is_err() || segs.len() > 64 {
        return;
    }
    let mut b = Vec::with_capacity(16 + 32 * segs.len() + table.len());
    b.extend_from_slice(b"ORUT");
    b.extend_from_slice(&CACHE_VERSION.to_ne_bytes());
    b.extend_from_slice(&(segs.len() as u64).to_ne_bytes());
    for s in segs {
        for v in [s.off, s.size, s.addr, u64::from(s.exec)] {
            b.extend_from_slice(&v.to_ne_bytes());
        }
    }
    b.extend_from_slice(table);
    let tmp = f.with_extension(format!("tmp{}", std::process::id()));
    if std::fs::write(&tmp, &b).is_ok() && std::fs::rename(&tmp, f).is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
}

/// The loadable segments of an ELF file: (file offset, file size, virtual
/// address, executable).
fn segments(elf: &[u8]) -> Vec<Segment> {
    use object::{Object, ObjectSegment, SegmentFlags};
    let Ok(f) = object::File::parse(elf) else {
        return Vec::new();
    };
    f.segments()
        .map(|s| {
            let (off, size) = s.file_range();
            let exec = matches!(s.flags(), SegmentFlags::Elf { p_flags } if p_flags & object::elf::PF_X != 0);
            Segment {
                off,
                size,
                addr: s.address(),
                exec,
            }
        })
        .collect()
}

/// A loadable segment of an ELF file.
#[derive(Clone, Copy, Debug)]
struct Segment {
    off: u64,
    size: u64,
    addr: u64,
    exec: bool,
}

/// The bias of mapping `m` (run-time address minus the ELF's virtual
/// address): from the segment it maps. A segment's file offset need not be
/// page aligned: the mapping starts at the page holding it (so its offset
/// may lie in the previous segment's bytes too); an executable mapping maps
/// an executable segment.
fn bias_of(segments: &[Segment], m: &MapEntry) -> Option<u64> {
    let page = |o: u64| o & !0xfff;
    let holds =
        |s: &&Segment| page(s.off) <= m.offset && m.offset < s.off.saturating_add(s.size.max(1));
    let want_exec = m.perms.contains('x');
    let s = segments
        .iter()
        .filter(holds)
        .find(|s| s.exec == want_exec)
        .or_else(|| segments.iter().find(holds))?;
    // Run-time address of the segment's first byte: the mapping's start plus
    // its distance from the mapping's offset.
    let at = m.start.wrapping_add(s.off).wrapping_sub(m.offset);
    Some(at.wrapping_sub(s.addr))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cached_table_reads_back_and_a_damaged_one_is_refused() {
        let dir = std::env::temp_dir().join(format!("oprofile-rs-ucache-{}", std::process::id()));
        let f = dir.join("t.tbl");
        let mut table = unwind::head(2).to_vec();
        for r in [
            unwind::Row {
                addr: 0x10,
                rule: unwind::CFA_SP,
                bp: 0,
                cfa: 8,
            },
            unwind::Row {
                addr: 0x20,
                rule: unwind::UNKNOWN,
                bp: 0,
                cfa: 0,
            },
        ] {
            table.extend_from_slice(&r.encoded());
        }
        let segs = vec![Segment {
            off: 0x1000,
            size: 0x200,
            addr: 0x401000,
            exec: true,
        }];
        write_cached(&f, &table, &segs);
        let (t, s) = read_cached(&f).expect("the cached table");
        assert_eq!(t, table);
        assert_eq!(
            (s[0].off, s[0].size, s[0].addr, s[0].exec),
            (0x1000, 0x200, 0x401000, true)
        );
        // Cut short, or another version: built again.
        let b = std::fs::read(&f).unwrap();
        std::fs::write(&f, &b[..b.len() - 1]).unwrap();
        assert!(read_cached(&f).is_none());
        let mut v = b.clone();
        v[4] ^= 1;
        std::fs::write(&f, &v).unwrap();
        assert!(read_cached(&f).is_none());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn prefetch_takes_the_binaries_most_processes_map_first() {
        let dir = tempfile::tempdir().unwrap();
        let maps = |pid: u32, text: &str| {
            std::fs::create_dir_all(dir.path().join(pid.to_string())).unwrap();
            std::fs::write(dir.path().join(format!("{pid}/maps")), text).unwrap();
        };
        let libc = "7f0000000000-7f0000100000 r-xp 00028000 08:01 200 /usr/lib/libc.so.6\n";
        let vdso = "7ffd00000000-7ffd00002000 r-xp 00000000 00:00 0 [vdso]\n";
        // Two processes of two programs share the C library and the vDSO;
        // a data mapping, an anonymous executable one and a second
        // mapping of the same file count for nothing more.
        maps(
            10,
            &format!(
                "00400000-00401000 r-xp 00000000 08:01 100 /usr/bin/a\n\
                 00401000-00402000 rw-p 00001000 08:01 101 /usr/bin/data\n\
                 7e0000000000-7e0000001000 rwxp 00000000 00:00 0 \n{libc}{libc}{vdso}"
            ),
        );
        maps(
            11,
            &format!("00400000-00401000 r-xp 00000000 08:01 300 /usr/bin/b\n{libc}{vdso}"),
        );
        // The recorder's own maps and a directory that is no process: not
        // read.
        maps(
            12,
            "00400000-00401000 r-xp 00000000 08:01 900 /usr/bin/me\n",
        );
        std::fs::create_dir_all(dir.path().join("self")).unwrap();
        // 11 and the recorder run; 10 sleeps (a command with a ") R " in
        // its name fools no one).
        let stat = |pid: u32, text: &str| {
            std::fs::write(dir.path().join(format!("{pid}/stat")), text).unwrap();
        };
        stat(10, "10 (a) R (x) S 1 10 10 0 -1");
        stat(11, "11 (b) R 1 11 11 0 -1");
        stat(12, "12 (me) R 1 12 12 0 -1");
        let (order, running) = prefetch_order(dir.path(), 12);
        assert_eq!(running, vec![11]);
        let got: Vec<(u64, String, u32)> =
            order.into_iter().map(|((i, p), n, _)| (i, p, n)).collect();
        assert_eq!(
            got,
            vec![
                (0, "[vdso]".to_string(), 2),
                (200, "/usr/lib/libc.so.6".to_string(), 2),
                (100, "/usr/bin/a".to_string(), 1),
                (300, "/usr/bin/b".to_string(), 1),
            ]
        );
        // Read through the root of a process that maps it.
        let (first, _) = prefetch_order(dir.path(), 12);
        match &first[1].2 {
            Source::File(f) => assert!(
                f.ends_with("10/root/usr/lib/libc.so.6")
                    || f.ends_with("11/root/usr/lib/libc.so.6"),
                "{f:?}"
            ),
            s => panic!("{s:?}"),
        }
        let (none, running) = prefetch_order(&dir.path().join("none"), 12);
        assert!(none.is_empty() && running.is_empty());
    }

    #[test]
    fn a_changed_file_gets_another_cache_name() {
        let dir = std::env::temp_dir().join(format!("oprofile-rs-uname-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("bin");
        std::fs::write(&f, b"one").unwrap();
        let a = Source::File(f.clone()).cache_name().unwrap();
        assert_eq!(Source::File(f.clone()).cache_name().unwrap(), a);
        std::fs::write(&f, b"three").unwrap();
        assert_ne!(Source::File(f.clone()).cache_name().unwrap(), a);
        assert!(Source::File(dir.join("none")).cache_name().is_none());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_bias_of_a_mapping_is_its_segments() {
        // The test binary itself, as its own maps show it.
        let text = std::fs::read_to_string("/proc/self/maps").unwrap();
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let maps = parse_maps(&text);
        let m = maps
            .iter()
            .find(|m| m.perms.contains('x') && Path::new(&m.path) == exe)
            .expect("the test's text mapping");
        let data = std::fs::read(&exe).unwrap();
        let bias = bias_of(&segments(&data), m).expect("a segment");
        // A function of this binary, at its run-time address, is at its ELF
        // address plus the bias: the ELF's symbol for it says where.
        let here = the_bias_of_a_mapping_is_its_segments as *const () as usize as u64;
        let elf = object::File::parse(&*data).unwrap();
        use object::{Object, ObjectSymbol};
        let sym = elf
            .symbols()
            .find(|s| {
                // The function itself, not the harness's closure around it
                // (legacy mangling: `...segments17h<hash>E`).
                s.name().is_ok_and(|n| {
                    n.contains("the_bias_of_a_mapping_is_its_segments17h") && n.ends_with('E')
                }) && s.address() != 0
            })
            .expect("the test's symbol");
        assert_eq!(sym.address().wrapping_add(bias), here);
    }
}
