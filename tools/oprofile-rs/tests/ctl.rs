//! `oprofile-rs ctl`: the module's control from the command line, here
//! against a module without the control ioctls (the "device" is a plain
//! file, whose ioctls answer ENOTTY), so through its debugfs files; the
//! guest scenario `lockdown.sh` runs it through the ioctls under
//! `lockdown=integrity`.

mod common;

use std::path::Path;

use common::*;

fn file(d: &Path, k: &str) -> String {
    std::fs::read_to_string(d.join(k))
        .unwrap()
        .trim()
        .to_string()
}

#[test]
fn actions_run_in_order_through_the_debugfs_files() {
    let dir = tempfile::tempdir().unwrap();
    let dbg = fake_debugfs(dir.path());
    let dev = dir.path().join("dev");
    std::fs::write(&dev, b"").unwrap();
    let ctl = |args: &[&str]| {
        let base = [
            "ctl",
            "--device",
            dev.to_str().unwrap(),
            "--debugfs",
            dbg.to_str().unwrap(),
        ];
        run_tool_any(&[&base[..], args].concat())
    };
    // No action: show.
    let (ok, out, err) = ctl(&[]);
    assert!(ok, "{err}");
    assert!(out.contains("event=cpu-clock,page-faults\n"), "{out}");
    assert!(out.contains("mode=consume\n"), "{out}");
    assert!(out.ends_with("tracing_on=1\n"), "{out}");
    // Off, one change (two keys), on, flush, snapshot.
    let (ok, _, err) = ctl(&[
        "off",
        "mode=overwrite",
        "backtrace_depth=4",
        "on",
        "flush",
        "snapshot",
    ]);
    assert!(ok, "{err}");
    assert_eq!(file(&dbg, "mode"), "overwrite");
    assert_eq!(file(&dbg, "backtrace_depth"), "4");
    assert_eq!(file(&dbg, "tracing_on"), "1");
    assert_eq!(file(&dbg, "flush"), "1");
    assert_eq!(file(&dbg, "snapshot"), "1");
    // --pause: off around the change, on again after it.
    let (ok, _, err) = ctl(&["--pause", "backtrace_depth=2"]);
    assert!(ok, "{err}");
    assert_eq!(
        (file(&dbg, "backtrace_depth"), file(&dbg, "tracing_on")),
        ("2".into(), "1".into())
    );
    // A cgroup filter as perf's -G names it: below the cgroup2 root.
    let (ok, _, err) = ctl(&["off", "cgroup=system.slice/nginx.service", "on"]);
    assert!(ok, "{err}");
    assert_eq!(file(&dbg, "cgroup"), "/system.slice/nginx.service");
    // Refused before anything is touched: an unknown key or action, a key
    // twice, a value of two words; the files are as they were.
    for bad in [
        &["off", "bogus=1"][..],
        &["off", "frobnicate"],
        &["off", "mode=overwrite", "mode=consume"],
        &["off", "mode=over write"],
    ] {
        let (ok, _, err) = ctl(bad);
        assert!(!ok, "{bad:?} succeeded");
        assert!(err.contains("oprofile-rs: error:"), "{err}");
        assert_eq!(file(&dbg, "tracing_on"), "1", "{bad:?} touched the module");
    }
    let (_, _, err) = ctl(&["bogus=1"]);
    assert!(err.contains("the settings: event, sample_period"), "{err}");
    // A write the "module" refuses: a debugfs file that is not there.
    std::fs::remove_file(dbg.join("snapshot")).unwrap();
    let (ok, _, err) = ctl(&["snapshot"]);
    assert!(!ok && err.contains("refused a snapshot"), "{err}");
    // No device.
    let (ok, _, err) = run_tool_any(&["ctl", "--device", "/nonexistent/buffer", "on"]);
    assert!(
        !ok && err.contains("is the oprofile-rs module loaded?"),
        "{err}"
    );
}
