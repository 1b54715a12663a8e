mod common;

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use common::*;
use oprofile_tool::maps::parse_maps;
use oprofile_tool::symbols::{ElfSymbols, Kallsyms, Resolver};

#[test]
fn user_addresses_resolve_through_fake_maps() {
    let v = victim();
    let maps = HashMap::from([(PID, parse_maps(&fake_maps(v, &v.path)))]);
    let r = Resolver::new(None, maps, None);
    for name in ["alpha", "beta", "gamma_fn", "main"] {
        let (_, size) = v.syms[name];
        for delta in [0, size / 2, size - 1] {
            let f = r.resolve(false, PID, sym_addr(v, name, delta));
            assert_eq!(f.symbol.as_deref(), Some(name), "{name}+{delta}");
            assert_eq!(f.dso, v.path.file_name().unwrap().to_str().unwrap());
            assert_eq!(f.path.as_deref(), Some(v.path.to_str().unwrap()));
        }
    }
    // Unknown process: never guessed.
    let f = r.resolve(false, 999, sym_addr(v, "alpha", 0));
    assert_eq!(f.symbol, None);
    assert!(f.name().starts_with("[unknown] 0x"), "{}", f.name());
    // vdso: no file behind it.
    let f = r.resolve(false, PID, 0x7ffff7fc1010);
    assert_eq!((f.symbol.as_ref(), f.dso.as_str()), (None, "[vdso]"));
    assert!(r
        .take_warnings()
        .iter()
        .any(|w| w.contains("no maps captured for pid 999")));
}

#[test]
fn stripped_or_unreadable_binary_gives_binary_plus_offset() {
    let v = victim();
    let missing = v.path.with_file_name("does-not-exist");
    for (file, label) in [
        (
            &v.stripped,
            v.stripped.file_name().unwrap().to_str().unwrap(),
        ),
        (&missing, "does-not-exist"),
    ] {
        let maps = HashMap::from([(PID, parse_maps(&fake_maps(v, file)))]);
        let r = Resolver::new(None, maps, None);
        let addr = sym_addr(v, "alpha", 4);
        let f = r.resolve(false, PID, addr);
        assert_eq!(f.symbol, None);
        // File offset of alpha+4 through the program headers.
        let va = v.syms["alpha"].0 + 4;
        let (off, pva, ..) = v
            .loads
            .iter()
            .find(|(_, pva, fsz, _)| va >= *pva && va < pva + fsz)
            .unwrap();
        let want_off = va - pva + off;
        assert_eq!(f.file_offset, Some(want_off));
        assert_eq!(f.name(), format!("[{label}]+{want_off:#x}"));
    }
}

#[test]
fn symfs_prefix_is_used() {
    let v = victim();
    let dir = v.path.parent().unwrap();
    let name = v.path.file_name().unwrap().to_str().unwrap();
    let maps = HashMap::from([(
        PID,
        parse_maps(&fake_maps(v, std::path::Path::new(&format!("/{name}")))),
    )]);
    let r = Resolver::new(None, maps, Some(dir.to_path_buf()));
    assert_eq!(
        r.resolve(false, PID, sym_addr(v, "beta", 1))
            .symbol
            .as_deref(),
        Some("beta")
    );
}

#[test]
fn elf_symbols_offsets_and_extents() {
    let v = victim();
    let elf = ElfSymbols::parse(&std::fs::read(&v.path).unwrap()).unwrap();
    let (a, sz) = v.syms["alpha"];
    assert_eq!(elf.lookup(a), Some("alpha"));
    assert_eq!(elf.lookup(a + sz - 1), Some("alpha"));
    assert_ne!(elf.lookup(a + sz), Some("alpha"));
    assert!(ElfSymbols::parse(b"not an elf").is_err());
}

/// End to end with a live process: its real /proc/<pid>/maps and the
/// addresses it prints.
#[test]
fn live_process_maps() {
    let v = victim();
    let mut child = Command::new(&v.path)
        .arg("5")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let maps = std::fs::read_to_string(format!("/proc/{}/maps", child.id())).unwrap();
    let _ = child.kill();
    let _ = child.wait();
    let addrs: Vec<u64> = line
        .split_whitespace()
        .map(|a| u64::from_str_radix(a.trim_start_matches("0x"), 16).unwrap())
        .collect();
    let r = Resolver::new(None, HashMap::from([(77, parse_maps(&maps))]), None);
    for (addr, name) in addrs.iter().zip(["alpha", "beta", "gamma_fn"]) {
        assert_eq!(
            r.resolve(false, 77, *addr + 2).symbol.as_deref(),
            Some(name)
        );
    }
}

#[test]
fn kallsyms_resolution_with_modules() {
    let k = Kallsyms::parse(KALLSYMS, Some(MODULES));
    let name = |a| k.resolve(a).symbol;
    assert_eq!(name(0xffffffff81001000).as_deref(), Some("do_syscall_64"));
    assert_eq!(name(0xffffffff810013ff).as_deref(), Some("do_syscall_64"));
    assert_eq!(name(0xffffffff81001400).as_deref(), Some("__schedule"));
    assert_eq!(name(0xffffffff81002000), None); // _etext: last core text symbol
    assert_eq!(name(0xffffffff81500000), None);
    assert_eq!(name(0xffffffff80ffffff), None);
    let f = k.resolve(0xffffffffc0100210);
    assert_eq!(
        (f.symbol.as_deref(), f.dso.as_str()),
        (Some("opr_drain"), "[oprofile]")
    );
    assert_eq!(k.resolve(0xffffffff81001410).dso, "[kernel.kallsyms]");
    assert_eq!(
        k.resolve(0xffffffff81002010).name(),
        "[unknown] 0xffffffff81002010"
    );
}

#[test]
fn vdso_addresses_resolve_through_the_captured_image() {
    use object::{Object, ObjectSymbol};
    // This process's vDSO, as `record` captures it.
    let image = oprofile_tool::record::own_vdso().expect("no vDSO in this process");
    let file = object::File::parse(&*image).unwrap();
    let sym = file
        .dynamic_symbols()
        .find(|s| s.name().is_ok_and(|n| n.contains("clock_gettime")) && s.size() > 1)
        .expect("the vDSO exports clock_gettime");
    let start = 0x7fff_f7fc_0000u64;
    let maps = format!(
        "{start:x}-{:x} r-xp 00000000 00:00 0                  [vdso]\n",
        start + image.len() as u64
    );
    let mut r = Resolver::new(None, HashMap::from([(PID, parse_maps(&maps))]), None);
    let addr = start + sym.address() + sym.size() / 2;
    // Without the image: [vdso] without a symbol.
    assert_eq!(r.resolve(false, PID, addr).symbol, None);
    let mut r2 = Resolver::new(None, HashMap::from([(PID, parse_maps(&maps))]), None);
    r2.set_vdso(&image).unwrap();
    let f = r2.resolve(false, PID, addr);
    assert!(
        f.symbol
            .as_deref()
            .is_some_and(|s| s.contains("clock_gettime")),
        "{f:?}"
    );
    assert_eq!(f.dso, "[vdso]");
    // Garbage is refused, not trusted.
    assert!(r.set_vdso(b"not an ELF image").is_err());
}
