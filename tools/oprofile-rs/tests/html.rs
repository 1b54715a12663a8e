//! `html`: the page in a real browser (headless Chromium driven through the
//! DevTools protocol over a pipe): it loads without errors or network
//! requests, search highlights exactly the frames of a function, a click
//! zooms, a dragged time range and a thread selection filter every view,
//! the warnings show, and hostile names (`</script>`, quotes) stay text.
//!
//! Chromium is required: `scripts/setup --test` (which `scripts/test`
//! runs) installs it; the test finds it as `$OPROFILE_RS_CHROMIUM`, else
//! `chromium`, `chromium-browser`, `google-chrome` on PATH, and fails
//! without it.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use common::*;
use oprofile_stream::{Comm, Encoder, Header, Lost, Record, Sample, Tracing};
use serde_json::{json, Value};

mod cdp {
    //! A Chrome DevTools Protocol client over `--remote-debugging-pipe`
    //! (the browser reads commands on fd 3 and writes on fd 4, messages
    //! ended by NUL), with std, libc and serde_json only.
    use std::fs::File;
    use std::io::{Read, Write};
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::os::unix::process::CommandExt;
    use std::path::PathBuf;
    use std::process::{Child, Command, Stdio};
    use std::sync::mpsc::{channel, Receiver};
    use std::time::{Duration, Instant};

    use serde_json::{json, Value};

    /// The browser: `$OPROFILE_RS_CHROMIUM`, else the first of the usual
    /// names on PATH; a panic that says how to get it otherwise.
    pub fn chromium() -> PathBuf {
        if let Some(p) = std::env::var_os("OPROFILE_RS_CHROMIUM") {
            return PathBuf::from(p);
        }
        let path = std::env::var_os("PATH").unwrap_or_default();
        for name in ["chromium", "chromium-browser", "google-chrome"] {
            for dir in std::env::split_paths(&path) {
                let p = dir.join(name);
                if p.is_file() {
                    return p;
                }
            }
        }
        panic!(
            "the html tests need Chromium: apt-get install chromium (scripts/setup --test \
             installs it), or set OPROFILE_RS_CHROMIUM to a Chromium or Chrome binary"
        );
    }

    fn pipe() -> (OwnedFd, OwnedFd) {
        let mut fds = [0; 2];
        // SAFETY: pipe2 fills the two descriptors, which we then own.
        let r = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
        assert_eq!(r, 0, "pipe2: {}", std::io::Error::last_os_error());
        // SAFETY: both are open and ours alone.
        unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
    }

    pub struct Browser {
        child: Child,
        to: File,
        from: Receiver<Value>,
        next: u64,
        /// Events received (in order), every session's.
        pub events: Vec<Value>,
        session: String,
        _dir: tempfile::TempDir,
        stderr: PathBuf,
    }

    impl Browser {
        /// Starts the browser and opens a page of `width` x `height`.
        pub fn launch(width: u32, height: u32) -> Browser {
            let exe = chromium();
            let dir = tempfile::tempdir().unwrap();
            let (cmd_r, cmd_w) = pipe();
            let (ev_r, ev_w) = pipe();
            let stderr = dir.path().join("stderr");
            let mut cmd = Command::new(&exe);
            cmd.args([
                "--headless=new",
                "--remote-debugging-pipe",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--no-first-run",
                "--no-default-browser-check",
                "--disable-extensions",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--mute-audio",
            ])
            .arg(format!(
                "--user-data-dir={}",
                dir.path().join("profile").display()
            ))
            .arg(format!("--window-size={width},{height}"))
            .arg("about:blank")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(File::create(&stderr).unwrap());
            let (a, b) = (cmd_r.as_raw_fd(), ev_w.as_raw_fd());
            // SAFETY: only async-signal-safe calls between fork and exec.
            unsafe {
                cmd.pre_exec(move || {
                    // Out of the way of 3 and 4 first, then onto them
                    // (dup2 leaves close-on-exec off).
                    let a2 = libc::fcntl(a, libc::F_DUPFD, 10);
                    let b2 = libc::fcntl(b, libc::F_DUPFD, 10);
                    if a2 < 0 || b2 < 0 || libc::dup2(a2, 3) < 0 || libc::dup2(b2, 4) < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
            let child = cmd
                .spawn()
                .unwrap_or_else(|e| panic!("cannot start {}: {e}", exe.display()));
            drop(cmd_r);
            drop(ev_w);
            let (tx, rx) = channel();
            let mut reader = File::from(ev_r);
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 65536];
                loop {
                    let n = match reader.read(&mut chunk) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => n,
                    };
                    buf.extend_from_slice(&chunk[..n]);
                    while let Some(end) = buf.iter().position(|&c| c == 0) {
                        let msg: Vec<u8> = buf.drain(..=end).collect();
                        if let Ok(v) = serde_json::from_slice::<Value>(&msg[..end]) {
                            if tx.send(v).is_err() {
                                return;
                            }
                        }
                    }
                }
            });
            let mut b = Browser {
                child,
                to: File::from(cmd_w),
                from: rx,
                next: 0,
                events: Vec::new(),
                session: String::new(),
                _dir: dir,
                stderr,
            };
            let target = b.browser_call("Target.createTarget", json!({"url": "about:blank"}));
            let id = target["targetId"].as_str().unwrap().to_string();
            let att = b.browser_call(
                "Target.attachToTarget",
                json!({"targetId": id, "flatten": true}),
            );
            b.session = att["sessionId"].as_str().unwrap().to_string();
            for domain in ["Page", "Runtime", "Log", "Network"] {
                b.call(&format!("{domain}.enable"), json!({}));
            }
            b.call(
                "Emulation.setDeviceMetricsOverride",
                json!({"width": width, "height": height, "deviceScaleFactor": 1, "mobile": false}),
            );
            b
        }

        fn send(&mut self, method: &str, params: Value, session: Option<String>) -> Value {
            self.next += 1;
            let id = self.next;
            let mut msg = json!({"id": id, "method": method, "params": params});
            if let Some(s) = session {
                msg["sessionId"] = Value::String(s);
            }
            let mut bytes = serde_json::to_vec(&msg).unwrap();
            bytes.push(0);
            self.to.write_all(&bytes).unwrap();
            let deadline = Instant::now() + Duration::from_secs(60);
            loop {
                let left = deadline.saturating_duration_since(Instant::now());
                let v = self.from.recv_timeout(left).unwrap_or_else(|e| {
                    panic!(
                        "{method}: no answer ({e}); browser stderr:\n{}",
                        std::fs::read_to_string(&self.stderr).unwrap_or_default()
                    )
                });
                if v["id"] == json!(id) {
                    if let Some(err) = v.get("error") {
                        panic!("{method}: {err}");
                    }
                    return v["result"].clone();
                }
                self.events.push(v);
            }
        }

        fn browser_call(&mut self, method: &str, params: Value) -> Value {
            self.send(method, params, None)
        }

        /// A command to the page.
        pub fn call(&mut self, method: &str, params: Value) -> Value {
            let s = self.session.clone();
            self.send(method, params, Some(s))
        }

        /// Waits for event `method` (of the page), up to `secs`.
        pub fn wait_event(&mut self, method: &str, secs: u64) -> Value {
            if let Some(i) = self.events.iter().position(|e| e["method"] == method) {
                return self.events.remove(i);
            }
            let deadline = Instant::now() + Duration::from_secs(secs);
            loop {
                let left = deadline.saturating_duration_since(Instant::now());
                let v = self
                    .from
                    .recv_timeout(left)
                    .unwrap_or_else(|e| panic!("no {method} event: {e}"));
                if v["method"] == method {
                    return v;
                }
                self.events.push(v);
            }
        }

        /// The value of a JavaScript expression (awaited if a promise).
        pub fn eval(&mut self, expr: &str) -> Value {
            let r = self.call(
                "Runtime.evaluate",
                json!({"expression": expr, "returnByValue": true, "awaitPromise": true}),
            );
            if let Some(e) = r.get("exceptionDetails") {
                panic!("{expr}: {e}");
            }
            r["result"]["value"].clone()
        }

        /// Loads `url` and waits for its load event.
        pub fn open(&mut self, url: &str) {
            self.events.clear();
            self.call("Page.navigate", json!({"url": url}));
            self.wait_event("Page.loadEventFired", 60);
        }

        /// A mouse event of `kind` at (x, y), with the left button down
        /// (`buttons` 1) or not (0).
        pub fn mouse(&mut self, kind: &str, x: f64, y: f64, buttons: u32) {
            let button = if kind == "mouseMoved" && buttons == 0 {
                "none"
            } else {
                "left"
            };
            self.call(
                "Input.dispatchMouseEvent",
                json!({"type": kind, "x": x, "y": y, "button": button,
                       "buttons": buttons, "clickCount": 1}),
            );
        }

        /// A left click at (x, y).
        pub fn click(&mut self, x: f64, y: f64) {
            self.mouse("mouseMoved", x, y, 0);
            self.mouse("mousePressed", x, y, 1);
            self.mouse("mouseReleased", x, y, 0);
        }

        /// The problems the page reported: exceptions, console errors and
        /// warnings, log entries of level error or warning.
        pub fn problems(&self) -> Vec<String> {
            let mut v = Vec::new();
            for e in &self.events {
                let p = &e["params"];
                match e["method"].as_str() {
                    Some("Runtime.exceptionThrown") => v.push(format!("exception: {p}")),
                    Some("Runtime.consoleAPICalled")
                        if matches!(p["type"].as_str(), Some("error" | "warning" | "assert")) =>
                    {
                        v.push(format!("console: {p}"))
                    }
                    Some("Log.entryAdded")
                        if matches!(p["entry"]["level"].as_str(), Some("error" | "warning")) =>
                    {
                        v.push(format!("log: {p}"))
                    }
                    _ => {}
                }
            }
            v
        }

        /// URLs the page requested other than `page` itself.
        pub fn requests_besides(&self, page: &str) -> Vec<String> {
            self.events
                .iter()
                .filter(|e| e["method"] == "Network.requestWillBeSent")
                .filter_map(|e| e["params"]["request"]["url"].as_str())
                .filter(|u| *u != page && !u.starts_with("data:"))
                .map(str::to_string)
                .collect()
        }
    }

    impl Drop for Browser {
        fn drop(&mut self) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

use cdp::Browser;

/// A kernel symbol with a name that would end a script element, with both
/// quotes.
const HOSTILE_SYM: &str = "</script><b>\"x'";
/// A task name (15 bytes at most) of the same kind.
const HOSTILE_COMM: &str = "</script>\"'&";

const ENTRY: u64 = 0xffffffff81001820;
const SYSCALL: u64 = 0xffffffff81001010;
const SCHED: u64 = 0xffffffff81001410;
const HOSTILE_PC: u64 = 0xffffffff81001c08;
const HANDLER: u64 = 0xffffffffc0100010;

/// The recording's threads: (tid, pid, comm).
const THREADS: [(u32, u32, &str); 3] = [
    (PID, PID, HOSTILE_COMM),
    (PID + 1, PID, "worker"),
    (5000, 5000, "other"),
];

/// A stack: (pc, kernel callchain innermost first, user callchain, the
/// names from the outermost caller to the sampled function).
struct KnownStack {
    pc: u64,
    chain: Vec<u64>,
    user: Vec<u64>,
    names: Vec<&'static str>,
}

fn known_stacks() -> Vec<KnownStack> {
    vec![
        KnownStack {
            pc: SCHED,
            chain: vec![SYSCALL, ENTRY],
            user: vec![],
            names: vec!["entry_SYSCALL_64", "do_syscall_64", "__schedule"],
        },
        KnownStack {
            pc: SYSCALL + 0x10,
            chain: vec![ENTRY],
            user: vec![],
            names: vec!["entry_SYSCALL_64", "do_syscall_64"],
        },
        KnownStack {
            pc: HOSTILE_PC,
            chain: vec![ENTRY],
            user: vec![],
            names: vec!["entry_SYSCALL_64", HOSTILE_SYM],
        },
        KnownStack {
            pc: SCHED + 0x20,
            chain: vec![HANDLER],
            user: vec![],
            names: vec!["opr_handler", "__schedule"],
        },
        // A user stack cut at an address that is no code of the process.
        KnownStack {
            pc: SYSCALL + 0x10,
            chain: vec![ENTRY],
            user: vec![0x10],
            names: vec!["[truncated]", "entry_SYSCALL_64", "do_syscall_64"],
        },
    ]
}

/// A sample of the recording: µs from its start, thread index, stack index.
struct Known {
    t_us: u64,
    thread: usize,
    stack: usize,
}

/// 90 samples 1 ms apart (the first at 1 ms), over the threads and stacks
/// in a pattern that leaves each thread some of each stack; 7 lost.
fn recording(dir: &Path) -> (PathBuf, Vec<Known>) {
    let start = 1_000_000_000u64;
    let mut e = Encoder::new(&Header {
        nr_cpus: 2,
        backtrace_depth: 8,
        start_time: start,
        ..Header::default()
    });
    e.record(&Record::Tracing(Tracing {
        cpu: 0,
        on: true,
        time: start,
    }));
    for &(tid, pid, comm) in &THREADS {
        e.record(&Record::Comm(Comm::new(0, start, tid, pid, comm)));
    }
    let stacks = known_stacks();
    let mut known = Vec::new();
    for i in 0..90u64 {
        let thread = (i % 3) as usize;
        let stack = ((i / 3 + i) % stacks.len() as u64) as usize;
        let k = &stacks[stack];
        let (tid, pid, _) = THREADS[thread];
        e.record(&Record::Sample(Sample {
            cpu: (i % 2) as u16,
            kernel: true,
            time: start + 1_000_000 * (i + 1),
            pc: k.pc,
            pid: tid,
            tgid: pid,
            callchain: k.chain.clone(),
            user_callchain: k.user.clone(),
            ..Default::default()
        }));
        known.push(Known {
            t_us: 1000 * (i + 1),
            thread,
            stack,
        });
        if i == 40 {
            e.record(&Record::Lost(Lost {
                cpu: 1,
                time: start + 1_000_000 * (i + 1),
                count: 7,
            }));
        }
    }
    let v = victim();
    let file = write_recording(dir, &e.finish(), &fake_maps(v, &v.path));
    let meta = dir.join("oprofile.data.meta");
    let kallsyms = KALLSYMS.replace(
        "ffffffff81002000 T _etext",
        &format!("ffffffff81001c00 t {HOSTILE_SYM}\nffffffff81002000 T _etext"),
    );
    std::fs::write(meta.join("kallsyms"), kallsyms).unwrap();
    std::fs::write(meta.join("maps").join("5000"), fake_maps(v, &v.path)).unwrap();
    (file, known)
}

/// The frames a flame graph of `samples` has for a function named `name`:
/// the distinct paths (comm, then the frames from the outermost caller)
/// that end in it.
fn frames_of(samples: &[&Known], name: &str) -> usize {
    let stacks = known_stacks();
    let mut paths = BTreeSet::new();
    for s in samples {
        let mut path = vec![THREADS[s.thread].2];
        for n in &stacks[s.stack].names {
            path.push(n);
            if *n == name {
                paths.insert(path.clone());
            }
        }
    }
    paths.len()
}

fn make_page(dir: &Path, extra: &[&str]) -> (PathBuf, String, Vec<Known>) {
    let (file, known) = recording(dir);
    let page = dir.join("page.html");
    let mut args = vec![
        "html",
        "-i",
        file.to_str().unwrap(),
        "-o",
        page.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let (ok, _, err) = run_tool_any(&args);
    assert!(ok, "{err}");
    assert!(err.contains("(90 samples)"), "{err}");
    let html = std::fs::read_to_string(&page).unwrap();
    (page, html, known)
}

fn url(page: &Path) -> String {
    format!("file://{}", page.display())
}

/// The page's script's view of the frames drawn: node, left, width, text,
/// whether highlighted.
fn drawn(b: &mut Browser) -> Vec<Value> {
    b.eval(
        "[...document.querySelectorAll('#flame .fr')].map(d => ({node: +d.dataset.node, \
         x: d.getBoundingClientRect().left, y: d.getBoundingClientRect().top, \
         w: d.getBoundingClientRect().width, text: d.textContent, \
         match: d.classList.contains('match'), weight: +d.dataset.w}))",
    )
    .as_array()
    .unwrap()
    .clone()
}

fn number(v: &Value) -> f64 {
    v.as_f64()
        .unwrap_or_else(|| v.as_str().and_then(|s| s.parse().ok()).unwrap())
}

#[test]
fn html_page_works_in_a_browser() {
    let dir = tempfile::tempdir().unwrap();
    let (page, _, known) = make_page(dir.path(), &[]);
    let all: Vec<&Known> = known.iter().collect();
    let mut b = Browser::launch(1200, 900);
    b.open(&url(&page));
    assert_eq!(
        b.eval("!!(window.oprofile && window.oprofile.ready)"),
        json!(true)
    );
    assert_eq!(
        b.problems(),
        Vec::<String>::new(),
        "the page reported problems"
    );
    assert_eq!(
        b.requests_besides(&url(&page)),
        Vec::<String>::new(),
        "the page fetched something"
    );

    // The names stayed text: two script elements (the data's and the
    // code's), the hostile symbol and comm shown as they are.
    assert_eq!(b.eval("document.scripts.length"), json!(2));
    assert_eq!(
        b.eval("document.querySelectorAll('body b:not(#warnings > b)').length"),
        json!(0)
    );
    let texts: Vec<String> = drawn(&mut b)
        .iter()
        .map(|d| d["text"].as_str().unwrap().to_string())
        .collect();
    assert!(texts.iter().any(|t| t == HOSTILE_SYM), "{texts:?}");
    assert!(texts.iter().any(|t| t == HOSTILE_COMM), "{texts:?}");
    let options: Vec<String> = serde_json::from_value(
        b.eval("[...document.querySelectorAll('#thread option')].map(o => o.text)"),
    )
    .unwrap();
    assert!(
        options
            .iter()
            .any(|o| o.starts_with(&format!("process {PID} {HOSTILE_COMM} ("))),
        "{options:?}"
    );

    // Totals: every sample; the warnings: the lost samples and the cut
    // stacks.
    assert_eq!(
        b.eval("document.getElementById('totals').dataset.samples"),
        json!("90")
    );
    let warnings = b.eval(
        "(() => { const w = document.getElementById('warnings'); \
         return w.hidden || w.getBoundingClientRect().height === 0 ? '' : w.textContent; })()",
    );
    let warnings = warnings.as_str().unwrap();
    assert!(warnings.contains("7 samples were lost"), "{warnings}");
    let cut = known.iter().filter(|k| k.stack == 4).count();
    assert!(
        warnings.contains(&format!("call stacks cut: {cut} of 90 samples")),
        "{warnings}"
    );
    assert!(warnings.contains("[truncated]"), "{warnings}");

    // Search: exactly the frames of __schedule are highlighted, and the
    // share is that of the samples with it in their stack.
    let search = b.eval("document.getElementById('search').getBoundingClientRect().toJSON()");
    b.click(number(&search["x"]) + 10.0, number(&search["y"]) + 5.0);
    b.call("Input.insertText", json!({"text": "__schedule"}));
    let frames = drawn(&mut b);
    let matched: Vec<&Value> = frames.iter().filter(|d| d["match"] == true).collect();
    assert_eq!(matched.len(), frames_of(&all, "__schedule"), "{frames:?}");
    assert_eq!(matched.len(), 6);
    assert!(matched
        .iter()
        .all(|d| d["text"] == "__schedule" || d["w"].as_f64().unwrap() <= 14.0));
    let with_sched = known
        .iter()
        .filter(|k| known_stacks()[k.stack].names.contains(&"__schedule"))
        .count();
    let text = b.eval("document.getElementById('match-text').textContent");
    assert_eq!(
        text,
        json!(format!(
            "6 matches, {:.1}% of samples",
            100.0 * with_sched as f64 / 90.0
        ))
    );

    // Click on a frame: it fills the width; its callers above, full width
    // and faded; breadcrumbs lead back.
    let width = number(&b.eval("document.getElementById('flame').clientWidth"));
    let target = frames
        .iter()
        .filter(|d| d["text"] == "do_syscall_64")
        .max_by(|a, b| number(&a["w"]).total_cmp(&number(&b["w"])))
        .unwrap()
        .clone();
    assert!(number(&target["w"]) < width - 1.0, "{target}");
    b.click(
        number(&target["x"]) + number(&target["w"]) / 2.0,
        number(&target["y"]) + 8.0,
    );
    let after = drawn(&mut b);
    let zoomed = after
        .iter()
        .find(|d| d["node"] == target["node"])
        .unwrap_or_else(|| panic!("{after:?}"));
    assert!(
        (number(&zoomed["w"]) - width).abs() < 1.0,
        "{zoomed} vs {width}"
    );
    let crumbs = b.eval("document.getElementById('crumbs').textContent");
    assert!(
        crumbs
            .as_str()
            .unwrap()
            .ends_with("entry_SYSCALL_64 \u{203a} do_syscall_64"),
        "{crumbs}"
    );
    // Its children share the width by their samples.
    let kids: Vec<&Value> = after
        .iter()
        .filter(|d| d["text"] == "__schedule" && d["y"] != zoomed["y"])
        .collect();
    assert_eq!(kids.len(), 1, "{after:?}");
    let ratio = number(&kids[0]["weight"]) / number(&zoomed["weight"]);
    assert!((number(&kids[0]["w"]) / width - ratio).abs() < 0.01);
    assert_eq!(
        b.eval("document.getElementById('reset-zoom').disabled"),
        json!(false)
    );
    b.eval("document.getElementById('reset-zoom').click()");
    let reset = drawn(&mut b);
    let back = reset.iter().find(|d| d["node"] == target["node"]).unwrap();
    assert!((number(&back["w"]) - number(&target["w"])).abs() < 0.01);

    // The icicle turns the graph over: the root goes to the top.
    let root_y = |f: &[Value]| number(&f.iter().find(|d| d["node"] == -1).unwrap()["y"]);
    let flame_root = root_y(&reset);
    b.eval("document.getElementById('orientation').click()");
    let icicle_root = root_y(&drawn(&mut b));
    assert!(icicle_root < flame_root, "{icicle_root} {flame_root}");

    // Drag over the timeline: every view shows the samples of the range.
    let tl = b.eval("document.getElementById('timeline').getBoundingClientRect().toJSON()");
    let (x, y, w) = (number(&tl["x"]), number(&tl["y"]), number(&tl["width"]));
    b.mouse("mouseMoved", x + 0.25 * w, y + 30.0, 0);
    b.mouse("mousePressed", x + 0.25 * w, y + 30.0, 1);
    b.mouse("mouseMoved", x + 0.45 * w, y + 30.0, 1);
    b.mouse("mouseMoved", x + 0.6 * w, y + 30.0, 1);
    b.mouse("mouseReleased", x + 0.6 * w, y + 30.0, 0);
    let range = b.eval("window.oprofile.state.range");
    let (t0, t1) = (number(&range[0]), number(&range[1]));
    let inside: Vec<&Known> = known
        .iter()
        .filter(|k| (k.t_us as f64) >= t0 && (k.t_us as f64) < t1)
        .collect();
    assert!(inside.len() > 10 && inside.len() < 60, "{t0} {t1}");
    let n = inside.len().to_string();
    assert_eq!(
        b.eval("document.getElementById('totals').dataset.samples"),
        json!(n)
    );
    let f = drawn(&mut b);
    assert_eq!(
        number(&f.iter().find(|d| d["node"] == -1).unwrap()["weight"]),
        inside.len() as f64
    );
    assert_eq!(
        f.iter().filter(|d| d["match"] == true).count(),
        frames_of(&inside, "__schedule")
    );
    b.eval("window.oprofile.showView('tree')");
    let tree_top = b.eval(
        "[...document.querySelectorAll('#tree tr[data-depth=\"0\"]')].reduce((a, r) => a + +r.dataset.w, 0)",
    );
    assert_eq!(number(&tree_top), inside.len() as f64);
    b.eval("window.oprofile.showView('table')");
    let table_self = b.eval(
        "[...document.querySelectorAll('#table tr[data-frame]')].reduce((a, r) => a + +r.dataset.self, 0)",
    );
    assert_eq!(number(&table_self), inside.len() as f64);
    // The table's inclusive column: the samples with the function anywhere.
    let total_of = |b: &mut Browser, name: &str| {
        number(&b.eval(&format!(
            "+[...document.querySelectorAll('#table tr[data-frame]')].find(r => r.children[4].textContent === {}).dataset.total",
            serde_json::to_string(name).unwrap()
        )))
    };
    let expect = inside
        .iter()
        .filter(|k| known_stacks()[k.stack].names.contains(&"do_syscall_64"))
        .count();
    assert_eq!(total_of(&mut b, "do_syscall_64"), expect as f64);
    // Sorting by a column header.
    b.eval("document.querySelector('#table th[data-sort=\"name\"]').click()");
    let names = b.eval("[...document.querySelectorAll('#table tr[data-frame]')].map(r => r.children[4].textContent)");
    let names: Vec<String> = serde_json::from_value(names).unwrap();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted);

    // A thread: the views show its samples in the range.
    b.eval("window.oprofile.showView('flame')");
    let opt = b.eval(
        "[...document.querySelectorAll('#thread option')].find(o => o.text.includes('thread 4243')).value",
    );
    b.eval(&format!(
        "(() => {{ const s = document.getElementById('thread'); s.value = {opt}; \
         s.dispatchEvent(new Event('change')); }})()"
    ));
    let mine = inside.iter().filter(|k| k.thread == 1).count();
    assert_eq!(
        b.eval("document.getElementById('totals').dataset.samples"),
        json!(mine.to_string())
    );
    // Clear the range: the thread's samples of the whole recording.
    b.eval("document.getElementById('clear-range').click()");
    assert_eq!(
        b.eval("document.getElementById('totals').dataset.samples"),
        json!("30")
    );
    assert_eq!(b.eval("window.oprofile.state.range"), Value::Null);
    // A range without samples: empty views, no error.
    b.eval("window.oprofile.setRange(0, 500)");
    assert_eq!(
        b.eval("document.getElementById('totals').dataset.samples"),
        json!("0")
    );
    for v in ["tree", "table", "flame"] {
        b.eval(&format!("window.oprofile.showView('{v}')"));
    }
    assert_eq!(drawn(&mut b).len(), 1);
    assert_eq!(b.problems(), Vec::<String>::new());
}

#[test]
fn html_keeps_hostile_names_inside_the_data() {
    let dir = tempfile::tempdir().unwrap();
    let (_, html, _) = make_page(dir.path(), &["--title", "a </script> & <b>"]);
    // The page's own two closing tags, no other: the names are escaped in
    // the JSON and in the title.
    assert_eq!(html.matches("</script").count(), 2, "{html}");
    assert!(html.contains("<title>a &lt;/script&gt; &amp; &lt;b&gt;</title>"));
    assert!(html.contains("\\u003c/script\\u003e\\u003cb\\u003e\\\"x'"));
    // The data parses back to the names.
    let start = html.find("type=\"application/json\">").unwrap() + 24;
    let end = start + html[start..].find("</script>").unwrap();
    let data: Value = serde_json::from_str(&html[start..end]).unwrap();
    let strings: Vec<&str> = data["strings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    assert!(strings.contains(&HOSTILE_SYM), "{strings:?}");
    assert!(strings.contains(&HOSTILE_COMM), "{strings:?}");
    assert_eq!(data["samples"]["t"].as_array().unwrap().len(), 90);
    // No network: nothing in the page refers to another resource.
    for fetch in ["http://", "https://", " src=", "url("] {
        assert!(!html.contains(fetch), "{fetch}");
    }
}

#[test]
fn html_refuses_what_it_cannot_show() {
    let dir = tempfile::tempdir().unwrap();
    let (file, _) = recording(dir.path());
    let f = file.to_str().unwrap();
    let out = dir.path().join("x.html");
    let o = out.to_str().unwrap();
    // A filter that keeps nothing: an error, no file.
    let (ok, _, err) = run_tool_any(&["html", "-i", f, "-o", o, "--pid", "1"]);
    assert!(!ok);
    assert!(
        err.contains("no samples: the filter (pid 1) keeps none of the 90"),
        "{err}"
    );
    assert!(!out.exists());
    // Garbage and an empty file.
    let garbage = dir.path().join("garbage");
    std::fs::write(&garbage, b"not a recording at all, just text\n").unwrap();
    let (ok, _, err) = run_tool_any(&["html", "-i", garbage.to_str().unwrap(), "-o", o]);
    assert!(
        !ok && err.contains("error:") && !err.contains("panicked"),
        "{err}"
    );
    let empty = dir.path().join("empty");
    std::fs::write(&empty, b"").unwrap();
    let (ok, _, err) = run_tool_any(&["html", "-i", empty.to_str().unwrap(), "-o", o]);
    assert!(
        !ok && err.contains("error:") && !err.contains("panicked"),
        "{err}"
    );
    // An output that cannot be created.
    let (ok, _, err) = run_tool_any(&["html", "-i", f, "-o", "/nonexistent/dir/x.html"]);
    assert!(
        !ok && err.contains("cannot create /nonexistent/dir/x.html"),
        "{err}"
    );
}

/// 100k samples over many distinct stacks: the page loads and follows a
/// selection quickly (the figures are printed; the bounds only catch a
/// page that stops being usable).
#[test]
fn html_page_with_100k_samples() {
    let dir = tempfile::tempdir().unwrap();
    let start = 1_000_000_000u64;
    let mut e = Encoder::new(&Header {
        nr_cpus: 2,
        backtrace_depth: 16,
        start_time: start,
        ..Header::default()
    });
    for &(tid, pid, comm) in &THREADS {
        e.record(&Record::Comm(Comm::new(0, start, tid, pid, comm)));
    }
    let funcs = [ENTRY, SYSCALL, SCHED, HOSTILE_PC, HANDLER];
    let mut x = 12345u64;
    let mut rand = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let n = 100_000u64;
    for i in 0..n {
        let depth = 1 + rand() % 9;
        let chain: Vec<u64> = (0..depth)
            .map(|_| funcs[(rand() % 5) as usize] + (rand() % 4) * 4)
            .collect();
        let (tid, pid, _) = THREADS[(rand() % 3) as usize];
        e.record(&Record::Sample(Sample {
            cpu: (i % 2) as u16,
            kernel: true,
            time: start + 100_000 * (i + 1),
            pc: funcs[(rand() % 5) as usize],
            pid: tid,
            tgid: pid,
            callchain: chain,
            ..Default::default()
        }));
    }
    let v = victim();
    let file = write_recording(dir.path(), &e.finish(), &fake_maps(v, &v.path));
    let page = dir.path().join("big.html");
    let (ok, _, err) = run_tool_any(&[
        "html",
        "-i",
        file.to_str().unwrap(),
        "-o",
        page.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    let size = std::fs::metadata(&page).unwrap().len();
    let mut b = Browser::launch(1200, 900);
    b.open(&url(&page));
    assert_eq!(
        b.eval("!!(window.oprofile && window.oprofile.ready)"),
        json!(true)
    );
    assert_eq!(b.problems(), Vec::<String>::new());
    let stacks = b.eval(
        "JSON.parse(document.getElementById('profile-data').textContent).stacks.parent.length",
    );
    let load = number(&b.eval(
        "(() => { const n = performance.getEntriesByType('navigation')[0]; \
         return (n.loadEventEnd || n.domContentLoadedEventEnd) - n.startTime; })()",
    ));
    let script = number(&b.eval("window.oprofile.scriptMs"));
    // A selection change: the range, then every view drawn again.
    let update = number(&b.eval(
        "(() => { const t = performance.now(); const o = window.oprofile; const d = o.tEnd - o.tStart; o.setRange(o.tStart + d * 0.2, o.tStart + d * 0.7); \
         o.showView('tree'); o.showView('table'); o.showView('flame'); o.setQuery('schedule'); \
         return performance.now() - t; })()",
    ));
    let kept = b.eval("document.getElementById('totals').dataset.samples");
    let kept: u64 = kept.as_str().unwrap().parse().unwrap();
    assert!((49_000..=51_000).contains(&kept), "{kept}");
    eprintln!(
        "html, 100k samples: {} KB page, {stacks} stacks; load {load:.0} ms (script {script:.0} ms), \
         range + every view + search {update:.0} ms",
        size / 1024
    );
    assert!(load < 30_000.0 && update < 10_000.0, "{load} {update}");
    assert_eq!(b.problems(), Vec::<String>::new());
}

/// An event whose periods differ (cpu-clock in frequency mode): every view
/// sums the samples' periods (ns), the totals say so, and a recording of
/// several events shows one, as the other views of one event do.
#[test]
fn html_sums_the_periods_of_a_weighted_event() {
    use oprofile_stream::oprofile_format::EVENT_FLAG_FREQ;
    use oprofile_stream::{config_with_events, Config, EventDesc, EventDescExt};
    let v = victim();
    let (alpha, beta) = (sym_addr(v, "alpha", 4), sym_addr(v, "beta", 8));
    let start = 1_000_000_000u64;
    let mut e = Encoder::new(&Header {
        start_time: start,
        ..Header::default()
    });
    e.record(&Record::Config(Box::new(config_with_events(
        Config {
            generation: 1,
            time: start,
            ..Config::default()
        },
        &[
            EventDesc::new("cpu-clock", 1, 0, 1000, EVENT_FLAG_FREQ),
            EventDesc::new("page-faults", 1, 0, 10, 0),
        ],
    ))));
    e.record(&Record::Comm(Comm::new(0, start, PID, PID, "victim")));
    // cpu-clock: alpha 2 x 1 ms, beta 1 x 4 ms; page-faults: beta 3 x.
    for (i, (pc, event, period)) in [
        (alpha, 0, 1_000_000),
        (alpha, 0, 1_000_000),
        (beta, 0, 4_000_000),
        (beta, 1, 0),
        (beta, 1, 0),
        (beta, 1, 0),
    ]
    .into_iter()
    .enumerate()
    {
        e.record(&Record::Sample(Sample {
            time: start + 1_000_000 * (i as u64 + 1),
            pc,
            pid: PID,
            tgid: PID,
            event,
            period,
            ..Default::default()
        }));
    }
    let dir = tempfile::tempdir().unwrap();
    let file = write_recording(dir.path(), &e.finish(), &fake_maps(v, &v.path));
    let page = dir.path().join("w.html");
    let (ok, _, err) = run_tool_any(&[
        "html",
        "-i",
        file.to_str().unwrap(),
        "-o",
        page.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    assert!(
        err.contains("html shows event cpu-clock (the recording has cpu-clock, page-faults;"),
        "{err}"
    );
    let mut b = Browser::launch(1000, 700);
    b.open(&url(&page));
    assert_eq!(
        b.eval("!!(window.oprofile && window.oprofile.ready)"),
        json!(true)
    );
    assert_eq!(
        b.eval("document.getElementById('totals').textContent"),
        json!("3 samples (6,000,000 ns), 100.0% of the recording")
    );
    assert_eq!(
        b.eval("document.getElementById('totals').dataset.weight"),
        json!("6000000")
    );
    b.eval("window.oprofile.setQuery('beta')");
    assert_eq!(
        b.eval("document.getElementById('match-text').textContent"),
        json!("1 match, 66.7% of the weight (ns)")
    );
    b.eval("window.oprofile.showView('table')");
    let alpha_self = b.eval(
        "+[...document.querySelectorAll('#table tr[data-frame]')].find(r => r.children[4].textContent === 'alpha').dataset.self",
    );
    assert_eq!(alpha_self, json!(2_000_000));
    assert_eq!(b.problems(), Vec::<String>::new());
}
