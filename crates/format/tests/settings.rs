//! The table of settings (`SETTINGS` in `src/format.rs`) is the one
//! definition of the module's settings: these tests check what cannot be
//! derived from it at build time against it.
//! - The load parameters and their defaults, as `src/oprofile.rs` (the
//!   `module!` parameters) and `src/shims/glue.c` (the string parameters)
//!   declare them.
//! - The debugfs files, as `src/control/debugfs.rs` names them (its build
//!   also checks them against `CONFIG_KEYS`).
//! - The documentation's table of settings in `Documentation/design.md`,
//!   which must be the table rendered here (the failure prints it).
use std::collections::BTreeMap;
use std::path::Path;

use oprofile_format::{Setting, CONFIG_KEYS, SETTINGS};

fn repo_file(rel: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `name -> default` of the `module!` parameters of `src/oprofile.rs`
/// (booleans as 0 and 1, as the `config` text shows them).
fn module_params() -> BTreeMap<String, String> {
    let src = repo_file("src/oprofile.rs");
    let block = &src[src.find("    params: {").expect("module! has params")..];
    let mut out = BTreeMap::new();
    let mut name = None;
    for line in block.lines().skip(1) {
        let l = line.trim();
        if l == "}," && name.is_none() {
            break;
        }
        if let Some((n, ty)) = l.strip_suffix('{').and_then(|l| l.split_once(':')) {
            assert!(matches!(ty.trim(), "u64" | "bool" | "u32"), "{l}");
            name = Some(n.trim().to_string());
        } else if let (Some(n), Some(v)) = (&name, l.strip_prefix("default:")) {
            let v = v.trim().trim_end_matches(',');
            let v = match v {
                "false" => "0",
                "true" => "1",
                v => v,
            };
            out.insert(n.clone(), v.to_string());
        } else if l == "}," {
            name = None;
        }
    }
    out
}

/// `name -> default` of the string parameters of `src/shims/glue.c`
/// (`static char *NAME = "DEFAULT";` then `module_param(NAME, charp, ...)`).
fn glue_params() -> BTreeMap<String, String> {
    let src = repo_file("src/shims/glue.c");
    let mut out = BTreeMap::new();
    let lines: Vec<&str> = src.lines().collect();
    for (i, l) in lines.iter().enumerate() {
        let Some(rest) = l.strip_prefix("static char *") else {
            continue;
        };
        let Some((name, value)) = rest.split_once(" = \"") else {
            continue;
        };
        let Some(value) = value.strip_suffix("\";") else {
            continue;
        };
        let declared = lines
            .get(i + 1)
            .is_some_and(|n| n.starts_with(&format!("module_param({name}, charp,")));
        assert!(
            declared,
            "glue.c: {name} is not followed by its module_param()"
        );
        out.insert(name.to_string(), value.to_string());
    }
    out
}

#[test]
fn the_load_parameters_and_their_defaults_are_the_tables() {
    let mut declared = module_params();
    let strings = glue_params();
    assert!(
        declared.len() >= 9 && strings.len() >= 5,
        "{declared:?} {strings:?}"
    );
    for (k, v) in strings {
        assert!(
            declared.insert(k.clone(), v).is_none(),
            "{k} declared twice"
        );
    }
    let table: BTreeMap<String, String> = SETTINGS
        .iter()
        .filter(|s| s.load_param)
        .map(|s| (s.key.to_string(), s.default.to_string()))
        .collect();
    assert_eq!(
        declared, table,
        "load parameters (left: declared in the module; right: SETTINGS)"
    );
}

#[test]
fn the_debugfs_files_are_the_keys() {
    let src = repo_file("src/control/debugfs.rs");
    let list = &src[src.find("const KEY_FILES").expect("KEY_FILES")..];
    let list = &list[..list.find("];").expect("end of KEY_FILES")];
    let files: Vec<&str> = list
        .split("c\"")
        .skip(1)
        .map(|s| &s[..s.find('"').unwrap()])
        .collect();
    assert_eq!(files, CONFIG_KEYS);
    assert_eq!(
        src.matches("key_file::<").count(),
        CONFIG_KEYS.len(),
        "one key_file::<K>() per key"
    );
}

#[test]
fn a_number_settings_default_is_in_its_range() {
    for s in SETTINGS {
        if let Some((lo, hi)) = s.range {
            let v: u64 = s
                .default
                .parse()
                .unwrap_or_else(|_| panic!("{}: default {:?}", s.key, s.default));
            assert!(lo <= v && v <= hi, "{}: {v} not in {lo}..{hi}", s.key);
        }
    }
}

/// A number as the documentation writes it: `64 KiB`, `1 MiB`, else plain.
fn amount(v: u64) -> String {
    match v {
        v if v >= 1 << 20 && v % (1 << 20) == 0 => format!("{} MiB", v >> 20),
        v if v >= 1 << 10 && v % (1 << 10) == 0 => format!("{} KiB", v >> 10),
        v => v.to_string(),
    }
}

fn row(s: &Setting) -> String {
    let default = match (s.default, s.default_means) {
        ("", "") => "empty".to_string(),
        ("", m) => format!("empty: {m}"),
        (d, "") => format!("`{d}`"),
        (d, m) => format!("`{d}`: {m}"),
    };
    let values = match s.range {
        Some((lo, hi)) => format!("{} .. {}: {}", amount(lo), amount(hi), s.values),
        None => s.values.to_string(),
    };
    let load = if s.load_param { "yes" } else { "no" };
    format!(
        "| `{}` | {default} | {values} | {load} | {} |",
        s.key,
        s.apply.describe()
    )
}

/// The documentation's table, as the table of settings renders it.
fn rendered() -> String {
    let mut t = String::from(
        "| setting | default | values | load parameter | a change at run time |\n|---|---|---|---|---|\n",
    );
    for s in SETTINGS {
        t.push_str(&row(&s));
        t.push('\n');
    }
    t
}

#[test]
fn design_md_has_the_table_of_settings() {
    let doc = repo_file("Documentation/design.md");
    let want = rendered();
    assert!(
        doc.contains(&want),
        "Documentation/design.md does not hold the table of settings as src/format.rs defines it; \
         its table should read:\n\n{want}"
    );
}
