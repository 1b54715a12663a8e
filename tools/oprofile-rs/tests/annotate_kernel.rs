//! `annotate SYMBOL --vmlinux PATH` for a kernel function: the samples (at
//! the addresses the kernel ran at, KASLR included) placed on the
//! instructions of the function's code from the kernel's image; refused,
//! saying why, without the image, with another kernel's image, or for a
//! function the image lacks.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;

/// A stand-in for vmlinux: `_stext`, then `kfunc` (push rbp; mov rbp,rsp;
/// nop; pop rbp; ret), then `knext`, then `kcaller` (calls knext, loads
/// the address of `kdata`), linked at the kernel's usual address, with
/// DWARF lines (of this source).
const IMAGE_ASM: &str = r#"
    .text
    .globl _stext
_stext:
    nop
    .globl kfunc
    .type kfunc,@function
kfunc:
    push %rbp
    mov %rsp,%rbp
    nop
    pop %rbp
    ret
    .size kfunc, .-kfunc
    .globl knext
    .type knext,@function
knext:
    ret
    .size knext, .-knext
    .globl kcaller
    .type kcaller,@function
kcaller:
    call knext /* KCALL */
    lea kdata(%rip),%rax /* KDATA */
    ret
    .size kcaller, .-kcaller
    .data
    .globl kdata
    .type kdata,@object
kdata:
    .quad 0
    .size kdata, 8
"#;

const LINKED_AT: u64 = 0xffff_ffff_8100_0000;
/// Where the kernel ran (KASLR moved it by 0x900_0000).
const RAN_AT: u64 = 0xffff_ffff_8a00_0000;

fn image(dir: &Path) -> PathBuf {
    let src = dir.join("image.S");
    std::fs::write(&src, IMAGE_ASM).unwrap();
    let out = dir.join("vmlinux");
    sh(Command::new("cc")
        .args(["-g", "-nostdlib", "-static", "-no-pie"])
        .arg(format!("-Wl,-Ttext={LINKED_AT:#x}"))
        .args(["-Wl,-e,_stext", "-Wl,--build-id=none", "-o"])
        .arg(&out)
        .arg(&src));
    out
}

/// The kallsyms of the run: `_stext` and `kfunc` at `stext` and `kfunc`.
fn kallsyms(stext: u64, kfunc: u64) -> String {
    format!(
        "{stext:016x} T _stext\n{kfunc:016x} T kfunc\n{:016x} T knext\n{:016x} T _etext\n",
        kfunc + 6,
        kfunc + 7
    )
}

/// A recording of kernel samples at `pcs` (kfunc's start + offset), with
/// the given kallsyms.
fn recording(dir: &Path, kfunc: u64, offsets: &[u64], kallsyms: &str) -> PathBuf {
    let pcs: Vec<u64> = offsets.iter().map(|o| kfunc + o).collect();
    let file = kernel_recording(dir, "victim", &pcs);
    std::fs::write(dir.join("oprofile.data.meta/kallsyms"), kallsyms).unwrap();
    file
}

fn annotate(args: &[&str]) -> (bool, String, String) {
    run_tool_any(&[&["annotate"], args].concat())
}

#[test]
fn samples_land_on_the_kernel_functions_instructions_where_it_ran() {
    let dir = tempfile::tempdir().unwrap();
    let vmlinux = image(dir.path());
    let kfunc = RAN_AT + 1;
    // mov ×3, nop ×1, and one in the middle of the mov.
    let file = recording(
        dir.path(),
        kfunc,
        &[1, 1, 1, 4, 2],
        &kallsyms(RAN_AT, kfunc),
    );
    let f = file.to_str().unwrap();
    let (ok, out, err) = annotate(&["kfunc", "-i", f, "--vmlinux", vmlinux.to_str().unwrap()]);
    assert!(ok, "{err}");
    let lines: Vec<Vec<&str>> = out
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert!(
        out.starts_with(&format!(
            "# kfunc ({}), 5 samples, 1 not on an instruction start",
            vmlinux.display()
        )),
        "{out}"
    );
    let row = |addr: u64| -> Vec<&str> {
        let a = format!("{addr:x}");
        lines
            .iter()
            .find(|l| l.contains(&a.as_str()))
            .unwrap_or_else(|| panic!("no line at {a}: {out}"))
            .clone()
    };
    // Addresses as the kernel ran; weights on their instructions.
    assert_eq!(row(kfunc), [&format!("{kfunc:x}")[..], "push", "rbp"]);
    assert_eq!(
        row(kfunc + 1),
        [
            "60.00",
            "3",
            &format!("{:x}", kfunc + 1)[..],
            "mov",
            "rbp,rsp"
        ]
    );
    assert_eq!(
        row(kfunc + 4),
        ["20.00", "1", &format!("{:x}", kfunc + 4)[..], "nop"]
    );
    assert_eq!(row(kfunc + 6), [&format!("{:x}", kfunc + 6)[..], "ret"]);
    assert!(!out.contains(&format!("{:x}", kfunc + 7)), "knext: {out}");
}

#[test]
fn without_the_image_or_with_another_kernels_it_says_why() {
    // annotate SYMBOL -i FILE [-k IMAGE] must fail: its error.
    let refused = |symbol: &str, file: &Path, image: Option<&Path>| -> String {
        let mut args = vec![symbol, "-i", file.to_str().unwrap()];
        if let Some(i) = image {
            args.extend(["-k", i.to_str().unwrap()]);
        }
        let (ok, _, err) = annotate(&args);
        assert!(!ok, "{args:?} succeeded");
        err
    };
    let dir = tempfile::tempdir().unwrap();
    let vmlinux = image(dir.path());
    let kfunc = RAN_AT + 1;
    let file = recording(dir.path(), kfunc, &[1, 4], &kallsyms(RAN_AT, kfunc));
    let err = refused("kfunc", &file, None);
    assert!(
        err.contains("kfunc is a kernel function") && err.contains("--vmlinux PATH"),
        "{err}"
    );
    // kfunc moved by another offset than _stext: not this kernel's image.
    let dir2 = tempfile::tempdir().unwrap();
    let moved = RAN_AT + 0x10_0001;
    let moved_file = recording(dir2.path(), moved, &[1], &kallsyms(RAN_AT, moved));
    let err = refused("kfunc", &moved_file, Some(&vmlinux));
    assert!(
        err.contains("is not the image of the kernel recorded"),
        "{err}"
    );
    // A function the image lacks.
    let dir3 = tempfile::tempdir().unwrap();
    let ks = kallsyms(RAN_AT, kfunc).replace(" kfunc\n", " other_func\n");
    let other = recording(dir3.path(), kfunc, &[1], &ks);
    let err = refused("other_func", &other, Some(&vmlinux));
    assert!(err.contains("has no symbol other_func"), "{err}");
    // Not an ELF file.
    let err = refused("kfunc", &file, Some(&file));
    assert!(
        err.contains("cannot disassemble") || err.contains("not an ELF"),
        "{err}"
    );
    // A recording without kallsyms: its kernel samples name no function.
    std::fs::remove_file(dir.path().join("oprofile.data.meta/kallsyms")).unwrap();
    let err = refused("kfunc", &file, Some(&vmlinux));
    assert!(err.contains("no sample in a function named kfunc"), "{err}");
}

/// The kernel function's source lines (DWARF of the image) come first and
/// between its instructions, and its call and RIP-relative targets are
/// named by the image's symbols at the addresses the kernel ran at.
#[test]
fn source_lines_and_targets_of_a_kernel_function() {
    let dir = tempfile::tempdir().unwrap();
    let vmlinux = image(dir.path());
    let link = |name: &str| elf_sym(&vmlinux, name).0;
    let slide = RAN_AT - LINKED_AT;
    let kcaller = link("kcaller") + slide;
    let ks = format!(
        "{RAN_AT:016x} T _stext\n{:016x} T knext\n{kcaller:016x} T kcaller\n{:016x} T _etext\n",
        link("knext") + slide,
        kcaller + 13
    );
    // 3 on the call (5 bytes), 1 on the lea.
    let file = recording(dir.path(), kcaller, &[0, 0, 0, 5], &ks);
    let f = file.to_str().unwrap();
    let (ok, out, err) = annotate(&["kcaller", "-i", f, "--vmlinux", vmlinux.to_str().unwrap()]);
    assert!(ok, "{err}");
    let line_of = |marker: &str| IMAGE_ASM.lines().position(|l| l.contains(marker)).unwrap() + 1;
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[1],
        format!("# source: {}", dir.path().join("image.S").display()),
        "{out}"
    );
    let summary = lines
        .iter()
        .position(|l| *l == "# hottest source lines:")
        .unwrap_or_else(|| panic!("{out}"));
    let call = format!("image.S:{}", line_of("KCALL"));
    assert_eq!(
        lines[summary + 2].split_whitespace().collect::<Vec<_>>(),
        [
            "75.00",
            "3",
            &call[..],
            "call",
            "knext",
            "/*",
            "KCALL",
            "*/"
        ],
        "{out}"
    );
    let row = |addr: u64| -> Vec<&str> {
        let a = format!("{addr:x}");
        lines
            .iter()
            .map(|l| l.split_whitespace().collect::<Vec<_>>())
            .find(|l| l.iter().take(3).any(|w| *w == a))
            .unwrap_or_else(|| panic!("no line at {a}: {out}"))
    };
    let knext = format!("{:x}", link("knext") + slide);
    assert_eq!(
        row(kcaller),
        [
            "75.00",
            "3",
            &format!("{kcaller:x}")[..],
            "call",
            &knext[..],
            "<knext>"
        ],
        "{out}"
    );
    let kdata = format!("{:x}", link("kdata") + slide);
    assert_eq!(row(kcaller + 5)[5..], [";", &kdata[..], "<kdata>"], "{out}");
    // The lea's source row is between the call and the lea.
    let lea = lines
        .iter()
        .position(|l| l.contains(&format!("{:x}  lea", kcaller + 5)))
        .unwrap();
    assert!(
        lines[lea - 1]
            .trim()
            .starts_with(&format!("image.S:{}", line_of("KDATA"))),
        "{out}"
    );
}
