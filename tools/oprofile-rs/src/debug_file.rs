//! A binary's separate debug file (a distribution's debug package, a build
//! split with `objcopy --only-keep-debug`), found as gdb and perf find it:
//! by build-id, then by `.gnu_debuglink`.

use std::path::{Path, PathBuf};

/// The separate debug file of the ELF file `file` read at `real`, found as
/// gdb and perf find it: by build-id (`DIR/.build-id/ab/cdef….debug`), then
/// by `.gnu_debuglink` (next to the binary, in its `.debug/`, in `DIR/` and
/// in `DIR/<binary's directory>/`), for each debug directory DIR; one whose
/// build-id differs from the binary's is not its. None where the binary
/// has DWARF itself. Its path and its bytes.
pub(crate) fn debug_file(
    real: &Path,
    file: &object::File<'_>,
    dirs: &[PathBuf],
) -> Option<(PathBuf, Vec<u8>)> {
    use object::Object;
    if file.section_by_name(".debug_info").is_some() {
        return None;
    }
    let id = file.build_id().ok().flatten();
    let mut candidates = Vec::new();
    if let Some((first, rest)) = id.and_then(|id| id.split_first()) {
        let rest: String = rest.iter().map(|b| format!("{b:02x}")).collect();
        for d in dirs {
            candidates.push(
                d.join(".build-id")
                    .join(format!("{first:02x}"))
                    .join(format!("{rest}.debug")),
            );
        }
    }
    if let Some((link, _crc)) = file.gnu_debuglink().ok().flatten() {
        let link = PathBuf::from(crate::text::from_bytes(link).into_owned());
        let dir = real.parent().unwrap_or(Path::new("/"));
        candidates.push(dir.join(&link));
        candidates.push(dir.join(".debug").join(&link));
        for d in dirs {
            candidates.push(d.join(&link));
            candidates.push(d.join(dir.strip_prefix("/").unwrap_or(dir)).join(&link));
        }
    }
    candidates.into_iter().find_map(|c| {
        if c.as_path() == real || !c.is_file() {
            return None;
        }
        let data = std::fs::read(&c).ok()?;
        let theirs = object::File::parse(&*data)
            .ok()?
            .build_id()
            .ok()
            .flatten()
            .map(<[u8]>::to_vec);
        match (id, theirs) {
            (Some(ours), Some(theirs)) if ours != theirs => None,
            _ => Some((c, data)),
        }
    })
}
