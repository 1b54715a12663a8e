//! Builds the module's CFI table of each ELF file named on the command line
//! and prints what it took: the time of `unwind_table::build` (the best of
//! five runs, the file already read), its rows, bytes and statistics.
//! `--rows` prints the rows too.
//!
//! cargo run --release -p oprofile-rs --example unwind_table -- /lib/x86_64-linux-gnu/libc.so.6

use std::time::{Duration, Instant};

use oprofile_stream::oprofile_format::unwind::{CFA_BP, CFA_SP, END};
use oprofile_tool::unwind_table::build;

fn main() {
    let mut rows = false;
    for arg in std::env::args().skip(1) {
        if arg == "--rows" {
            rows = true;
            continue;
        }
        let data = match std::fs::read(&arg) {
            Ok(d) => d,
            Err(e) => {
                eprintln!("{arg}: {e}");
                continue;
            }
        };
        let mut best = Duration::MAX;
        let mut table = None;
        for _ in 0..5 {
            let t0 = Instant::now();
            let t = build(&data);
            best = best.min(t0.elapsed());
            table = Some(t);
        }
        match table {
            Some(Ok(t)) => {
                println!(
                    "{arg}: {} in {best:?}: {} rows, {} bytes\n  {}",
                    t.section,
                    t.rows.len(),
                    t.bytes().len(),
                    t.stats
                );
                if rows {
                    for r in &t.rows {
                        let rule = match r.rule {
                            END => "END".to_string(),
                            CFA_SP => format!("sp+{}", r.cfa),
                            CFA_BP => format!("bp+{}", r.cfa),
                            _ => "UNKNOWN".to_string(),
                        };
                        println!("  {:#010x} {rule} bp {}", r.addr, r.bp);
                    }
                }
            }
            Some(Err(e)) => println!("{arg}: {e}"),
            None => {}
        }
    }
}
