//! A kernel module's object file: found by the module's name under a
//! module tree (`/lib/modules/RELEASE`), and read (decompressed where it is
//! `.ko.xz`).

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

/// `NAME.ko` or `NAME.ko.xz` under `dir` (module names use `_` where file
/// names may use `-`), searched depth first; symbolic links to directories
/// (`/lib/modules/R/build`, `source`) are not followed.
pub(crate) fn search_module(
    dir: &Path,
    module: &str,
    depth: u32,
) -> std::io::Result<Option<PathBuf>> {
    if depth > 8 {
        return Ok(None);
    }
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if depth == 0 => return Err(e),
        Err(_) => return Ok(None),
    };
    let mut subdirs = Vec::new();
    for e in rd.flatten() {
        let Ok(ty) = e.file_type() else { continue };
        let name = e.file_name().to_string_lossy().replace('-', "_");
        if ty.is_dir() {
            subdirs.push(e.path());
        } else if name == format!("{module}.ko") || name == format!("{module}.ko.xz") {
            return Ok(Some(e.path()));
        }
    }
    subdirs.sort();
    for d in subdirs {
        if let Some(p) = search_module(&d, module, depth + 1)? {
            return Ok(Some(p));
        }
    }
    Ok(None)
}

/// Largest module accepted (decompressed).
const MAX_MODULE: usize = 512 << 20;

/// A module's object file, decompressed if it is `.ko.xz`.
pub(crate) fn read_module(path: &Path) -> Result<Vec<u8>> {
    let data = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    match data.get(..6) {
        Some(b"\xfd7zXZ\0") => crate::symbols::xz_decompress(&data, MAX_MODULE)
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display())),
        Some([0x1f, 0x8b, ..]) | Some([0x28, 0xb5, 0x2f, 0xfd, ..]) => bail!(
            "{}: compressed with gzip or zstd, which annotate does not read: decompress it \
             (gunzip, zstd -d) and give the .ko with --modules",
            path.display()
        ),
        _ => Ok(data),
    }
}
