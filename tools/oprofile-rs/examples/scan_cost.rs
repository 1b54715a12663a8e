//! What `record`'s scan of the stream costs per record: builds a stream
//! like a system-wide recording's (two CPUs, batches of SAMPLEs of a few
//! processes, a COMM at each change of task), then feeds it to
//! [`Scanner`] as `record` does (1 MiB pieces, the backlog left out,
//! written to a sink) `--rounds` times and prints the records scanned and
//! the time per record. For instruction counts, run it under
//! `valgrind --tool=callgrind` and divide `Scanner::feed_into`'s inclusive
//! count by the records.
//!
//! cargo run --release -p oprofile-rs --example scan_cost -- [--rounds N] [--user-depth D]

use std::time::Instant;

use oprofile_stream::{Comm, Encoder, Header, Record, Sample};
use oprofile_tool::record::Scanner;

fn main() {
    let (mut rounds, mut depth) = (1usize, 0usize);
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let v = args.next().and_then(|v| v.parse().ok());
        match (a.as_str(), v) {
            ("--rounds", Some(v)) => rounds = v,
            ("--user-depth", Some(v)) => depth = v,
            _ => {
                eprintln!("usage: scan_cost [--rounds N] [--user-depth D]");
                std::process::exit(2);
            }
        }
    }
    let mut e = Encoder::new(&Header::default());
    let mut records = 0u64;
    let mut time = 1_000u64;
    // 2 CPUs x 50 batches of 100 samples: runs of one process, a COMM
    // before each (as the module names a task anew on each CPU).
    for batch in 0..100u32 {
        let cpu = (batch % 2) as u16;
        let tgid = 100 + (batch / 2) % 3;
        e.record(&Record::Comm(Comm::new(cpu, time, tgid, tgid, "workload")));
        records += 1;
        for i in 0..100u64 {
            time += 500_000;
            e.record(&Record::Sample(Sample {
                cpu,
                kernel: i % 20 == 0,
                time,
                pc: 0x5555_5555_1000 + i,
                pid: tgid,
                tgid,
                user_callchain: (0..depth as u64).map(|d| 0x5555_5555_2000 + d).collect(),
                period: 1_000_000,
                ..Default::default()
            }));
            records += 1;
        }
    }
    let stream = e.finish();
    let mut best = f64::MAX;
    for _ in 0..rounds {
        let mut s = Scanner::skipping_backlog();
        let mut sink = std::io::sink();
        let t0 = Instant::now();
        let mut written = 0;
        for piece in stream.chunks(1 << 20) {
            written += s.feed_into(piece, &mut sink).expect("scan");
        }
        best = best.min(t0.elapsed().as_secs_f64());
        assert_eq!(written, stream.len() as u64);
        assert_eq!(s.samples, 10_000);
    }
    println!(
        "{records} records, {} bytes: {:.1} ns per record (best of {rounds})",
        stream.len(),
        best * 1e9 / records as f64
    );
}
