//! `include/uapi/oprofile_rs.h` says what `src/format.rs` says: the test
//! compiles a C program that includes the header and prints every constant,
//! structure size and field (offset and size) it defines, then checks each
//! constant against the Rust definition and each field against the bytes
//! the module's own encoders write there.
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use oprofile_format::*;

fn header_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../include/uapi/oprofile_rs.h")
}

/// The constants the header must define, with their Rust values.
fn constants() -> Vec<(&'static str, u64)> {
    vec![
        ("OPROFILE_RS_MAGIC_LEN", MAGIC.len() as u64),
        ("OPROFILE_RS_VERSION", VERSION.into()),
        ("OPROFILE_RS_MIN_VERSION", MIN_VERSION.into()),
        ("OPROFILE_RS_HEADER_LEN", HEADER_LEN as u64),
        ("OPROFILE_RS_MIN_HEADER_LEN", MIN_HEADER_LEN as u64),
        ("OPROFILE_RS_WORD_SIZE", WORD_SIZE.into()),
        ("OPROFILE_RS_ENDIAN_LITTLE", Endian::Little.code().into()),
        ("OPROFILE_RS_ENDIAN_BIG", Endian::Big.code().into()),
        ("OPROFILE_RS_CLOCK_LOCAL", CLOCK_LOCAL.into()),
        ("OPROFILE_RS_SOURCE_HARDWARE", SOURCE_HARDWARE.into()),
        ("OPROFILE_RS_SOURCE_SOFTWARE", SOURCE_SOFTWARE.into()),
        ("OPROFILE_RS_EVENT_NAME_LEN", EVENT_NAME_LEN as u64),
        ("OPROFILE_RS_SAMPLE", SAMPLE.into()),
        ("OPROFILE_RS_COMM", COMM.into()),
        ("OPROFILE_RS_LOST", LOST.into()),
        ("OPROFILE_RS_TRACING", TRACING.into()),
        ("OPROFILE_RS_CONFIG", CONFIG.into()),
        ("OPROFILE_RS_SNAPSHOT", SNAPSHOT.into()),
        ("OPROFILE_RS_SWITCH", SWITCH.into()),
        ("OPROFILE_RS_SWITCH_LEN", SWITCH_LEN as u64),
        (
            "OPROFILE_RS_SWITCH_FLAG_RUN_DELAY",
            SWITCH_FLAG_RUN_DELAY.into(),
        ),
        (
            "OPROFILE_RS_SWITCH_PREEMPTED",
            SwitchReason::Preempted.code().into(),
        ),
        (
            "OPROFILE_RS_SWITCH_SLEEP",
            SwitchReason::Sleep.code().into(),
        ),
        (
            "OPROFILE_RS_SWITCH_BLOCKED",
            SwitchReason::Blocked.code().into(),
        ),
        ("OPROFILE_RS_SWITCH_EXIT", SwitchReason::Exit.code().into()),
        (
            "OPROFILE_RS_SWITCH_STOPPED",
            SwitchReason::Stopped.code().into(),
        ),
        (
            "OPROFILE_RS_SWITCH_OTHER",
            SwitchReason::Other.code().into(),
        ),
        ("OPROFILE_RS_SWITCH_IDLE", SwitchReason::Idle.code().into()),
        ("OPROFILE_RS_RECORD_ALIGN", RECORD_ALIGN as u64),
        ("OPROFILE_RS_SAMPLE_FLAG_KERNEL", SAMPLE_FLAG_KERNEL.into()),
        ("OPROFILE_RS_SAMPLE_FLAG_EXT", SAMPLE_FLAG_EXT.into()),
        (
            "OPROFILE_RS_SAMPLE_FLAG_THROTTLED",
            SAMPLE_FLAG_THROTTLED.into(),
        ),
        (
            "OPROFILE_RS_SAMPLE_FLAG_USER_STACK",
            SAMPLE_FLAG_USER_STACK.into(),
        ),
        ("OPROFILE_RS_SAMPLE_LEN", SAMPLE_LEN as u64),
        ("OPROFILE_RS_SAMPLE_EXT_LEN", SAMPLE_EXT_LEN as u64),
        ("OPROFILE_RS_MAX_DEPTH", MAX_DEPTH as u64),
        ("OPROFILE_RS_MAX_USER_DEPTH", MAX_USER_DEPTH as u64),
        ("OPROFILE_RS_MAX_USER_STACK", MAX_USER_STACK as u64),
        (
            "OPROFILE_RS_USER_STACK_REGS_LEN",
            USER_STACK_REGS_LEN as u64,
        ),
        ("OPROFILE_RS_COMM_LEN", COMM_LEN as u64),
        ("OPROFILE_RS_COMM_NAME_LEN", COMM_NAME_LEN as u64),
        ("OPROFILE_RS_LOST_LEN", LOST_LEN as u64),
        ("OPROFILE_RS_TRACING_LEN", TRACING_LEN as u64),
        ("OPROFILE_RS_CONFIG_LEN", CONFIG_LEN as u64),
        ("OPROFILE_RS_CONFIG_EXT_LEN", CONFIG_EXT_LEN as u64),
        ("OPROFILE_RS_EVENT_DESC_LEN", EVENT_DESC_LEN as u64),
        (
            "OPROFILE_RS_EVENT_DESC_NAME_LEN",
            EVENT_DESC_NAME_LEN as u64,
        ),
        ("OPROFILE_RS_MAX_EVENTS", MAX_EVENTS as u64),
        ("OPROFILE_RS_MODE_CONSUME", MODE_CONSUME.into()),
        ("OPROFILE_RS_MODE_OVERWRITE", MODE_OVERWRITE.into()),
        ("OPROFILE_RS_EVENT_FLAG_FREQ", EVENT_FLAG_FREQ.into()),
        (
            "OPROFILE_RS_EVENT_FLAG_EXCLUDE_USER",
            EVENT_FLAG_EXCLUDE_USER.into(),
        ),
        (
            "OPROFILE_RS_EVENT_FLAG_EXCLUDE_KERNEL",
            EVENT_FLAG_EXCLUDE_KERNEL.into(),
        ),
        ("OPROFILE_RS_EVENT_FLAG_NMI", EVENT_FLAG_NMI.into()),
        ("OPROFILE_RS_SNAPSHOT_LEN", SNAPSHOT_LEN as u64),
        ("OPROFILE_RS_IOC_MAGIC", ioctl::MAGIC.into()),
        ("OPROFILE_RS_IOC_TRACING_ON", ioctl::TRACING_ON.into()),
        ("OPROFILE_RS_IOC_TRACING_OFF", ioctl::TRACING_OFF.into()),
        ("OPROFILE_RS_IOC_FLUSH", ioctl::FLUSH.into()),
        ("OPROFILE_RS_IOC_GET_TRACING", ioctl::GET_TRACING.into()),
        ("OPROFILE_RS_IOC_CONSUME", ioctl::CONSUME.into()),
        ("OPROFILE_RS_IOC_SNAPSHOT", ioctl::SNAPSHOT.into()),
        ("OPROFILE_RS_IOC_SET_CONFIG", ioctl::SET_CONFIG.into()),
        ("OPROFILE_RS_IOC_GET_CONFIG", ioctl::GET_CONFIG.into()),
        ("OPROFILE_RS_IOC_UNWIND_TABLE", ioctl::UNWIND_TABLE.into()),
        ("OPROFILE_RS_IOC_UNWIND_MAP", ioctl::UNWIND_MAP.into()),
        ("OPROFILE_RS_IOC_UNWIND_RESET", ioctl::UNWIND_RESET.into()),
        ("OPROFILE_RS_UNWIND_MAGIC", unwind::MAGIC.into()),
        ("OPROFILE_RS_UNWIND_MAX_ROWS", unwind::MAX_ROWS.into()),
        ("OPROFILE_RS_UNWIND_END", unwind::END.into()),
        ("OPROFILE_RS_UNWIND_CFA_SP", unwind::CFA_SP.into()),
        ("OPROFILE_RS_UNWIND_CFA_BP", unwind::CFA_BP.into()),
        ("OPROFILE_RS_UNWIND_UNKNOWN", unwind::UNKNOWN.into()),
        ("OPROFILE_RS_CHAIN_CUT", unwind::CHAIN_CUT),
        ("OPROFILE_RS_META_VERSION", meta::VERSION.into()),
    ]
}

/// The structures and their fields.
const STRUCTS: &[(&str, &[&str])] = &[
    (
        "header",
        &[
            "magic",
            "version",
            "header_size",
            "word_size",
            "endian",
            "clock",
            "sample_source",
            "nr_cpus",
            "backtrace_depth",
            "sample_period",
            "sample_freq",
            "start_time",
            "event_name",
        ],
    ),
    ("prefix", &["type", "size", "cpu", "b6", "b7"]),
    (
        "sample",
        &[
            "prefix",
            "time",
            "pc",
            "pid",
            "tgid",
            "period",
            "event",
            "user_depth",
            "reserved0",
            "user_stack",
            "reserved1",
        ],
    ),
    ("user_stack", &["ip", "sp", "bp", "copied"]),
    ("comm", &["prefix", "time", "pid", "tgid", "comm"]),
    ("lost", &["prefix", "time", "count"]),
    ("tracing", &["prefix", "time"]),
    (
        "event_desc",
        &["perf_type", "flags", "reserved", "config", "value", "name"],
    ),
    (
        "config",
        &[
            "prefix",
            "time",
            "generation",
            "backtrace_depth",
            "user_backtrace_depth",
            "reserved",
            "cpu_buffer_size",
            "buffer_size",
            "buffer_watershed",
        ],
    ),
    ("config_ext", &["cgroup", "pid", "reserved"]),
    (
        "snapshot",
        &[
            "prefix",
            "time",
            "seq",
            "reserved",
            "overwritten",
            "records",
        ],
    ),
    (
        "switch",
        &[
            "prefix",
            "time",
            "pid",
            "tgid",
            "state",
            "reserved",
            "exec_runtime",
            "run_delay",
        ],
    ),
    ("config_text", &["ptr", "len"]),
    ("consume", &["tail", "new_tail"]),
    ("unwind_table", &["ptr", "len"]),
    ("unwind_table_head", &["magic", "rows", "reserved"]),
    ("unwind_row", &["addr", "rule", "bp", "cfa"]),
    (
        "unwind_map",
        &["pid", "table", "start", "end", "bias", "inode"],
    ),
    (
        "meta",
        &[
            "version",
            "meta_size",
            "data_offset",
            "data_size",
            "head",
            "tail",
            "opening",
            "full",
        ],
    ),
];

/// What the header says: `NAME VALUE` for the constants, `sizeof.S N` and
/// `S.F OFFSET SIZE` for the structures, and the magic's bytes.
struct CView {
    values: HashMap<String, u64>,
    fields: HashMap<String, (usize, usize)>,
}

impl CView {
    fn value(&self, name: &str) -> u64 {
        *self
            .values
            .get(name)
            .unwrap_or_else(|| panic!("the header lacks {name}"))
    }
    fn sizeof(&self, s: &str) -> usize {
        self.value(&format!("sizeof.{s}")) as usize
    }
    fn field(&self, s: &str, f: &str) -> (usize, usize) {
        *self
            .fields
            .get(&format!("{s}.{f}"))
            .unwrap_or_else(|| panic!("no field {s}.{f}"))
    }
    /// The field `f` of struct `s` in `rec`, read native-endian.
    fn read(&self, s: &str, f: &str, rec: &[u8]) -> u64 {
        let (off, size) = self.field(s, f);
        let b = &rec[off..off + size];
        match size {
            1 => b[0].into(),
            2 => u16::from_ne_bytes(b.try_into().unwrap()).into(),
            4 => u32::from_ne_bytes(b.try_into().unwrap()).into(),
            8 => u64::from_ne_bytes(b.try_into().unwrap()),
            _ => panic!("{s}.{f}: a field of {size} bytes is not a number"),
        }
    }
    /// The bytes of field `f` of struct `s` in `rec`.
    fn bytes<'a>(&self, s: &str, f: &str, rec: &'a [u8]) -> &'a [u8] {
        let (off, size) = self.field(s, f);
        &rec[off..off + size]
    }
}

/// The C program's view, built once for the tests of this file (they run
/// in parallel).
fn c_view() -> &'static CView {
    static VIEW: std::sync::OnceLock<CView> = std::sync::OnceLock::new();
    VIEW.get_or_init(build_c_view)
}

fn build_c_view() -> CView {
    let header = header_path();
    assert!(header.exists(), "no {}", header.display());
    let mut c = String::from("#include <stdio.h>\n#include <stddef.h>\n");
    c += &format!("#include \"{}\"\n", header.display());
    c += "#define V(n) printf(\"%s %llu\\n\", #n, (unsigned long long)(n));\n";
    c += "#define S(s) printf(\"sizeof.%s %zu\\n\", #s, sizeof(struct oprofile_rs_##s));\n";
    c += "#define F(s, f) printf(\"%s.%s %zu %zu\\n\", #s, #f, offsetof(struct oprofile_rs_##s, f), \
          sizeof(((struct oprofile_rs_##s *)0)->f));\n";
    c += "int main(void) {\n";
    for (name, _) in constants() {
        c += &format!("V({name})\n");
    }
    for (s, fields) in STRUCTS {
        c += &format!("S({s})\n");
        for f in *fields {
            c += &format!("F({s}, {f})\n");
        }
    }
    c += "for (int i = 0; i < OPROFILE_RS_MAGIC_LEN; i++) printf(\"magic.%d %u\\n\", i, \
          (unsigned char)OPROFILE_RS_MAGIC[i]);\n";
    c += "printf(\"device %s\\n\", OPROFILE_RS_DEVICE);\n";
    c += "return 0; }\n";

    let dir = std::env::temp_dir().join(format!("oprofile-rs-uapi-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (src, bin) = (dir.join("uapi.c"), dir.join("uapi"));
    std::fs::write(&src, c).unwrap();
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let out = Command::new(&cc)
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-o"])
        .arg(&bin)
        .arg(&src)
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot run the C compiler {cc} (scripts/setup installs gcc): {e}")
        });
    assert!(
        out.status.success(),
        "the header does not compile:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = Command::new(&bin).output().unwrap();
    std::fs::remove_dir_all(&dir).ok();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let (mut values, mut fields) = (HashMap::new(), HashMap::new());
    for line in text.lines() {
        let w: Vec<&str> = line.split(' ').collect();
        match w.as_slice() {
            ["device", d] => assert_eq!(*d, "/dev/oprofile/buffer"),
            [name, v] => {
                values.insert(name.to_string(), v.parse().unwrap());
            }
            [name, off, size] => {
                fields.insert(
                    name.to_string(),
                    (off.parse().unwrap(), size.parse().unwrap()),
                );
            }
            _ => panic!("unexpected line {line}"),
        }
    }
    CView { values, fields }
}

#[test]
fn the_headers_constants_are_the_definitions() {
    let c = c_view();
    let mut wrong = Vec::new();
    for (name, v) in constants() {
        if c.value(name) != v {
            wrong.push(format!(
                "{name}: {} in the header, {v} in src/format.rs",
                c.value(name)
            ));
        }
    }
    for (i, b) in MAGIC.iter().enumerate() {
        if c.value(&format!("magic.{i}")) != u64::from(*b) {
            wrong.push(format!("OPROFILE_RS_MAGIC byte {i}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_headers_structures_have_the_records_sizes() {
    let c = c_view();
    for (s, len) in [
        ("header", HEADER_LEN),
        ("prefix", PREFIX_LEN),
        ("sample", SAMPLE_EXT_LEN),
        ("user_stack", USER_STACK_REGS_LEN),
        ("comm", COMM_LEN),
        ("lost", LOST_LEN),
        ("tracing", TRACING_LEN),
        ("event_desc", EVENT_DESC_LEN),
        ("config", CONFIG_LEN),
        ("config_ext", CONFIG_EXT_LEN),
        ("snapshot", SNAPSHOT_LEN),
        ("switch", SWITCH_LEN),
        ("config_text", ioctl::CONFIG_TEXT_LEN as usize),
        ("consume", ioctl::CONSUME_LEN as usize),
        ("meta", meta::LEN),
        ("unwind_table", ioctl::UNWIND_TABLE_LEN as usize),
        ("unwind_table_head", unwind::TABLE_HEAD_LEN),
        ("unwind_row", unwind::ROW_LEN),
        ("unwind_map", unwind::MAP_LEN),
    ] {
        assert_eq!(c.sizeof(s), len, "sizeof(struct oprofile_rs_{s})");
    }
    // The version-1 SAMPLE is the extended one's first SAMPLE_LEN bytes.
    assert_eq!(c.field("sample", "period").0, SAMPLE_LEN);
}

#[test]
fn the_headers_fields_hold_what_the_encoders_write() {
    let c = c_view();
    let e = Endian::native();

    let h = Header {
        version: 0x0102,
        header_size: HEADER_LEN as u16,
        word_size: 8,
        endian: e,
        clock: 0x33,
        sample_source: 0x44,
        nr_cpus: 0x0506_0708,
        backtrace_depth: 0x090a_0b0c,
        sample_period: 0x1112_1314_1516_1718,
        sample_freq: 0x2122_2324_2526_2728,
        start_time: 0x3132_3334_3536_3738,
        event_name: event_name_field(b"instructions"),
    };
    let mut b = [0u8; HEADER_LEN];
    assert_eq!(h.encode(&mut b), Some(HEADER_LEN));
    assert_eq!(c.bytes("header", "magic", &b), MAGIC);
    assert_eq!(c.read("header", "version", &b), 0x0102);
    assert_eq!(c.read("header", "header_size", &b), HEADER_LEN as u64);
    assert_eq!(c.read("header", "word_size", &b), 8);
    assert_eq!(c.read("header", "endian", &b), e.code().into());
    assert_eq!(c.read("header", "clock", &b), 0x33);
    assert_eq!(c.read("header", "sample_source", &b), 0x44);
    assert_eq!(c.read("header", "nr_cpus", &b), 0x0506_0708);
    assert_eq!(c.read("header", "backtrace_depth", &b), 0x090a_0b0c);
    assert_eq!(c.read("header", "sample_period", &b), 0x1112_1314_1516_1718);
    assert_eq!(c.read("header", "sample_freq", &b), 0x2122_2324_2526_2728);
    assert_eq!(c.read("header", "start_time", &b), 0x3132_3334_3536_3738);
    assert!(c
        .bytes("header", "event_name", &b)
        .starts_with(b"instructions\0"));

    let s = SampleHead {
        cpu: 0x0102,
        kernel: true,
        depth: 0,
        time: 0x1112_1314_1516_1718,
        pc: 0x2122_2324_2526_2728,
        pid: 0x3132_3334,
        tgid: 0x4142_4344,
        period: 0x5152_5354_5556_5758,
        event: 0x6162,
        user_depth: 0x71,
        ext: true,
        throttled: true,
        user_stack: 0x0808,
    };
    let b = s.encoded(e);
    assert_eq!(c.read("prefix", "type", &b), SAMPLE.into());
    assert_eq!(c.read("prefix", "cpu", &b), 0x0102);
    assert_eq!(c.read("prefix", "size", &b), s.size() as u64);
    assert_eq!(
        c.read("prefix", "b6", &b),
        u64::from(
            SAMPLE_FLAG_KERNEL | SAMPLE_FLAG_EXT | SAMPLE_FLAG_THROTTLED | SAMPLE_FLAG_USER_STACK
        )
    );
    assert_eq!(c.field("sample", "prefix"), (0, PREFIX_LEN));
    assert_eq!(c.read("sample", "time", &b), s.time);
    assert_eq!(c.read("sample", "pc", &b), s.pc);
    assert_eq!(c.read("sample", "pid", &b), s.pid.into());
    assert_eq!(c.read("sample", "tgid", &b), s.tgid.into());
    assert_eq!(c.read("sample", "period", &b), s.period);
    assert_eq!(c.read("sample", "event", &b), s.event.into());
    assert_eq!(c.read("sample", "user_depth", &b), s.user_depth.into());
    assert_eq!(c.read("sample", "user_stack", &b), s.user_stack.into());
    let words = user_stack_words(1, 2, 3, 4);
    for (f, w) in ["ip", "sp", "bp", "copied"].iter().zip(words) {
        assert_eq!(
            c.field("user_stack", f).0,
            8 * (w as usize - 1),
            "user_stack.{f}"
        );
    }

    let m = Comm {
        cpu: 1,
        time: 0x1112_1314_1516_1718,
        pid: 0x2122_2324,
        tgid: 0x3132_3334,
        comm: *b"sixteen-bytes-nm",
    };
    let b = m.encoded(e);
    assert_eq!(c.read("prefix", "size", &b), COMM_LEN as u64);
    assert_eq!(c.read("comm", "time", &b), m.time);
    assert_eq!(c.read("comm", "pid", &b), m.pid.into());
    assert_eq!(c.read("comm", "tgid", &b), m.tgid.into());
    assert_eq!(c.bytes("comm", "comm", &b), &m.comm);

    let l = Lost {
        cpu: 1,
        time: 0x1112_1314_1516_1718,
        count: 0x2122_2324_2526_2728,
    };
    let b = l.encoded(e);
    assert_eq!(c.read("lost", "time", &b), l.time);
    assert_eq!(c.read("lost", "count", &b), l.count);

    let t = Tracing {
        cpu: 0,
        time: 0x1112_1314_1516_1718,
        on: true,
    };
    let b = t.encoded(e);
    assert_eq!(c.read("tracing", "time", &b), t.time);
    assert_eq!(c.read("prefix", "b6", &b), 1);

    let sn = Snapshot {
        cpu: 1,
        time: 0x1112_1314_1516_1718,
        end: true,
        seq: 0x2122_2324,
        overwritten: 0x3132_3334_3536_3738,
        records: 0x4142_4344_4546_4748,
    };
    let b = sn.encoded(e);
    assert_eq!(c.read("snapshot", "time", &b), sn.time);
    assert_eq!(c.read("snapshot", "seq", &b), sn.seq.into());
    assert_eq!(c.read("snapshot", "overwritten", &b), sn.overwritten);
    assert_eq!(c.read("snapshot", "records", &b), sn.records);
    assert_eq!(c.read("prefix", "b6", &b), 1);

    let sw = Switch {
        cpu: 1,
        time: 0x1112_1314_1516_1718,
        pid: 0x2122_2324,
        tgid: 0x3132_3334,
        reason: SwitchReason::Blocked,
        state: 0x4142_4344,
        exec_runtime: 0x5152_5354_5556_5758,
        run_delay: Some(0x6162_6364_6566_6768),
    };
    let b = sw.encoded(e);
    assert_eq!(c.read("switch", "time", &b), sw.time);
    assert_eq!(c.read("switch", "pid", &b), sw.pid.into());
    assert_eq!(c.read("switch", "tgid", &b), sw.tgid.into());
    assert_eq!(c.read("switch", "state", &b), sw.state.into());
    assert_eq!(c.read("switch", "exec_runtime", &b), sw.exec_runtime);
    assert_eq!(c.read("switch", "run_delay", &b), 0x6162_6364_6566_6768);
    assert_eq!(c.read("prefix", "b6", &b), SWITCH_FLAG_RUN_DELAY.into());
    assert_eq!(c.read("prefix", "b7", &b), 2);
    assert_eq!(Switch::read(e, &b), Some(sw));
    let none = Switch {
        run_delay: None,
        ..sw
    };
    assert_eq!(Switch::read(e, &none.encoded(e)), Some(none));

    let ev = EventDesc {
        perf_type: 0x0102_0304,
        flags: EVENT_FLAG_FREQ | EVENT_FLAG_NMI,
        config: 0x1112_1314_1516_1718,
        value: 0x2122_2324_2526_2728,
        name: EventDesc::name_field(b"cycles"),
    };
    let mut events = [EventDesc::default(); MAX_EVENTS];
    events[1] = ev;
    let cf = Config {
        time: 0x1112_1314_1516_1718,
        generation: 0x2122_2324,
        mode: MODE_OVERWRITE,
        backtrace_depth: 0x31,
        user_backtrace_depth: 0x32,
        cpu_buffer_size: 0x4142_4344_4546_4748,
        buffer_size: 0x5152_5354_5556_5758,
        buffer_watershed: 0x6162_6364_6566_6768,
        nr_events: 2,
        events,
        cgroup: 0x7172_7374_7576_7778,
        pid: 0x0a0b_0c0d,
    };
    let mut b = vec![0u8; cf.encoded_len()];
    assert_eq!(cf.encode(e, &mut b), Some(b.len()));
    assert_eq!(c.read("prefix", "b6", &b), 2);
    assert_eq!(c.read("prefix", "b7", &b), MODE_OVERWRITE.into());
    assert_eq!(c.read("config", "time", &b), cf.time);
    assert_eq!(c.read("config", "generation", &b), cf.generation.into());
    assert_eq!(c.read("config", "backtrace_depth", &b), 0x31);
    assert_eq!(c.read("config", "user_backtrace_depth", &b), 0x32);
    assert_eq!(c.read("config", "cpu_buffer_size", &b), cf.cpu_buffer_size);
    assert_eq!(c.read("config", "buffer_size", &b), cf.buffer_size);
    assert_eq!(
        c.read("config", "buffer_watershed", &b),
        cf.buffer_watershed
    );
    let d = &b[c.sizeof("config") + c.sizeof("event_desc")..];
    assert_eq!(c.read("event_desc", "perf_type", d), ev.perf_type.into());
    assert_eq!(c.read("event_desc", "flags", d), ev.flags.into());
    assert_eq!(c.read("event_desc", "config", d), ev.config);
    assert_eq!(c.read("event_desc", "value", d), ev.value);
    assert_eq!(c.bytes("event_desc", "name", d), &ev.name);
    let x = &b[c.sizeof("config") + 2 * c.sizeof("event_desc")..];
    assert_eq!(x.len(), c.sizeof("config_ext"));
    assert_eq!(c.read("config_ext", "cgroup", x), cf.cgroup);
    assert_eq!(c.read("config_ext", "pid", x), cf.pid.into());
}

#[test]
fn the_headers_meta_page_is_the_modules() {
    let c = c_view();
    for (f, at) in [
        ("version", meta::VERSION_AT),
        ("meta_size", meta::META_SIZE_AT),
        ("data_offset", meta::DATA_OFFSET_AT),
        ("data_size", meta::DATA_SIZE_AT),
        ("head", meta::HEAD_AT),
        ("tail", meta::TAIL_AT),
        ("opening", meta::OPENING_AT),
        ("full", meta::FULL_AT),
    ] {
        assert_eq!(c.field("meta", f).0, at, "oprofile_rs_meta.{f}");
    }
    assert_eq!(c.field("consume", "new_tail"), (8, 8));
    assert_eq!(c.field("config_text", "len"), (8, 8));
}

#[test]
fn the_headers_unwind_structures_are_the_modules() {
    let c = c_view();
    // A row as the tool encodes it, read through the header's fields.
    let row = unwind::Row {
        addr: 0x1234_5678,
        rule: unwind::CFA_BP,
        bp: -2,
        cfa: 0x1f0,
    };
    let b = row.encoded();
    assert_eq!(c.read("unwind_row", "addr", &b), 0x1234_5678);
    assert_eq!(c.read("unwind_row", "rule", &b), unwind::CFA_BP.into());
    assert_eq!(c.read("unwind_row", "bp", &b) as u8 as i8, -2);
    assert_eq!(c.read("unwind_row", "cfa", &b), 0x1f0);
    let h = unwind::head(7);
    assert_eq!(
        c.read("unwind_table_head", "magic", &h),
        unwind::MAGIC.into()
    );
    assert_eq!(c.read("unwind_table_head", "rows", &h), 7);
    // The map request, in the order the module reads it.
    for (f, at, size) in [
        ("pid", 0, 4),
        ("table", 4, 4),
        ("start", 8, 8),
        ("end", 16, 8),
        ("bias", 24, 8),
        ("inode", 32, 8),
    ] {
        assert_eq!(
            c.field("unwind_map", f),
            (at, size),
            "oprofile_rs_unwind_map.{f}"
        );
    }
}
