//! `archive`: a recording read on a machine without its binaries, files
//! found by build-id (the archive's, debuginfod's), hostile archives; and
//! the kernel's build-ids (side-car `build-ids`, pprof's kernel mapping).

mod common;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use oprofile_stream::{Comm, Encoder, Header, Record, Sample};

const ID_A: &str = "aa11223344556677889900aabbccddeeff001122";
const ID_B: &str = "bb11223344556677889900aabbccddeeff001122";

/// victim.c built at `out` with build-id `id`.
fn build(out: &Path, id: &str) {
    std::fs::create_dir_all(out.parent().unwrap()).unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/victim.c");
    sh(Command::new("cc")
        .args(["-O1", "-fPIE", "-pie"])
        .arg(format!("-Wl,--build-id=0x{id}"))
        .arg("-o")
        .arg(out)
        .arg(src));
}

/// 10 samples in alpha, 6 in beta of `elf` mapped at BASE.
fn stream(elf: &Path) -> Vec<u8> {
    let (a, _) = elf_sym(elf, "alpha");
    let (b, _) = elf_sym(elf, "beta");
    let mut e = Encoder::new(&Header {
        start_time: 1_000_000_000,
        ..Header::default()
    });
    e.record(&Record::Comm(Comm::new(
        0,
        1_000_000_000,
        PID,
        PID,
        "victim",
    )));
    let pcs = std::iter::repeat_n(BASE + a + 4, 10).chain(std::iter::repeat_n(BASE + b + 8, 6));
    for (i, pc) in pcs.enumerate() {
        e.record(&Record::Sample(Sample {
            time: 1_000_000_000 + 1000 * (i as u64 + 1),
            pc,
            pid: PID,
            tgid: PID,
            ..Default::default()
        }));
    }
    e.finish()
}

/// The recording `DIR/rec/oprofile.data` of `elf`'s samples, mapped at
/// `shown_as`: with `build_id`, its maps are the kernel's records carrying
/// it (side-car `events`), else a `/proc` snapshot (no build-id).
fn recording(dir: &Path, elf: &Path, shown_as: &str, build_id: Option<&str>) -> PathBuf {
    let rec = dir.join("rec");
    std::fs::create_dir_all(&rec).unwrap();
    let maps = maps_for(elf, shown_as);
    let file = write_recording(&rec, &stream(elf), &maps);
    if let Some(id) = build_id {
        let meta = rec.join("oprofile.data.meta");
        std::fs::remove_file(meta.join("maps").join(PID.to_string())).unwrap();
        let mut ev = String::new();
        for l in maps.lines() {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() < 6 || f[5] != shown_as {
                continue;
            }
            let (s, e) = f[0].split_once('-').unwrap();
            let off = u64::from_str_radix(f[2], 16).unwrap();
            ev += &format!("1 mmap {PID} {PID} {s} {e} {off:x} 5 {id} {shown_as}\n");
        }
        std::fs::write(meta.join("events"), ev).unwrap();
    }
    file
}

/// Runs the tool with `args` and `env` (and no debuginfod unless `env`
/// names one): (success, stdout, stderr).
fn tool(args: &[&str], env: &[(&str, &str)]) -> (bool, String, String) {
    let mut c = assert_cmd::Command::cargo_bin("oprofile-rs").unwrap();
    c.args(args).env_remove("DEBUGINFOD_URLS");
    for (k, v) in env {
        c.env(k, v);
    }
    let o = c.output().unwrap();
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    );
    assert!(!err.contains("panicked"), "{args:?}: {err}");
    (o.status.success(), out, err)
}

/// The report's rows of alpha and beta.
fn rows(report: &str) -> Vec<String> {
    report
        .lines()
        .filter(|l| l.contains("alpha") || l.contains("beta"))
        .map(str::to_string)
        .collect()
}

#[test]
fn an_archive_is_read_where_neither_recording_nor_binaries_are() {
    let d = tempfile::tempdir().unwrap();
    let bin = d.path().join("bin/victim");
    build(&bin, ID_A);
    let rec = recording(d.path(), &bin, bin.to_str().unwrap(), None);
    let rec = rec.to_str().unwrap();
    let cache = d.path().join("cache");
    let env = [("XDG_CACHE_HOME", cache.to_str().unwrap())];
    let (ok, before, err) = tool(&["report", "-i", rec], &env);
    assert!(ok, "{err}");
    assert_eq!(rows(&before).len(), 2, "{before}");
    let mut archives = Vec::new();
    for name in ["rec.tar.zst", "rec.tar.gz", "rec.tar"] {
        let ar = d.path().join(name);
        let (ok, _, err) = tool(&["archive", "-i", rec, "-o", ar.to_str().unwrap()], &env);
        assert!(ok, "{err}");
        assert!(
            err.contains("wrote") && err.contains("1 files by build-id"),
            "{err}"
        );
        assert!(!err.contains("not archived"), "{err}");
        archives.push(ar);
    }
    // Another machine: no recording, and another build of the program at
    // its path (the archive's copy comes first).
    std::fs::remove_dir_all(d.path().join("rec")).unwrap();
    build(&bin, ID_B);
    for ar in &archives {
        let ar = ar.to_str().unwrap();
        let (ok, after, err) = tool(&["report", "-i", ar], &env);
        assert!(ok, "{ar}: {err}");
        assert_eq!(rows(&after), rows(&before), "{ar}: {after}");
        assert!(!err.contains("cannot read"), "{err}");
    }
    // Every view reads it.
    let ar = archives[0].to_str().unwrap();
    let (ok, folded, err) = tool(&["folded", "-i", ar], &env);
    assert!(ok && folded.contains("victim;alpha 10"), "{folded}{err}");
    let (ok, script, err) = tool(&["script", "-i", ar], &env);
    assert!(ok && script.contains("alpha"), "{err}");
    let (ok, ann, err) = tool(&["annotate", "alpha", "-i", ar], &env);
    assert!(ok && ann.contains("alpha"), "{ann}{err}");
    let pb = d.path().join("p.pb.gz");
    let (ok, _, err) = tool(&["pprof", "-i", ar, "-o", pb.to_str().unwrap()], &env);
    assert!(ok, "{err}");
    let (ok, folded, _) = tool(&["pprof-folded", pb.to_str().unwrap()], &env);
    assert!(ok && folded.contains("alpha"), "{folded}");
    let ff = d.path().join("f.json");
    let (ok, _, err) = tool(&["firefox", "-i", ar, "-o", ff.to_str().unwrap()], &env);
    assert!(ok, "{err}");
    // Unpacked once, into the cache.
    let unpacked = std::fs::read_dir(cache.join("oprofile-rs/archives"))
        .unwrap()
        .count();
    assert_eq!(unpacked, 3);
}

#[test]
fn a_local_file_of_another_build_is_never_read_for_an_archive() {
    let d = tempfile::tempdir().unwrap();
    let bin = d.path().join("bin/victim");
    build(&bin, ID_A);
    let path = bin.to_str().unwrap().to_string();
    let rec = recording(d.path(), &bin, &path, Some(ID_A));
    let rec = rec.to_str().unwrap();
    let cache = d.path().join("cache");
    let env = [("XDG_CACHE_HOME", cache.to_str().unwrap())];
    // Archived where the binary is gone: said so.
    std::fs::remove_file(&bin).unwrap();
    let ar = d.path().join("rec.tar.zst");
    let (ok, _, err) = tool(&["archive", "-i", rec, "-o", ar.to_str().unwrap()], &env);
    assert!(ok, "{err}");
    assert!(
        err.contains(&format!("not archived: {path}: not found")),
        "{err}"
    );
    // Another build at its path (the same code: read, it would name alpha).
    build(&bin, ID_B);
    let (ok, out, err) = tool(&["report", "-i", ar.to_str().unwrap()], &env);
    assert!(ok, "{err}");
    assert!(
        err.contains(&format!(
            "{path}: local file has another build-id ({ID_B}; the recording's is {ID_A}), not used"
        )),
        "{err}"
    );
    assert_eq!(
        err.matches("local file has another build-id").count(),
        1,
        "{err}"
    );
    assert!(!out.contains("alpha"), "{out}");
    // The recording itself (not an archive) reads it, with a warning.
    let (ok, out, err) = tool(&["report", "-i", rec], &env);
    assert!(ok, "{err}");
    assert!(err.contains("has changed since the recording"), "{err}");
    assert!(out.contains("alpha"), "{out}");
}

/// A debuginfod server on 127.0.0.1 serving `files` (URL path → body),
/// 404 for anything else; `hang`: it accepts and never answers. Its URL
/// and the paths asked for.
fn server(files: Vec<(String, Vec<u8>)>, hang: bool) -> (String, Arc<Mutex<Vec<String>>>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    let asked = Arc::new(Mutex::new(Vec::new()));
    let seen = asked.clone();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            let mut head = Vec::new();
            let mut b = [0u8; 1024];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                match s.read(&mut b) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => head.extend_from_slice(&b[..n]),
                }
            }
            let head = String::from_utf8_lossy(&head).into_owned();
            let path = head.split_whitespace().nth(1).unwrap_or("").to_string();
            seen.lock().unwrap().push(path.clone());
            if hang {
                held.push(s);
                continue;
            }
            let _ = match files.iter().find(|(p, _)| *p == path) {
                Some((_, body)) => write!(
                    s,
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                )
                .and_then(|_| s.write_all(body)),
                None => s.write_all(
                    b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                ),
            };
        }
    });
    (url, asked)
}

/// A recording of the program built with ID_A, which is gone; its bytes.
fn recording_without_binary(d: &Path) -> (String, Vec<u8>) {
    let bin = d.join("bin/victim");
    build(&bin, ID_A);
    let rec = recording(d, &bin, bin.to_str().unwrap(), Some(ID_A));
    let data = std::fs::read(&bin).unwrap();
    std::fs::remove_file(&bin).unwrap();
    (rec.to_str().unwrap().to_string(), data)
}

#[test]
fn debuginfod_gives_the_binary_missing_here() {
    let d = tempfile::tempdir().unwrap();
    let (rec, data) = recording_without_binary(d.path());
    // Without a server: not symbolised.
    let (ok, out, err) = tool(&["report", "-i", &rec], &[]);
    assert!(ok, "{err}");
    assert!(
        !out.contains("alpha") && err.contains("cannot read"),
        "{out}{err}"
    );
    let want = format!("/buildid/{ID_A}/executable");
    let (url, asked) = server(vec![(want.clone(), data.clone())], false);
    let dcache = d.path().join("dcache");
    let env = [
        ("DEBUGINFOD_URLS", url.as_str()),
        ("DEBUGINFOD_CACHE_PATH", dcache.to_str().unwrap()),
    ];
    let (ok, out, err) = tool(&["report", "-i", &rec], &env);
    assert!(ok, "{err}");
    assert_eq!(rows(&out).len(), 2, "{out}{err}");
    assert!(asked.lock().unwrap().contains(&want));
    // Cached as elfutils' client does.
    assert_eq!(
        std::fs::read(dcache.join(ID_A).join("executable")).unwrap(),
        data
    );
    // The cache is used, the server not asked again for it.
    let n = asked.lock().unwrap().iter().filter(|p| **p == want).count();
    let (ok, again, _) = tool(&["report", "-i", &rec], &env);
    assert!(ok && rows(&again) == rows(&out));
    assert_eq!(
        asked.lock().unwrap().iter().filter(|p| **p == want).count(),
        n
    );
}

#[test]
fn debuginfod_without_the_file_is_a_note_and_a_hung_server_a_timeout() {
    let d = tempfile::tempdir().unwrap();
    let (rec, _) = recording_without_binary(d.path());
    let dcache = d.path().join("dcache");
    let (url, _) = server(Vec::new(), false);
    let env = [
        ("DEBUGINFOD_URLS", url.as_str()),
        ("DEBUGINFOD_CACHE_PATH", dcache.to_str().unwrap()),
    ];
    let (ok, out, err) = tool(&["report", "-i", &rec], &env);
    assert!(ok, "{err}");
    assert!(
        err.contains(&format!(
            "debuginfod: no executable for build-id {ID_A}: {url}: HTTP 404"
        )),
        "{err}"
    );
    assert!(out.contains("# samples: 16"), "{out}");
    // A server that never answers costs DEBUGINFOD_TIMEOUT, once.
    let (url, asked) = server(Vec::new(), true);
    let env = [
        ("DEBUGINFOD_URLS", url.as_str()),
        ("DEBUGINFOD_CACHE_PATH", dcache.to_str().unwrap()),
        ("DEBUGINFOD_TIMEOUT", "1"),
    ];
    let t = Instant::now();
    let (ok, _, err) = tool(&["report", "-i", &rec], &env);
    assert!(ok, "{err}");
    assert!(t.elapsed() < Duration::from_secs(30), "{:?}", t.elapsed());
    assert!(err.contains("not asked again"), "{err}");
    assert_eq!(asked.lock().unwrap().len(), 1);
}

// ------------------------------------------------------------------ hostile archives

/// A raw tar member: name, type, data, link name.
type Member<'a> = (&'a [u8], tar::EntryType, &'a [u8], &'a [u8]);

/// A tar of raw members: (name, type, data, link name), names and link
/// names written as they are (the tar crate's checks bypassed).
fn raw_tar(members: &[Member]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for (name, ty, data, link) in members {
        let mut h = tar::Header::new_ustar();
        {
            let u = h.as_ustar_mut().unwrap();
            u.name[..name.len()].copy_from_slice(name);
            u.linkname[..link.len()].copy_from_slice(link);
        }
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_entry_type(*ty);
        h.set_cksum();
        b.append(&h, *data).unwrap();
    }
    b.into_inner().unwrap()
}

const GOOD_MANIFEST: &[u8] = b"oprofile-rs-archive 1\nstream oprofile.data\n";

#[test]
fn hostile_archives_are_refused_with_a_clear_error() {
    let d = tempfile::tempdir().unwrap();
    let cache = d.path().join("cache");
    let env = [("XDG_CACHE_HOME", cache.to_str().unwrap())];
    let archives = cache.join("oprofile-rs/archives");
    let abs = d.path().join("abs-evil");
    let abs_name = abs.to_str().unwrap().as_bytes().to_vec();
    let reg = tar::EntryType::Regular;
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "dotdot.tar",
            raw_tar(&[
                (b"MANIFEST", reg, GOOD_MANIFEST, b""),
                (b"../evil", reg, b"x", b""),
            ]),
            "member ../evil: a path outside the archive (..), refused",
        ),
        (
            "deep.tar",
            raw_tar(&[(b"a/../../../evil2", reg, b"x", b"")]),
            "a path outside the archive (..), refused",
        ),
        (
            "abs.tar",
            raw_tar(&[(&abs_name, reg, b"x", b"")]),
            "an absolute path, refused",
        ),
        (
            "symlink.tar",
            raw_tar(&[
                (b"l", tar::EntryType::Symlink, b"", b"/"),
                (b"l/tmp/evil3", reg, b"x", b""),
            ]),
            "member l: a link, refused",
        ),
        (
            "hardlink.tar",
            raw_tar(&[(b"h", tar::EntryType::Link, b"", b"/etc/passwd")]),
            "member h: a link, refused",
        ),
        (
            "fifo.tar",
            raw_tar(&[(b"f", tar::EntryType::Fifo, b"", b"")]),
            "refused",
        ),
        (
            "nomanifest.tar",
            raw_tar(&[(b"x", reg, b"x", b"")]),
            "it has no MANIFEST: not an oprofile-rs archive",
        ),
        (
            "nostream.tar",
            raw_tar(&[(b"MANIFEST", reg, GOOD_MANIFEST, b"")]),
            "it lacks its stream oprofile.data",
        ),
        (
            "garbage.tar.gz",
            [&[0x1f, 0x8b, 8, 0][..], &[0x55; 300][..]].concat(),
            "archive",
        ),
        (
            "garbage.tar.zst",
            [&[0x28, 0xb5, 0x2f, 0xfd][..], &[0xaa; 300][..]].concat(),
            "archive",
        ),
    ];
    for (name, data, want) in &cases {
        let p = d.path().join(name);
        std::fs::write(&p, data).unwrap();
        let (ok, _, err) = tool(&["report", "-i", p.to_str().unwrap()], &env);
        assert!(!ok, "{name}: accepted");
        assert!(err.contains(want), "{name}: {err}");
        assert!(
            err.contains(&format!("archive {}", p.display())),
            "{name}: {err}"
        );
    }
    // Nothing was written outside the cache's own directories, and no
    // failed unpack is kept.
    assert!(!cache.join("oprofile-rs/evil").exists());
    assert!(!cache.join("evil2").exists() && !cache.join("oprofile-rs/evil2").exists());
    assert!(!abs.exists());
    assert!(!Path::new("/tmp/evil3").exists());
    let left: Vec<_> = std::fs::read_dir(&archives)
        .map(|r| r.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn a_cut_archive_is_an_error_and_a_huge_member_is_streamed() {
    let d = tempfile::tempdir().unwrap();
    let cache = d.path().join("cache");
    let env = [("XDG_CACHE_HOME", cache.to_str().unwrap())];
    // A recording of kernel samples (no binary needed).
    let rec = d.path().join("rec");
    std::fs::create_dir(&rec).unwrap();
    let mut e = Encoder::new(&Header::default());
    e.record(&Record::Comm(Comm::new(0, 1, PID, PID, "k")));
    for t in 0..5 {
        e.record(&Record::Sample(Sample {
            kernel: true,
            time: 10 + t,
            pc: 0xffffffff81001410,
            pid: PID,
            tgid: PID,
            ..Default::default()
        }));
    }
    let file = write_recording(&rec, &e.finish(), "");
    let ar = d.path().join("rec.tar.zst");
    let (ok, _, err) = tool(
        &[
            "archive",
            "-i",
            file.to_str().unwrap(),
            "-o",
            ar.to_str().unwrap(),
        ],
        &env,
    );
    assert!(ok, "{err}");
    let whole = std::fs::read(&ar).unwrap();
    let cut = d.path().join("cut.tar.zst");
    std::fs::write(&cut, &whole[..whole.len() / 2]).unwrap();
    let (ok, _, err) = tool(&["report", "-i", cut.to_str().unwrap()], &env);
    assert!(
        !ok && err.contains(&format!("archive {}", cut.display())),
        "{err}"
    );

    // 256 MiB of one member, unpacked by a process that stays far smaller.
    const HUGE: u64 = 256 << 20;
    let big = d.path().join("big.tar");
    {
        let f = std::fs::File::create(&big).unwrap();
        let mut b = tar::Builder::new(std::io::BufWriter::new(f));
        let mut add = |name: &str, data: &mut dyn Read, len: u64| {
            let mut h = tar::Header::new_gnu();
            h.set_size(len);
            h.set_mode(0o644);
            b.append_data(&mut h, name, data).unwrap();
        };
        add(
            "MANIFEST",
            &mut &GOOD_MANIFEST[..],
            GOOD_MANIFEST.len() as u64,
        );
        let stream = std::fs::read(&file).unwrap();
        add("oprofile.data", &mut &stream[..], stream.len() as u64);
        let ks = KALLSYMS.as_bytes();
        add("oprofile.data.meta/kallsyms", &mut &ks[..], ks.len() as u64);
        add("junk", &mut std::io::repeat(0).take(HUGE), HUGE);
        b.into_inner().unwrap().flush().unwrap();
    }
    let mut c = std::process::Command::new(assert_cmd::cargo::cargo_bin("oprofile-rs"));
    let mut child = c
        .args(["report", "-i", big.to_str().unwrap()])
        .env("XDG_CACHE_HOME", &cache)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let status = format!("/proc/{}/status", child.id());
    let mut peak_kb = 0u64;
    let mut out = String::new();
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        stdout.read_to_string(&mut s).unwrap();
        s
    });
    loop {
        if let Ok(s) = std::fs::read_to_string(&status) {
            if let Some(kb) = s
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse::<u64>().ok())
            {
                peak_kb = peak_kb.max(kb);
            }
        }
        if child.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    out += &reader.join().unwrap();
    assert!(out.contains("__schedule"), "{out}");
    assert!(peak_kb > 0 && peak_kb < 64 << 10, "peak RSS {peak_kb} kB");
}

// ------------------------------------------------------------------ the kernel's build-ids

/// `/sys/kernel/notes`-like bytes: a Linux note, then the GNU build-id.
fn notes(id: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    for (name, ty, desc) in [(&b"Linux\0"[..], 1u32, &[0u8, 1, 2][..]), (b"GNU\0", 3, id)] {
        v.extend((name.len() as u32).to_ne_bytes());
        v.extend((desc.len() as u32).to_ne_bytes());
        v.extend(ty.to_ne_bytes());
        v.extend(name);
        v.resize(v.len().next_multiple_of(4), 0);
        v.extend(desc);
        v.resize(v.len().next_multiple_of(4), 0);
    }
    v
}

#[test]
fn record_keeps_the_kernels_and_modules_build_ids() {
    let d = tempfile::tempdir().unwrap();
    let sys = d.path().join("sys");
    std::fs::create_dir_all(sys.join("kernel")).unwrap();
    std::fs::write(sys.join("kernel/notes"), notes(&[0xab; 20])).unwrap();
    std::fs::create_dir_all(sys.join("module/oprofile/notes")).unwrap();
    std::fs::write(
        sys.join("module/oprofile/notes/.note.gnu.build-id"),
        notes(&[0xcd; 20]),
    )
    .unwrap();
    std::fs::create_dir_all(sys.join("module/kernel/parameters")).unwrap();
    std::fs::create_dir_all(sys.join("module/builtin")).unwrap();
    let dev = d.path().join("dev");
    std::fs::write(&dev, Encoder::new(&Header::default()).finish()).unwrap();
    let dbg = d.path().join("debugfs");
    std::fs::create_dir(&dbg).unwrap();
    std::fs::write(dbg.join("flush"), "").unwrap();
    let out = d.path().join("rec");
    let o = assert_cmd::Command::cargo_bin("oprofile-rs")
        .unwrap()
        .args(["record", "-o", out.to_str().unwrap()])
        .args(["--device", dev.to_str().unwrap()])
        .args(["--debugfs", dbg.to_str().unwrap(), "--duration", "0.2"])
        .args(["--maps", "poll", "--sys-root", sys.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    let meta = d.path().join("rec.meta");
    let ab = "ab".repeat(20);
    let cd = "cd".repeat(20);
    assert_eq!(
        std::fs::read_to_string(meta.join("build-ids")).unwrap(),
        format!("kernel {ab}\noprofile {cd}\n")
    );
    let info = std::fs::read_to_string(meta.join("info")).unwrap();
    assert!(info.contains("sidecar-version: 3"), "{info}");
    assert!(
        info.contains(&format!("build-ids: kernel {ab}, 1 modules")),
        "{info}"
    );
}

/// The build-id pprof gives each mapping, by file name.
fn pprof_build_ids(pb: &Path) -> Vec<(String, String)> {
    let p = oprofile_tool::pprof::read(&std::fs::read(pb).unwrap()).unwrap();
    let s = |i: i64| p.string_table[i as usize].clone();
    let mut v: Vec<_> = p
        .mapping
        .iter()
        .map(|m| (s(m.filename), s(m.build_id)))
        .collect();
    v.sort();
    v
}

#[test]
fn pprof_gives_the_kernel_mapping_its_build_id_and_old_side_cars_still_read() {
    let d = tempfile::tempdir().unwrap();
    let rec = kernel_recording(d.path(), "k", &[0xffffffff81001410, 0xffffffffc0100010]);
    let meta = d.path().join("oprofile.data.meta");
    let (ab, cd) = ("ab".repeat(20), "cd".repeat(20));
    std::fs::write(
        meta.join("build-ids"),
        format!("kernel {ab}\noprofile {cd}\nbad ../../x\n"),
    )
    .unwrap();
    let pb = d.path().join("p.pb.gz");
    let r = rec.to_str().unwrap();
    let (ok, _, err) = tool(&["pprof", "-i", r, "-o", pb.to_str().unwrap()], &[]);
    assert!(ok, "{err}");
    assert_eq!(
        pprof_build_ids(&pb),
        [
            ("[kernel.kallsyms]".to_string(), ab.clone()),
            ("[oprofile]".to_string(), cd.clone())
        ]
    );
    // A side-car of version 2 has no build-ids: mappings without one.
    std::fs::remove_file(meta.join("build-ids")).unwrap();
    let (ok, _, err) = tool(&["pprof", "-i", r, "-o", pb.to_str().unwrap()], &[]);
    assert!(ok, "{err}");
    assert_eq!(
        pprof_build_ids(&pb),
        [
            ("[kernel.kallsyms]".to_string(), String::new()),
            ("[oprofile]".to_string(), String::new())
        ]
    );
}

/// A stand-in for vmlinux (`_stext`, then `kfunc`: push rbp; mov rbp,rsp;
/// nop; pop rbp; ret) linked where the kernel runs, with build-id `id`.
fn kernel_image(dir: &Path, id: &str) -> PathBuf {
    let src = dir.join("image.S");
    std::fs::write(
        &src,
        ".text\n.globl _stext\n_stext:\nnop\n.globl kfunc\n.type kfunc,@function\nkfunc:\n\
         push %rbp\nmov %rsp,%rbp\nnop\npop %rbp\nret\n.size kfunc, .-kfunc\n",
    )
    .unwrap();
    let out = dir.join("vmlinux");
    sh(Command::new("cc")
        .args(["-nostdlib", "-static", "-no-pie"])
        .arg("-Wl,-Ttext=0xffffffff81000000")
        .arg(format!("-Wl,--build-id=0x{id}"))
        .args(["-Wl,-e,_stext", "-o"])
        .arg(&out)
        .arg(&src));
    out
}

#[test]
fn the_kernels_image_of_the_recorded_build_is_archived_for_annotate() {
    let d = tempfile::tempdir().unwrap();
    let cache = d.path().join("cache");
    let env = [("XDG_CACHE_HOME", cache.to_str().unwrap())];
    let img = d.path().join("img");
    std::fs::create_dir(&img).unwrap();
    let vmlinux = kernel_image(&img, ID_A);
    let kfunc = 0xffff_ffff_8100_0001u64;
    let rec = kernel_recording(d.path(), "k", &[kfunc + 1, kfunc + 1, kfunc + 4]);
    let meta = d.path().join("oprofile.data.meta");
    std::fs::write(
        meta.join("kallsyms"),
        format!(
            "ffffffff81000000 T _stext\n{kfunc:016x} T kfunc\n{:016x} T _etext\n",
            kfunc + 6
        ),
    )
    .unwrap();
    let r = rec.to_str().unwrap();
    let v = vmlinux.to_str().unwrap();
    // Another build of the kernel: not archived, and said so.
    std::fs::write(meta.join("build-ids"), format!("kernel {ID_B}\n")).unwrap();
    let ar = d.path().join("rec.tar.gz");
    let a = ar.to_str().unwrap();
    let (ok, _, err) = tool(&["archive", "-i", r, "-o", a, "--vmlinux", v], &env);
    assert!(ok, "{err}");
    assert!(
        err.contains(&format!(
            "not archived: the kernel's image (build-id {ID_B})"
        )),
        "{err}"
    );
    // The recorded build: archived, and annotate finds it there.
    std::fs::write(meta.join("build-ids"), format!("kernel {ID_A}\n")).unwrap();
    let (ok, _, err) = tool(&["archive", "-i", r, "-o", a, "--vmlinux", v], &env);
    assert!(ok && err.contains("1 files by build-id"), "{err}");
    std::fs::remove_dir_all(&img).unwrap();
    let (ok, out, err) = tool(&["annotate", "kfunc", "-i", a], &env);
    assert!(ok, "{err}");
    assert!(out.starts_with("# kfunc ("), "{out}");
    assert!(out.contains(".build-id/aa/"), "{out}");
    assert!(out.contains("mov") && out.contains("rbp,rsp"), "{out}");
}
