//! The unwind tables' format (`format::unwind`): what `check` refuses and
//! what `find` answers, as the module and the tool both use them.

use oprofile_format::unwind::{self, Row, TableError};

fn row(addr: u32, rule: u8, cfa: u16, bp: i8) -> Row {
    Row {
        addr,
        rule,
        bp,
        cfa,
    }
}

fn table(rows: &[Row]) -> Vec<u8> {
    let mut b = unwind::head(rows.len() as u32).to_vec();
    for r in rows {
        b.extend_from_slice(&r.encoded());
    }
    b
}

fn good() -> Vec<Row> {
    vec![
        row(0x1000, unwind::CFA_SP, 8, 0),
        row(0x1001, unwind::CFA_SP, 16, -2),
        row(0x1004, unwind::CFA_BP, 16, -2),
        row(0x1040, unwind::UNKNOWN, 0, 0),
        row(0x2000, unwind::END, 0, 0),
        row(0x2010, unwind::UNKNOWN, 0, 0),
    ]
}

#[test]
fn a_good_table_is_taken_and_searched() {
    let t = table(&good());
    let rows = unwind::check(&t).expect("a good table");
    assert_eq!(rows.len(), 6 * unwind::ROW_LEN);
    assert_eq!(unwind::find(rows, 0xfff), None);
    for (addr, want) in [
        (0x1000, 0),
        (0x1003, 1),
        (0x1004, 2),
        (0x103f, 2),
        (0x1040, 3),
        (0x2000, 4),
        (0x200f, 4),
        (0x2010, 5),
        (u64::MAX, 5),
    ] {
        assert_eq!(unwind::find(rows, addr), Some(good()[want]), "{addr:#x}");
    }
    for r in good() {
        assert_eq!(Row::decode(&r.encoded()), Some(r));
    }
}

#[test]
fn bad_tables_are_refused_with_their_reason() {
    let good_rows = good();
    let mut cases: Vec<(Vec<u8>, TableError)> = vec![
        (vec![], TableError::Length),
        (table(&good_rows)[..15].to_vec(), TableError::Length),
        (unwind::head(0).to_vec(), TableError::Rows),
        (
            unwind::head(unwind::MAX_ROWS + 1).to_vec(),
            TableError::Rows,
        ),
    ];
    // A row short, a byte too many.
    let t = table(&good_rows);
    cases.push((t[..t.len() - 1].to_vec(), TableError::Length));
    let mut long = t.clone();
    long.push(0);
    cases.push((long, TableError::Length));
    // The magic, the reserved word.
    let mut m = t.clone();
    m[0] ^= 1;
    cases.push((m, TableError::Head));
    let mut r = t.clone();
    r[12] = 1;
    cases.push((r, TableError::Head));
    // A rule the walk does not know; a positive bp.
    let mut bad = good_rows.clone();
    bad[1].rule = 4;
    cases.push((table(&bad), TableError::Rule));
    let mut bad = good_rows.clone();
    bad[1].bp = 1;
    cases.push((table(&bad), TableError::Rule));
    // Out of order, equal addresses.
    let mut bad = good_rows.clone();
    bad.swap(1, 2);
    cases.push((table(&bad), TableError::Order));
    let mut bad = good_rows.clone();
    bad[2].addr = bad[1].addr;
    cases.push((table(&bad), TableError::Order));
    // Not ended by UNKNOWN.
    cases.push((table(&good_rows[..5]), TableError::End));
    for (i, (bytes, want)) in cases.iter().enumerate() {
        assert_eq!(unwind::check(bytes).err(), Some(*want), "case {i}");
    }
}

#[test]
fn the_cfa_of_each_rule() {
    assert_eq!(
        unwind::cfa(&row(0, unwind::CFA_SP, 24, 0), 100, 200),
        Some(124)
    );
    assert_eq!(
        unwind::cfa(&row(0, unwind::CFA_BP, 16, -2), 100, 200),
        Some(216)
    );
    assert_eq!(unwind::cfa(&row(0, unwind::END, 0, 0), 100, 200), None);
    assert_eq!(unwind::cfa(&row(0, unwind::UNKNOWN, 0, 0), 100, 200), None);
    assert_eq!(
        unwind::cfa(&row(0, unwind::CFA_SP, 8, 0), u64::MAX - 4, 0),
        None
    );
}
