//! Where the files a recording needs are read, by build-id: the archive's
//! copy (`oprofile-rs archive`, `.build-id/ab/cdef…` as perf's `~/.debug`
//! and `/usr/lib/debug` lay them out), then the local file at the mapped
//! path if it is the same build, then debuginfod (`DEBUGINFOD_URLS`).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::buildid::{build_id, build_id_path, hex};
use crate::debuginfod::{Debuginfod, Kind};

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
                let theirs = build_id(&data).map(|b| hex(&b));
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
