//! A small debuginfod client: binaries and debug files fetched by build-id
//! from the servers `DEBUGINFOD_URLS` names (space-separated), as
//! elfutils' client does: `GET URL/buildid/HEX/executable` (or
//! `/debuginfo`), cached under `$DEBUGINFOD_CACHE_PATH` (default
//! `$XDG_CACHE_HOME/debuginfod_client`, `~/.cache/debuginfod_client`) as
//! `HEX/executable` and `HEX/debuginfo`, the layout that client uses, so
//! that the two share their downloads.
//!
//! Blocking HTTP with `ureq` (rustls for https; no async runtime). A server
//! that does not answer within `DEBUGINFOD_TIMEOUT` seconds (default 90,
//! the elfutils client's) is left out for the rest of the run.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::buildid::{file_build_id, valid_build_id};

/// What is fetched for a build-id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// The binary itself (`/executable`).
    Executable,
    /// Its separate debug file (`/debuginfo`).
    Debuginfo,
}

impl Kind {
    pub fn word(self) -> &'static str {
        match self {
            Kind::Executable => "executable",
            Kind::Debuginfo => "debuginfo",
        }
    }
}

/// The servers and the cache.
#[derive(Debug, Clone)]
pub struct Debuginfod {
    pub urls: Vec<String>,
    pub cache: PathBuf,
    pub timeout: Duration,
    /// Servers that failed to answer (timeout, refused): not asked again.
    dead: RefCell<HashSet<String>>,
    /// (build-id, kind) → the answer already given this run.
    done: RefCell<HashMap<(String, Kind), Result<PathBuf, String>>>,
}

impl Debuginfod {
    /// From the environment: `None` where `DEBUGINFOD_URLS` is unset or
    /// empty.
    pub fn from_env() -> Option<Debuginfod> {
        let urls = std::env::var("DEBUGINFOD_URLS").ok()?;
        let cache = match std::env::var_os("DEBUGINFOD_CACHE_PATH") {
            Some(p) if !p.is_empty() => PathBuf::from(p),
            _ => {
                let base = match std::env::var_os("XDG_CACHE_HOME") {
                    Some(x) if !x.is_empty() => PathBuf::from(x),
                    _ => PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| "/".into()))
                        .join(".cache"),
                };
                base.join("debuginfod_client")
            }
        };
        let timeout = std::env::var("DEBUGINFOD_TIMEOUT")
            .ok()
            .and_then(|t| t.trim().parse::<u64>().ok())
            .filter(|t| *t > 0)
            .unwrap_or(90);
        Debuginfod::new(&urls, cache, Duration::from_secs(timeout))
    }

    /// `urls` space-separated; `None` where it names none.
    pub fn new(urls: &str, cache: PathBuf, timeout: Duration) -> Option<Debuginfod> {
        let urls: Vec<String> = urls
            .split_ascii_whitespace()
            .map(|u| u.trim_end_matches('/').to_string())
            .filter(|u| !u.is_empty())
            .collect();
        (!urls.is_empty()).then(|| Debuginfod {
            urls,
            cache,
            timeout,
            dead: RefCell::default(),
            done: RefCell::default(),
        })
    }

    /// The file of build-id `id` (hex), from the cache or a server. The
    /// error is a note for the user (not found, a server that failed).
    pub fn fetch(&self, id: &str, kind: Kind) -> Result<PathBuf, String> {
        let key = (id.to_string(), kind);
        if let Some(r) = self.done.borrow().get(&key) {
            return r.clone();
        }
        let r = self.fetch_uncached(id, kind);
        self.done.borrow_mut().insert(key, r.clone());
        r
    }

    fn fetch_uncached(&self, id: &str, kind: Kind) -> Result<PathBuf, String> {
        if !valid_build_id(id) {
            return Err(format!("debuginfod: {id:?} is no build-id, not asked"));
        }
        let dir = self.cache.join(id);
        let path = dir.join(kind.word());
        if path.is_file() && matches_id(&path, id) {
            return Ok(path);
        }
        let agent = ureq::AgentBuilder::new()
            .timeout_connect(self.timeout)
            .timeout_read(self.timeout)
            .timeout_write(self.timeout)
            .build();
        let mut why = Vec::new();
        for url in &self.urls {
            if self.dead.borrow().contains(url) {
                continue;
            }
            let full = format!("{url}/buildid/{id}/{}", kind.word());
            match agent.get(&full).call() {
                Ok(resp) => match store(resp.into_reader(), &dir, kind) {
                    Ok(p) if matches_id(&p, id) => return Ok(p),
                    Ok(p) => {
                        let _ = std::fs::remove_file(&p);
                        why.push(format!("{url} sent a file of another build-id"));
                    }
                    Err(e) => why.push(format!("{url}: {e}")),
                },
                Err(ureq::Error::Status(code, _)) => why.push(format!("{url}: HTTP {code}")),
                Err(ureq::Error::Transport(t)) => {
                    self.dead.borrow_mut().insert(url.clone());
                    // ureq's text starts with the URL asked.
                    let text = t.to_string();
                    let what = text.strip_prefix(&format!("{full}: ")).unwrap_or(&text);
                    why.push(format!("{url}: {what} (not asked again)"));
                }
            }
        }
        if why.is_empty() {
            why.push("no server left to ask".into());
        }
        Err(format!(
            "debuginfod: no {} for build-id {id}: {}",
            kind.word(),
            why.join("; ")
        ))
    }
}

/// Streams the body into `dir/KIND` (through a temporary file: a run cut
/// short leaves no partial file under the final name).
fn store(mut body: impl std::io::Read, dir: &Path, kind: Kind) -> Result<PathBuf, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let tmp = dir.join(format!(".{}.tmp-{}", kind.word(), std::process::id()));
    let r = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        std::io::copy(&mut body, &mut f)?;
        f.flush()?;
        std::fs::rename(&tmp, dir.join(kind.word()))
    })();
    match r {
        Ok(()) => Ok(dir.join(kind.word())),
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            Err(format!("download failed: {e}"))
        }
    }
}

/// Whether the ELF file at `path` has build-id `id` (hex).
pub fn matches_id(path: &Path, id: &str) -> bool {
    file_build_id(path).as_deref() == Some(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_split_on_spaces_and_an_empty_list_is_none() {
        let d = Debuginfod::new(
            " http://a/  https://b ",
            PathBuf::from("/nonexistent"),
            Duration::from_secs(1),
        )
        .unwrap();
        assert_eq!(d.urls, ["http://a", "https://b"]);
        assert!(Debuginfod::new("  ", PathBuf::new(), Duration::from_secs(1)).is_none());
    }
}
