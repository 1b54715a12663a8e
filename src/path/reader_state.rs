// SPDX-License-Identifier: GPL-2.0

//! What the stream has delivered, kept across readers, so that every stream
//! is self-contained.
//!
//! A CPU writes a COMM record only when it sees a task (or name) other than
//! the one its last COMM named, and the records a new reader gets first were
//! written before it opened: their COMM may have gone to the previous
//! reader. So the device remembers, per CPU, the last COMM record it
//! delivered, whether the last TRACING record it delivered said off, and the
//! last CONFIG record it delivered (at first the configuration at load), and
//! starts each stream with them (after the header; the CONFIG first, stamped
//! with the stream's start): the configuration, naming and tracing state in
//! force where the new stream's records begin. A CONFIG record waiting in
//! the event buffer (a change not read yet) follows in its place.

use kernel::prelude::*;

use crate::format::{self, Endian};

/// Whether records of type `kind` change the delivered state (COMM,
/// TRACING, CONFIG): the *noted* records, which the event buffer's index
/// lists (`record_index.rs`).
pub(crate) fn is_noted(kind: u16) -> bool {
    kind == format::COMM || kind == format::TRACING || kind == format::CONFIG
}

/// Bytes of the longest noted record (a CONFIG of every event).
pub(crate) const NOTED_MAX: usize = format::CONFIG_MAX_LEN;

/// The delivered state. Owned by the profiler behind a mutex that only the
/// reader of the moment takes (see `device.rs`).
pub(crate) struct ReaderState {
    /// Per CPU: the last COMM record delivered (all zero: none).
    comm: KVVec<[u8; format::COMM_LEN]>,
    /// The last TRACING record delivered said off.
    tracing_off: bool,
    /// The last CONFIG record delivered (at first, the one of the load).
    config: format::Config,
    /// The current stream's opening records after the header, and how many
    /// of their bytes were read.
    prefix: KVVec<u8>,
    prefix_read: usize,
}

impl ReaderState {
    /// The state before any stream, of `nr_cpus` possible CPUs and the
    /// configuration `config` (the one at load).
    pub(crate) fn new(nr_cpus: usize, config: format::Config) -> Result<Self> {
        let mut comm = KVVec::with_capacity(nr_cpus, GFP_KERNEL)?;
        for _ in 0..nr_cpus {
            comm.push([0; format::COMM_LEN], GFP_KERNEL)?;
        }
        Ok(Self {
            comm,
            tracing_off: false,
            config,
            prefix: KVVec::new(),
            prefix_read: 0,
        })
    }

    /// Starts a stream: its opening records (after the header) restate the
    /// delivered state.
    pub(crate) fn start_stream(&mut self) -> Result {
        self.prefix.clear();
        self.prefix_read = 0;
        let mut config = [0u8; format::CONFIG_MAX_LEN];
        let restated = format::Config {
            time: crate::shims::clock::now(),
            ..self.config
        };
        let len = restated.encode(Endian::native(), &mut config).unwrap_or(0);
        self.prefix
            .extend_from_slice(config.get(..len).unwrap_or(&[]), GFP_KERNEL)?;
        for c in self.comm.iter() {
            if format::record_len(Endian::native(), c) == Some(format::COMM_LEN) {
                self.prefix.extend_from_slice(c, GFP_KERNEL)?;
            }
        }
        if self.tracing_off {
            // Its time: that of the stream's start is as good as any, the
            // switch happened before.
            let rec = format::Tracing {
                cpu: 0,
                time: crate::shims::clock::now(),
                on: false,
            }
            .encoded(Endian::native());
            self.prefix.extend_from_slice(&rec, GFP_KERNEL)?;
        }
        Ok(())
    }

    /// The opening records not read yet, whole records that fit in `max`
    /// bytes.
    pub(crate) fn prefix_chunk(&self, max: usize) -> &[u8] {
        let rest = self.prefix.get(self.prefix_read..).unwrap_or(&[]);
        let mut n = 0;
        while let Some(len) = rest
            .get(n..)
            .and_then(|r| format::record_len(Endian::native(), r))
        {
            if len == 0 || n + len > max || n + len > rest.len() {
                break;
            }
            n += len;
        }
        rest.get(..n).unwrap_or(&[])
    }

    /// Bytes of opening records not read yet.
    pub(crate) fn prefix_remaining(&self) -> usize {
        self.prefix.len() - self.prefix_read
    }

    /// Whether opening records remain.
    pub(crate) fn prefix_pending(&self) -> bool {
        self.prefix_read < self.prefix.len()
    }

    /// `n` bytes of the opening records were delivered.
    pub(crate) fn prefix_consumed(&mut self, n: usize) {
        self.prefix_read = (self.prefix_read + n).min(self.prefix.len());
    }

    /// Sets the configuration restated before anything was delivered: the
    /// load's, once `default` is resolved.
    pub(crate) fn set_initial_config(&mut self, config: format::Config) {
        self.config = config;
    }

    /// Notes one delivered record, `rec` (its first [`NOTED_MAX`] bytes at
    /// most): a COMM, TRACING or CONFIG record changes the state, others
    /// are ignored.
    pub(crate) fn note(&mut self, rec: &[u8]) {
        let Some(p) = format::Prefix::read(Endian::native(), rec) else {
            return;
        };
        let len = usize::from(p.size);
        if p.kind == format::COMM && len == format::COMM_LEN && rec.len() == len {
            if let Some(slot) = self.comm.get_mut(usize::from(p.cpu)) {
                slot.copy_from_slice(rec);
            }
        } else if p.kind == format::TRACING {
            // Byte 6 of a TRACING record: the new state.
            self.tracing_off = p.b6 == 0;
        } else if p.kind == format::CONFIG && len <= NOTED_MAX && rec.len() == len {
            let mut full = [0u8; NOTED_MAX];
            if let Some(dst) = full.get_mut(..len) {
                dst.copy_from_slice(rec);
            }
            if let Some(c) = format::Config::read(Endian::native(), &full) {
                self.config = c;
            }
        }
    }

    /// Notes the COMM, TRACING and CONFIG records among the whole records `a`
    /// followed by `b` (one run of records split in two slices) up to `n`
    /// bytes, which were delivered.
    pub(crate) fn delivered(&mut self, a: &[u8], b: &[u8], n: usize) {
        let byte = |i: usize| -> u8 {
            if i < a.len() {
                a.get(i).copied().unwrap_or(0)
            } else {
                b.get(i - a.len()).copied().unwrap_or(0)
            }
        };
        let mut at = 0;
        while at + format::PREFIX_LEN <= n {
            // Only COMM, TRACING and CONFIG records matter: skip the others reading
            // their prefix straight from `a` (the slow path below copies the
            // prefix, for the record at the seam of `a` and `b`).
            if let Some(p) = a
                .get(at..)
                .and_then(|r| format::Prefix::read(Endian::native(), r))
            {
                let len = usize::from(p.size);
                if p.kind != format::COMM
                    && p.kind != format::TRACING
                    && p.kind != format::CONFIG
                    && len >= format::PREFIX_LEN
                    && at + len <= n
                {
                    at += len;
                    continue;
                }
            }
            let mut head = [0u8; format::PREFIX_LEN];
            for (i, h) in head.iter_mut().enumerate() {
                *h = byte(at + i);
            }
            let Some(p) = format::Prefix::read(Endian::native(), &head) else {
                break;
            };
            let len = usize::from(p.size);
            if len < format::PREFIX_LEN || at + len > n {
                break;
            }
            if is_noted(p.kind) {
                let mut rec = [0u8; NOTED_MAX];
                for (i, r) in rec.iter_mut().take(len).enumerate() {
                    *r = byte(at + i);
                }
                self.note(rec.get(..len.min(NOTED_MAX)).unwrap_or(&[]));
            }
            at += len;
        }
    }
}
