//! `annotate SYMBOL` for a function of a kernel module: the samples (at the
//! addresses the module ran at) placed on the instructions of the function's
//! code from the module's object file (`--modules FILE`, a directory holding
//! `NAME.ko` or `NAME.ko.xz`, or by default the recording kernel's
//! `/lib/modules/RELEASE` under `--symfs`), its relocations named; refused,
//! saying why, without the file, with another build of the module, or with
//! a file that is no module.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;

/// A stand-in module: `mod_first` (ret), `mod_hot` (push rbp; mov rbp,rsp;
/// call ext_fn; mov eax,[counter]; pop rbp; ret: two relocations), then
/// `mod_last`, all in `.text`.
const MODULE_ASM: &str = r#"
    .text
    .globl mod_first
    .type mod_first,@function
mod_first:
    ret
    .size mod_first, .-mod_first
    .globl mod_hot
    .type mod_hot,@function
mod_hot:
    push %rbp
    mov %rsp,%rbp
    call ext_fn
    mov counter(%rip),%eax
    pop %rbp
    ret
    .size mod_hot, .-mod_hot
    .globl mod_last
    .type mod_last,@function
mod_last:
    nop
    ret
    .size mod_last, .-mod_last
    .data
    .globl counter
counter:
    .long 0
"#;

/// Where the module's `.text` ran.
const BASE: u64 = 0xffff_ffff_c0a0_0000;
/// mod_hot's offset in `.text`, and mod_last's.
const HOT: u64 = 1;
const LAST: u64 = 18;

fn module(dir: &Path) -> PathBuf {
    let src = dir.join("standin.S");
    std::fs::write(&src, MODULE_ASM).unwrap();
    let out = dir.join("standin.ko");
    sh(Command::new("cc").arg("-c").arg("-o").arg(&out).arg(&src));
    out
}

/// The kallsyms of the run: the stand-in module at `BASE`, its mod_last at
/// `last` (BASE + LAST where it is this build).
fn kallsyms(last: u64) -> String {
    format!(
        "ffffffff81000000 T _stext\nffffffff81100000 T _etext\n\
         {BASE:016x} t mod_first\t[standin]\n{:016x} t mod_hot\t[standin]\n{last:016x} t mod_last\t[standin]\n",
        BASE + HOT
    )
}

/// A recording of samples in mod_hot at `offsets` from its start, with the
/// given kallsyms and the kernel release `release` in its side-car.
fn recording(dir: &Path, offsets: &[u64], kallsyms: &str, release: &str) -> PathBuf {
    let pcs: Vec<u64> = offsets.iter().map(|o| BASE + HOT + o).collect();
    let file = kernel_recording(dir, "kthread", &pcs);
    let meta = dir.join("oprofile.data.meta");
    std::fs::write(meta.join("kallsyms"), kallsyms).unwrap();
    std::fs::write(
        meta.join("modules"),
        format!("standin 4096 0 - Live {BASE:#x} (O)\n"),
    )
    .unwrap();
    std::fs::write(meta.join("info"), format!("kernel-release: {release}\n")).unwrap();
    file
}

fn annotate(args: &[&str]) -> (bool, String, String) {
    run_tool_any(&[&["annotate"], args].concat())
}

/// The annotation's line at `addr`, split into words.
fn row(out: &str, addr: u64) -> Vec<String> {
    let a = format!("{addr:x}");
    out.lines()
        .map(|l| l.split_whitespace().map(str::to_string).collect::<Vec<_>>())
        .find(|l| l.contains(&a))
        .unwrap_or_else(|| panic!("no line at {a}: {out}"))
}

#[test]
fn samples_land_on_the_module_functions_instructions_with_its_relocations_named() {
    let dir = tempfile::tempdir().unwrap();
    let ko = module(dir.path());
    // mov rbp,rsp ×3, the call ×1, and one in the middle of the mov.
    let file = recording(
        dir.path(),
        &[1, 1, 1, 4, 2],
        &kallsyms(BASE + LAST),
        "9.9.9",
    );
    let f = file.to_str().unwrap();
    let (ok, out, err) = annotate(&["mod_hot", "-i", f, "--modules", ko.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert!(
        out.starts_with(&format!(
            "# mod_hot ({}), 5 samples, 1 not on an instruction start",
            ko.display()
        )),
        "{out}"
    );
    let hot = BASE + HOT;
    assert_eq!(
        row(&out, hot),
        [format!("{hot:x}"), "push".into(), "rbp".into()]
    );
    assert_eq!(
        row(&out, hot + 1),
        ["60.00", "3", &format!("{:x}", hot + 1), "mov", "rbp,rsp"]
    );
    // The call's target is the relocation's symbol (the file's bytes say
    // "the next instruction").
    let call = row(&out, hot + 4);
    assert_eq!(call[..3], ["20.00", "1", &format!("{:x}", hot + 4)[..]]);
    assert_eq!(call[3], "call");
    assert_eq!(call[call.len() - 2..], [";", "ext_fn"], "{out}");
    let load = row(&out, hot + 9);
    assert_eq!(load[load.len() - 2..], [";", "counter"], "{out}");
    assert_eq!(row(&out, hot + 16)[1], "ret");
    assert!(
        !out.contains(&format!("{:x}", BASE + LAST)),
        "mod_last: {out}"
    );

    // The same from a directory holding it compressed (Debian's .ko.xz),
    // under a file name with '-' for the module's '_'-less name.
    let tree = dir.path().join("tree/kernel/drivers/misc");
    std::fs::create_dir_all(&tree).unwrap();
    let mut xz = Vec::new();
    lzma_rs::xz_compress(
        &mut std::io::BufReader::new(&std::fs::read(&ko).unwrap()[..]),
        &mut xz,
    )
    .unwrap();
    std::fs::write(tree.join("standin.ko.xz"), xz).unwrap();
    let (ok, out2, err) = annotate(&[
        "mod_hot",
        "-i",
        f,
        "--modules",
        dir.path().join("tree").to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    assert_eq!(
        out2.lines().skip(1).collect::<Vec<_>>(),
        out.lines().skip(1).collect::<Vec<_>>()
    );
    assert!(out2.contains("standin.ko.xz"), "{out2}");

    // By default, the recording kernel's module tree (here under --symfs).
    let root = dir.path().join("root");
    let kdir = root.join("lib/modules/9.9.9/updates/dkms");
    std::fs::create_dir_all(&kdir).unwrap();
    std::fs::copy(&ko, kdir.join("standin.ko")).unwrap();
    let (ok, out3, err) = annotate(&["mod_hot", "-i", f, "--symfs", root.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert!(
        out3.starts_with(&format!(
            "# mod_hot ({}), 5 samples",
            kdir.join("standin.ko").display()
        )),
        "{out3}"
    );
}

#[test]
fn without_the_module_or_with_another_build_it_says_why() {
    let refused = |file: &Path, modules: Option<&Path>| -> String {
        let mut args = vec!["mod_hot", "-i", file.to_str().unwrap()];
        if let Some(m) = modules {
            args.extend(["--modules", m.to_str().unwrap()]);
        }
        let (ok, _, err) = annotate(&args);
        assert!(!ok, "{args:?} succeeded");
        err
    };
    let dir = tempfile::tempdir().unwrap();
    let ko = module(dir.path());
    let file = recording(dir.path(), &[1, 4], &kallsyms(BASE + LAST), "0.0.0-none");
    // No --modules, and no /lib/modules/0.0.0-none.
    let err = refused(&file, None);
    assert!(
        err.contains("/lib/modules/0.0.0-none") && err.contains("--modules PATH"),
        "{err}"
    );
    // A directory without it.
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let err = refused(&file, Some(&empty));
    assert!(err.contains("has no standin.ko or standin.ko.xz"), "{err}");
    let err = refused(&file, Some(&dir.path().join("nope")));
    assert!(err.contains("no such file or directory"), "{err}");
    // Another build: mod_last ran 0x40 further than this file puts it.
    let dir2 = tempfile::tempdir().unwrap();
    let other = recording(
        dir2.path(),
        &[1],
        &kallsyms(BASE + LAST + 0x40),
        "0.0.0-none",
    );
    let err = refused(&other, Some(&ko));
    assert!(
        err.contains("is not the object file of the module standin recorded"),
        "{err}"
    );
    // Not a module: an executable, and gzip data.
    let err = refused(&file, Some(&victim().path));
    assert!(err.contains("is not a kernel module"), "{err}");
    let gz = dir.path().join("standin.ko.gz");
    std::fs::write(&gz, [0x1f, 0x8b, 8, 0, 0, 0, 0, 0]).unwrap();
    let err = refused(&file, Some(&gz));
    assert!(err.contains("gzip or zstd"), "{err}");
    // Corrupt xz: an error, not a panic.
    let bad = dir.path().join("standin.ko.xz");
    std::fs::write(&bad, b"\xfd7zXZ\0garbage").unwrap();
    let err = refused(&file, Some(&bad));
    assert!(err.contains("not valid xz") || err.contains("xz"), "{err}");
}
