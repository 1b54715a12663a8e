// SPDX-License-Identifier: GPL-2.0

//! The event buffer: whole stream records waiting for the reader of
//! `/dev/oprofile/buffer`, filled by the sync. A byte FIFO that never splits
//! a record: appends go to the end, compacting the buffer when the end is
//! reached; reads take whole records from the front.

use kernel::prelude::*;

use crate::records;

/// Byte FIFO of whole records.
///
/// # Invariants
///
/// `start <= end <= data.len()`, and `data[start..end]` is a sequence of
/// whole records.
pub(crate) struct EventBuffer {
    data: KVVec<u8>,
    start: usize,
    end: usize,
    /// Bumped by every flush; readers return data below the watershed once
    /// per flush.
    pub(crate) flush_seq: u64,
    /// Total bytes ever appended (stats).
    pub(crate) bytes_in: u64,
}

impl EventBuffer {
    pub(crate) fn new(size: usize) -> Result<Self> {
        let mut data = KVVec::with_capacity(size, GFP_KERNEL)?;
        data.resize(size, 0, GFP_KERNEL)?;
        Ok(Self {
            data,
            start: 0,
            end: 0,
            flush_seq: 0,
            bytes_in: 0,
        })
    }

    /// Bytes waiting.
    pub(crate) fn len(&self) -> usize {
        self.end - self.start
    }

    /// Whether a record of `len` bytes fits now.
    pub(crate) fn fits(&self, len: usize) -> bool {
        self.data.len() - self.len() >= len
    }

    /// Appends one whole record; false (nothing appended) if it does not fit.
    pub(crate) fn push(&mut self, record: &[u8]) -> bool {
        if !self.fits(record.len()) {
            return false;
        }
        if self.data.len() - self.end < record.len() {
            self.data.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        match self.data.get_mut(self.end..self.end + record.len()) {
            Some(dst) => dst.copy_from_slice(record),
            None => return false,
        }
        self.end += record.len();
        self.bytes_in += record.len() as u64;
        true
    }

    /// The longest prefix of whole records that fits in `max` bytes.
    pub(crate) fn whole_records(&self, max: usize) -> &[u8] {
        let waiting = self.data.get(self.start..self.end).unwrap_or(&[]);
        let mut n = 0;
        while let Some(len) = waiting.get(n..).and_then(records::record_len) {
            if len == 0 || n + len > max || n + len > waiting.len() {
                break;
            }
            n += len;
        }
        waiting.get(..n).unwrap_or(&[])
    }

    /// Size of the first waiting record, if any.
    pub(crate) fn first_len(&self) -> Option<usize> {
        self.data
            .get(self.start..self.end)
            .and_then(records::record_len)
    }

    /// Drops `n` bytes (whole records) from the front.
    pub(crate) fn consume(&mut self, n: usize) {
        self.start += n.min(self.len());
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
    }
}

#[cfg(oprofile_rs_kunit)]
#[kunit_tests(oprofile_rs_event_buffer)]
mod tests {
    use super::*;

    #[test]
    fn whole_records_only_and_compaction() {
        let Ok(mut eb) = EventBuffer::new(64) else {
            return;
        };
        let r = records::lost(1, 5, 9); // 24 bytes
        assert!(eb.push(&r));
        assert!(eb.push(&r));
        // A third record does not fit in 64 bytes.
        assert!(!eb.push(&r));
        assert_eq!(eb.len(), 48);
        assert_eq!(eb.whole_records(30).len(), 24);
        assert_eq!(eb.whole_records(23).len(), 0);
        assert_eq!(eb.first_len(), Some(24));
        eb.consume(24);
        // 24 bytes wait at offset 24: the next push must compact to fit.
        assert!(eb.push(&r));
        assert_eq!(eb.len(), 48);
        assert_eq!(eb.whole_records(1000).len(), 48);
    }
}
