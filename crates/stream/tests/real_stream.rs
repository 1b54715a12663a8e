//! Tests on a stream captured from the real module in the test VM
//! (`tests/fixtures/vm-cpu-clock-2cpu-depth4.bin`, see `tests/fixtures/README.md`):
//! it decodes cleanly, re-encodes byte for byte, and satisfies the invariants
//! `Documentation/stream-format.md` promises.
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use oprofile_stream::*;

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/vm-cpu-clock-2cpu-depth4.bin"
);
const STATS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/vm-cpu-clock-2cpu-depth4.stats"
);

fn data() -> Vec<u8> {
    std::fs::read(FIXTURE).expect("reading the fixture")
}

fn decoded() -> (Vec<u8>, Decoded) {
    let data = data();
    let d = decode(&data).expect("fixture header decodes");
    (data, d)
}

/// The module's debugfs `stats` lines `cpuN key=value ...`, per CPU.
fn stats() -> BTreeMap<u16, HashMap<String, u64>> {
    let text = std::fs::read_to_string(STATS).expect("reading the stats file");
    let mut out = BTreeMap::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let mut words = line.split_whitespace();
        let cpu = words.next().unwrap();
        let cpu: u16 = cpu
            .strip_prefix("cpu")
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("bad stats line {line:?}"));
        let fields = words
            .map(|w| {
                let (k, v) = w
                    .split_once('=')
                    .unwrap_or_else(|| panic!("bad field {w:?}"));
                (k.to_string(), v.parse().unwrap())
            })
            .collect();
        out.insert(cpu, fields);
    }
    out
}

fn samples(d: &Decoded) -> impl Iterator<Item = &Sample> {
    d.records.iter().filter_map(|r| match r {
        Record::Sample(s) => Some(s),
        _ => None,
    })
}

#[test]
fn decodes_without_error_or_warning() {
    let (data, d) = decoded();
    assert!(d.error.is_none(), "{:?}", d.error);
    assert!(d.warnings.is_empty(), "{:?}", d.warnings);
    assert_eq!(d.valid_len, data.len() as u64);
    assert_eq!(data.len() % 8, 0);
}

#[test]
fn header_fields() {
    let (data, d) = decoded();
    assert_eq!(data[..8], MAGIC);
    let h = &d.header;
    // A version-1 recording: readers of version 2 still read it.
    assert_eq!(h.version, 1);
    assert_ne!(h.version, VERSION);
    // Captured from an early module: the 64-byte header with a 16-byte name field.
    assert_eq!(h.header_size as usize, MIN_HEADER_SIZE);
    assert_eq!(h.word_size, 8);
    assert_eq!(h.endian, Endian::Little);
    assert_eq!(h.clock, 1);
    assert_eq!(h.sample_source, 2, "software cpu-clock");
    assert_eq!(h.sample_source_name(), "software cpu-clock (IRQ)");
    assert_eq!(h.event_name(), "cpu-clock");
    assert_eq!(h.nr_cpus, 2);
    assert_eq!(h.backtrace_depth, 4);
    assert_eq!(h.sample_period, 200_000);
    assert_eq!(h.sample_freq, 0);
    assert!(h.start_time > 0);
    // Every record's CPU is in range.
    assert!(d.records.iter().all(|r| u32::from(r.cpu()) < h.nr_cpus));
}

#[test]
fn every_record_type_occurs() {
    let (_, d) = decoded();
    let mut counts = [0usize; 4];
    for r in &d.records {
        counts[match r {
            Record::Sample(_) => 0,
            Record::Comm(_) => 1,
            Record::Lost(_) => 2,
            Record::Tracing(_) => 3,
            other => panic!("a version-1 stream has no {other:?}"),
        }] += 1;
    }
    let [sample, comm, lost, tracing] = counts;
    assert!(sample > 0, "no SAMPLE");
    assert!(comm > 0, "no COMM");
    assert!(lost > 0, "no LOST");
    assert!(tracing > 0, "no TRACING");
    // Both CPUs produced samples.
    let cpus: BTreeSet<u16> = samples(&d).map(|s| s.cpu).collect();
    assert_eq!(cpus, BTreeSet::from([0, 1]));
}

#[test]
fn re_encodes_byte_identical() {
    let (data, d) = decoded();
    let mut enc = Encoder::new(&d.header);
    for r in &d.records {
        enc.record(r);
    }
    let again = enc.finish();
    assert_eq!(again.len(), data.len());
    if let Some(i) = again.iter().zip(&data).position(|(a, b)| a != b) {
        panic!("re-encoded stream differs from the fixture first at byte {i}");
    }
    // Record by record too: each record's encoded_size matches its bytes.
    let mut off = d.header.header_size as usize;
    for r in &d.records {
        let n = r.encoded_size_in(d.header.version);
        assert_eq!(
            encode_record_version(r, d.header.endian, d.header.version),
            data[off..off + n]
        );
        off += n;
    }
    assert_eq!(off, data.len());
}

#[test]
fn accounting_per_cpu_matches_module_stats() {
    let (_, d) = decoded();
    let stats = stats();
    assert_eq!(stats.len() as u32, d.header.nr_cpus);
    let mut got: BTreeMap<u16, (u64, u64)> = BTreeMap::new();
    for r in &d.records {
        match r {
            Record::Sample(s) => got.entry(s.cpu).or_default().0 += 1,
            Record::Lost(l) => got.entry(l.cpu).or_default().1 += l.count,
            _ => {}
        }
    }
    for (cpu, st) in &stats {
        let (n_samples, n_lost) = got.get(cpu).copied().unwrap_or_default();
        let expected = st["sample_received"] - st["sample_invalid_eip"];
        assert_eq!(
            n_samples + n_lost,
            expected,
            "cpu{cpu}: {n_samples} SAMPLE + {n_lost} LOST != sample_received - sample_invalid_eip"
        );
        // Everything lost was lost to a full ring buffer.
        assert_eq!(n_lost, st["sample_lost_overflow"], "cpu{cpu}");
    }
}

#[test]
fn callchains_respect_depth_and_mode() {
    let (_, d) = decoded();
    let depth = d.header.backtrace_depth as usize;
    let mut deepest = 0;
    for s in samples(&d) {
        assert!(s.callchain.len() <= depth, "{s:?}");
        if !s.kernel {
            assert!(
                s.callchain.is_empty(),
                "user-mode sample with a callchain: {s:?}"
            );
        }
        deepest = deepest.max(s.callchain.len());
    }
    assert!(
        deepest > 0,
        "no kernel callchain at all with backtrace_depth {depth}"
    );
    assert!(samples(&d).any(|s| !s.kernel), "no user-mode sample");
}

/// Per CPU, records come in time order, except that a LOST record carries a
/// later time than the (older) records of the sync batch it heads, which
/// follow it: the fixture's module stamped the time the sync noticed the
/// loss (today's stamps the latest sample lost), never earlier than
/// anything before it on its CPU.
#[test]
fn per_cpu_record_times_are_ordered() {
    let (_, d) = decoded();
    let mut last_non_lost: HashMap<u16, u64> = HashMap::new();
    let mut last_any: HashMap<u16, u64> = HashMap::new();
    let mut last_lost: HashMap<u16, u64> = HashMap::new();
    for (i, r) in d.records.iter().enumerate() {
        let (cpu, t) = (r.cpu(), r.time());
        if let Record::Lost(_) = r {
            if let Some(&prev) = last_any.get(&cpu) {
                assert!(
                    t >= prev,
                    "record {i}: LOST at {t} before earlier record at {prev}"
                );
            }
            if let Some(&prev) = last_lost.get(&cpu) {
                assert!(
                    t >= prev,
                    "record {i}: LOST at {t} before earlier LOST at {prev}"
                );
            }
            last_lost.insert(cpu, t);
        } else {
            if let Some(&prev) = last_non_lost.get(&cpu) {
                assert!(
                    t >= prev,
                    "record {i} on cpu{cpu}: time {t} < previous {prev}"
                );
            }
            last_non_lost.insert(cpu, t);
        }
        let e = last_any.entry(cpu).or_insert(t);
        *e = (*e).max(t);
    }
}

#[test]
fn no_sample_while_tracing_is_off() {
    let (_, d) = decoded();
    let switches: Vec<&Tracing> = d
        .records
        .iter()
        .filter_map(|r| match r {
            Record::Tracing(t) => Some(t),
            _ => None,
        })
        .collect();
    // The capture switched tracing off, on, and off again before the flush.
    let states: Vec<bool> = switches.iter().map(|t| t.on).collect();
    assert_eq!(states, [false, true, false]);
    assert!(switches.windows(2).all(|w| w[0].time <= w[1].time));
    // Windows (off, next on or end of stream) during which no SAMPLE may lie.
    let mut off_windows = Vec::new();
    for (i, t) in switches.iter().enumerate() {
        if !t.on {
            let end = switches[i + 1..]
                .iter()
                .find(|n| n.on)
                .map_or(u64::MAX, |n| n.time);
            off_windows.push((t.time, end));
        }
    }
    let mut before = 0;
    for s in samples(&d) {
        for &(off, on) in &off_windows {
            assert!(
                !(s.time > off && s.time < on),
                "sample at {} while tracing was off ({off}..{on}): {s:?}",
                s.time
            );
        }
        if s.time < off_windows[0].0 {
            before += 1;
        }
    }
    assert!(before > 0);
    // Samples were taken between the `on` and the final `off` too.
    let (on, off) = (switches[1].time, switches[2].time);
    assert!(samples(&d).any(|s| s.time >= on && s.time <= off));
}

/// COMM is emitted before the first sample of a task on a CPU after that CPU
/// last saw another task: every SAMPLE's pid is the one named by the latest
/// COMM of its CPU.
#[test]
fn every_sample_pid_was_named_by_a_comm_of_its_cpu() {
    let (_, d) = decoded();
    let mut current: HashMap<u16, (u32, u32)> = HashMap::new();
    let mut named: HashSet<u32> = HashSet::new();
    let mut comms = 0;
    for (i, r) in d.records.iter().enumerate() {
        match r {
            Record::Comm(c) => {
                assert!(!c.name().is_empty(), "record {i}: empty COMM name");
                current.insert(c.cpu, (c.pid, c.tgid));
                named.insert(c.pid);
                comms += 1;
            }
            Record::Sample(s) => {
                assert!(
                    named.contains(&s.pid),
                    "record {i}: pid {} never named",
                    s.pid
                );
                assert_eq!(
                    current.get(&s.cpu),
                    Some(&(s.pid, s.tgid)),
                    "record {i}: sample of pid {} on cpu{} without a COMM for it since the CPU's last other task",
                    s.pid,
                    s.cpu
                );
            }
            _ => {}
        }
    }
    assert!(comms > 2);
}

/// Byte offsets where each record of the full decode ends.
fn record_ends(d: &Decoded) -> Vec<usize> {
    let mut off = d.header.header_size as usize;
    d.records
        .iter()
        .map(|r| {
            off += r.encoded_size_in(d.header.version);
            off
        })
        .collect()
}

fn check_cut(data: &[u8], full: &Decoded, ends: &[usize], cut: usize) {
    let part = &data[..cut];
    let result = std::panic::catch_unwind(|| decode(part));
    let result = result.unwrap_or_else(|_| panic!("decode panicked on a cut at {cut}"));
    if cut < full.header.header_size as usize {
        let e = result.expect_err("a cut header must be an error");
        assert!(e.is_header_error(), "cut {cut}: {e}");
        assert!(
            matches!(e.kind, ErrorKind::TruncatedHeader { len } if len == cut),
            "cut {cut}: {e:?}"
        );
        return;
    }
    let d = result.unwrap_or_else(|e| panic!("cut {cut}: header error {e}"));
    assert_eq!(d.header, full.header);
    assert!(d.warnings.is_empty(), "cut {cut}: {:?}", d.warnings);
    // The records returned are exactly the records that fit before the cut.
    let n = ends.partition_point(|&end| end <= cut);
    assert_eq!(d.records.len(), n, "cut {cut}");
    assert!(
        d.records[..] == full.records[..n],
        "cut {cut}: not a prefix"
    );
    let boundary = if n == 0 {
        full.header.header_size as usize
    } else {
        ends[n - 1]
    };
    assert_eq!(d.valid_len, boundary as u64, "cut {cut}");
    if cut == boundary {
        assert!(
            d.error.is_none(),
            "cut {cut} at a record boundary: {:?}",
            d.error
        );
    } else {
        let e = d.error.expect("a cut inside a record is an error");
        assert!(e.is_truncation(), "cut {cut}: {e}");
        assert_eq!(e.offset, boundary as u64, "cut {cut}");
        assert_eq!(e.to_string(), format!("truncated at offset {boundary}"));
    }
}

#[test]
fn truncated_at_sampled_offsets_keeps_a_prefix() {
    let (data, full) = decoded();
    let ends = record_ends(&full);
    let mut cuts: BTreeSet<usize> = (0..=data.len()).step_by(97).collect();
    cuts.extend([
        0,
        1,
        7,
        8,
        13,
        14,
        63,
        64,
        65,
        71,
        72,
        data.len() - 1,
        data.len(),
    ]);
    for cut in cuts {
        check_cut(&data, &full, &ends, cut);
    }
}

#[test]
fn truncated_around_record_boundaries_keeps_a_prefix() {
    let (data, full) = decoded();
    let ends = record_ends(&full);
    // Around every 10th boundary, and inside each record type's fields.
    let mut cuts = BTreeSet::new();
    for &end in ends.iter().step_by(10) {
        for c in [end - 1, end, end + 1, end + 7, end + 8, end + 9] {
            if c <= data.len() {
                cuts.insert(c);
            }
        }
    }
    for cut in cuts {
        check_cut(&data, &full, &ends, cut);
    }
}
