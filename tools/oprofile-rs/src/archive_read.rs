//! Reading an archive (what `oprofile-rs archive` writes: the format is
//! told in `archive.rs`): its `MANIFEST`, how it is compressed, and its
//! unpacking into the cache, where any command's `-i` reads it.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Component, Path, PathBuf};

use anyhow::{bail, Context, Result};

use crate::sidecar::sidecar_dir;

pub const MANIFEST: &str = "MANIFEST";
const MANIFEST_HEAD: &str = "oprofile-rs-archive 1";

/// What an archive holds, from its `MANIFEST`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Manifest {
    /// The stream's member name.
    pub stream: String,
    /// (kind, build-id, name) of each file.
    pub files: Vec<(String, String, String)>,
}

impl Manifest {
    pub fn to_text(&self) -> String {
        let mut s = format!("{MANIFEST_HEAD}\nstream {}\n", self.stream);
        for (kind, id, name) in &self.files {
            s += &format!("file {kind} {id} {}\n", crate::mapevents::escape(name));
        }
        s
    }

    pub fn parse(text: &str) -> Result<Manifest, String> {
        let mut lines = text.lines();
        if lines.next() != Some(MANIFEST_HEAD) {
            return Err(format!(
                "its {MANIFEST} does not start with \"{MANIFEST_HEAD}\""
            ));
        }
        let mut m = Manifest::default();
        for l in lines {
            if let Some(s) = l.strip_prefix("stream ") {
                m.stream = s.to_string();
            } else if let Some(f) = l.strip_prefix("file ") {
                let mut it = f.splitn(3, ' ');
                if let (Some(k), Some(id), Some(n)) = (it.next(), it.next(), it.next()) {
                    if crate::buildid::valid_build_id(id) {
                        m.files.push((
                            k.to_string(),
                            id.to_string(),
                            crate::mapevents::unescape(n),
                        ));
                    }
                }
            }
        }
        if m.stream.is_empty() || !safe_relative(Path::new(&m.stream)) || m.stream.contains('/') {
            return Err(format!("its {MANIFEST} names no stream"));
        }
        Ok(m)
    }

    /// Mapped path → build-id, for the paths with one build-id.
    pub fn known(&self) -> HashMap<String, String> {
        let mut by_path: HashMap<&str, Vec<&str>> = HashMap::new();
        for (k, id, n) in &self.files {
            if k == "executable" {
                by_path.entry(n).or_default().push(id);
            }
        }
        by_path
            .into_iter()
            .filter(|(_, ids)| ids.iter().all(|i| *i == ids[0]))
            .map(|(p, ids)| (p.to_string(), ids[0].to_string()))
            .collect()
    }
}

/// How an archive is compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
    Zstd,
}

impl Compression {
    /// From the output's name: `.tar`, `.tar.gz`/`.tgz`, `.tar.zst`/`.tzst`.
    pub fn of_name(path: &Path) -> Option<Compression> {
        let n = path.file_name()?.to_str()?;
        if n.ends_with(".tar") {
            Some(Compression::None)
        } else if n.ends_with(".tar.gz") || n.ends_with(".tgz") {
            Some(Compression::Gzip)
        } else if n.ends_with(".tar.zst") || n.ends_with(".tzst") {
            Some(Compression::Zstd)
        } else {
            None
        }
    }

    /// From the first bytes of a file: `None` when it is no archive (an
    /// oprofile-rs stream, anything else).
    pub fn of_content(head: &[u8]) -> Option<Compression> {
        match head {
            [0x1f, 0x8b, ..] => Some(Compression::Gzip),
            [0x28, 0xb5, 0x2f, 0xfd, ..] => Some(Compression::Zstd),
            h if h.get(257..262) == Some(b"ustar") => Some(Compression::None),
            _ => None,
        }
    }
}

/// Whether the file at `path` is an archive (by its content).
pub fn is_archive(path: &Path) -> bool {
    let mut head = [0u8; 512];
    let Ok(mut f) = File::open(path) else {
        return false;
    };
    let mut n = 0;
    while n < head.len() {
        match f.read(&mut head[n..]) {
            Ok(0) | Err(_) => break,
            Ok(k) => n += k,
        }
    }
    Compression::of_content(&head[..n]).is_some()
}

/// An archive unpacked.
#[derive(Debug, Clone)]
pub struct Unpacked {
    /// The directory it was unpacked into.
    pub root: PathBuf,
    pub manifest: Manifest,
    pub stream: PathBuf,
    pub sidecar: PathBuf,
}

/// Where archives are unpacked: `$XDG_CACHE_HOME/oprofile-rs/archives`, or
/// `~/.cache/oprofile-rs/archives`.
pub fn cache_dir() -> PathBuf {
    let base = match std::env::var_os("XDG_CACHE_HOME") {
        Some(x) if !x.is_empty() => PathBuf::from(x),
        _ => {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| "/tmp".into())).join(".cache")
        }
    };
    base.join("oprofile-rs").join("archives")
}

/// FNV-1a, 64 bits: the names of the tool's cached files (unpacked
/// archives here, unwind tables in `unwind_load.rs`).
pub(crate) struct Fnv(pub(crate) u64);

impl Fnv {
    pub(crate) fn new() -> Fnv {
        Fnv(0xcbf2_9ce4_8422_2325)
    }

    pub(crate) fn write(&mut self, b: &[u8]) {
        for &x in b {
            self.0 = (self.0 ^ u64::from(x)).wrapping_mul(0x0100_0000_01b3);
        }
    }
}

/// FNV-1a (64 bits) of the file's bytes, and its length: the name of its
/// unpacked copy.
fn hash_file(path: &Path) -> std::io::Result<String> {
    let mut f = File::open(path)?;
    let mut h = Fnv::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut len = 0u64;
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        len += n as u64;
        h.write(&buf[..n]);
    }
    Ok(format!("{:016x}-{len:x}", h.0))
}

/// Whether `p` is a relative path that stays below where it is joined
/// (no root, no `..`).
fn safe_relative(p: &Path) -> bool {
    p.components()
        .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
}

/// Unpacks the archive at `path` (once: a later call finds its copy in
/// the cache) and reads its manifest.
pub fn open(path: &Path) -> Result<Unpacked> {
    let shown = path.display().to_string();
    let hash = hash_file(path).with_context(|| format!("cannot read {shown}"))?;
    let cache = cache_dir();
    let root = cache.join(&hash);
    if !root.join(".complete").is_file() {
        std::fs::create_dir_all(&cache)
            .with_context(|| format!("cannot create {}", cache.display()))?;
        let tmp = cache.join(format!("{hash}.tmp-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::create_dir(&tmp).with_context(|| format!("cannot create {}", tmp.display()))?;
        // Only a whole archive, with its manifest and its stream, is kept.
        if let Err(e) = unpack(path, &tmp).and_then(|()| contents(&tmp).map(|_| ())) {
            let _ = std::fs::remove_dir_all(&tmp);
            return Err(e.context(format!("archive {shown}")));
        }
        File::create(tmp.join(".complete"))?;
        // What is there is a failed unpack's, unless another run has just
        // completed it (then it is kept, and this copy dropped).
        if !root.join(".complete").is_file() {
            let _ = std::fs::remove_dir_all(&root);
        }
        if std::fs::rename(&tmp, &root).is_err() {
            // Another run unpacked it meanwhile.
            let _ = std::fs::remove_dir_all(&tmp);
        }
    }
    let (manifest, stream) = contents(&root).map_err(|e| e.context(format!("archive {shown}")))?;
    let sidecar = sidecar_dir(&stream);
    Ok(Unpacked {
        root,
        manifest,
        stream,
        sidecar,
    })
}

/// The manifest of the archive unpacked in `root`, and its stream's path.
fn contents(root: &Path) -> Result<(Manifest, PathBuf)> {
    let text = std::fs::read_to_string(root.join(MANIFEST))
        .map_err(|_| anyhow::anyhow!("it has no {MANIFEST}: not an oprofile-rs archive"))?;
    let manifest = Manifest::parse(&text).map_err(|e| anyhow::anyhow!(e))?;
    let stream = root.join(&manifest.stream);
    if !stream.is_file() {
        bail!(
            "it lacks its stream {} (its {MANIFEST} names it)",
            manifest.stream
        );
    }
    Ok((manifest, stream))
}

/// Unpacks every member into `dir`, streamed; an error for a corrupt
/// archive and for a member that is not a plain file or a directory, or
/// whose path leaves `dir`.
fn unpack(path: &Path, dir: &Path) -> Result<()> {
    let mut f = File::open(path)?;
    let mut head = [0u8; 512];
    let n = read_up_to(&mut f, &mut head)?;
    drop(f);
    let Some(c) = Compression::of_content(&head[..n]) else {
        bail!("not a tar, tar.gz or tar.zst file");
    };
    let file = BufReader::new(File::open(path)?);
    let reader: Box<dyn Read> = match c {
        Compression::None => Box::new(file),
        Compression::Gzip => Box::new(flate2::read::MultiGzDecoder::new(file)),
        Compression::Zstd => Box::new(
            ruzstd::decoding::StreamingDecoder::new(file)
                .map_err(|e| anyhow::anyhow!("corrupt zstd data: {e}"))?,
        ),
    };
    let mut ar = tar::Archive::new(reader);
    let entries = ar.entries().context("corrupt tar data")?;
    let mut any = false;
    for e in entries {
        let mut e = e.context("corrupt")?;
        let name = e
            .path()
            .context("a member's name cannot be read")?
            .into_owned();
        let shown = name.display().to_string();
        let ty = e.header().entry_type();
        if ty == tar::EntryType::XGlobalHeader {
            continue;
        }
        if name.is_absolute() {
            bail!("member {shown}: an absolute path, refused");
        }
        if !safe_relative(&name) {
            bail!("member {shown}: a path outside the archive (..), refused");
        }
        let out = dir.join(&name);
        match ty {
            tar::EntryType::Directory => {
                std::fs::create_dir_all(&out)
                    .with_context(|| format!("cannot create {}", out.display()))?;
            }
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                if let Some(parent) = out.parent() {
                    std::fs::create_dir_all(parent)
                        .with_context(|| format!("cannot create {}", parent.display()))?;
                }
                // Every path under `dir` is this function's: a plain file
                // or a directory, never a link to follow.
                let mut w = File::create(&out)
                    .with_context(|| format!("cannot create {}", out.display()))?;
                std::io::copy(&mut e, &mut w)
                    .with_context(|| format!("member {shown}: corrupt or cut short"))?;
                any = true;
            }
            tar::EntryType::Symlink | tar::EntryType::Link => {
                bail!("member {shown}: a link, refused (an archive holds plain files)")
            }
            other => {
                bail!("member {shown}: of type {other:?}, refused (an archive holds plain files)")
            }
        }
    }
    if !any {
        bail!("it holds no file");
    }
    Ok(())
}

fn read_up_to(f: &mut File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifest_round_trip_and_refusals() {
        let m = Manifest {
            stream: "oprofile.data".into(),
            files: vec![
                (
                    "executable".into(),
                    "abcd".into(),
                    "/usr/bin/my prog".into(),
                ),
                ("debuginfo".into(), "abcd".into(), "/usr/bin/my prog".into()),
            ],
        };
        let back = Manifest::parse(&m.to_text()).unwrap();
        assert_eq!(back, m);
        assert_eq!(back.known()["/usr/bin/my prog"], "abcd");
        assert!(Manifest::parse("something else\n").is_err());
        assert!(Manifest::parse(&format!("{MANIFEST_HEAD}\nstream ../x\n")).is_err());
        assert!(Manifest::parse(&format!("{MANIFEST_HEAD}\n")).is_err());
        // A build-id that is no hex is left out.
        let m = Manifest::parse(&format!(
            "{MANIFEST_HEAD}\nstream s\nfile executable ../../x /bin/sh\n"
        ))
        .unwrap();
        assert!(m.files.is_empty());
    }

    #[test]
    fn formats_by_name_and_by_content() {
        assert_eq!(
            Compression::of_name(Path::new("a.tar.zst")),
            Some(Compression::Zstd)
        );
        assert_eq!(
            Compression::of_name(Path::new("a.tgz")),
            Some(Compression::Gzip)
        );
        assert_eq!(
            Compression::of_name(Path::new("a.tar")),
            Some(Compression::None)
        );
        assert_eq!(Compression::of_name(Path::new("a.zip")), None);
        assert_eq!(Compression::of_content(b"OPRFRS\0\n"), None);
        assert_eq!(
            Compression::of_content(&[0x1f, 0x8b, 8]),
            Some(Compression::Gzip)
        );
    }
}
