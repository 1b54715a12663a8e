// SPDX-License-Identifier: GPL-2.0

//! The sync: moves records from the per-CPU ring buffers into the event
//! buffer, with a LOST record wherever a CPU dropped samples.
//!
//! Runs from a self-rearming delayed work per online CPU (every `HZ/10`,
//! staggered by a jiffy per CPU, see glue.c) that moves that CPU's records,
//! when a CPU goes offline (its last records), and synchronously from
//! `flush` and `tracing_on` writes, which move every CPU's records merged by
//! time; `SyncState`'s mutex serialises them. When the event buffer is full
//! the sync stops: records wait in the CPU buffers (which then drop and
//! count new samples), so every loss is counted per CPU and shows in the
//! stream.

use kernel::prelude::*;

use crate::{profiler::Profiler, records, ringbuf::ReadError, sampler::now};

/// A record consumed from a CPU buffer, not yet in the event buffer.
#[derive(Clone, Copy)]
struct Staged {
    buf: [u8; records::MAX_RECORD],
    len: usize,
    ts: u64,
}

/// State of the sync, owned behind `Profiler::sync_state`.
pub(crate) struct SyncState {
    staged: KVec<Staged>,
    /// Per CPU: lost samples already reported in LOST records.
    lost_reported: KVec<u64>,
    /// The latest time stamp of a record moved so far.
    pub(crate) last_ts: u64,
}

impl SyncState {
    pub(crate) fn new(nr_cpus: usize) -> Result<Self> {
        let mut staged = KVec::with_capacity(nr_cpus, GFP_KERNEL)?;
        let mut lost_reported = KVec::with_capacity(nr_cpus, GFP_KERNEL)?;
        for _ in 0..nr_cpus {
            staged.push(
                Staged {
                    buf: [0; records::MAX_RECORD],
                    len: 0,
                    ts: 0,
                },
                GFP_KERNEL,
            )?;
            lost_reported.push(0, GFP_KERNEL)?;
        }
        Ok(Self {
            staged,
            lost_reported,
            last_ts: 0,
        })
    }
}

/// Upper bound of records moved by one sync, so that a flood cannot keep the
/// work running forever.
const MAX_BATCH: usize = 1 << 20;

/// Moves what every CPU buffer holds into the event buffer, merged by time.
/// Returns the number of records moved.
pub(crate) fn sync(p: &Profiler) -> usize {
    sync_some(p, None)
}

/// Moves what CPU `cpu`'s buffer holds into the event buffer.
pub(crate) fn sync_cpu(p: &Profiler, cpu: u32) -> usize {
    sync_some(p, Some(cpu))
}

fn sync_some(p: &Profiler, only: Option<u32>) -> usize {
    let picked = |cpu: u32| only.is_none_or(|o| o == cpu);
    let mut st = p.sync_state.lock();
    let st = &mut *st;
    let mut eb = p.events.lock();
    for (cpu, reported) in p.cpus.iter().zip(st.lost_reported.iter_mut()) {
        if !picked(cpu.cpu) {
            continue;
        }
        let lost = cpu
            .counters
            .sample_lost_overflow
            .load(core::sync::atomic::Ordering::Relaxed);
        if lost > *reported && eb.push(&records::lost(cpu.cpu as u16, now(), lost - *reported)) {
            *reported = lost;
        }
    }
    let mut moved = 0;
    while moved < MAX_BATCH {
        // Refill empty staging slots, then move the oldest staged record.
        let mut oldest: Option<(usize, u64)> = None;
        for (i, (cpu, s)) in p.cpus.iter().zip(st.staged.iter_mut()).enumerate() {
            if !picked(cpu.cpu) {
                continue;
            }
            if s.len == 0 {
                match cpu.buffer.consume(&mut s.buf) {
                    Ok(info) => {
                        s.len = info.len;
                        s.ts = info.ts;
                    }
                    Err(ReadError::Empty | ReadError::Busy | ReadError::Contended) => {}
                    // Cannot happen: every record the module writes fits.
                    Err(e) => pr_warn!("cpu{}: ring buffer read failed: {:?}\n", cpu.cpu, e),
                }
            }
            if s.len != 0 && oldest.is_none_or(|(_, ts)| s.ts < ts) {
                oldest = Some((i, s.ts));
            }
        }
        let Some((i, _)) = oldest else { break };
        let Some(s) = st.staged.get_mut(i) else { break };
        if !eb.push(s.buf.get(..s.len).unwrap_or(&[])) {
            break;
        }
        st.last_ts = st.last_ts.max(s.ts);
        s.len = 0;
        moved += 1;
    }
    if eb.len() >= p.config.buffer_watershed {
        p.readers.notify_all();
    }
    moved
}
