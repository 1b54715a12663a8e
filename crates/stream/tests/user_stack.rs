//! The SAMPLE's user stack part (flag `0x08`, `--call-graph dwarf`): the
//! registers, the count of bytes copied and the copy area after the
//! callchains. Round trip through the [`Encoder`], the exact bytes, a part
//! cut short or followed by unknown bytes, a `copied` count past the area,
//! and readers that do not know the flag (they skip the part).

use oprofile_stream::oprofile_format as format;
use oprofile_stream::*;

fn header() -> Header {
    Header {
        nr_cpus: 4,
        ..Header::default()
    }
}

/// A user-mode sample with two user callers and a stack copy of `data` in
/// an area of `size` bytes.
fn sample(size: u16, data: Vec<u8>) -> Sample {
    Sample {
        cpu: 1,
        kernel: false,
        time: 77,
        pc: 0x40_1234,
        pid: 9,
        tgid: 8,
        callchain: vec![],
        user_callchain: vec![0x40_2000, 0x40_3000],
        period: 1000,
        event: 0,
        throttled: false,
        user_stack: Some(UserStack {
            ip: 0x40_1234,
            sp: 0x7ffd_0000_1000,
            bp: 0x7ffd_0000_1040,
            size,
            data,
        }),
    }
}

fn one_record(s: &Sample) -> Vec<u8> {
    let mut e = Encoder::new(&header());
    e.record(&Record::Sample(s.clone()));
    e.finish()
}

/// Offset of the user stack part in a record with `user` user callers.
fn part_at(user: usize) -> usize {
    SAMPLE_EXT_SIZE + 8 * user
}

#[test]
fn round_trip_and_exact_bytes() {
    let data: Vec<u8> = (0..64u8).collect();
    let s = sample(64, data.clone());
    let b = one_record(&s);
    let r = &b[HEADER_SIZE..];
    let size = part_at(2) + format::USER_STACK_REGS_LEN + 64;
    assert_eq!(r.len(), size);
    assert_eq!(Record::Sample(s.clone()).encoded_size(), size);
    // size; flags: extended | user stack; kernel depth 0.
    assert_eq!(u16::from_le_bytes([r[2], r[3]]) as usize, size);
    assert_eq!(
        r[6],
        format::SAMPLE_FLAG_EXT | format::SAMPLE_FLAG_USER_STACK
    );
    // Bytes 44..46: the copy area.
    assert_eq!(&r[44..46], &64u16.to_le_bytes());
    let at = part_at(2);
    let word = |i: usize| u64::from_le_bytes(r[at + 8 * i..at + 8 * i + 8].try_into().unwrap());
    assert_eq!(
        [word(0), word(1), word(2), word(3)],
        [0x40_1234, 0x7ffd_0000_1000, 0x7ffd_0000_1040, 64]
    );
    assert_eq!(&r[at + 32..], &data[..]);
    let d = decode(&b).unwrap();
    assert!(d.error.is_none() && d.warnings.is_empty(), "{d:?}");
    assert_eq!(d.records, [Record::Sample(s)]);
    // The format's own reader sees the same part.
    let p = format::parse(Endian::Little, r).unwrap();
    assert!(!p.oversized());
    let u = p.user_stack().unwrap();
    assert_eq!(
        (u.ip, u.sp, u.bp, u.data),
        (0x40_1234, 0x7ffd_0000_1000, 0x7ffd_0000_1040, &data[..])
    );
}

#[test]
fn a_short_copy_keeps_its_area_and_reads_back_the_bytes_copied() {
    // 20 bytes copied of a 4096-byte area (the copy met an unreadable page).
    let data = vec![0xaa; 20];
    let s = sample(4096, data.clone());
    let b = one_record(&s);
    let r = &b[HEADER_SIZE..];
    assert_eq!(r.len(), part_at(2) + 32 + 4096);
    assert!(r[part_at(2) + 32 + 20..].iter().all(|&x| x == 0));
    let d = decode(&b).unwrap();
    match &d.records[..] {
        [Record::Sample(got)] => {
            let u = got.user_stack.as_ref().unwrap();
            assert_eq!((u.size, &u.data), (4096, &data));
        }
        other => panic!("{other:?}"),
    }
    // An area smaller than the bytes is widened to them, rounded up to 8.
    let s = sample(0, vec![1; 13]);
    assert_eq!(s.user_stack.as_ref().unwrap().area(), 16);
    let d = decode(&one_record(&s)).unwrap();
    match &d.records[..] {
        [Record::Sample(got)] => {
            let u = got.user_stack.as_ref().unwrap();
            assert_eq!((u.size, u.data.len()), (16, 13));
        }
        other => panic!("{other:?}"),
    }
    // The largest part: a full-depth sample with 8 KiB of stack is the
    // largest record of any configuration.
    let mut s = sample(
        format::MAX_USER_STACK as u16,
        vec![7; format::MAX_USER_STACK],
    );
    s.kernel = true;
    s.callchain = vec![0xffff_ffff_8100_0000; format::MAX_DEPTH];
    s.user_callchain = vec![0x40_2000; format::MAX_USER_DEPTH];
    let b = one_record(&s);
    assert_eq!(b.len() - HEADER_SIZE, format::MAX_STACK_RECORD);
    assert_eq!(decode(&b).unwrap().records, [Record::Sample(s)]);
}

#[test]
fn copied_past_the_area_is_clamped() {
    let s = sample(32, (0..32u8).collect());
    let mut b = one_record(&s);
    let at = HEADER_SIZE + part_at(2) + 24;
    b[at..at + 8].copy_from_slice(&u64::MAX.to_le_bytes());
    let d = decode(&b).unwrap();
    assert!(d.error.is_none(), "{d:?}");
    match &d.records[..] {
        [Record::Sample(got)] => assert_eq!(got.user_stack, s.user_stack),
        other => panic!("{other:?}"),
    }
    b[at..at + 8].copy_from_slice(&33u64.to_le_bytes());
    let d = decode(&b).unwrap();
    match &d.records[..] {
        [Record::Sample(got)] => assert_eq!(got.user_stack.as_ref().unwrap().data.len(), 32),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_part_cut_short_is_corruption_and_a_longer_record_is_accepted() {
    let s = sample(64, vec![5; 64]);
    let b = one_record(&s);
    let full = b.len() - HEADER_SIZE;
    // The size field says 8 bytes less than the part needs.
    let mut cut = b.clone();
    cut[HEADER_SIZE + 2..HEADER_SIZE + 4].copy_from_slice(&((full - 8) as u16).to_le_bytes());
    cut.truncate(b.len() - 8);
    let d = decode(&cut).unwrap();
    assert!(d.records.is_empty());
    assert_eq!(
        d.error.unwrap().kind,
        ErrorKind::RecordTooSmall {
            rtype: TYPE_SAMPLE,
            size: (full - 8) as u16,
            needed: full
        }
    );
    // The stream ends inside the part: a truncated record.
    let d = decode(&b[..b.len() - 8]).unwrap();
    assert!(d.records.is_empty());
    assert!(d.error.unwrap().is_truncation());
    // A header that announces an area larger than the record.
    let mut big = b.clone();
    big[HEADER_SIZE + 44..HEADER_SIZE + 46].copy_from_slice(&8192u16.to_le_bytes());
    let d = decode(&big).unwrap();
    assert!(matches!(
        d.error.unwrap().kind,
        ErrorKind::RecordTooSmall { .. }
    ));
    // Bytes after the part (a later version's fields): skipped, with a warning.
    let mut longer = b.clone();
    longer[HEADER_SIZE + 2..HEADER_SIZE + 4].copy_from_slice(&((full + 16) as u16).to_le_bytes());
    longer.extend_from_slice(&[0xee; 16]);
    let d = decode(&longer).unwrap();
    assert!(d.error.is_none());
    assert!(matches!(
        d.warnings[..],
        [Warning::OversizedRecord {
            rtype: TYPE_SAMPLE,
            ..
        }]
    ));
    assert_eq!(d.records, [Record::Sample(s)]);
}

#[test]
fn readers_that_do_not_know_the_flag_skip_the_part() {
    // Such a reader sees the record without the flag bit: a SAMPLE larger
    // than its callchains, whose extra bytes it ignores.
    let s = sample(256, vec![3; 200]);
    let mut b = one_record(&s);
    let mut e = Encoder::new(&header());
    e.record(&Record::Comm(Comm::new(1, 80, 9, 8, "after")));
    b.extend_from_slice(&e.finish()[HEADER_SIZE..]);
    let mut old = b.clone();
    old[HEADER_SIZE + 6] &= !format::SAMPLE_FLAG_USER_STACK;
    let p = format::parse(Endian::Little, &old[HEADER_SIZE..]).unwrap();
    assert!(p.oversized());
    assert_eq!(p.needed, part_at(2));
    assert_eq!(
        p.user_callchain().collect::<Vec<_>>(),
        [0x40_2000, 0x40_3000]
    );
    assert_eq!(p.user_stack(), None);
    let d = decode(&old).unwrap();
    assert!(d.error.is_none());
    let mut without = s.clone();
    without.user_stack = None;
    assert_eq!(
        d.records,
        [
            Record::Sample(without),
            Record::Comm(Comm::new(1, 80, 9, 8, "after"))
        ]
    );
    // With the flag, the format's reader takes the part, and the next
    // record starts after it.
    let p = format::parse(Endian::Little, &b[HEADER_SIZE..]).unwrap();
    assert!(!p.oversized());
    assert_eq!(p.user_stack().unwrap().data, &[3; 200][..]);
    assert_eq!(decode(&b).unwrap().records.len(), 2);
}

#[test]
fn a_short_sample_ignores_the_flag_bytes_it_does_not_have() {
    // A version-1 SAMPLE (no extended flag) with bit 3 set: no part.
    let mut e = Encoder::new(&header());
    e.raw(
        TYPE_SAMPLE,
        0,
        format::SAMPLE_FLAG_USER_STACK,
        0,
        &[0u8; 24],
        None,
    );
    let d = decode(&e.finish()).unwrap();
    assert!(d.error.is_none(), "{d:?}");
    match &d.records[..] {
        [Record::Sample(s)] => assert_eq!(s.user_stack, None),
        other => panic!("{other:?}"),
    }
}
