//! Issue 35 item 4 (a): the Firefox Profiler output names its libraries
//! (path, build-id) and places native frames at addresses relative to them,
//! as samply writes them; and it holds every field the processed profile
//! format (the version it declares, 55) requires.

// The tables are parallel columns, read row by row.
#![allow(clippy::needless_range_loop, clippy::type_complexity)]

mod common;

use std::collections::HashMap;

use common::*;
use oprofile_stream::{Comm, Encoder, Header, Record, Sample};
use serde_json::Value;

// ------------------------------------------------------------------ the format

/// The category colours of the format (`CategoryColor`).
const COLORS: &[&str] = &[
    "transparent",
    "purple",
    "green",
    "orange",
    "yellow",
    "lightblue",
    "blue",
    "brown",
    "magenta",
    "red",
    "lightred",
    "darkgray",
    "grey",
];

fn obj<'a>(v: &'a Value, what: &str) -> &'a serde_json::Map<String, Value> {
    v.as_object()
        .unwrap_or_else(|| panic!("{what}: not an object: {v}"))
}

fn field<'a>(v: &'a Value, what: &str, name: &str) -> &'a Value {
    obj(v, what)
        .get(name)
        .unwrap_or_else(|| panic!("{what}.{name} missing"))
}

fn num(v: &Value, what: &str, name: &str) -> f64 {
    field(v, what, name)
        .as_f64()
        .unwrap_or_else(|| panic!("{what}.{name}: not a number"))
}

fn string_field<'a>(v: &'a Value, what: &str, name: &str) -> &'a str {
    field(v, what, name)
        .as_str()
        .unwrap_or_else(|| panic!("{what}.{name}: not a string"))
}

/// A table (struct of arrays): its `length`, and each column an array of
/// that length.
fn table<'a>(v: &'a Value, what: &str, columns: &[&str]) -> (usize, HashMap<String, &'a [Value]>) {
    let len = num(v, what, "length") as usize;
    let mut cols = HashMap::new();
    for c in columns {
        let col = field(v, what, c)
            .as_array()
            .unwrap_or_else(|| panic!("{what}.{c}: not an array"));
        assert_eq!(
            col.len(),
            len,
            "{what}.{c}: {} rows, length {len}",
            col.len()
        );
        cols.insert(c.to_string(), col.as_slice());
    }
    (len, cols)
}

/// An index into a table of `len` rows (or, where `null_ok`, null; where
/// `minus_one_ok`, -1).
fn index(v: &Value, len: usize, what: &str, null_ok: bool, minus_one_ok: bool) {
    match v {
        Value::Null if null_ok => {}
        Value::Number(n) if minus_one_ok && n.as_i64() == Some(-1) => {}
        Value::Number(n) => {
            let i = n
                .as_u64()
                .unwrap_or_else(|| panic!("{what}: {n} is no index"));
            assert!((i as usize) < len, "{what}: {i} past {len} rows");
        }
        v => panic!("{what}: {v} is no index"),
    }
}

/// Checks `p` against the processed profile format's types of version 55
/// (`src/types/profile.js` of the Firefox Profiler when
/// `PROCESSED_PROFILE_VERSION` was 55): the fields its `Profile`,
/// `ProfileMeta`, `Lib`, `RawThread` and tables require, with their types,
/// every column as long as its table, every index within its table.
fn validate_processed_profile(p: &Value) {
    let meta = field(p, "profile", "meta");
    for n in ["interval", "startTime", "processType", "version"] {
        num(meta, "meta", n);
    }
    assert_eq!(num(meta, "meta", "preprocessedProfileVersion"), 55.0);
    string_field(meta, "meta", "product");
    let stackwalk = num(meta, "meta", "stackwalk");
    assert!(
        stackwalk == 0.0 || stackwalk == 1.0,
        "meta.stackwalk {stackwalk}"
    );
    assert!(field(meta, "meta", "markerSchema").is_array());
    // Categories (optional in the type, but the profiler needs a grey one
    // as the default category since version 53, each with a first
    // subcategory).
    let cats = field(meta, "meta", "categories").as_array().unwrap();
    assert!(
        cats.iter().any(|c| c["color"] == "grey"),
        "no grey category"
    );
    let mut subcats = Vec::new();
    for c in cats {
        string_field(c, "category", "name");
        let color = string_field(c, "category", "color");
        assert!(COLORS.contains(&color), "colour {color}");
        let subs = field(c, "category", "subcategories").as_array().unwrap();
        assert!(!subs.is_empty() && subs.iter().all(Value::is_string));
        subcats.push(subs.len());
    }

    // Lib: strings, codeId and arch a string or null (the reference writer
    // writes null for an arch it does not know).
    let libs = field(p, "profile", "libs").as_array().unwrap();
    for l in libs {
        for n in ["name", "path", "debugName", "debugPath", "breakpadId"] {
            string_field(l, "lib", n);
        }
        for n in ["codeId", "arch"] {
            let v = field(l, "lib", n);
            assert!(v.is_string() || v.is_null(), "lib.{n}: {v}");
        }
    }

    let threads = field(p, "profile", "threads").as_array().unwrap();
    assert!(!threads.is_empty());
    for t in threads {
        let w = "thread";
        string_field(t, w, "processType");
        num(t, w, "processStartupTime");
        num(t, w, "registerTime");
        for n in ["processShutdownTime", "unregisterTime"] {
            let v = field(t, w, n);
            assert!(v.is_number() || v.is_null(), "{n}: {v}");
        }
        assert!(field(t, w, "pausedRanges").is_array());
        string_field(t, w, "name");
        assert!(field(t, w, "isMainThread").is_boolean());
        for n in ["pid", "tid"] {
            let v = field(t, w, n);
            assert!(v.is_string() || v.is_number(), "{n}: {v}");
        }
        let strings = field(t, w, "stringArray").as_array().unwrap();
        assert!(strings.iter().all(Value::is_string));
        let ns = strings.len();

        let (nres, res) = table(
            field(t, w, "resourceTable"),
            "resourceTable",
            &["lib", "name", "host", "type"],
        );
        for i in 0..nres {
            index(&res["lib"][i], libs.len(), "resource.lib", true, false);
            index(&res["name"][i], ns, "resource.name", false, false);
        }
        let (nsym, sym) = table(
            field(t, w, "nativeSymbols"),
            "nativeSymbols",
            &["libIndex", "address", "name", "functionSize"],
        );
        for i in 0..nsym {
            index(
                &sym["libIndex"][i],
                libs.len(),
                "nativeSymbols.libIndex",
                false,
                false,
            );
            index(&sym["name"][i], ns, "nativeSymbols.name", false, false);
            assert!(sym["address"][i].is_u64());
            assert!(sym["functionSize"][i].is_u64() || sym["functionSize"][i].is_null());
        }
        let (nfunc, func) = table(
            field(t, w, "funcTable"),
            "funcTable",
            &[
                "name",
                "isJS",
                "relevantForJS",
                "resource",
                "fileName",
                "lineNumber",
                "columnNumber",
            ],
        );
        for i in 0..nfunc {
            index(&func["name"][i], ns, "func.name", false, false);
            index(&func["resource"][i], nres, "func.resource", false, true);
            index(&func["fileName"][i], ns, "func.fileName", true, false);
            assert!(func["isJS"][i].is_boolean() && func["relevantForJS"][i].is_boolean());
        }
        let (nframe, frame) = table(
            field(t, w, "frameTable"),
            "frameTable",
            &[
                "address",
                "inlineDepth",
                "category",
                "subcategory",
                "func",
                "nativeSymbol",
                "innerWindowID",
                "line",
                "column",
            ],
        );
        for i in 0..nframe {
            let a = &frame["address"][i];
            assert!(a.is_u64() || a.as_i64() == Some(-1), "frame address {a}");
            assert!(frame["inlineDepth"][i].is_u64());
            index(&frame["func"][i], nfunc, "frame.func", false, false);
            index(
                &frame["nativeSymbol"][i],
                nsym,
                "frame.nativeSymbol",
                true,
                false,
            );
            let cat = &frame["category"][i];
            index(cat, cats.len(), "frame.category", true, false);
            if let Some(c) = cat.as_u64() {
                index(
                    &frame["subcategory"][i],
                    subcats[c as usize],
                    "frame.subcategory",
                    false,
                    false,
                );
            }
        }
        let (nstack, stack) = table(
            field(t, w, "stackTable"),
            "stackTable",
            &["frame", "prefix"],
        );
        for i in 0..nstack {
            index(&stack["frame"][i], nframe, "stack.frame", false, false);
            // Parents come first.
            index(&stack["prefix"][i], i, "stack.prefix", true, false);
        }
        let samples = field(t, w, "samples");
        let (nsamples, s) = table(samples, "samples", &["stack"]);
        for i in 0..nsamples {
            index(&s["stack"][i], nstack, "sample.stack", true, false);
        }
        let times = obj(samples, "samples")
            .get("time")
            .or_else(|| obj(samples, "samples").get("timeDeltas"))
            .expect("samples.time or samples.timeDeltas");
        assert_eq!(times.as_array().unwrap().len(), nsamples);
        let weight = field(samples, "samples", "weight");
        assert!(weight.is_null() || weight.as_array().unwrap().len() == nsamples);
        let wt = string_field(samples, "samples", "weightType");
        assert!(["samples", "tracing-ms", "bytes"].contains(&wt), "{wt}");
        table(
            field(t, w, "markers"),
            "markers",
            &["data", "name", "startTime", "endTime", "phase", "category"],
        );
    }
}

// ------------------------------------------------------------------ the test

/// The Breakpad id of a build-id, written here from its definition: the
/// first 16 bytes, the first three GUID fields byte-swapped (little-endian
/// ELF), in upper-case hex, then the age 0.
fn breakpad_of(build_id: &[u8]) -> String {
    let mut g = [0u8; 16];
    g.copy_from_slice(&build_id[..16]);
    g[0..4].reverse();
    g[4..6].reverse();
    g[6..8].reverse();
    let hex: String = g.iter().map(|b| format!("{b:02X}")).collect();
    format!("{hex}0")
}

/// The lowest virtual address of the ELF file's PT_LOAD segments.
fn first_load_vaddr(elf: &std::path::Path) -> u64 {
    use object::read::elf::ProgramHeader;
    let data = std::fs::read(elf).unwrap();
    let f = object::read::elf::ElfFile64::<object::Endianness>::parse(&*data).unwrap();
    let e = f.endian();
    f.elf_program_headers()
        .iter()
        .filter(|ph| ph.p_type(e) == object::elf::PT_LOAD)
        .map(|ph| ph.p_vaddr(e))
        .min()
        .unwrap()
}

#[test]
fn firefox_profile_has_libraries_and_relative_addresses() {
    let dir = tempfile::tempdir().unwrap();
    let elf = build_inline(dir.path());
    let raw_id = oprofile_tool::buildid::build_id(&std::fs::read(&elf).unwrap()).unwrap();
    let build_id: String = raw_id.iter().map(|b| format!("{b:02x}")).collect();
    let maps = maps_for(&elf, elf.to_str().unwrap());
    let base = first_load_vaddr(&elf);
    let (outer, outer_size) = elf_sym(&elf, "_ZN2ns5outerEi");
    let r = oprofile_tool::symbols::Resolver::new(
        None,
        HashMap::from([(PID, oprofile_tool::maps::parse_maps(&maps))]),
        None,
    );
    // An address of outer inside the inlined inner.
    let inl = (0..outer_size)
        .map(|d| BASE + outer + d)
        .find(|&a| !r.resolve(false, PID, a).inlined.is_empty())
        .expect("an inlined address");
    // In the kernel (common::KALLSYMS): __schedule + 0x10 called from
    // do_syscall_64 + 0x10; in the module: opr_drain + 0x10.
    let (sched, syscall, drain) = (
        0xffff_ffff_8100_1410,
        0xffff_ffff_8100_1010,
        0xffff_ffff_c010_0210,
    );
    let mut e = Encoder::new(&Header {
        sample_period: 250_000,
        ..Header::default()
    });
    e.record(&Record::Comm(Comm::new(0, 1, PID, PID, "inline")));
    let samples: [(bool, u64, Vec<u64>); 4] = [
        (false, inl, vec![]),
        (false, BASE + outer, vec![]),
        (true, sched, vec![syscall]),
        (true, drain, vec![]),
    ];
    for (i, (kernel, pc, chain)) in samples.into_iter().enumerate() {
        e.record(&Record::Sample(Sample {
            kernel,
            time: 10 + i as u64,
            pc,
            pid: PID,
            tgid: PID,
            callchain: chain,
            ..Default::default()
        }));
    }
    let file = write_recording(dir.path(), &e.finish(), &maps);
    let out = dir.path().join("p.json");
    run_tool(&[
        "firefox",
        "-q",
        "-i",
        file.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    let p: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    validate_processed_profile(&p);

    // The libraries: the ELF file with its build-id, the kernel, the module.
    let libs = p["libs"].as_array().unwrap();
    let lib_named = |name: &str| {
        libs.iter()
            .position(|l| l["name"] == name)
            .unwrap_or_else(|| panic!("no lib {name} in {libs:?}"))
    };
    let user_lib = lib_named("inline");
    let l = &libs[user_lib];
    assert_eq!(l["path"], elf.to_str().unwrap());
    assert_eq!(l["debugPath"], elf.to_str().unwrap());
    assert_eq!(l["debugName"], "inline");
    assert_eq!(l["codeId"], build_id.as_str());
    assert_eq!(l["breakpadId"], breakpad_of(&raw_id).as_str());
    let kernel_lib = lib_named("[kernel.kallsyms]");
    let module_lib = lib_named("[oprofile]");
    assert_eq!(libs.len(), 3, "{libs:?}");

    // Every frame: (its lib, its address there, its function, its native
    // symbol's (lib, address, size, name)).
    let t = &p["threads"][0];
    let strings = t["stringArray"].as_array().unwrap();
    let s = |v: &Value| {
        strings[v.as_u64().unwrap() as usize]
            .as_str()
            .unwrap()
            .to_string()
    };
    let ft = &t["frameTable"];
    let func = &t["funcTable"];
    let res = &t["resourceTable"];
    let ns = &t["nativeSymbols"];
    let frames: Vec<(
        Option<usize>,
        i64,
        String,
        Option<(usize, u64, u64, String)>,
    )> = (0..ft["length"].as_u64().unwrap() as usize)
        .map(|i| {
            let f = ft["func"][i].as_u64().unwrap() as usize;
            let lib = match func["resource"][f].as_i64().unwrap() {
                -1 => None,
                r => Some(res["lib"][r as usize].as_u64().unwrap() as usize),
            };
            let sym = ft["nativeSymbol"][i].as_u64().map(|n| {
                let n = n as usize;
                (
                    ns["libIndex"][n].as_u64().unwrap() as usize,
                    ns["address"][n].as_u64().unwrap(),
                    ns["functionSize"][n].as_u64().unwrap(),
                    s(&ns["name"][n]),
                )
            });
            (
                lib,
                ft["address"][i].as_i64().unwrap(),
                s(&func["name"][f]),
                sym,
            )
        })
        .collect();
    let at = |lib: usize, addr: u64| {
        frames
            .iter()
            .find(|f| f.0 == Some(lib) && f.1 == addr as i64)
            .unwrap_or_else(|| panic!("no frame at {lib}:{addr:#x} in {frames:#?}"))
    };
    // User frames: the ELF's virtual address less its first segment's;
    // the symbol outer with its ELF start and size.
    let outer_sym = Some((
        user_lib,
        outer - base,
        outer_size,
        "ns::outer(int)".to_string(),
    ));
    for pc in [inl, BASE + outer] {
        let f = at(user_lib, pc - BASE - base);
        assert_eq!((&f.2, &f.3), (&"ns::outer(int)".to_string(), &outer_sym));
    }
    // The inlined function follows the frame at that address, a label.
    assert!(
        frames.iter().any(|f| f.0.is_none()
            && f.1 == -1
            && f.2.contains("inner")
            && f.2.ends_with(" (inline)")),
        "{frames:#?}"
    );
    // Kernel frames: relative to _text, the symbols up to the next one;
    // the module's relative to its start, its last symbol to the module's
    // end (16384 bytes).
    let f = at(kernel_lib, 0x1410);
    assert_eq!(f.3, Some((kernel_lib, 0x1400, 0x400, "__schedule".into())));
    let f = at(kernel_lib, 0x1010);
    assert_eq!(
        f.3,
        Some((kernel_lib, 0x1000, 0x400, "do_syscall_64".into()))
    );
    let f = at(module_lib, 0x210);
    assert_eq!(
        f.3,
        Some((module_lib, 0x200, 16384 - 0x200, "opr_drain".into()))
    );
    // Every frame with an address is in a lib and a symbol of it.
    for f in &frames {
        assert_eq!(f.1 >= 0, f.0.is_some(), "{f:?}");
        if let (Some(lib), Some(sym)) = (f.0, &f.3) {
            assert_eq!(sym.0, lib);
            assert!(sym.1 <= f.1 as u64 && (f.1 as u64) < sym.1 + sym.2, "{f:?}");
            assert_eq!(sym.3, f.2);
        }
    }
}

#[test]
fn the_check_catches_a_broken_profile() {
    // The validator is no rubber stamp: each fault it is written for fails.
    let v = victim();
    let dir = tempfile::tempdir().unwrap();
    let file = write_recording(dir.path(), &synthetic_stream(v), &fake_maps(v, &v.path));
    let out = dir.path().join("p.json");
    run_tool(&[
        "firefox",
        "-q",
        "-i",
        file.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    let good: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    validate_processed_profile(&good);
    let breakages: [(&str, fn(&mut Value)); 5] = [
        ("no stackwalk", |p| {
            p["meta"].as_object_mut().unwrap().remove("stackwalk");
        }),
        ("a lib without breakpadId", |p| {
            p["libs"][0].as_object_mut().unwrap().remove("breakpadId");
        }),
        ("a short column", |p| {
            p["threads"][0]["frameTable"]["address"]
                .as_array_mut()
                .unwrap()
                .pop();
        }),
        ("a resource past the table", |p| {
            p["threads"][0]["funcTable"]["resource"][0] = 99.into();
        }),
        ("a stack before its prefix", |p| {
            p["threads"][0]["stackTable"]["prefix"][0] = 0.into();
        }),
    ];
    for (what, brk) in breakages {
        let mut p = good.clone();
        brk(&mut p);
        let r = std::panic::catch_unwind(|| validate_processed_profile(&p));
        assert!(r.is_err(), "{what}: taken");
    }
}
