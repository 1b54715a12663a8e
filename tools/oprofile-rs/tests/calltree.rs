//! Issue 35 item 1: `report -g [caller|callee][,PCT]` draws full call
//! trees under the rows, in text and `--json`, as `perf report -g` does:
//! callee order from each function up to its callers, caller order from it
//! down to its callees (with `--children`), percentages of all samples,
//! branches under the threshold hidden and counted, every sample once in a
//! tree whatever its recursion.

mod common;

use common::*;
use oprofile_stream::{Comm, Encoder, Header, Record, Sample};
use serde_json::Value;

/// A return address in `name`, `delta` bytes into it.
fn ret(name: &str, delta: u64) -> u64 {
    sym_addr(victim(), name, delta)
}

/// User-mode samples of the victim, each `(count, leaf, callers innermost
/// first)`, and kernel-mode ones `(count, kernel pc, kernel callers, user
/// callers)`.
type User<'a> = (usize, &'a str, &'a [&'a str]);
type Kernel<'a> = (usize, u64, &'a [u64], &'a [&'a str]);

fn stream(user: &[User], kernel: &[Kernel]) -> Vec<u8> {
    let mut e = Encoder::new(&Header {
        nr_cpus: 1,
        backtrace_depth: 8,
        start_time: 1_000_000_000,
        ..Header::default()
    });
    let mut t = 1_000_000_000u64;
    e.record(&Record::Comm(Comm::new(0, t, PID, PID, "victim")));
    let mut sample = |kernel: bool, pc: u64, chain: Vec<u64>, user: Vec<u64>| {
        t += 1_000_000;
        e.record(&Record::Sample(Sample {
            cpu: 0,
            kernel,
            time: t,
            pc,
            pid: PID,
            tgid: PID,
            callchain: chain,
            user_callchain: user,
            ..Default::default()
        }));
    };
    let rets = |names: &[&str]| -> Vec<u64> { names.iter().map(|n| ret(n, 4)).collect() };
    for &(n, leaf, callers) in user {
        for _ in 0..n {
            sample(false, ret(leaf, 8), vec![], rets(callers));
        }
    }
    for &(n, pc, chain, callers) in kernel {
        for _ in 0..n {
            sample(true, pc, chain.to_vec(), rets(callers));
        }
    }
    e.finish()
}

fn recording(data: &[u8]) -> (tempfile::TempDir, String) {
    let v = victim();
    let dir = tempfile::tempdir().unwrap();
    let file = write_recording(dir.path(), data, &fake_maps(v, &v.path));
    let f = file.to_str().unwrap().to_string();
    (dir, f)
}

/// main → alpha → beta 6 times, main → gamma_fn → beta 4 times.
fn two_paths() -> (tempfile::TempDir, String) {
    recording(&stream(
        &[
            (6, "beta", &["alpha", "main"]),
            (4, "beta", &["gamma_fn", "main"]),
        ],
        &[],
    ))
}

/// A tree node as `name weight self [children...]`, for comparisons.
fn shape(n: &Value) -> String {
    let kids: Vec<String> = n["children"]
        .as_array()
        .map(|k| k.iter().map(shape).collect())
        .unwrap_or_default();
    let mut s = format!(
        "{} {} {}",
        n["symbol"].as_str().unwrap(),
        n["weight"],
        n["self_weight"]
    );
    if !kids.is_empty() {
        s += &format!(" [{}]", kids.join(", "));
    }
    if !n["hidden"].is_null() {
        s += &format!(
            " (hidden {} {})",
            n["hidden"]["branches"], n["hidden"]["weight"]
        );
    }
    s
}

/// The tree of the row of `symbol` in `report --json ARGS`.
fn tree_of(f: &str, symbol: &str, args: &[&str]) -> Value {
    let mut a = vec!["report", "-i", f, "--json"];
    a.extend(args);
    let v = json(&run_tool(&a));
    report_row(&v, symbol)["call_tree"].clone()
}

/// Every node's weight is its own plus its children's and the hidden
/// ones'; the percentages are of `total`.
fn check_sums(n: &Value, total: u64) {
    let w = n["weight"].as_u64().unwrap();
    let kids: u64 = n["children"]
        .as_array()
        .map(|k| k.iter().map(|c| c["weight"].as_u64().unwrap()).sum())
        .unwrap_or(0);
    let hidden = n["hidden"]["weight"].as_u64().unwrap_or(0);
    assert_eq!(w, n["self_weight"].as_u64().unwrap() + kids + hidden, "{n}");
    let p = n["percent"].as_f64().unwrap();
    assert!((p - 100.0 * w as f64 / total as f64).abs() < 1e-9, "{n}");
    for c in n["children"].as_array().into_iter().flatten() {
        check_sums(c, total);
    }
}

/// The tree lines under the first row of a text report: its figures
/// (blanks squeezed), then the drawing and names as they are. They start
/// at a fixed column: after 2 blanks, the total (8 wide) and in caller
/// order the self (9 more), and 2 blanks.
fn tree_lines(out: &str, caller: bool) -> Vec<String> {
    let start = if caller { 21 } else { 12 };
    out.lines()
        .skip_while(|l| l.starts_with('#'))
        .skip(2)
        .take_while(|l| !l.is_empty())
        .map(|l| {
            let fig: Vec<&str> = l[..start].split_whitespace().collect();
            assert!(l[start - 2..start].trim().is_empty(), "{l}: {out}");
            format!("{} {}", fig.join(" "), &l[start..])
        })
        .collect()
}

#[test]
fn callee_tree_shows_who_calls_the_sampled_function() {
    let (_d, f) = two_paths();
    // perf's default order without --children: callee.
    let v = json(&run_tool(&["report", "-i", &f, "--json", "-g"]));
    assert_eq!(v["call_graph"]["order"], "callee", "{v}");
    assert_eq!(v["call_graph"]["threshold"], 0.5, "{v}");
    let t = report_row(&v, "beta")["call_tree"].clone();
    assert_eq!(t["nodes"].as_array().unwrap().len(), 1, "{t}");
    assert_eq!(
        shape(&t["nodes"][0]),
        "beta 10 0 [alpha 6 0 [main 6 6], gamma_fn 4 0 [main 4 4]]"
    );
    check_sums(&t["nodes"][0], 10);
    assert_eq!(t["nodes"][0]["children"][0]["percent"], 60.0);
    // Rows of functions without samples of their own get no row (and no
    // tree) without --children.
    assert!(v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r["symbol"] == "beta"));

    let out = run_tool(&["report", "-i", &f, "-g", "callee"]);
    assert!(
        out.contains("# call trees (-g callee): from each function up to its outermost callers"),
        "{out}"
    );
    assert!(!out.contains("-g shows"), "{out}");
    assert_eq!(
        tree_lines(&out, false),
        [
            "100.00% beta",
            "60.00% |--alpha",
            "60.00% |  main",
            "40.00% \\--gamma_fn",
            "40.00%    main",
        ],
        "{out}"
    );
}

#[test]
fn caller_tree_shows_what_a_function_calls() {
    let (_d, f) = two_paths();
    // perf's default order with --children: caller.
    let v = json(&run_tool(&[
        "report",
        "-i",
        &f,
        "--json",
        "--children",
        "-g",
    ]));
    assert_eq!(v["call_graph"]["order"], "caller", "{v}");
    let main = report_row(&v, "main");
    assert_eq!(main["children_weight"], 10);
    let t = &main["call_tree"];
    assert_eq!(
        shape(&t["nodes"][0]),
        "main 10 0 [alpha 6 0 [beta 6 6], gamma_fn 4 0 [beta 4 4]]"
    );
    check_sums(&t["nodes"][0], 10);
    // Every row's tree is of its inclusive samples.
    for r in v["rows"].as_array().unwrap() {
        let n = &r["call_tree"]["nodes"][0];
        assert_eq!(n["symbol"], r["symbol"], "{r}");
        assert_eq!(n["weight"], r["children_weight"], "{r}");
    }
    let alpha = report_row(&v, "alpha");
    assert_eq!(
        shape(&alpha["call_tree"]["nodes"][0]),
        "alpha 6 0 [beta 6 6]"
    );

    let out = run_tool(&[
        "report",
        "-i",
        &f,
        "--children",
        "-g",
        "caller",
        "-S",
        "main",
    ]);
    assert_eq!(
        tree_lines(&out, true),
        [
            "100.00% 0.00% main",
            "60.00% 0.00% |--alpha",
            "60.00% 60.00% |  beta",
            "40.00% 0.00% \\--gamma_fn",
            "40.00% 40.00%    beta",
        ],
        "{out}"
    );

    // Without --children, caller order is perf's inverted graph: the
    // row's own samples from the outermost caller down to it.
    let t = tree_of(&f, "beta", &["-g", "caller"]);
    assert_eq!(
        t["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .map(shape)
            .collect::<Vec<_>>(),
        ["main 10 0 [alpha 6 0 [beta 6 6], gamma_fn 4 0 [beta 4 4]]"]
    );
    // With --children, callee order: every sample with the function in
    // its stack, up to its callers.
    let t = tree_of(&f, "alpha", &["--children", "-g", "callee"]);
    assert_eq!(shape(&t["nodes"][0]), "alpha 6 0 [main 6 6]");
}

#[test]
fn threshold_hides_small_branches_and_says_how_much() {
    let (_d, f) = two_paths();
    let t = tree_of(&f, "beta", &["-g", "callee,50"]);
    assert_eq!(
        shape(&t["nodes"][0]),
        "beta 10 0 [alpha 6 0 [main 6 6]] (hidden 1 4)"
    );
    assert_eq!(t["nodes"][0]["hidden"]["percent"], 40.0);
    check_sums(&t["nodes"][0], 10);
    let out = run_tool(&["report", "-i", &f, "-g", "callee,50%"]);
    assert_eq!(
        tree_lines(&out, false),
        [
            "100.00% beta",
            "60.00% |--alpha",
            "60.00% |  main",
            "40.00% \\--[1 branch under 50.00% hidden]",
        ],
        "{out}"
    );
    assert!(
        out.contains("branches under 50.00% hidden (-g callee,0 shows them)"),
        "{out}"
    );
    // --percent-limit is the trees' threshold too, unless -g gives one.
    let t = tree_of(&f, "beta", &["-g", "--percent-limit", "50"]);
    assert_eq!(t["nodes"][0]["hidden"]["weight"], 4, "{t}");
    let t = tree_of(&f, "beta", &["-g", "callee,0", "--percent-limit", "50"]);
    assert!(t["nodes"][0]["hidden"].is_null(), "{t}");
    // A row under the threshold: its whole tree is hidden, and said so.
    let (_d2, f2) = recording(&stream(
        &[(999, "alpha", &["main"]), (1, "beta", &["main"])],
        &[],
    ));
    let t = tree_of(&f2, "beta", &["-g"]);
    assert_eq!(t["nodes"].as_array().unwrap().len(), 0, "{t}");
    assert_eq!(t["hidden"]["weight"], 1, "{t}");
    let out = run_tool(&["report", "-i", &f2, "-g", "-S", "beta"]);
    assert_eq!(
        tree_lines(&out, false),
        ["0.10% [1 branch under 0.50% hidden]"],
        "{out}"
    );
}

#[test]
fn recursion_counts_once_in_rows_and_trees() {
    // main → alpha → beta → alpha → beta (sampled) 5 times, main → alpha
    // (sampled) 5 times.
    let (_d, f) = recording(&stream(
        &[
            (5, "beta", &["alpha", "beta", "alpha", "main"]),
            (5, "alpha", &["main"]),
        ],
        &[],
    ));
    let v = json(&run_tool(&[
        "report",
        "-i",
        &f,
        "--json",
        "--children",
        "-g",
        "caller,0",
    ]));
    let alpha = report_row(&v, "alpha");
    assert_eq!(alpha["children_weight"], 10, "{alpha}");
    // From alpha's outermost frame: its recursion is under it.
    let n = &alpha["call_tree"]["nodes"][0];
    assert_eq!(shape(n), "alpha 10 5 [beta 5 0 [alpha 5 0 [beta 5 5]]]");
    check_sums(n, 10);
    let beta = report_row(&v, "beta");
    assert_eq!(beta["children_weight"], 5, "{beta}");
    assert_eq!(
        shape(&beta["call_tree"]["nodes"][0]),
        "beta 5 0 [alpha 5 0 [beta 5 5]]"
    );
    // Callee order: from the innermost frame up.
    let t = tree_of(&f, "alpha", &["--children", "-g", "callee,0"]);
    assert_eq!(
        shape(&t["nodes"][0]),
        "alpha 10 0 [beta 5 0 [alpha 5 0 [main 5 5]], main 5 5]"
    );
    check_sums(&t["nodes"][0], 10);
}

#[test]
fn trees_cross_into_the_kernel_and_follow_the_filters() {
    // 3 kernel samples in __schedule ← do_syscall_64 ← entry_SYSCALL_64,
    // entered from gamma_fn ← main; 7 user samples in alpha ← main.
    let (_d, f) = recording(&stream(
        &[(7, "alpha", &["main"])],
        &[(
            3,
            0xffffffff81001410,
            &[0xffffffff81001010, 0xffffffff81001820],
            &["gamma_fn", "main"],
        )],
    ));
    let t = tree_of(&f, "main", &["--children", "-g"]);
    assert_eq!(
        shape(&t["nodes"][0]),
        "main 10 0 [alpha 7 7, gamma_fn 3 0 [entry_SYSCALL_64 3 0 [do_syscall_64 3 0 [__schedule 3 3]]]]"
    );
    // The binary is named where the path changes binary.
    let out = run_tool(&["report", "-i", &f, "--children", "-g", "-S", "main"]);
    let lines = tree_lines(&out, true);
    assert!(
        lines.contains(&"30.00% 0.00%    entry_SYSCALL_64  ([kernel.kallsyms])".to_string()),
        "{out}"
    );
    assert!(
        lines.contains(&"30.00% 0.00%    do_syscall_64".to_string()),
        "{out}"
    );
    // --dsos keeps the samples taken in the kernel: main's tree is theirs,
    // and its percentages are of them.
    let t = tree_of(
        &f,
        "main",
        &["--children", "-g", "--dsos", "[kernel.kallsyms]"],
    );
    let n = &t["nodes"][0];
    assert_eq!(
        shape(n),
        "main 3 0 [gamma_fn 3 0 [entry_SYSCALL_64 3 0 [do_syscall_64 3 0 [__schedule 3 3]]]]"
    );
    assert_eq!(n["percent"], 100.0);
    check_sums(n, 3);
    // Rows by process: the tree is of all its samples.
    let v = json(&run_tool(&[
        "report", "-i", &f, "--json", "--sort", "pid", "-g", "caller",
    ]));
    let n = &v["rows"][0]["call_tree"]["nodes"][0];
    assert_eq!(n["symbol"], "main", "{v}");
    assert_eq!(n["weight"], 10, "{v}");
}

#[test]
fn the_default_report_says_stacks_were_recorded() {
    let (_d, f) = two_paths();
    let out = run_tool(&["report", "-i", &f]);
    assert!(
        out.contains(
            "# call stacks recorded (10 of 10 samples): -g shows who calls each function, \
             --children -g what each one calls"
        ),
        "{out}"
    );
    let v = json(&run_tool(&["report", "-i", &f, "--json"]));
    assert_eq!(v["samples_with_stacks"], 10, "{v}");
    assert!(v.get("call_graph").is_none(), "{v}");
    // No stacks, no note.
    let (_d2, f2) = recording(&stream(&[(4, "alpha", &[])], &[]));
    let out = run_tool(&["report", "-i", &f2]);
    assert!(!out.contains("call stacks recorded"), "{out}");
    let v = json(&run_tool(&["report", "-i", &f2, "--json", "-g"]));
    assert_eq!(v["samples_with_stacks"], 0, "{v}");
    assert_eq!(
        shape(&report_row(&v, "alpha")["call_tree"]["nodes"][0]),
        "alpha 4 4"
    );
}

#[test]
fn bad_call_graph_settings_are_errors() {
    let (_d, f) = two_paths();
    for (arg, says) in [
        ("bogus", "is not an order"),
        ("flat", "only the graph print type"),
        ("caller,callee", "give one order"),
        ("200", "from 0 to 100"),
        ("0.5,10", "one threshold only"),
        ("address", "is not taken"),
        ("-1", ""),
    ] {
        let (ok, _, err) = run_tool_any(&["report", "-i", &f, &format!("--call-graph={arg}")]);
        assert!(!ok, "-g {arg} was taken");
        assert!(err.contains(says), "-g {arg}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    // perf's words that change nothing here are taken.
    let (ok, _, err) = run_tool_any(&[
        "report",
        "-i",
        &f,
        "-g",
        "graph,0.5,caller,function,percent",
    ]);
    assert!(ok, "{err}");
    // The old listing of direct callers and callees is --callers.
    let v = json(&run_tool(&["report", "-i", &f, "--json", "--callers"]));
    let beta = report_row(&v, "beta");
    assert_eq!(beta["callers"][0]["symbol"], "alpha", "{beta}");
    assert!(beta.get("call_tree").is_none(), "{beta}");
    // Both under a row: the tree, then the listing, then one blank line.
    let out = run_tool(&["report", "-i", &f, "-g", "--callers"]);
    let lines: Vec<&str> = out.lines().skip_while(|l| l.starts_with('#')).collect();
    let callers = lines.iter().position(|l| l.trim() == "callers:").unwrap();
    assert_eq!(lines[callers - 1], "    40.00%     main", "{out}");
    assert_eq!(lines.last(), Some(&""), "{out}");
    assert!(!lines[lines.len() - 2].is_empty(), "{out}");
}
