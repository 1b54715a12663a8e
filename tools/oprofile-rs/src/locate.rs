//! Where the files a recording needs are read, by build-id: the archive's
//! copy (`oprofile-rs archive`, `.build-id/ab/cdef…` as perf's `~/.debug`
//! and `/usr/lib/debug` lay them out), then the local file at the mapped
//! path if it is the same build, then debuginfod (`DEBUGINFOD_URLS`).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::debuginfod::{Debuginfod, Kind};

/// Hex of a build-id's bytes.
pub fn hex(id: &[u8]) -> String {
    id.iter().map(|b| format!("{b:02x}")).collect()
}

/// The build-id of the ELF file at `path` (hex), reading only the parts of
/// the file that hold it.
pub fn file_build_id(path: &Path) -> Option<String> {
    use object::Object;
    let f = std::fs::File::open(path).ok()?;
    let cache = object::ReadCache::new(f);
    let obj = object::File::parse(&cache).ok()?;
    obj.build_id().ok().flatten().map(hex)
}

/// `.build-id/ab/cdef…` (`.debug` appended for a debug file) of build-id
/// `id` (hex), relative to a directory of that layout.
pub fn build_id_path(id: &str, debug: bool) -> Option<PathBuf> {
    if !crate::debuginfod::valid_build_id(id) {
        return None;
    }
    let (first, rest) = id.split_at(2);
    let name = if debug {
        format!("{rest}.debug")
    } else {
        rest.to_string()
    };
    Some(PathBuf::from(".build-id").join(first).join(name))
}

/// The GNU build-id (hex) in a sequence of ELF notes, as the kernel shows
/// its own in `/sys/kernel/notes` and a module's in
/// `/sys/module/NAME/notes/.note.gnu.build-id` (the machine's byte order;
/// 4-byte aligned). `None` for garbage or where no such note is.
pub fn build_id_from_notes(data: &[u8]) -> Option<String> {
    const NT_GNU_BUILD_ID: u32 = 3;
    let word = |at: usize| -> Option<u32> {
        Some(u32::from_ne_bytes(
            data.get(at..at.checked_add(4)?)?.try_into().ok()?,
        ))
    };
    let align = |n: usize| n.checked_add(3).map(|n| n & !3);
    let mut at = 0usize;
    while at.checked_add(12)? <= data.len() {
        let namesz = word(at)? as usize;
        let descsz = word(at + 4)? as usize;
        let ty = word(at + 8)?;
        let name_at = at + 12;
        let desc_at = name_at.checked_add(align(namesz)?)?;
        let end = desc_at.checked_add(align(descsz)?)?;
        let name = data.get(name_at..name_at.checked_add(namesz)?)?;
        let desc = data.get(desc_at..desc_at.checked_add(descsz)?)?;
        if ty == NT_GNU_BUILD_ID && name == b"GNU\0" && !desc.is_empty() {
            return Some(hex(desc));
        }
        if end <= at {
            return None;
        }
        at = end;
    }
    None
}

/// Where the resolver, the unwinder and `annotate` find files.
#[derive(Debug, Default)]
pub struct Locator {
    /// The unpacked archive the recording was read from (it holds
    /// `.build-id/`).
    pub archive: Option<PathBuf>,
    /// Mapped path → the build-id the archive's manifest gives it (for
    /// mappings whose record carries none: the `/proc` snapshot's).
    pub known: HashMap<String, String>,
    /// The kernel's and its modules' build-ids (side-car `build-ids`):
    /// `kernel` or the module's name → hex.
    pub kernel: HashMap<String, String>,
    pub debuginfod: Option<Debuginfod>,
    /// Never read a local file whose build-id differs from the one known
    /// (a recording read from an archive); otherwise it is read, with a
    /// warning, when nothing else has the right one.
    pub strict: bool,
}

impl Locator {
    /// The build-id of the binary mapped at `mapped`: the mapping's own
    /// (the kernel's record), else the manifest's.
    pub fn known_id<'a>(&'a self, mapped: &str, recorded: Option<&'a str>) -> Option<&'a str> {
        recorded.or_else(|| self.known.get(mapped).map(String::as_str))
    }

    /// The archive's copy of build-id `id` (`debug`: its debug file).
    pub fn in_archive(&self, id: &str, debug: bool) -> Option<PathBuf> {
        let p = self.archive.as_ref()?.join(build_id_path(id, debug)?);
        p.is_file().then_some(p)
    }

    /// The separate debug file of build-id `id`: the archive's, else
    /// debuginfod's (`Err`: a note on why debuginfod had none).
    pub fn debuginfo(&self, id: &str) -> Result<Option<PathBuf>, String> {
        if let Some(p) = self.in_archive(id, true) {
            return Ok(Some(p));
        }
        match &self.debuginfod {
            Some(d) => d.fetch(id, Kind::Debuginfo).map(Some),
            None => Ok(None),
        }
    }

    /// The file to read for a binary read locally at `real`, of build-id
    /// `id` where one is known, and its bytes: the archive's copy; else the
    /// local file if it is that build (or none is known); else
    /// debuginfod's; else, unless strict, the local file of another build.
    /// `note(key, text)` takes what the user should hear (once per key).
    pub fn executable(
        &self,
        real: &Path,
        id: Option<&str>,
        note: &mut dyn FnMut(String, String),
    ) -> Option<(PathBuf, Vec<u8>)> {
        if let Some(p) = id.and_then(|id| self.in_archive(id, false)) {
            match std::fs::read(&p) {
                Ok(d) => return Some((p, d)),
                Err(e) => note(
                    format!("read {}", p.display()),
                    format!("cannot read {}: {e}", p.display()),
                ),
            }
        }
        let local = std::fs::read(real);
        let fetched = |note: &mut dyn FnMut(String, String)| -> Option<(PathBuf, Vec<u8>)> {
            let (id, d) = (id?, self.debuginfod.as_ref()?);
            match d.fetch(id, Kind::Executable) {
                Ok(p) => match std::fs::read(&p) {
                    Ok(data) => Some((p, data)),
                    Err(e) => {
                        note(
                            format!("read {}", p.display()),
                            format!("cannot read {}: {e}", p.display()),
                        );
                        None
                    }
                },
                Err(why) => {
                    note(format!("debuginfod {id}"), why);
                    None
                }
            }
        };
        match local {
            Ok(data) => {
                let Some(id) = id else {
                    return Some((real.to_path_buf(), data));
                };
                let theirs = crate::symbols::build_id(&data).map(|b| hex(&b));
                if theirs.as_deref() == Some(id) || (theirs.is_none() && !self.strict) {
                    return Some((real.to_path_buf(), data));
                }
                if let Some(f) = fetched(&mut *note) {
                    return Some(f);
                }
                let now = theirs.as_deref().unwrap_or("none");
                if self.strict {
                    note(
                        format!("another {}", real.display()),
                        format!(
                            "{}: local file has another build-id ({now}; the recording's is {id}), not used",
                            real.display()
                        ),
                    );
                    None
                } else {
                    note(
                        format!("build-id {}", real.display()),
                        format!(
                            "{} has changed since the recording (build-id {id} there, {now} now): \
                             its symbols may be wrong",
                            real.display()
                        ),
                    );
                    Some((real.to_path_buf(), data))
                }
            }
            Err(err) => {
                let f = fetched(&mut *note);
                if f.is_none() {
                    note(
                        format!("cannot read {}", real.display()),
                        format!(
                            "cannot read {}: {err}: its addresses are shown as [binary]+offset",
                            real.display()
                        ),
                    );
                }
                f
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn note(name: &[u8], ty: u32, desc: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend((name.len() as u32).to_ne_bytes());
        v.extend((desc.len() as u32).to_ne_bytes());
        v.extend(ty.to_ne_bytes());
        v.extend(name);
        v.resize(v.len().next_multiple_of(4), 0);
        v.extend(desc);
        v.resize(v.len().next_multiple_of(4), 0);
        v
    }

    #[test]
    fn the_gnu_build_id_note_is_found_among_others() {
        // As /sys/kernel/notes: Xen and Linux notes before the build-id.
        let mut notes = note(b"Xen\0", 6, b"xen-3.0\0");
        notes.extend(note(b"Linux\0", 1, &[1, 2, 3]));
        notes.extend(note(b"GNU\0", 3, &[0xde, 0xad, 0xbe, 0xef, 0x01]));
        assert_eq!(build_id_from_notes(&notes).as_deref(), Some("deadbeef01"));
        // A GNU note of another type is not the build-id.
        assert_eq!(build_id_from_notes(&note(b"GNU\0", 1, &[1, 2, 3, 4])), None);
    }

    #[test]
    fn garbage_notes_give_none_never_a_panic() {
        assert_eq!(build_id_from_notes(&[]), None);
        assert_eq!(build_id_from_notes(&[0xff; 11]), None);
        assert_eq!(build_id_from_notes(&[0xff; 64]), None);
        // Sizes pointing past the end.
        let mut bad = note(b"GNU\0", 3, &[1, 2, 3, 4]);
        bad[4..8].copy_from_slice(&1000u32.to_ne_bytes());
        assert_eq!(build_id_from_notes(&bad), None);
        let mut huge = note(b"GNU\0", 3, &[1, 2, 3, 4]);
        huge[0..4].copy_from_slice(&u32::MAX.to_ne_bytes());
        assert_eq!(build_id_from_notes(&huge), None);
    }

    #[test]
    fn build_id_paths_are_of_hex_only() {
        assert_eq!(
            build_id_path("abcdef", false).unwrap(),
            Path::new(".build-id/ab/cdef")
        );
        assert_eq!(
            build_id_path("abcdef", true).unwrap(),
            Path::new(".build-id/ab/cdef.debug")
        );
        assert_eq!(build_id_path("../x", false), None);
    }
}
