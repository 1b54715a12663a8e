mod common;

use std::path::Path;
use std::process::{Command as StdCommand, Stdio};
use std::time::{Duration, Instant};

use assert_cmd::Command;
use oprofile_stream::{Comm, Encoder, Header, Lost, Record, Sample};
use oprofile_tool::record::Scanner;

const DEAD_PID: u32 = 3_999_999; // above any pid_max

fn stream_for(pids: &[u32]) -> Vec<u8> {
    let mut e = Encoder::new(&Header::default());
    for (i, &p) in pids.iter().enumerate() {
        e.record(&Record::Comm(Comm::new(0, i as u64, p, p, "x")));
        for j in 0..3 {
            e.record(&Record::Sample(Sample {
                cpu: 0,
                kernel: false,
                time: 10 + j,
                pc: 0x1000,
                pid: p,
                tgid: p,
                callchain: vec![],
                ..Default::default()
            }));
        }
    }
    e.record(&Record::Lost(Lost {
        cpu: 0,
        time: 99,
        count: 7,
    }));
    e.finish()
}

/// `oprofile-rs record -o OUT --device DEV --debugfs DEBUGFS --duration SECS`.
fn record_for(out: &Path, dev: &Path, debugfs: &Path, secs: &str) -> Command {
    let mut c = Command::cargo_bin("oprofile-rs").unwrap();
    c.args(["record", "-o", out.to_str().unwrap()])
        .args(["--device", dev.to_str().unwrap()])
        .args(["--debugfs", debugfs.to_str().unwrap(), "--duration", secs])
        .args(["--maps", "poll"]);
    c
}

/// Runs `record` with `args` for 5 s, which must fail; returns its stderr.
fn record_failing(out: &Path, dev: &Path, debugfs: &Path, args: &[&str]) -> String {
    let o = record_for(out, dev, debugfs, "5")
        .args(args)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(!o.status.success(), "{args:?}: {err}");
    err
}

#[test]
fn scanner_counts_records_fed_in_pieces() {
    let data = stream_for(&[10, 20]);
    for chunk in [1usize, 3, 8, 64, 1000] {
        let mut s = Scanner::default();
        for c in data.chunks(chunk) {
            s.feed(c).unwrap();
        }
        assert_eq!(
            (s.samples, s.lost, s.processes()),
            (6, 7, 2),
            "chunk {chunk}"
        );
        assert_eq!(s.take_new_tgids(), vec![10, 20]);
        assert!(s.error.is_none());
    }
    let mut s = Scanner::default();
    assert!(s.feed(b"garbage garbage garbage").is_err());
}

/// A kernel thread (or a process seen only in kernel mode, e.g. in a system
/// call) that exited before its maps were read.
const DEAD_KTHREAD: u32 = 3_999_998;

fn sample(pid: u32, kernel: bool, time: u64) -> Record {
    Record::Sample(Sample {
        cpu: 0,
        kernel,
        time,
        pc: if kernel {
            0xffff_ffff_8100_1000
        } else {
            0x1000
        },
        pid,
        tgid: pid,
        callchain: if kernel {
            vec![0xffff_ffff_8100_2000, 0xffff_ffff_8100_3000]
        } else {
            vec![]
        },
        ..Default::default()
    })
}

#[test]
fn scanner_knows_which_processes_need_maps() {
    let mut e = Encoder::new(&Header::default());
    // 10: kernel mode only; 20: user mode; 30: kernel mode first, user mode later.
    for (pid, kernel) in [(10, true), (10, true), (20, false), (30, true)] {
        e.record(&sample(pid, kernel, 1));
    }
    let first = e.len();
    e.record(&sample(30, false, 2)).record(&sample(10, true, 3));
    let data = e.finish();
    let mut s = Scanner::default();
    s.feed(&data[..first]).unwrap();
    assert_eq!(s.take_new_tgids(), vec![10, 20, 30]);
    assert!(!s.needs_maps(10));
    assert!(s.needs_maps(20));
    assert!(!s.needs_maps(30));
    s.feed(&data[first..]).unwrap();
    assert!(s.take_new_tgids().is_empty());
    assert!(!s.needs_maps(10));
    assert!(s.needs_maps(30));
    assert!(!s.needs_maps(0));
    assert_eq!((s.samples, s.processes()), (6, 3));
}

/// Only processes with user-mode samples need maps: `record` warns about (and
/// counts as missing) those alone, and `report` does not complain about the
/// missing maps of a kernel-only process either.
#[test]
fn missing_maps_only_matter_for_user_mode_processes() {
    let dir = tempfile::tempdir().unwrap();
    let dev = dir.path().join("dev");
    let mut e = Encoder::new(&Header::default());
    e.record(&Record::Comm(Comm::new(
        0,
        0,
        DEAD_KTHREAD,
        DEAD_KTHREAD,
        "kworker/0:1",
    )));
    for t in 1..4 {
        e.record(&sample(DEAD_KTHREAD, true, t));
    }
    e.record(&Record::Comm(Comm::new(0, 5, DEAD_PID, DEAD_PID, "victim")));
    e.record(&sample(DEAD_PID, true, 6))
        .record(&sample(DEAD_PID, false, 7));
    let data = e.finish();
    std::fs::write(&dev, &data).unwrap();
    let out = dir.path().join("rec");
    let o = record_for(&out, &dev, dir.path(), "0.3").output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("5 samples, 0 lost, 2 processes (0 maps captured, 1 missing)"),
        "{err}"
    );
    assert!(
        err.contains(&format!("maps of pid {DEAD_PID} not captured")),
        "{err}"
    );
    assert!(!err.contains(&format!("pid {DEAD_KTHREAD}")), "{err}");
    let info = std::fs::read_to_string(dir.path().join("rec.meta/info")).unwrap();
    assert!(
        info.contains(&format!("maps-missing: {DEAD_PID}: ")),
        "{info}"
    );
    assert!(!info.contains(&DEAD_KTHREAD.to_string()), "{info}");

    let o = Command::cargo_bin("oprofile-rs")
        .unwrap()
        .args(["report", "-i", out.to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains(&format!("no maps captured for pid {DEAD_PID}")),
        "{err}"
    );
    assert!(!err.contains(&format!("pid {DEAD_KTHREAD}")), "{err}");
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("kworker/0:1"),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
}

#[test]
fn record_duration_flush_and_sidecar() {
    let mut live = StdCommand::new("sleep").arg("20").spawn().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let dev = dir.path().join("dev");
    let data = stream_for(&[live.id(), DEAD_PID]);
    std::fs::write(&dev, &data).unwrap();
    let dbg = dir.path().join("debugfs");
    std::fs::create_dir(&dbg).unwrap();
    std::fs::write(dbg.join("flush"), "").unwrap();
    let out = dir.path().join("rec");
    let t = Instant::now();
    let o = record_for(&out, &dev, &dbg, "0.5").output().unwrap();
    let _ = live.kill();
    let _ = live.wait();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(t.elapsed() < Duration::from_secs(10));
    assert_eq!(std::fs::read(&out).unwrap(), data);
    assert_eq!(
        std::fs::read_to_string(dbg.join("flush")).unwrap().trim(),
        "1"
    );
    assert!(
        err.contains(&format!("recorded {} bytes", data.len())),
        "{err}"
    );
    assert!(
        err.contains("6 samples, 7 lost, 2 processes (1 maps captured, 1 missing)"),
        "{err}"
    );
    assert!(
        err.contains(&format!("maps of pid {DEAD_PID} not captured")),
        "{err}"
    );
    let meta = dir.path().join("rec.meta");
    let maps = std::fs::read_to_string(meta.join("maps").join(live.id().to_string())).unwrap();
    assert!(maps.contains("sleep"), "{maps}");
    assert!(!meta.join("maps").join(DEAD_PID.to_string()).exists());
    let info = std::fs::read_to_string(meta.join("info")).unwrap();
    assert!(info.contains("sidecar-version: 3"));
    assert!(info.contains("maps-captured: 1"));
    assert!(
        info.contains(&format!("maps-missing: {DEAD_PID}: process exited")),
        "{info}"
    );
    // Captured when this host lets us read kallsyms, else said so: not
    // either one whatever happened.
    if std::fs::read_to_string("/proc/kallsyms").is_ok() {
        assert!(meta.join("kallsyms").exists(), "{info}");
        assert!(info.contains("kallsyms: captured"), "{info}");
    } else {
        assert!(!meta.join("kallsyms").exists(), "{info}");
        assert!(info.contains("kallsyms: not captured"), "{info}");
    }
    // The recording is readable by the analysis commands.
    let o = Command::cargo_bin("oprofile-rs")
        .unwrap()
        .args(["report", "-i", out.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stdout).contains("# samples: 6, lost: 7"));
}

#[test]
fn record_stops_when_command_exits_and_tracks_it() {
    let dir = tempfile::tempdir().unwrap();
    let dev = dir.path().join("dev");
    std::fs::write(&dev, stream_for(&[])).unwrap();
    let out = dir.path().join("rec");
    let t = Instant::now();
    let o = Command::cargo_bin("oprofile-rs")
        .unwrap()
        .args([
            "record",
            "-o",
            out.to_str().unwrap(),
            "--device",
            dev.to_str().unwrap(),
        ])
        .args([
            "--debugfs",
            dir.path().join("nope").to_str().unwrap(),
            "--maps",
            "poll",
            "--",
            "sleep",
            "0.5",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(t.elapsed() < Duration::from_secs(8), "{:?}", t.elapsed());
    // The flush failure is a warning, not an error.
    assert!(err.contains("warning: cannot write 1 to"), "{err}");
    let info = std::fs::read_to_string(dir.path().join("rec.meta/info")).unwrap();
    assert!(info.contains("command: sleep 0.5"), "{info}");
    // The started command's maps were captured while it lived.
    let n = std::fs::read_dir(dir.path().join("rec.meta/maps"))
        .unwrap()
        .count();
    assert_eq!(n, 1);
}

#[test]
fn record_stops_cleanly_on_sigint() {
    let dir = tempfile::tempdir().unwrap();
    let dev = dir.path().join("dev");
    let data = stream_for(&[1]);
    std::fs::write(&dev, &data).unwrap();
    let out = dir.path().join("rec");
    let bin = assert_cmd::cargo::cargo_bin("oprofile-rs");
    let child = StdCommand::new(bin)
        .args([
            "record",
            "-o",
            out.to_str().unwrap(),
            "--device",
            dev.to_str().unwrap(),
        ])
        .args(["--debugfs", dir.path().to_str().unwrap()])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The SIGINT handler is installed before the recording starts, and the
    // output is created after (kallsyms, maps, the device first: slow on a
    // loaded host): its existence says the handler is in place.
    let t = Instant::now();
    while !out.exists() {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "record never created its output"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // SAFETY: kill() with our own child's pid; it has not been waited for,
    // so the pid is still its.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("recorded"), "{err}");
    assert_eq!(std::fs::read(&out).unwrap(), data);
}

#[test]
fn record_without_device_fails_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let o = Command::cargo_bin("oprofile-rs")
        .unwrap()
        .args([
            "record",
            "-o",
            dir.path().join("r").to_str().unwrap(),
            "--device",
            "/nonexistent/buffer",
            "--duration",
            "1",
        ])
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("cannot open /nonexistent/buffer"), "{err}");
}

/// A process whose maps read empty (it had exited: a zombie) has no maps
/// captured: `record` says so instead of counting an empty snapshot.
#[test]
fn empty_maps_of_a_user_process_count_as_missing() {
    let dir = tempfile::tempdir().unwrap();
    let proc_root = dir.path().join("proc");
    for (pid, maps) in [
        (4242u32, ""),
        (4343, "00400000-00401000 r-xp 00000000 00:00 0 /bin/x\n"),
    ] {
        std::fs::create_dir_all(proc_root.join(pid.to_string())).unwrap();
        std::fs::write(proc_root.join(pid.to_string()).join("maps"), maps).unwrap();
    }
    let mut e = Encoder::new(&Header::default());
    e.record(&Record::Comm(Comm::new(0, 0, 4242, 4242, "zombie")))
        .record(&sample(4242, false, 1))
        .record(&Record::Comm(Comm::new(0, 2, 4343, 4343, "alive")))
        .record(&sample(4343, false, 3));
    let dev = dir.path().join("dev");
    std::fs::write(&dev, e.finish()).unwrap();
    let out = dir.path().join("rec");
    let o = record_for(&out, &dev, dir.path(), "0.3")
        .args(["--proc-root", proc_root.to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("(1 maps captured, 1 missing)"), "{err}");
    assert!(
        err.contains("maps of pid 4242 not captured: its maps were empty"),
        "{err}"
    );
    assert!(dir.path().join("rec.meta/maps/4343").exists());
    assert!(!dir.path().join("rec.meta/maps/4242").exists());
}

#[test]
fn record_captures_jit_perf_maps_and_other_mount_namespaces() {
    // A fake /proc: pid 4242 runs in another mount namespace, where it is
    // pid 7 and writes /tmp/perf-7.map.
    let dir = tempfile::tempdir().unwrap();
    let proc_root = dir.path().join("proc");
    let p = proc_root.join("4242");
    std::fs::create_dir_all(p.join("ns")).unwrap();
    std::fs::create_dir_all(p.join("root/tmp")).unwrap();
    std::fs::create_dir_all(proc_root.join("self/ns")).unwrap();
    std::fs::write(
        p.join("maps"),
        "7f0000000000-7f0000100000 rwxp 00000000 00:00 0 \n",
    )
    .unwrap();
    std::fs::write(p.join("status"), "Name:\tjava\nNSpid:\t4242\t7\n").unwrap();
    std::fs::write(p.join("root/tmp/perf-7.map"), "7f0000001000 100 jitted\n").unwrap();
    std::os::unix::fs::symlink("mnt:[4026532000]", p.join("ns/mnt")).unwrap();
    std::os::unix::fs::symlink("mnt:[4026531841]", proc_root.join("self/ns/mnt")).unwrap();
    let dev = dir.path().join("dev");
    let mut e = Encoder::new(&Header::default());
    e.record(&Record::Comm(Comm::new(0, 1, 4242, 4242, "java")));
    e.record(&Record::Sample(Sample {
        cpu: 0,
        kernel: false,
        time: 10,
        pc: 0x7f0000001010,
        pid: 4242,
        tgid: 4242,
        callchain: vec![],
        ..Default::default()
    }));
    std::fs::write(&dev, e.finish()).unwrap();
    let dbg = dir.path().join("debugfs");
    std::fs::create_dir(&dbg).unwrap();
    let out = dir.path().join("rec");
    let o = record_for(&out, &dev, &dbg, "0.3")
        .args(["--proc-root", proc_root.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    let meta = dir.path().join("rec.meta");
    assert_eq!(
        std::fs::read_to_string(meta.join("perf-maps/4242.map")).unwrap(),
        "7f0000001000 100 jitted\n"
    );
    assert_eq!(
        std::fs::read_to_string(meta.join("namespaces")).unwrap(),
        "4242 mnt:[4026532000]\n"
    );
    let info = std::fs::read_to_string(meta.join("info")).unwrap();
    assert!(
        info.contains("other-mount-namespaces: 1 processes"),
        "{info}"
    );
    // The JIT symbol comes from the side-car's copy.
    let o = Command::cargo_bin("oprofile-rs")
        .unwrap()
        .args(["script", "-q", "-i", out.to_str().unwrap()])
        .output()
        .unwrap();
    let s = String::from_utf8_lossy(&o.stdout);
    assert!(s.contains("00007f0000001010 jitted (perf-4242.map)"), "{s}");
}

fn record_cmd(out: &Path, dev: &Path, nodebugfs: &Path) -> Command {
    let mut c = Command::cargo_bin("oprofile-rs").unwrap();
    c.args(["record", "-q", "-o", out.to_str().unwrap()])
        .args(["--device", dev.to_str().unwrap()])
        .args(["--debugfs", nodebugfs.to_str().unwrap()]);
    c
}

/// The side-car's `events` lines of one kind for `pid`.
fn event_lines(meta: &Path, kind: &str, pid: u32) -> Vec<String> {
    std::fs::read_to_string(meta.join("events"))
        .unwrap()
        .lines()
        .filter(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            f.len() > 2 && f[1] == kind && f[2] == pid.to_string()
        })
        .map(str::to_string)
        .collect()
}

#[test]
fn record_with_kernel_map_records_sees_a_command_fork_and_exec() {
    // The recorder runs as root on the test machines: the kernel's records
    // must be available (--maps events fails otherwise).
    let dir = tempfile::tempdir().unwrap();
    let dev = dir.path().join("dev");
    std::fs::write(&dev, stream_for(&[])).unwrap();
    let out = dir.path().join("rec");
    let o = record_cmd(&out, &dev, &dir.path().join("nope"))
        .args([
            "--maps",
            "events",
            "--",
            "sh",
            "-c",
            "true & wait; exec sleep 0.3",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let meta = dir.path().join("rec.meta");
    let info = std::fs::read_to_string(meta.join("info")).unwrap();
    assert!(info.contains("maps: exact (perf MMAP2"), "{info}");
    let cmd_pid: u32 = info
        .lines()
        .find_map(|l| l.strip_prefix("command: "))
        .and_then(|l| l.rsplit_once("(pid "))
        .and_then(|(_, p)| p.trim_end_matches(')').parse().ok())
        .unwrap();
    // The command's exec of sh, then of sleep: COMM exec records, and
    // MMAP2 records of both binaries for its pid, in that order, after the
    // exec of the trampoline that held it (this tool, record.rs `Held`).
    let comms = event_lines(&meta, "comm", cmd_pid);
    let execs: Vec<&str> = comms
        .iter()
        .filter(|l| l.split(' ').nth(4) == Some("1"))
        .map(|l| l.rsplit(' ').next().unwrap())
        .collect();
    assert_eq!(execs, ["oprofile-rs", "sh", "sleep"], "{comms:?}");
    let maps = event_lines(&meta, "mmap", cmd_pid);
    let first = |name: &str| maps.iter().position(|l| l.ends_with(name));
    let (sh, sleep) = (first("sh").or(first("dash")), first("sleep"));
    assert!(sh.is_some() && sleep.is_some() && sh < sleep, "{maps:#?}");
    // The background `true`: a FORK record from the command's pid, and it
    // belongs to the command's processes.
    let text = std::fs::read_to_string(meta.join("events")).unwrap();
    let child: u32 = text
        .lines()
        .find_map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            (f[1] == "fork" && f[3] == cmd_pid.to_string() && f[2] != f[3])
                .then(|| f[2].parse().unwrap())
        })
        .unwrap_or_else(|| panic!("no fork of {cmd_pid}:\n{text}"));
    assert!(!event_lines(&meta, "exit", child).is_empty());
    let target = std::fs::read_to_string(meta.join("target")).unwrap();
    assert_eq!(target.trim(), cmd_pid.to_string());
    // Times are in order.
    let times: Vec<u64> = text
        .lines()
        .map(|l| l.split(' ').next().unwrap().parse().unwrap())
        .collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]));
    // The vDSO was captured.
    assert!(meta.join("vdso").exists(), "{info}");
}

#[test]
fn record_p_stops_when_the_processes_exit_and_rejects_bad_pids() {
    let dir = tempfile::tempdir().unwrap();
    let dev = dir.path().join("dev");
    std::fs::write(&dev, stream_for(&[])).unwrap();
    let out = dir.path().join("rec");
    let nope = dir.path().join("nope");
    // Long enough for a recorder started on a loaded machine to find them
    // running (0.4 s failed there: "no such process").
    let mut a = StdCommand::new("sleep").arg("2").spawn().unwrap();
    let mut b = StdCommand::new("sleep").arg("3").spawn().unwrap();
    let t = Instant::now();
    let o = record_cmd(&out, &dev, &nope)
        .args(["--duration", "30", "-p"])
        .arg(format!("{},{}", a.id(), b.id()))
        .output()
        .unwrap();
    // Reap them while the recorder waits: a zombie counts as exited.
    let _ = (a.wait(), b.wait());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(t.elapsed() < Duration::from_secs(20), "{:?}", t.elapsed());
    let target = std::fs::read_to_string(dir.path().join("rec.meta/target")).unwrap();
    assert!(target.contains(&a.id().to_string()) && target.contains(&b.id().to_string()));

    for (args, msg) in [
        (vec!["-p", &DEAD_PID.to_string()], "no such process"),
        (vec!["-p", "garbage"], "invalid value"),
        (vec!["-p", "1", "--", "true"], "cannot be used with"),
        (
            vec!["--", "/nonexistent/cmd"],
            "cannot start /nonexistent/cmd",
        ),
        (vec!["--maps", "nonsense"], "invalid value"),
    ] {
        let _ = std::fs::remove_file(&out);
        let o = record_cmd(&out, &dev, &nope).args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{args:?}: {err}");
        assert!(err.contains(msg), "{args:?}: {err}");
        assert!(!out.exists(), "{args:?} left {}", out.display());
    }
}

#[test]
fn analyses_of_a_record_p_recording_keep_its_processes_unless_all() {
    let mut live = StdCommand::new("sleep").arg("20").spawn().unwrap();
    let p = live.id();
    let other = DEAD_PID;
    let dir = tempfile::tempdir().unwrap();
    let dev = dir.path().join("dev");
    std::fs::write(&dev, stream_for(&[p, other])).unwrap();
    let out = dir.path().join("rec");
    let o = record_cmd(&out, &dev, &dir.path().join("nope"))
        .args(["--duration", "0.3", "-p", &p.to_string()])
        .output()
        .unwrap();
    let _ = live.kill();
    let _ = live.wait();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let script = |extra: &[&str]| {
        let o = Command::cargo_bin("oprofile-rs")
            .unwrap()
            .args(["script", "-q", "-i", out.to_str().unwrap()])
            .args(extra)
            .output()
            .unwrap();
        assert!(o.status.success());
        let pids: Vec<String> = String::from_utf8_lossy(&o.stdout)
            .lines()
            .map(|l| l.split_whitespace().nth(2).unwrap().to_string())
            .collect();
        pids
    };
    let mine = format!("{p}/{p}");
    let theirs = format!("{other}/{other}");
    assert_eq!(script(&[]), vec![mine.clone(); 3]);
    let all = script(&["--all"]);
    assert_eq!(all.iter().filter(|l| **l == theirs).count(), 3, "{all:?}");
    assert_eq!(all.len(), 6);
    // An explicit --pid replaces the recording's limit.
    assert_eq!(script(&["--pid", &other.to_string()]), vec![theirs; 3]);
}

/// A process that starts and exits right after the recorder opened the
/// device, with user-mode samples in the stream, has its maps from the
/// kernel's records: the map tracking starts before the device is opened
/// (it used to start after the side-car's kallsyms read, and such processes
/// were "not captured"). The device is a FIFO, so the test knows when the
/// recorder has opened it.
#[test]
fn a_process_started_right_after_the_device_opened_has_maps() {
    let dir = tempfile::tempdir().unwrap();
    let dev = dir.path().join("dev");
    let c = std::ffi::CString::new(dev.to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let out = dir.path().join("rec");
    let bin = assert_cmd::cargo::cargo_bin("oprofile-rs");
    let rec = StdCommand::new(bin)
        .args(["record", "-q", "-o", out.to_str().unwrap()])
        .args(["--device", dev.to_str().unwrap()])
        .args(["--debugfs", dir.path().join("nope").to_str().unwrap()])
        .args(["--maps", "events"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // A writer's non-blocking open succeeds once the recorder has the FIFO
    // open for reading (ENXIO before).
    let t = Instant::now();
    let writer = loop {
        let fd = unsafe { libc::open(c.as_ptr(), libc::O_WRONLY | libc::O_NONBLOCK) };
        if fd >= 0 {
            break fd;
        }
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "the recorder never opened the device"
        );
        std::thread::sleep(Duration::from_millis(1));
    };
    let mut short = StdCommand::new("true").spawn().unwrap();
    let pid = short.id();
    assert!(short.wait().unwrap().success());
    let data = stream_for(&[pid]);
    let n = unsafe { libc::write(writer, data.as_ptr().cast(), data.len()) };
    assert_eq!(n, data.len() as isize);
    unsafe { libc::close(writer) };
    std::thread::sleep(Duration::from_millis(500));
    unsafe { libc::kill(rec.id() as i32, libc::SIGINT) };
    let o = rec.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(!err.contains("not captured"), "pid {pid}: {err}");
    assert_eq!(std::fs::read(&out).unwrap(), data);
    let meta = dir.path().join("rec.meta");
    assert!(!event_lines(&meta, "mmap", pid).is_empty(), "pid {pid}");
    assert!(!event_lines(&meta, "exit", pid).is_empty(), "pid {pid}");
}

/// Samples older than the stream's opening were buffered before the
/// recording started: a process with only those is told apart (its maps
/// cannot have been caught). Fed in pieces of every size, across records.
#[test]
fn scanner_tells_samples_buffered_before_the_start() {
    let mut e = Encoder::new(&Header {
        start_time: 100,
        ..Header::default()
    });
    e.record(&sample(7, false, 50))
        .record(&sample(8, true, 60))
        .record(&sample(8, false, 150))
        .record(&sample(7, false, 90))
        .record(&sample(9, false, 100));
    let data = e.finish();
    for chunk in [1usize, 5, 8, 40, 1000] {
        let mut s = Scanner::default();
        for c in data.chunks(chunk) {
            s.feed(c).unwrap();
        }
        assert_eq!(s.samples, 5, "chunk {chunk}");
        let mut since: Vec<u32> = s.user_since_start.iter().copied().collect();
        since.sort();
        assert_eq!(since, [8, 9], "chunk {chunk}");
        assert!(s.needs_maps(7) && s.needs_maps(8) && s.needs_maps(9));
        assert_eq!(s.take_new_tgids(), [7, 8, 9], "chunk {chunk}");
    }
}

// ------------------------------------------------------------------ settings

fn file(d: &Path, k: &str) -> String {
    std::fs::read_to_string(d.join(k))
        .unwrap()
        .trim()
        .to_string()
}

const SETTINGS: [&str; 11] = [
    "-e",
    "cycles,page-faults",
    "-F",
    "4000,0",
    "-c",
    "0,100",
    "-g",
    "--buffer-size",
    "2M",
    "--watershed",
    "256K",
];

#[test]
fn record_applies_its_settings_and_puts_them_back_on_sigint_and_sigterm() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        settings_put_back_on(sig);
    }
}

fn settings_put_back_on(sig: i32) {
    let dir = tempfile::tempdir().unwrap();
    let dbg = common::fake_debugfs(dir.path());
    let dev = dir.path().join("dev");
    let data = stream_for(&[1]);
    std::fs::write(&dev, &data).unwrap();
    let out = dir.path().join("rec");
    let child = StdCommand::new(assert_cmd::cargo::cargo_bin("oprofile-rs"))
        .args(["record", "-o", out.to_str().unwrap()])
        .args(["--device", dev.to_str().unwrap()])
        .args(["--debugfs", dbg.to_str().unwrap(), "--maps", "poll"])
        .args(SETTINGS)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // While it records: the new settings, recording on.
    let t = Instant::now();
    while file(&dbg, "event") != "cycles,page-faults" && t.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(file(&dbg, "event"), "cycles,page-faults");
    assert_eq!(file(&dbg, "sample_period"), "0,100");
    assert_eq!(file(&dbg, "sample_freq"), "4000,0");
    assert_eq!(file(&dbg, "backtrace_depth"), "32");
    assert_eq!(file(&dbg, "user_backtrace_depth"), "32");
    assert_eq!(file(&dbg, "buffer_size"), "2097152");
    assert_eq!(file(&dbg, "buffer_watershed"), "262144");
    assert_eq!(file(&dbg, "cpu_buffer_size"), "65536", "not asked for");
    assert_eq!(file(&dbg, "tracing_on"), "1");
    unsafe { libc::kill(child.id() as i32, sig) };
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "signal {sig}: {err}");
    // Everything it changed is back (watershed: it was 256K already).
    assert_settings_as_before(&dbg);
    assert!(
        err.contains("put the module's settings back: event=cpu-clock,page-faults"),
        "{err}"
    );
    assert_eq!(std::fs::read(&out).unwrap(), data);
    let info = std::fs::read_to_string(dir.path().join("rec.meta/info")).unwrap();
    assert!(
        info.contains("settings: event=cycles,page-faults sample_period=0,100 sample_freq=4000,0"),
        "{info}"
    );
    assert!(info.contains("through debugfs"), "{info}");
    assert!(
        info.contains("settings-restored: event=cpu-clock,page-faults"),
        "{info}"
    );
}

/// The fake module's settings are those `fake_debugfs` made, recording on
/// as it was before `record` ran.
fn assert_settings_as_before(dbg: &Path) {
    assert_eq!(file(dbg, "event"), "cpu-clock,page-faults");
    assert_eq!(file(dbg, "sample_period"), "1000000,1000");
    assert_eq!(file(dbg, "sample_freq"), "0,0");
    assert_eq!(file(dbg, "backtrace_depth"), "0");
    assert_eq!(file(dbg, "user_backtrace_depth"), "32");
    assert_eq!(file(dbg, "buffer_size"), "1048576");
    assert_eq!(file(dbg, "tracing_on"), "1", "recording was on before");
}

#[test]
fn record_puts_back_what_it_changed_when_applying_fails() {
    let dir = tempfile::tempdir().unwrap();
    let dbg = common::fake_debugfs(dir.path());
    // The module refuses the watershed (the last key): a directory cannot
    // be written.
    std::fs::remove_file(dbg.join("buffer_watershed")).unwrap();
    std::fs::create_dir(dbg.join("buffer_watershed")).unwrap();
    let dev = dir.path().join("dev");
    std::fs::write(&dev, stream_for(&[1])).unwrap();
    let out = dir.path().join("rec");
    let err = record_failing(&out, &dev, &dbg, &SETTINGS);
    assert!(
        err.contains("the module refused event=cycles,page-faults"),
        "{err}"
    );
    assert!(err.contains("its settings are as they were"), "{err}");
    assert_settings_as_before(&dbg);
    assert!(!out.exists(), "nothing recorded");
}

#[test]
fn record_refuses_contradictory_settings_before_touching_the_module() {
    let dir = tempfile::tempdir().unwrap();
    let dbg = common::fake_debugfs(dir.path());
    let dev = dir.path().join("dev");
    std::fs::write(&dev, stream_for(&[1])).unwrap();
    let before: Vec<(String, String)> = std::fs::read_dir(&dbg)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read_to_string(e.path()).unwrap(),
            )
        })
        .collect();
    let out = dir.path().join("rec");
    for (args, msg) in [
        (&["-c", "1000", "-F", "99"][..], "both given for event 1"),
        (&["-e", "cycles", "-c", "1,2"], "2 values for 1 event"),
        (&["-e", "cycles,cycles"], "cycles is listed twice"),
        (&["-c", "1,2,3"], "3 values for 2 events"),
        (
            &["--buffer-size", "1M", "--watershed", "2M"],
            "must be below",
        ),
    ] {
        let err = record_failing(&out, &dev, &dbg, args);
        assert!(err.contains(msg), "{args:?}: {err}");
        for (k, v) in &before {
            assert_eq!(
                &std::fs::read_to_string(dbg.join(k)).unwrap(),
                v,
                "{args:?} changed {k}"
            );
        }
        assert!(!out.exists());
    }
    // Values clap refuses.
    for args in [
        &["-c", "x"][..],
        &["--buffer-size", "1.5M"],
        &["--call-graph", "dwarf"],
    ] {
        record_failing(&out, &dev, &dbg, args);
    }
}

#[test]
fn record_puts_back_its_settings_after_a_later_error() {
    let dir = tempfile::tempdir().unwrap();
    let dbg = common::fake_debugfs(dir.path());
    let dev = dir.path().join("dev");
    std::fs::write(&dev, stream_for(&[1])).unwrap();
    // Applied, then the output cannot be created.
    let out = dir.path().join("no-such-dir/rec");
    let err = record_failing(&out, &dev, &dbg, &SETTINGS);
    assert!(err.contains("cannot create"), "{err}");
    assert!(
        err.contains("the module's settings were put back (event=cpu-clock,page-faults"),
        "{err}"
    );
    assert_settings_as_before(&dbg);
}

#[test]
fn record_call_graph_dwarf_sets_the_user_stack_size_and_puts_it_back() {
    let dir = tempfile::tempdir().unwrap();
    let dbg = common::fake_debugfs(dir.path());
    // A module with user stack copies.
    std::fs::write(dbg.join("user_stack_size"), "0\n").unwrap();
    let mut config = std::fs::read_to_string(dbg.join("config")).unwrap();
    config += "user_stack_size=0\n";
    std::fs::write(dbg.join("config"), config).unwrap();
    let dev = dir.path().join("dev");
    let mut e = Encoder::new(&Header::default());
    e.record(&Record::Comm(Comm::new(0, 1, 7, 7, "x")));
    for (i, stack) in [None, Some(vec![1u8; 64])].into_iter().enumerate() {
        e.record(&Record::Sample(Sample {
            time: 10 + i as u64,
            pc: 0x1000,
            pid: 7,
            tgid: 7,
            user_stack: stack.map(|data| oprofile_stream::UserStack {
                ip: 0x1000,
                sp: 0x7ffc_0000_0000,
                bp: 0,
                size: 4096,
                data,
            }),
            ..Default::default()
        }));
    }
    std::fs::write(&dev, e.finish()).unwrap();
    let out = dir.path().join("rec");
    let o = record_for(&out, &dev, &dbg, "0.5")
        .args(["--call-graph", "dwarf,4K", "-q"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let info = std::fs::read_to_string(dir.path().join("rec.meta/info")).unwrap();
    // 4 KiB copies: samples of up to 5200 bytes, 64 of them per CPU
    // buffer (512 KiB), four CPU buffers in the event buffer.
    assert!(
        info.contains(
            "settings: backtrace_depth=32 user_backtrace_depth=32 cpu_buffer_size=524288 \
             buffer_size=2097152 user_stack_size=4096"
        ),
        "{info}"
    );
    assert!(info.contains("user_stack_size=0"), "{info}");
    assert_settings_as_before(&dbg);
    assert_eq!(file(&dbg, "user_stack_size"), "0");
    assert_eq!(file(&dbg, "cpu_buffer_size"), "65536");
    assert!(
        err.contains("2 samples") && err.contains("1 with a user stack copy"),
        "{err}"
    );
    // A size the module could not take is refused before it is touched.
    let err = record_failing(&out, &dev, &dbg, &["--call-graph", "dwarf,100"]);
    assert!(err.contains("a multiple of 8 from 8 to 8192"), "{err}");
    assert_eq!(file(&dbg, "user_stack_size"), "0");
}

/// A stream whose header says it was opened at 100: before that, the
/// module's backlog (a COMM, two SAMPLEs, a LOST record); after it, a
/// SAMPLE and a LOST record of the recording.
fn stream_with_backlog() -> Vec<u8> {
    let mut e = Encoder::new(&Header {
        start_time: 100,
        ..Header::default()
    });
    e.record(&Record::Comm(Comm::new(0, 5, DEAD_PID, DEAD_PID, "old")));
    e.record(&sample(DEAD_PID, true, 10))
        .record(&sample(DEAD_PID, true, 20));
    e.record(&Record::Lost(Lost {
        cpu: 0,
        time: 30,
        count: 3,
    }));
    e.record(&sample(DEAD_PID, true, 150));
    e.record(&Record::Lost(Lost {
        cpu: 0,
        time: 160,
        count: 2,
    }));
    e.finish()
}

/// A regular file as the device: `record` reads all of it as the backlog,
/// before the command (here: none, a duration) starts, so every LOST
/// record is the backlog's, also the one stamped after the opening (the
/// module stamps the time its sync noticed the loss).
#[test]
fn record_leaves_out_the_backlog_but_not_its_comm() {
    let dir = tempfile::tempdir().unwrap();
    let dev = dir.path().join("dev");
    std::fs::write(&dev, stream_with_backlog()).unwrap();
    let out = dir.path().join("rec");
    let o = record_for(&out, &dev, dir.path(), "0.3").output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("1 samples, 0 lost"), "{err}");
    let info = std::fs::read_to_string(dir.path().join("rec.meta/info")).unwrap();
    assert!(
        info.contains("backlog-skipped: 2 samples and 5 lost"),
        "{info}"
    );
    // The stream written: the header, the COMM that names the later
    // sample, and that sample; it decodes as a whole.
    let d = oprofile_stream::decode(&std::fs::read(&out).unwrap()).unwrap();
    let kinds: Vec<(u16, u64)> = d.records.iter().map(|r| (r.rtype(), r.time())).collect();
    let want: Vec<(u16, u64)> = [
        Record::Comm(Comm::new(0, 5, DEAD_PID, DEAD_PID, "old")),
        sample(DEAD_PID, true, 150),
    ]
    .iter()
    .map(|r| (r.rtype(), r.time()))
    .collect();
    assert_eq!(kinds, want);
    assert_eq!(d.header.start_time, 100);
}

/// The losses of a module nobody read for a while come in LOST records
/// stamped after the stream's opening (when the backlog is drained): they
/// are the backlog's, not the recording's. A LOST record read after the
/// command started is the recording's. (Before, `record` after an idle
/// minute said "12453 samples, 51487 lost" of a recording that lost
/// nothing.) The device is a FIFO holding the backlog before `record`
/// starts; the rest is written once the command runs.
#[test]
fn losses_noticed_while_the_backlog_is_read_are_the_backlogs() {
    let dir = tempfile::tempdir().unwrap();
    let dev = dir.path().join("dev");
    let c = std::ffi::CString::new(dev.to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    // O_RDWR opens a FIFO without waiting for a reader (Linux), so the
    // backlog is in the pipe before the recorder opens it.
    let fd = unsafe { libc::open(c.as_ptr(), libc::O_RDWR) };
    assert!(fd >= 0);
    let mut whole = stream_with_backlog();
    let header = Header {
        start_time: 100,
        ..Header::default()
    };
    let head = Encoder::new(&header).finish().len();
    let mut e = Encoder::new(&header);
    e.record(&sample(DEAD_PID, true, 170));
    e.record(&Record::Lost(Lost {
        cpu: 1,
        time: 180,
        count: 6,
    }));
    let later = e.finish()[head..].to_vec();
    let write = |b: &[u8]| {
        let n = unsafe { libc::write(fd, b.as_ptr().cast(), b.len()) };
        assert_eq!(n, b.len() as isize);
    };
    write(&whole);
    let started = dir.path().join("started");
    let out = dir.path().join("rec");
    let bin = assert_cmd::cargo::cargo_bin("oprofile-rs");
    let rec = StdCommand::new(bin)
        .args(["record", "-o", out.to_str().unwrap()])
        .args(["--device", dev.to_str().unwrap()])
        .args(["--debugfs", dir.path().to_str().unwrap(), "--maps", "poll"])
        .args(["--", "sh", "-c"])
        .arg(format!("touch {}; sleep 2", started.display()))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t = Instant::now();
    while !started.exists() {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "the command never started"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    write(&later);
    unsafe { libc::close(fd) };
    let o = rec.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("2 samples, 6 lost"), "{err}");
    let info = std::fs::read_to_string(dir.path().join("rec.meta/info")).unwrap();
    assert!(
        info.contains("backlog-skipped: 2 samples and 5 lost"),
        "{info}"
    );
    whole.extend_from_slice(&later);
    let d = oprofile_stream::decode(&std::fs::read(&out).unwrap()).unwrap();
    let kinds: Vec<(u16, u64)> = d.records.iter().map(|r| (r.rtype(), r.time())).collect();
    assert_eq!(kinds, vec![(2, 5), (1, 150), (1, 170), (3, 180)]);
}

#[test]
fn record_keep_backlog_keeps_every_record() {
    let dir = tempfile::tempdir().unwrap();
    let dev = dir.path().join("dev");
    let data = stream_with_backlog();
    std::fs::write(&dev, &data).unwrap();
    let out = dir.path().join("rec");
    let o = record_for(&out, &dev, dir.path(), "0.3")
        .arg("--keep-backlog")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("3 samples, 5 lost"), "{err}");
    assert_eq!(std::fs::read(&out).unwrap(), data);
    let info = std::fs::read_to_string(dir.path().join("rec.meta/info")).unwrap();
    assert!(!info.contains("backlog-skipped"), "{info}");
}

#[test]
fn scanner_leaves_out_the_backlog_fed_in_pieces() {
    let data = stream_with_backlog();
    let whole = {
        let mut s = Scanner::skipping_backlog();
        let mut out = Vec::new();
        s.feed_into(&data, &mut out).unwrap();
        out
    };
    for chunk in [1usize, 3, 8, 64, 1000] {
        let mut s = Scanner::skipping_backlog();
        let mut out = Vec::new();
        let mut written = 0;
        for c in data.chunks(chunk) {
            written += s.feed_into(c, &mut out).unwrap();
        }
        assert_eq!(out, whole, "chunk {chunk}");
        assert_eq!(written, out.len() as u64);
        assert_eq!(
            (s.samples, s.lost, s.skipped_samples, s.skipped_lost),
            (1, 2, 2, 3),
            "chunk {chunk}"
        );
    }
    // Garbage after the header: kept as it came (the bytes are saved),
    // counted as an error.
    let mut bad =
        data[..oprofile_stream::parse_header(&data).unwrap().header_size as usize].to_vec();
    bad.extend_from_slice(b"garbage garbage garbage garbage");
    let mut s = Scanner::skipping_backlog();
    let mut out = Vec::new();
    s.feed_into(&bad, &mut out).unwrap();
    assert_eq!(out, bad);
    assert!(s.error.is_some());
}

/// What `record` reads while its settings are applied (the event buffer
/// had no room for their CONFIG record) is the backlog: a LOST record
/// stamped after the opening (the settings' `tracing_on=0` reports the
/// losses of the CPU buffers the backlog filled) is left out with it, as
/// in the backlog rounds. Fed as ordinary records it was the recording's
/// (a CI run: 1,266 lost beside 1,784 samples of a recording that lost
/// none).
#[test]
fn losses_read_while_the_settings_are_applied_are_the_backlogs() {
    let data = stream_with_backlog();
    let mut s = Scanner::skipping_backlog();
    let mut out = Vec::new();
    s.feed_backlog_into(&data, &mut out).unwrap();
    assert_eq!(
        (s.samples, s.lost, s.skipped_samples, s.skipped_lost),
        (1, 0, 2, 5)
    );
    assert!(!s.reading_backlog, "put back as it was");
    // Then the recording's own: counted.
    let header = Header {
        start_time: 100,
        ..Header::default()
    };
    let head = Encoder::new(&header).finish().len();
    let mut e = Encoder::new(&header);
    e.record(&Record::Lost(Lost {
        cpu: 1,
        time: 180,
        count: 6,
    }));
    s.feed_into(&e.finish()[head..], &mut out).unwrap();
    assert_eq!((s.lost, s.skipped_lost), (6, 5));
    // Without a backlog before it, a LOST after the opening is the
    // recording's even then.
    let mut e = Encoder::new(&header);
    e.record(&Record::Lost(Lost {
        cpu: 0,
        time: 150,
        count: 4,
    }));
    let mut s = Scanner::skipping_backlog();
    s.feed_backlog_into(&e.finish(), &mut Vec::new()).unwrap();
    assert_eq!((s.lost, s.skipped_lost), (4, 0));
}

/// A SWITCH record of the backlog (a switch-out before the stream's
/// opening) goes with its SAMPLE: both are left out. Keeping the SWITCH
/// alone made `report --off-cpu` show a block with its stack lost (on
/// Debian's stock kernel, `record --off-cpu -p PID` changes its settings
/// seconds before it opens the stream). A SWITCH of the recording is kept.
#[test]
fn scanner_leaves_out_the_backlogs_switches_with_their_samples() {
    use oprofile_stream::{Switch, SwitchReason};
    let switch = |time| {
        Record::Switch(Switch {
            cpu: 0,
            time,
            pid: DEAD_PID,
            tgid: DEAD_PID,
            reason: SwitchReason::Sleep,
            state: 1,
            exec_runtime: 0,
            run_delay: None,
        })
    };
    let mut e = Encoder::new(&Header {
        start_time: 100,
        ..Header::default()
    });
    e.record(&switch(40)).record(&sample(DEAD_PID, true, 40));
    e.record(&switch(140)).record(&sample(DEAD_PID, true, 140));
    let data = e.finish();
    let mut s = Scanner::skipping_backlog();
    let mut out = Vec::new();
    s.feed_into(&data, &mut out).unwrap();
    let d = oprofile_stream::decode(&out).unwrap();
    let kept: Vec<(u16, u64)> = d.records.iter().map(|r| (r.rtype(), r.time())).collect();
    assert_eq!(kept, vec![(7, 140), (1, 140)]);
    assert_eq!((s.samples, s.skipped_samples), (1, 1));
}

/// A SIGINT or SIGTERM that comes during the set-up (here: already before
/// `record` is called) ends the recording without starting the command; it
/// was started and killed at once before.
#[test]
fn record_stopped_during_its_set_up_does_not_start_the_command() {
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;

    let dir = tempfile::tempdir().unwrap();
    let dev = dir.path().join("dev");
    std::fs::write(&dev, stream_with_backlog()).unwrap();
    let marker = dir.path().join("ran");
    let mut o = oprofile_tool::record::RecordOptions::new(dir.path().join("rec"));
    o.device = dev;
    o.debugfs = dir.path().to_path_buf();
    o.maps = oprofile_tool::record::MapsSource::Poll;
    // A command that creates the marker at once and ignores the SIGTERM
    // record stops a command with: record reaps every command it started
    // before it returns (stop_child), so had it started this one the marker
    // would exist when it returns (no sleep needed to see it).
    o.command = vec![
        "sh".into(),
        "-c".into(),
        format!("trap '' TERM; touch {}", marker.display()),
    ];
    let sum = oprofile_tool::record::record(&o, Arc::new(AtomicBool::new(true))).unwrap();
    assert!(!marker.exists(), "the command ran");
    assert_eq!(sum.stop, oprofile_tool::record::StopReason::Signal);
    assert!(sum.command_status.is_none());
    assert!(
        sum.warnings.iter().any(|w| w.contains("was not run")),
        "{:?}",
        sum.warnings
    );
    let info = std::fs::read_to_string(dir.path().join("rec.meta/info")).unwrap();
    assert!(
        info.contains("(not started: the recording was stopped before)"),
        "{info}"
    );
    // What was read is still a well-formed recording.
    oprofile_stream::decode(&std::fs::read(dir.path().join("rec")).unwrap()).unwrap();
}

/// perf record's spellings: `-d` (perf's: record data addresses) is still
/// the old --duration here, with one warning that names it; a COMMAND
/// needs no `--`, its options are its own; `-a` (system-wide) records for
/// the COMMAND without limiting the analyses to it, and not with `-p`.
#[test]
fn record_takes_perf_spellings() {
    let dir = tempfile::tempdir().unwrap();
    let dev = dir.path().join("dev");
    std::fs::write(&dev, stream_for(&[])).unwrap();
    let out = dir.path().join("rec");
    let meta = dir.path().join("rec.meta");
    let nope = dir.path().join("nope");
    let rec = |args: &[&str]| -> (bool, String) {
        let o = record_cmd(&out, &dev, &nope).args(args).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        (o.status.success(), err)
    };
    let warning = "oprofile-rs: warning: record -d is --duration here (perf's -d records data \
                   addresses); use --duration";
    for old in [&["-d", "0.3"][..], &["-d0.3"], &["-ad", "0.3"]] {
        let t = Instant::now();
        let (ok, err) = rec(old);
        assert!(ok, "{old:?}: {err}");
        assert_eq!(err.lines().filter(|l| *l == warning).count(), 1, "{err}");
        assert!(err.contains("recorded"), "{err}");
        assert!(t.elapsed() < Duration::from_secs(20), "{:?}", t.elapsed());
    }
    let (ok, err) = rec(&["--duration", "0.3"]);
    assert!(ok && !err.contains("record -d"), "{err}");
    let (ok, err) = rec(&["-d", "0.3", "--duration", "1"]);
    assert!(!ok && err.contains("cannot be used with"), "{err}");

    // A command from the first word that is not an option, as perf takes
    // it: `-c` is the shell's.
    let (ok, err) = rec(&["sh", "-c", "sleep 0.2"]);
    assert!(ok, "{err}");
    let info = std::fs::read_to_string(meta.join("info")).unwrap();
    assert!(info.contains("command: sh -c sleep 0.2"), "{info}");
    assert!(meta.join("target").is_file());
    // -a: the command only says when to stop; no target limits the
    // analyses.
    for args in [
        &["-a", "--", "sleep", "0.2"][..],
        &["--all-cpus", "sleep", "0.2"],
    ] {
        let (ok, err) = rec(args);
        assert!(ok, "{args:?}: {err}");
        let info = std::fs::read_to_string(meta.join("info")).unwrap();
        assert!(info.contains("command: sleep 0.2"), "{args:?}: {info}");
        assert!(!meta.join("target").exists(), "{args:?}");
    }
    let (ok, err) = rec(&["-a", "-p", "1"]);
    assert!(!ok && err.contains("cannot be used with"), "{err}");
}

// ------------------------------------------------------- a command alone

/// A fake module that knows `pid` (0: every task), as `fake_debugfs`
/// makes it otherwise.
fn pid_debugfs(dir: &Path) -> std::path::PathBuf {
    let d = common::fake_debugfs(dir);
    std::fs::write(d.join("pid"), "0\n").unwrap();
    let mut c = std::fs::read_to_string(d.join("config")).unwrap();
    c += "pid=0\n";
    std::fs::write(d.join("config"), c).unwrap();
    d
}

/// A command that writes, as it starts, its pid and what the fake module
/// says then (`pid`, `tracing_on`) to `seen`.
fn witness(seen: &Path, dbg: &Path) -> [String; 3] {
    let (s, d) = (seen.display(), dbg.display());
    [
        "sh".into(),
        "-c".into(),
        format!("echo $$ $(cat {d}/pid 2>/dev/null) $(cat {d}/tracing_on) > {s}"),
    ]
}

/// `record ARGS` against `dev` and the fake module `dbg`: success, stderr.
fn record_with(out: &Path, dev: &Path, dbg: &Path, args: &[&str]) -> (bool, String) {
    let o = record_cmd(out, dev, dbg).args(args).output().unwrap();
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn info_of(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("rec.meta/info")).unwrap()
}

/// In `dir`: a fake debugfs with `pid` (see [`pid_debugfs`]), a device
/// holding an empty stream, and the output path: `(debugfs, device, out)`.
fn pid_rig(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf, std::path::PathBuf) {
    let dbg = pid_debugfs(dir);
    let dev = dir.join("dev");
    std::fs::write(&dev, stream_for(&[])).unwrap();
    (dbg, dev, dir.join("rec"))
}

#[test]
fn record_command_binds_the_module_to_it_before_it_runs() {
    let dir = tempfile::tempdir().unwrap();
    let (dbg, dev, out) = pid_rig(dir.path());
    let seen = dir.path().join("seen");
    let w = witness(&seen, &dbg);
    let (ok, err) = record_with(&out, &dev, &dbg, &["-g", "--", &w[0], &w[1], &w[2]]);
    assert!(ok, "{err}");
    // The command saw the module bound to its own process, recording on.
    let s = std::fs::read_to_string(&seen).unwrap();
    let f: Vec<&str> = s.split_whitespace().collect();
    assert_eq!(f.len(), 3, "{s}");
    assert_eq!(f[0], f[1], "pid= the command's process: {s}");
    assert_eq!(f[2], "1", "recording on: {s}");
    let info = info_of(dir.path());
    assert!(
        info.contains(&format!(
            "settings: backtrace_depth=32 user_backtrace_depth=32 pid={}",
            f[0]
        )),
        "{info}"
    );
    assert!(
        info.contains(&format!("profiled: pid {} and the tasks it creates", f[0])),
        "{info}"
    );
    assert!(info.contains(&format!("(pid {})", f[0])), "{info}");
    // Put back with the rest.
    assert_eq!(file(&dbg, "pid"), "0");
    assert_settings_as_before(&dbg);
    assert!(
        err.contains("put the module's settings back: backtrace_depth=0 user_backtrace_depth=32\n"),
        "{err}"
    );
    assert!(!err.contains("note:"), "{err}");
}

#[test]
fn record_a_and_several_pids_leave_the_module_on_every_task() {
    let dir = tempfile::tempdir().unwrap();
    let (dbg, dev, out) = pid_rig(dir.path());
    let seen = dir.path().join("seen");
    let w = witness(&seen, &dbg);
    // -a with a command: the command says when to stop, nothing more.
    let (ok, err) = record_with(&out, &dev, &dbg, &["-a", "--", &w[0], &w[1], &w[2]]);
    assert!(ok, "{err}");
    let s = std::fs::read_to_string(&seen).unwrap();
    assert_eq!(s.split_whitespace().nth(1), Some("0"), "{s}");
    let info = info_of(dir.path());
    assert!(
        info.contains("profiled: every task (system-wide)"),
        "{info}"
    );
    assert!(!info.contains("settings:"), "nothing changed: {info}");
    assert!(
        !err.contains("note:") && !err.contains("put the module's"),
        "{err}"
    );
    // No command: every task.
    let (ok, err) = record_with(&out, &dev, &dbg, &["--duration", "0.2"]);
    assert!(ok, "{err}");
    assert!(!info_of(dir.path()).contains("settings:"));
    // Several -p processes: every task, filtered afterwards, said once.
    let mut a = StdCommand::new("sleep").arg("20").spawn().unwrap();
    let mut b = StdCommand::new("sleep").arg("20").spawn().unwrap();
    let pids = format!("{},{}", a.id(), b.id());
    let (ok, err) = record_with(&out, &dev, &dbg, &["--duration", "0.3", "-p", &pids]);
    let _ = (a.kill(), b.kill(), a.wait(), b.wait());
    assert!(ok, "{err}");
    let note = "the module binds its counters to one process, and -p names several: \
                recording every task (system-wide); the processes' samples are kept by the \
                analyses";
    assert_eq!(err.matches(note).count(), 1, "{err}");
    let info = info_of(dir.path());
    assert!(!info.contains("settings:"), "{info}");
    assert!(
        info.contains(note) && info.contains("profiled: every task"),
        "{info}"
    );
    assert_eq!(file(&dbg, "pid"), "0");
}

#[test]
fn record_p_binds_the_module_to_one_process_while_it_runs() {
    let dir = tempfile::tempdir().unwrap();
    let (dbg, dev, out) = pid_rig(dir.path());
    let mut target = StdCommand::new("sleep").arg("30").spawn().unwrap();
    let p = target.id().to_string();
    let child = StdCommand::new(assert_cmd::cargo::cargo_bin("oprofile-rs"))
        .args(["record", "-o", out.to_str().unwrap()])
        .args(["--device", dev.to_str().unwrap()])
        .args(["--debugfs", dbg.to_str().unwrap(), "--maps", "poll"])
        .args(["-p", &p])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t = Instant::now();
    while file(&dbg, "pid") != p && t.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(file(&dbg, "pid"), p, "bound while recording");
    // Its exit ends the recording, and the module is put back.
    let _ = target.kill();
    let _ = target.wait();
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert_eq!(file(&dbg, "pid"), "0");
    // (record's own binding: put back without a line of its own)
    assert!(!err.contains("put the module's settings back"), "{err}");
    let info = info_of(dir.path());
    assert!(
        info.contains(&format!("settings: pid={p} ")) && info.contains("settings-restored: pid=0"),
        "{info}"
    );
}

#[test]
fn record_puts_pid_back_on_sigint_and_sigterm() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        let dir = tempfile::tempdir().unwrap();
        let (dbg, dev, out) = pid_rig(dir.path());
        let started = dir.path().join("started");
        let child = StdCommand::new(assert_cmd::cargo::cargo_bin("oprofile-rs"))
            .args(["record", "-o", out.to_str().unwrap()])
            .args(["--device", dev.to_str().unwrap()])
            .args(["--debugfs", dbg.to_str().unwrap(), "--maps", "poll", "--"])
            .args([
                "sh",
                "-c",
                &format!("echo $$ > {}; exec sleep 30", started.display()),
            ])
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let t = Instant::now();
        while std::fs::read_to_string(&started).map_or(true, |s| !s.ends_with('\n')) {
            assert!(t.elapsed() < Duration::from_secs(30), "never started");
            std::thread::sleep(Duration::from_millis(20));
        }
        let pid = std::fs::read_to_string(&started)
            .unwrap()
            .trim()
            .to_string();
        assert_eq!(file(&dbg, "pid"), pid);
        unsafe { libc::kill(child.id() as i32, sig) };
        let o = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "signal {sig}: {err}");
        assert_eq!(file(&dbg, "pid"), "0", "signal {sig}");
        assert!(!err.contains("put the module's settings back"), "{err}");
    }
}

#[test]
fn record_command_refused_pid_is_an_error_and_nothing_runs() {
    let dir = tempfile::tempdir().unwrap();
    let dbg = pid_debugfs(dir.path());
    // The module refuses pid= with an error other than "unknown key" (a
    // directory cannot be written: EISDIR).
    std::fs::remove_file(dbg.join("pid")).unwrap();
    std::fs::create_dir(dbg.join("pid")).unwrap();
    let dev = dir.path().join("dev");
    std::fs::write(&dev, stream_for(&[])).unwrap();
    let out = dir.path().join("rec");
    let seen = dir.path().join("seen");
    let w = witness(&seen, &dbg);
    let (ok, err) = record_with(&out, &dev, &dbg, &["-g", "--", &w[0], &w[1], &w[2]]);
    assert!(!ok, "{err}");
    assert!(
        err.contains("the module refused backtrace_depth=32 user_backtrace_depth=32 pid="),
        "{err}"
    );
    assert!(err.contains("its settings are as they were"), "{err}");
    assert_settings_as_before(&dbg);
    assert!(!out.exists());
    // The held command was ended without running.
    std::thread::sleep(Duration::from_millis(200));
    assert!(!seen.exists(), "the command ran");
}

#[test]
fn record_puts_pid_back_after_a_later_error_and_never_runs_the_command() {
    let dir = tempfile::tempdir().unwrap();
    let dbg = pid_debugfs(dir.path());
    let dev = dir.path().join("dev");
    std::fs::write(&dev, stream_for(&[])).unwrap();
    // Bound, then the output cannot be created.
    let out = dir.path().join("no-such-dir/rec");
    let seen = dir.path().join("seen");
    let w = witness(&seen, &dbg);
    let (ok, err) = record_with(&out, &dev, &dbg, &["--", &w[0], &w[1], &w[2]]);
    assert!(!ok, "{err}");
    assert!(err.contains("cannot create"), "{err}");
    assert!(
        err.contains("the module's settings were put back (pid=0)"),
        "{err}"
    );
    assert_eq!(file(&dbg, "pid"), "0");
    std::thread::sleep(Duration::from_millis(200));
    assert!(!seen.exists(), "the command ran");
    // A command that does not exist: said before the module is touched.
    let out = dir.path().join("rec");
    let (ok, err) = record_with(&out, &dev, &dbg, &["--", "/nonexistent/cmd"]);
    assert!(
        !ok && err.contains("cannot start /nonexistent/cmd"),
        "{err}"
    );
    assert!(!err.contains("put back"), "{err}");
    assert!(!out.exists());
}

#[test]
fn record_command_on_a_module_without_pid_falls_back_to_every_task() {
    let dir = tempfile::tempdir().unwrap();
    // The modules before `pid`: no such key in their configuration.
    let dbg = common::fake_debugfs(dir.path());
    let dev = dir.path().join("dev");
    std::fs::write(&dev, stream_for(&[])).unwrap();
    let out = dir.path().join("rec");
    let seen = dir.path().join("seen");
    let w = witness(&seen, &dbg);
    let (ok, err) = record_with(&out, &dev, &dbg, &["--", &w[0], &w[1], &w[2]]);
    assert!(ok, "{err}");
    let note = "oprofile-rs: note: the module has no pid setting (it predates task-bound \
                recording): recording every task (system-wide); the command's samples are kept \
                by the analyses";
    assert_eq!(err.lines().filter(|l| *l == note).count(), 1, "{err}");
    assert!(seen.exists(), "the command ran");
    assert!(!dbg.join("pid").exists(), "pid written");
    let info = info_of(dir.path());
    assert!(!info.contains("settings:"), "nothing changed: {info}");
    assert!(
        info.contains("profiled: every task (system-wide)"),
        "{info}"
    );
    // The analyses still keep the command alone.
    assert!(dir.path().join("rec.meta/target").is_file());

    // A module that lists pid but has no such file (ENOENT, as "unknown
    // key"): the other settings without it.
    let dbg2 = dir.path().join("d2");
    std::fs::create_dir(&dbg2).unwrap();
    for e in std::fs::read_dir(&dbg).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), dbg2.join(e.file_name())).unwrap();
    }
    let mut c = std::fs::read_to_string(dbg2.join("config")).unwrap();
    c += "pid=0\n";
    std::fs::write(dbg2.join("config"), c).unwrap();
    std::fs::remove_file(&seen).unwrap();
    let w = witness(&seen, &dbg2);
    let (ok, err) = record_with(&out, &dev, &dbg2, &["-g", "--", &w[0], &w[1], &w[2]]);
    assert!(ok, "{err}");
    assert!(
        err.contains("note: the module refused backtrace_depth=32 user_backtrace_depth=32 pid=")
            && err.contains("recording every task (system-wide)"),
        "{err}"
    );
    assert!(seen.exists(), "the command ran");
    let info = info_of(dir.path());
    assert!(
        info.contains("settings: backtrace_depth=32 user_backtrace_depth=32 (through"),
        "{info}"
    );
    assert!(info.contains("profiled: every task"), "{info}");
    assert_settings_as_before(&dbg2);
    assert!(!dbg2.join("pid").exists());
}

/// A stop (SIGINT, SIGTERM) while the command is held (here: record
/// blocks creating its output, a FIFO nobody reads yet, after the module
/// was bound): the command never runs, and pid is put back. (Through the
/// library, whose stop flag the signal handler sets: a signal's handler
/// runs in a thread of its own, and could set it after record went on.)
#[test]
fn record_stopped_while_the_command_is_held_never_runs_it() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    let dir = tempfile::tempdir().unwrap();
    let (dbg, dev, out) = pid_rig(dir.path());
    let c = std::ffi::CString::new(out.to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let seen = dir.path().join("seen");
    let mut o = oprofile_tool::record::RecordOptions::new(out.clone());
    o.self_exe = env!("CARGO_BIN_EXE_oprofile-rs").into();
    o.device = dev;
    o.debugfs = dbg.clone();
    o.maps = oprofile_tool::record::MapsSource::Poll;
    o.command = witness(&seen, &dbg).to_vec();
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    let recording = std::thread::spawn(move || oprofile_tool::record::record(&o, s));
    let t = Instant::now();
    let held = loop {
        // (Read while it is written: empty then.)
        if let Ok(p) = file(&dbg, "pid").parse::<u32>() {
            if p != 0 {
                break p;
            }
        }
        assert!(t.elapsed() < Duration::from_secs(30), "never bound");
        std::thread::sleep(Duration::from_millis(20));
    };
    // Bound to a process that exists and has not run the command.
    let proc_dir = Path::new("/proc").join(held.to_string());
    assert!(proc_dir.exists(), "{held}");
    std::thread::sleep(Duration::from_millis(200));
    assert!(!seen.exists());
    stop.store(true, Ordering::SeqCst);
    // Let it go on: open the FIFO and read what it writes.
    let bytes = std::fs::read(&out).unwrap();
    let sum = recording.join().unwrap().unwrap();
    assert!(!bytes.is_empty());
    assert_eq!(sum.stop, oprofile_tool::record::StopReason::Signal);
    assert!(
        sum.warnings.iter().any(|w| w.contains("was not run")),
        "{:?}",
        sum.warnings
    );
    assert_eq!(sum.settings_restored.as_deref(), Some("pid=0"));
    assert_eq!(file(&dbg, "pid"), "0");
    assert!(!seen.exists(), "the command ran");
    // Its process is gone (reaped), not left waiting.
    assert!(!proc_dir.exists(), "{held}");
}

/// A refresh re-reads the processes sampled since the one before, not
/// every live one (system-wide, the recorder read /proc/PID/stat, status
/// and the namespace links of every process twice a second: 29 % of its
/// own CPU time in a measured run), and a kernel thread is never read
/// again after its first sample.
#[test]
fn maps_refresh_reads_the_processes_sampled_since() {
    use oprofile_tool::record::{is_kernel_thread, MapsTracker};
    let dir = tempfile::tempdir().unwrap();
    let proc_root = dir.path().join("proc");
    let stat = |pid: u32, flags: u64| {
        format!("{pid} (a b) S 1 {pid} {pid} 0 -1 {flags} 0 0 0 0 1 2 0 0 20 0 1 0 5 0 0\n")
    };
    let maps = |lib: &str| format!("7f0000000000-7f0000001000 r-xp 00000000 08:01 12 /lib/{lib}\n");
    for (pid, flags) in [
        (100u32, 0x0040_0000u64),
        (200, 0x0040_0000),
        (2, 0x0020_8040),
    ] {
        let p = proc_root.join(pid.to_string());
        std::fs::create_dir_all(&p).unwrap();
        std::fs::write(p.join("stat"), stat(pid, flags)).unwrap();
        std::fs::write(
            p.join("maps"),
            if pid == 2 {
                String::new()
            } else {
                maps("old.so")
            },
        )
        .unwrap();
    }
    assert!(is_kernel_thread(&stat(2, 0x0020_8040)));
    assert!(!is_kernel_thread(&stat(100, 0x0040_0000)));
    assert!(!is_kernel_thread("garbage"));
    let mut t = MapsTracker::new(proc_root.clone(), Duration::ZERO);
    for pid in [100, 200, 2] {
        t.track(pid);
    }
    // The kernel thread: no maps, and no "empty maps" error to report.
    assert!(t.missing(|_| true).is_empty(), "{:?}", t.missing(|_| true));
    for pid in [100, 200] {
        std::fs::write(proc_root.join(format!("{pid}/maps")), maps("new.so")).unwrap();
    }
    t.note_sampled([100, 2]);
    t.refresh(false);
    assert!(t.maps[&100].contains("new.so"), "sampled: re-read");
    assert!(t.maps[&200].contains("old.so"), "not sampled: not re-read");
    // At the end every live process is read.
    t.refresh(true);
    assert!(t.maps[&200].contains("new.so"));
    assert!(!t.maps.contains_key(&2));
}
