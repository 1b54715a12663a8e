//! `cargo +nightly fuzz run decode` (from crates/stream): the decoder must
//! never panic, and must re-encode what it decoded identically.
#![no_main]

use libfuzzer_sys::fuzz_target;
use oprofile_stream::{decode, Encoder, Header};

fuzz_target!(|data: &[u8]| {
    if let Ok(d) = decode(data) {
        assert!(d.valid_len <= data.len() as u64);
        let _ = d.error.as_ref().map(|e| e.to_string());
        let mut e = Encoder::new(&Header { header_size: 64, ..d.header.clone() });
        for r in &d.records {
            e.record(r);
        }
        let again = decode(&e.finish()).expect("re-encoded stream decodes");
        assert_eq!(again.records, d.records);
        assert!(again.error.is_none());
    }
});
