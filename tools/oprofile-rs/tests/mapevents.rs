//! The kernel's map records, read on this machine: the collector opened for
//! real (the tests run as root, as `record` does), this process mapping a
//! file and starting a child that execs, and the paths taken when
//! `perf_event_open` fails (an old kernel, a refusal), down to `record`'s
//! fallback to polling `/proc`.

use std::collections::HashMap;
use std::io::Error;
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command as StdCommand;

use oprofile_stream::{Encoder, Header};
use oprofile_tool::mapevents::{Collector, MapEvent, Timeline};

fn true_bin() -> PathBuf {
    ["/usr/bin/true", "/bin/true"]
        .iter()
        .map(|p| Path::new(p).canonicalize())
        .find_map(Result::ok)
        .expect("no true binary")
}

fn kernel_at_least(major: u32, minor: u32) -> bool {
    let r = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    let mut v = r
        .split(|c: char| !c.is_ascii_digit())
        .map(|n| n.parse::<u32>());
    let (Some(Ok(a)), Some(Ok(b))) = (v.next(), v.next()) else {
        panic!("kernel release {r}?")
    };
    (a, b) >= (major, minor)
}

fn page() -> u64 {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_PAGESIZE) as u64 }
}

fn gettid() -> u32 {
    // SAFETY: no preconditions.
    unsafe { libc::gettid() as u32 }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|b| format!("{b:02x}")).collect()
}

fn open(what: &str) -> Collector {
    Collector::open().unwrap_or_else(|e| {
        panic!("{what}: the kernel's map records must be available here (root): {e}")
    })
}

/// A file mapped executable by this process (a copy of `true` at a path of
/// its own, with a space), unmapped on drop.
struct Mapped {
    path: PathBuf,
    addr: u64,
    len: usize,
    build_id: Option<String>,
    _dir: tempfile::TempDir,
}

impl Mapped {
    fn new() -> Mapped {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().canonicalize().unwrap().join("mapped by test");
        std::fs::copy(true_bin(), &path).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let build_id = oprofile_tool::buildid::build_id(&bytes).map(|b| hex(&b));
        assert!(
            build_id.is_some(),
            "{} has no build-id",
            true_bin().display()
        );
        let f = std::fs::File::open(&path).unwrap();
        // SAFETY: a new mapping of a file of ours, unmapped on drop.
        let addr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                bytes.len(),
                libc::PROT_READ | libc::PROT_EXEC,
                libc::MAP_PRIVATE,
                f.as_raw_fd(),
                0,
            )
        };
        assert_ne!(addr, libc::MAP_FAILED, "{}", Error::last_os_error());
        Mapped {
            path,
            addr: addr as u64,
            len: bytes.len(),
            build_id,
            _dir: dir,
        }
    }

    /// Whether `events` hold this mapping's MMAP2 record.
    fn in_(&self, events: &[MapEvent]) -> bool {
        let path = self.path.to_str().unwrap();
        events
            .iter()
            .any(|e| matches!(e, MapEvent::Mmap { path: p, .. } if p == path))
    }

    /// The records `c` reads until this mapping's is among them (at most
    /// 2 s: the kernel writes it in the mmap call, but a loaded host has
    /// been seen not to show it at the first look), sorted by time.
    fn collect(&self, c: &mut Collector) -> Vec<MapEvent> {
        let mut all = Vec::new();
        for _ in 0..100 {
            c.poll();
            all.extend(c.take_sorted());
            if self.in_(&all) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        all.sort_by_key(|e| e.time());
        all
    }

    /// A mapping made and its records read ([`Mapped::collect`]), made
    /// anew up to three times while its record is not among them: on CI's
    /// host, building beside the tests, one such record was once not there
    /// after 2 s. Fails with what the collector counted as lost and skipped.
    fn seen(c: &mut Collector) -> (Mapped, Vec<MapEvent>) {
        let mut read = Vec::new();
        for _ in 0..3 {
            let m = Mapped::new();
            let events = m.collect(c);
            if m.in_(&events) {
                return (m, events);
            }
            read.push(events.len());
        }
        panic!(
            "no MMAP2 of the test's mapping in three tries (records read: {read:?}; lost by the kernel: {}, skipped: {:?})",
            c.lost, c.skipped
        );
    }

    /// The MMAP2 record of this mapping among `events`.
    fn record<'a>(&self, events: &'a [MapEvent]) -> &'a MapEvent {
        let path = self.path.to_str().unwrap();
        let mut it = events
            .iter()
            .filter(|e| matches!(e, MapEvent::Mmap { path: p, .. } if p == path));
        let e = it
            .next()
            .unwrap_or_else(|| panic!("no MMAP2 of {path} among {events:#?}"));
        assert!(it.next().is_none(), "{path} mapped twice: {events:#?}");
        e
    }

    /// The record the kernel should have written for this mapping.
    fn expected(&self, time: u64, build_id: Option<String>) -> MapEvent {
        MapEvent::Mmap {
            time,
            pid: std::process::id(),
            tid: gettid(),
            start: self.addr,
            end: self.addr + (self.len as u64).div_ceil(page()) * page(),
            pgoff: 0,
            prot: (libc::PROT_READ | libc::PROT_EXEC) as u32,
            build_id,
            path: self.path.to_str().unwrap().to_string(),
        }
    }
}

impl Drop for Mapped {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`.
        unsafe { libc::munmap(self.addr as *mut libc::c_void, self.len) };
    }
}

#[test]
fn the_kernel_records_a_mapping_and_a_child_exec_and_exit_of_this_process() {
    let mut c = open("this test");
    assert_eq!(c.build_ids, kernel_at_least(5, 12));
    assert!(c.cpus() >= 1);
    let me = std::process::id();
    let mapped = Mapped::new();
    // A child of this thread that execs `true` and exits.
    let mut child = StdCommand::new(true_bin()).spawn().unwrap();
    let kid = child.id();
    assert!(child.wait().unwrap().success());
    let events = mapped.collect(&mut c);
    assert_eq!(c.lost, 0);
    assert!(!c.skipped.any(), "{:?}", c.skipped);

    // The mapping, as mapped: range, offset, protection, path, build-id.
    let m = mapped.record(&events);
    let want_id = if c.build_ids {
        mapped.build_id.clone()
    } else {
        None
    };
    assert_eq!(*m, mapped.expected(m.time(), want_id));

    // The child: FORK from this thread, its exec of `true` (COMM flagged
    // exec, then the MMAP2 of the binary), its EXIT; in that order.
    let of_kid: Vec<&MapEvent> = events.iter().filter(|e| e.pid() == kid).collect();
    let fork = of_kid
        .iter()
        .find(|e| matches!(e, MapEvent::Fork { .. }))
        .unwrap_or_else(|| panic!("no FORK of {kid}: {of_kid:#?}"));
    assert_eq!(
        **fork,
        MapEvent::Fork {
            time: fork.time(),
            pid: kid,
            ppid: me,
            tid: kid,
            ptid: gettid(),
        }
    );
    let comm = of_kid
        .iter()
        .find(|e| matches!(e, MapEvent::Comm { .. }))
        .unwrap_or_else(|| panic!("no COMM of {kid}: {of_kid:#?}"));
    assert_eq!(
        **comm,
        MapEvent::Comm {
            time: comm.time(),
            pid: kid,
            tid: kid,
            exec: true,
            name: "true".into(),
        }
    );
    let bin = true_bin();
    let image = of_kid
        .iter()
        .find(|e| matches!(e, MapEvent::Mmap { path, .. } if Path::new(path) == bin))
        .unwrap_or_else(|| panic!("no MMAP2 of {} for {kid}: {of_kid:#?}", bin.display()));
    let exit = of_kid
        .iter()
        .find(|e| matches!(e, MapEvent::Exit { .. }))
        .unwrap_or_else(|| panic!("no EXIT of {kid}: {of_kid:#?}"));
    assert_eq!(
        **exit,
        MapEvent::Exit {
            time: exit.time(),
            pid: kid,
            ppid: me,
            tid: kid,
            ptid: me,
        }
    );
    assert!(
        fork.time() <= comm.time() && comm.time() <= image.time() && image.time() <= exit.time(),
        "{of_kid:#?}"
    );
    if c.build_ids {
        let MapEvent::Mmap { build_id, .. } = image else {
            unreachable!()
        };
        let file = std::fs::read(&bin).unwrap();
        let want = oprofile_tool::buildid::build_id(&file).map(|b| hex(&b));
        assert_eq!(*build_id, want);
    }

    // What the analyses make of them: each address found in the mapping of
    // its process at its time.
    let t = Timeline::new(HashMap::new(), &events);
    let path_at = |pid, time, addr| t.lookup(pid, time, addr).map(|(_, m)| m.map.path.clone());
    assert_eq!(
        path_at(me, m.time(), mapped.addr + 8),
        Some(mapped.path.to_str().unwrap().to_string())
    );
    let MapEvent::Mmap { start, .. } = image else {
        unreachable!()
    };
    assert_eq!(
        path_at(kid, image.time(), start + 8),
        Some(bin.to_str().unwrap().to_string())
    );
}

#[test]
fn a_kernel_without_build_ids_in_its_records_still_gives_the_mappings() {
    // A kernel before 5.12 refuses the build_id bit with EINVAL: the events
    // are opened again without it.
    let mut asked = Vec::new();
    let mut c = Collector::open_with_faults(|build_id, cpu| {
        asked.push((build_id, cpu));
        build_id.then(|| Error::from_raw_os_error(libc::EINVAL))
    })
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(!c.build_ids);
    // Asked once with it (the first CPU), then never again.
    assert_eq!(asked.iter().filter(|a| a.0).count(), 1, "{asked:?}");
    let (mapped, events) = Mapped::seen(&mut c);
    let m = mapped.record(&events);
    assert_eq!(*m, mapped.expected(m.time(), None));
}

#[test]
fn a_refused_perf_event_open_says_why_and_offline_cpus_are_passed_over() {
    let refused = |errno: i32| match Collector::open_with_faults(|_, _| {
        Some(Error::from_raw_os_error(errno))
    }) {
        Ok(_) => panic!("opened despite errno {errno}"),
        Err(e) => e,
    };
    let e = refused(libc::EACCES);
    assert!(
        e.starts_with("perf_event_open(PERF_COUNT_SW_DUMMY, cpu "),
        "{e}"
    );
    assert!(e.contains("Permission denied"), "{e}");
    assert!(
        e.ends_with(" (needs root or CAP_PERFMON, or kernel.perf_event_paranoid <= 0)"),
        "{e}"
    );
    let e = refused(libc::ENOSYS);
    assert!(e.ends_with(" (kernel without CONFIG_PERF_EVENTS?)"), "{e}");
    // EINVAL with and without build-ids: no hint.
    let e = refused(libc::EINVAL);
    assert!(e.ends_with("Invalid argument (os error 22)"), "{e}");
    assert_eq!(refused(libc::ENODEV), "no online CPU accepted a perf event");

    // One CPU gone (unplugged since the list was read): the others serve.
    let all = open("all CPUs").cpus();
    let mut first = None;
    let c = Collector::open_with_faults(|_, cpu| {
        (*first.get_or_insert(cpu) == cpu).then(|| Error::from_raw_os_error(libc::ENODEV))
    });
    match c {
        Ok(c) => assert_eq!(c.cpus(), all - 1),
        Err(e) => assert!(
            all == 1 && e == "no online CPU accepted a perf event",
            "{e}"
        ),
    }
}

/// Makes `cmd` run with `perf_event_open(2)` failing with `errno`: a seccomp
/// filter installed in the child before its exec (the real refusal, from
/// the kernel, to the real binary).
fn without_perf_event_open(cmd: &mut StdCommand, errno: i32) -> &mut StdCommand {
    let filter = [
        // The syscall number (`seccomp_data.nr`, at offset 0).
        libc::sock_filter {
            code: (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16,
            jt: 0,
            jf: 0,
            k: 0,
        },
        libc::sock_filter {
            code: (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16,
            jt: 0,
            jf: 1,
            k: libc::SYS_perf_event_open as u32,
        },
        libc::sock_filter {
            code: (libc::BPF_RET | libc::BPF_K) as u16,
            jt: 0,
            jf: 0,
            k: libc::SECCOMP_RET_ERRNO | errno as u32,
        },
        libc::sock_filter {
            code: (libc::BPF_RET | libc::BPF_K) as u16,
            jt: 0,
            jf: 0,
            k: libc::SECCOMP_RET_ALLOW,
        },
    ];
    // SAFETY: only async-signal-safe calls (prctl) between fork and exec;
    // the filter outlives them (it is copied in).
    unsafe {
        cmd.pre_exec(move || {
            let prog = libc::sock_fprog {
                len: filter.len() as u16,
                filter: filter.as_ptr() as *mut libc::sock_filter,
            };
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
                || libc::prctl(
                    libc::PR_SET_SECCOMP,
                    libc::SECCOMP_MODE_FILTER,
                    &prog as *const libc::sock_fprog,
                ) != 0
            {
                return Err(Error::last_os_error());
            }
            Ok(())
        })
    }
}

/// `record --maps MAPS -- sleep 0.5` with perf_event_open failing with
/// `errno`, on a device file of an empty stream.
fn record_refused(dir: &Path, maps: &str, errno: i32) -> (bool, String) {
    let dev = dir.join("dev");
    std::fs::write(&dev, Encoder::new(&Header::default()).finish()).unwrap();
    let bin = assert_cmd::cargo::cargo_bin("oprofile-rs");
    let mut cmd = StdCommand::new(bin);
    cmd.args(["record", "-q", "-o", dir.join("rec").to_str().unwrap()])
        .args(["--device", dev.to_str().unwrap()])
        .args(["--debugfs", dir.join("nope").to_str().unwrap()])
        .args(["--maps", maps, "--", "sleep", "0.5"]);
    let o = without_perf_event_open(&mut cmd, errno).output().unwrap();
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn record_falls_back_to_polling_when_perf_event_open_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (ok, err) = record_refused(dir.path(), "auto", libc::EACCES);
    assert!(ok, "{err}");
    // One warning, one line, that says why and what it costs.
    let w: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("exact process maps unavailable"))
        .collect();
    assert_eq!(w.len(), 1, "{err}");
    let w = w[0];
    assert!(
        w.starts_with(
            "oprofile-rs: warning: exact process maps unavailable \
             (perf_event_open(PERF_COUNT_SW_DUMMY, cpu "
        ),
        "{w}"
    );
    assert!(
        w.ends_with(
            "failed: Permission denied (os error 13) (needs root or CAP_PERFMON, or \
             kernel.perf_event_paranoid <= 0)): polling /proc/PID/maps instead \
             (short-lived processes, libraries loaded and unloaded between reads and \
             exec can be symbolised wrongly or not at all)"
        ),
        "{w}"
    );
    assert!(!w.contains("  "), "{w}");
    // ... and the maps polled: the command's are there, no records.
    let meta = dir.path().join("rec.meta");
    let info = std::fs::read_to_string(meta.join("info")).unwrap();
    assert!(info.contains("maps: polled /proc/PID/maps every"), "{info}");
    assert!(!info.contains("maps: exact"), "{info}");
    assert!(!meta.join("events").exists());
    let maps: Vec<String> = std::fs::read_dir(meta.join("maps"))
        .unwrap()
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
        .collect();
    assert!(maps.iter().any(|m| m.contains("sleep")), "{maps:?}");

    // `--maps events` asks for the records: an error, that says why.
    let dir = tempfile::tempdir().unwrap();
    let (ok, err) = record_refused(dir.path(), "events", libc::ENOSYS);
    assert!(!ok, "{err}");
    assert!(
        err.contains("exact process maps unavailable: perf_event_open(PERF_COUNT_SW_DUMMY, cpu "),
        "{err}"
    );
    assert!(
        err.contains("(os error 38) (kernel without CONFIG_PERF_EVENTS?)"),
        "{err}"
    );
    assert!(!dir.path().join("rec").exists());
}
