//! Issue 12, pprof: real mappings (start, limit, file offset, build-id),
//! line info with inlined functions, a `cpu/nanoseconds` value next to the
//! count. Decoded with pprof's own `profile.proto` (compiled at test time
//! by protox, read with prost-reflect), not with the tool's prost structs.

mod common;

use std::collections::HashMap;

use common::*;
use oprofile_stream::{Comm, Encoder, Header, Record, Sample};
use prost_reflect::{DynamicMessage, MessageDescriptor, ReflectMessage, Value};

fn schema() -> MessageDescriptor {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures");
    let fds = protox::compile(["profile.proto"], [dir]).expect("profile.proto compiles");
    let pool = prost_reflect::DescriptorPool::from_file_descriptor_set(fds).unwrap();
    pool.get_message_by_name("perftools.profiles.Profile")
        .unwrap()
}

/// Every field of every message is one the schema knows.
fn assert_no_unknown_fields(m: &DynamicMessage) {
    assert_eq!(
        m.unknown_fields().count(),
        0,
        "unknown fields in {}",
        m.descriptor().full_name()
    );
    for (_, v) in m.fields() {
        match v {
            Value::Message(m) => assert_no_unknown_fields(m),
            Value::List(l) => {
                for v in l {
                    if let Value::Message(m) = v {
                        assert_no_unknown_fields(m);
                    }
                }
            }
            _ => {}
        }
    }
}

fn u(m: &DynamicMessage, f: &str) -> u64 {
    match &*m.get_field_by_name(f).unwrap() {
        Value::U64(v) => *v,
        Value::I64(v) => *v as u64,
        Value::Bool(b) => *b as u64,
        v => panic!("{f}: {v:?}"),
    }
}

fn list(m: &DynamicMessage, f: &str) -> Vec<Value> {
    m.get_field_by_name(f).unwrap().as_list().unwrap().to_vec()
}

fn msgs(m: &DynamicMessage, f: &str) -> Vec<DynamicMessage> {
    list(m, f)
        .into_iter()
        .map(|v| v.as_message().unwrap().clone())
        .collect()
}

#[test]
fn pprof_has_mappings_lines_inlines_and_nanoseconds() {
    let dir = tempfile::tempdir().unwrap();
    let elf = build_inline(dir.path());
    let build_id: String = oprofile_tool::buildid::build_id(&std::fs::read(&elf).unwrap())
        .unwrap()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let maps = maps_for(&elf, elf.to_str().unwrap());
    // An address of outer inside the inlined inner, found by the resolver.
    let r = oprofile_tool::symbols::Resolver::new(
        None,
        HashMap::from([(PID, oprofile_tool::maps::parse_maps(&maps))]),
        None,
    );
    let (outer, size) = elf_sym(&elf, "_ZN2ns5outerEi");
    let inl = (0..size)
        .map(|d| BASE + outer + d)
        .find(|&a| !r.resolve(false, PID, a).inlined.is_empty())
        .expect("an inlined address");
    // 5 samples there, 2 at outer's entry; cpu-clock with a 250 µs period.
    let h = Header {
        sample_period: 250_000,
        ..Header::default()
    };
    let mut e = Encoder::new(&h);
    e.record(&Record::Comm(Comm::new(0, 1, PID, PID, "inline")));
    for (i, pc) in [inl; 5].into_iter().chain([BASE + outer; 2]).enumerate() {
        e.record(&Record::Sample(Sample {
            cpu: 0,
            kernel: false,
            time: 10 + i as u64,
            pc,
            pid: PID,
            tgid: PID,
            callchain: vec![],
            ..Default::default()
        }));
    }
    let file = write_recording(dir.path(), &e.finish(), &maps);
    let pb = dir.path().join("p.pb.gz");
    assert_cmd::Command::cargo_bin("oprofile-rs")
        .unwrap()
        .args([
            "pprof",
            "-q",
            "-i",
            file.to_str().unwrap(),
            "-o",
            pb.to_str().unwrap(),
        ])
        .assert()
        .success();
    let mut raw = Vec::new();
    std::io::Read::read_to_end(
        &mut flate2::read::GzDecoder::new(&*std::fs::read(&pb).unwrap()),
        &mut raw,
    )
    .unwrap();
    let p = DynamicMessage::decode(schema(), raw.as_slice()).unwrap();
    assert_no_unknown_fields(&p);
    let strings: Vec<String> = list(&p, "string_table")
        .into_iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    let st = |i: u64| strings[i as usize].as_str();
    assert_eq!(st(0), "");
    // Sample types: the count, then CPU time.
    let types: Vec<(&str, &str)> = msgs(&p, "sample_type")
        .iter()
        .map(|t| (st(u(t, "type")), st(u(t, "unit"))))
        .collect();
    assert_eq!(types, [("samples", "count"), ("cpu", "nanoseconds")]);
    assert_eq!(st(u(&p, "default_sample_type")), "cpu");
    let mut values: Vec<(i64, i64)> = msgs(&p, "sample")
        .iter()
        .map(|s| {
            let v = list(s, "value");
            (v[0].as_i64().unwrap(), v[1].as_i64().unwrap())
        })
        .collect();
    values.sort();
    assert_eq!(values, [(2, 500_000), (5, 1_250_000)]);
    // The mapping: the maps' range and offset, the file, its build-id.
    let mappings = msgs(&p, "mapping");
    assert_eq!(mappings.len(), 1);
    let m = &mappings[0];
    let text_map = oprofile_tool::maps::parse_maps(&maps)
        .into_iter()
        .find(|e| e.start <= inl && inl < e.end)
        .unwrap();
    assert_eq!(u(m, "memory_start"), text_map.start);
    assert_eq!(u(m, "memory_limit"), text_map.end);
    assert_eq!(u(m, "file_offset"), text_map.offset);
    assert_eq!(st(u(m, "filename")), elf.to_str().unwrap());
    assert_eq!(st(u(m, "build_id")), build_id);
    for flag in [
        "has_functions",
        "has_filenames",
        "has_line_numbers",
        "has_inline_frames",
    ] {
        assert_eq!(u(m, flag), 1, "{flag}");
    }
    // Locations: the inlined one has two lines, inner first, with source
    // lines; every address lies in its mapping.
    let functions: HashMap<u64, (String, String)> = msgs(&p, "function")
        .iter()
        .map(|f| {
            (
                u(f, "id"),
                (
                    st(u(f, "name")).to_string(),
                    st(u(f, "filename")).to_string(),
                ),
            )
        })
        .collect();
    let locs = msgs(&p, "location");
    assert_eq!(locs.len(), 2);
    for l in &locs {
        let a = u(l, "address");
        assert!(a >= u(m, "memory_start") && a < u(m, "memory_limit"));
        assert_eq!(u(l, "mapping_id"), u(m, "id"));
        let lines: Vec<(String, String, u64)> = msgs(l, "line")
            .iter()
            .map(|ln| {
                let (name, file) = functions[&u(ln, "function_id")].clone();
                (name, file, u(ln, "line"))
            })
            .collect();
        for (_, file, line) in &lines {
            assert!(file.ends_with("inline.cc"), "{lines:?}");
            assert!(*line > 0, "{lines:?}");
        }
        if a == inl {
            assert_eq!(lines.len(), 2, "{lines:?}");
            assert!(lines[0].0.contains("inner"), "{lines:?}");
            assert_eq!(lines[1].0, "ns::outer(int)");
            assert_eq!(lines[1].2, inline_line_of("CALL-LINE") as u64);
        } else {
            assert_eq!(lines.len(), 1, "{lines:?}");
            assert_eq!(lines[0].0, "ns::outer(int)");
        }
    }
}
