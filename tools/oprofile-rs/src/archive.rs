//! `archive`: one file holding a recording, its side-car and the files its
//! analyses read (binaries, their separate debug files, the kernel's image
//! and modules), keyed by build-id, so that it can be analysed on another
//! machine (as `perf archive`); and the reading of such a file as any
//! command's `-i`.
//!
//! ```text
//! MANIFEST                    "oprofile-rs-archive 1", "stream NAME", then
//!                             "file KIND HEX NAME" lines: KIND executable
//!                             (NAME its mapped path), debuginfo, vmlinux,
//!                             module (NAME the module's)
//! NAME                        the recorded stream
//! NAME.meta/...               its side-car
//! .build-id/ab/cdef…          a binary, the kernel's image, a module
//! .build-id/ab/cdef….debug    a separate debug file
//! ```
//!
//! A plain tar, gzipped (`.tar.gz`) or zstd-compressed (`.tar.zst`, the
//! default). Members are streamed in and out (never whole in memory).
//! Reading unpacks into a cache directory named after the archive's hash
//! (`$XDG_CACHE_HOME/oprofile-rs/archives/`, `~/.cache/...`), once; members
//! that are not plain files or directories, or whose paths are absolute or
//! go up (`..`), are refused.
//!
//! This module writes an archive (`oprofile-rs archive`): it loads the
//! recording as the analyses read it, to learn which files they read.
//! Reading one (its `MANIFEST`, unpacking) is [`crate::archive_read`]'s.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufReader, Read, Write};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use crate::archive_read::{is_archive, Compression, Manifest, MANIFEST};
use crate::buildid::{build_id_path, file_build_id};
use crate::profile::{LoadOptions, Profile};
use crate::sidecar::sidecar_dir;

/// What `archive` put in and left out.
#[derive(Debug, Default)]
pub struct Summary {
    /// Files archived by build-id: (kind, name).
    pub files: Vec<(String, String)>,
    /// Files needed and not archived, with why.
    pub missing: Vec<String>,
    /// Bytes of the archive written.
    pub bytes: u64,
}

/// Options of `archive`.
#[derive(Debug, Clone, Default)]
pub struct ArchiveOptions {
    pub input: PathBuf,
    pub sidecar: Option<PathBuf>,
    pub output: PathBuf,
    /// How the recording is loaded (where binaries are found).
    pub load: LoadOptions,
    /// The kernel's image (else looked for where distributions put it).
    pub vmlinux: Option<PathBuf>,
}

/// Where distributions and build trees put the image of kernel `release`.
fn vmlinux_candidates(release: &str) -> Vec<PathBuf> {
    [
        format!("/usr/lib/debug/boot/vmlinux-{release}"),
        format!("/usr/lib/debug/lib/modules/{release}/vmlinux"),
        format!("/boot/vmlinux-{release}"),
        format!("/lib/modules/{release}/build/vmlinux"),
    ]
    .into_iter()
    .map(PathBuf::from)
    .collect()
}

/// Writes the archive of the recording `opts.input`.
pub fn create(opts: &ArchiveOptions) -> Result<Summary> {
    let Some(compression) = Compression::of_name(&opts.output) else {
        bail!(
            "{}: an archive's name ends in .tar, .tar.gz (.tgz) or .tar.zst (.tzst)",
            opts.output.display()
        );
    };
    if is_archive(&opts.input) {
        bail!("{} is an archive already", opts.input.display());
    }
    let meta = opts
        .sidecar
        .clone()
        .unwrap_or_else(|| sidecar_dir(&opts.input));
    let stream_name = opts
        .input
        .file_name()
        .and_then(|n| n.to_str())
        .filter(|n| !n.is_empty())
        .context("the recording's file name is not UTF-8")?
        .to_string();
    // The recording as the analyses read it: the binaries they use.
    let mut load = opts.load.clone();
    load.sidecar = Some(meta.clone());
    let p = Profile::load(&opts.input, &load)?;
    let mut sum = Summary::default();
    let mut manifest = Manifest {
        stream: stream_name.clone(),
        files: Vec::new(),
    };
    // Archive member (under .build-id/) → the file to copy.
    let mut members: BTreeMap<PathBuf, PathBuf> = BTreeMap::new();
    let mut add = |kind: &str, id: &str, name: &str, file: &Path, debug: bool| {
        if let Some(rel) = build_id_path(id, debug) {
            manifest
                .files
                .push((kind.to_string(), id.to_string(), name.to_string()));
            if members.insert(rel, file.to_path_buf()).is_none() {
                sum.files.push((kind.to_string(), name.to_string()));
            }
        }
    };
    let debug_dirs: Vec<PathBuf> = opts
        .load
        .debug_dirs
        .iter()
        .map(PathBuf::as_path)
        .chain([Path::new("/usr/lib/debug"), Path::new("/lib/debug")])
        .map(|d| match &opts.load.symfs {
            Some(root) => root.join(d.strip_prefix("/").unwrap_or(d)),
            None => d.to_path_buf(),
        })
        .collect();
    for b in &p.binaries {
        let Some(file) = &b.file else {
            sum.missing.push(format!("{}: not found", b.mapped));
            continue;
        };
        let Some(id) = &b.build_id else {
            sum.missing.push(format!(
                "{} ({}): has no build-id, so it cannot be told from another build",
                b.mapped,
                file.display()
            ));
            continue;
        };
        if b.recorded.as_ref().is_some_and(|r| r != id) {
            sum.missing.push(format!(
                "{} ({}): has changed since the recording (build-id {} there, {id} now)",
                b.mapped,
                file.display(),
                b.recorded.as_deref().unwrap_or("-")
            ));
            continue;
        }
        add("executable", id, &b.mapped, file, false);
        let data =
            std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))?;
        if let Ok(obj) = object::File::parse(&*data) {
            if let Some((dbg, _)) = crate::debug_file::debug_file(file, &obj, &debug_dirs) {
                add("debuginfo", id, &b.mapped, &dbg, true);
            }
        }
    }
    // The kernel's image and the modules sampled, where the recording
    // knows their build-ids and this machine has the same builds.
    let release = p.kernel_release();
    let kernel_id = p.locator.kernel.get("kernel").cloned();
    let kernel_sampled = p
        .samples
        .iter()
        .any(|s| s.pc.kernel && s.pc.dso == crate::symbols::KERNEL_DSO);
    if let Some(kid) = kernel_id.as_deref() {
        let mut cands: Vec<PathBuf> = opts.vmlinux.iter().cloned().collect();
        if let Some(r) = &release {
            cands.extend(vmlinux_candidates(r));
        }
        match cands
            .iter()
            .find(|c| file_build_id(c).as_deref() == Some(kid))
        {
            Some(v) => add("vmlinux", kid, "vmlinux", v, false),
            None if cands.is_empty() && kernel_sampled => sum.missing.push(format!(
                "the kernel's image (build-id {kid}): the recording does not say which kernel \
                 ran (no kernel-release in its side-car); give it with --vmlinux PATH (annotate \
                 of kernel functions needs it)"
            )),
            None if kernel_sampled || opts.vmlinux.is_some() => sum.missing.push(format!(
                "the kernel's image (build-id {kid}): none of {} is it (annotate of kernel \
                 functions needs it; --vmlinux PATH)",
                cands
                    .iter()
                    .map(|c| c.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
            None => {}
        }
    }
    let mut modules: Vec<String> = p
        .samples
        .iter()
        .filter(|s| {
            s.pc.kernel && s.pc.dso.starts_with('[') && s.pc.dso != crate::symbols::KERNEL_DSO
        })
        .map(|s| {
            s.pc.dso
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_string()
        })
        .filter(|m| m != "unknown")
        .collect();
    modules.sort();
    modules.dedup();
    for m in modules {
        let Some(id) = p.locator.kernel.get(&m) else {
            continue;
        };
        let found = release.as_ref().and_then(|r| {
            let dir = PathBuf::from(format!("/lib/modules/{r}"));
            crate::kernel_module::search_module(&dir, &m, 0)
                .ok()
                .flatten()
        });
        let same = found.as_ref().filter(|f| {
            crate::kernel_module::read_module(f)
                .ok()
                .and_then(|d| crate::buildid::build_id(&d))
                .map(|b| crate::buildid::hex(&b))
                .as_deref()
                == Some(id.as_str())
        });
        match same {
            Some(f) => add("module", id, &m, f, false),
            None => sum.missing.push(match &release {
                Some(r) => format!("module {m} (build-id {id}): no such build in /lib/modules/{r}"),
                None => format!(
                    "module {m} (build-id {id}): the recording does not say which kernel ran \
                     (no kernel-release in its side-car)"
                ),
            }),
        }
    }
    // The tar, streamed member by member into a file, then compressed
    // (streamed too) into the archive's, renamed at the end.
    let with_suffix = |suffix: &str| {
        let mut s = opts.output.as_os_str().to_owned();
        s.push(format!("{suffix}-{}", std::process::id()));
        PathBuf::from(s)
    };
    let (tar_path, part) = (with_suffix(".tar-part"), with_suffix(".part"));
    let r = (|| -> Result<()> {
        let out = File::create(&tar_path)
            .with_context(|| format!("cannot create {}", tar_path.display()))?;
        let mut tar = tar::Builder::new(std::io::BufWriter::new(out));
        tar.mode(tar::HeaderMode::Deterministic);
        append_bytes(&mut tar, MANIFEST, manifest.to_text().as_bytes())?;
        append_file(&mut tar, &opts.input, Path::new(&stream_name))?;
        if meta.is_dir() {
            append_dir(
                &mut tar,
                &meta,
                &PathBuf::from(format!("{stream_name}.meta")),
            )?;
        }
        for (rel, file) in &members {
            append_file(&mut tar, file, rel)?;
        }
        let mut out = tar.into_inner().context("cannot finish the archive")?;
        out.flush()
            .with_context(|| format!("cannot write {}", tar_path.display()))?;
        drop(out);
        let final_tmp = match compression {
            Compression::None => tar_path.clone(),
            Compression::Gzip | Compression::Zstd => {
                let mut src = BufReader::new(File::open(&tar_path)?);
                let dst = std::io::BufWriter::new(
                    File::create(&part)
                        .with_context(|| format!("cannot create {}", part.display()))?,
                );
                let mut dst = if compression == Compression::Gzip {
                    let mut gz = flate2::write::GzEncoder::new(dst, flate2::Compression::default());
                    std::io::copy(&mut src, &mut gz)?;
                    gz.finish()?
                } else {
                    // ruzstd unwraps its I/O results: errors are kept
                    // here and said after, never a panic.
                    let mut r = NoFail::new(src);
                    let mut w = NoFail::new(dst);
                    ruzstd::encoding::compress(
                        &mut r,
                        &mut w,
                        ruzstd::encoding::CompressionLevel::Fastest,
                    );
                    if let Some(e) = r.error.take().or(w.error.take()) {
                        return Err(e).context("cannot compress the archive");
                    }
                    w.inner
                };
                dst.flush()
                    .with_context(|| format!("cannot write {}", part.display()))?;
                std::fs::remove_file(&tar_path)?;
                part.clone()
            }
        };
        std::fs::rename(&final_tmp, &opts.output)
            .with_context(|| format!("cannot write {}", opts.output.display()))?;
        Ok(())
    })();
    if r.is_err() {
        let _ = std::fs::remove_file(&part);
        let _ = std::fs::remove_file(&tar_path);
    }
    r?;
    sum.bytes = std::fs::metadata(&opts.output)
        .map(|m| m.len())
        .unwrap_or(0);
    Ok(sum)
}

/// A reader or writer whose errors are kept, not returned: a read error
/// reads as the end, a write error as written.
struct NoFail<T> {
    inner: T,
    error: Option<std::io::Error>,
}

impl<T> NoFail<T> {
    fn new(inner: T) -> NoFail<T> {
        NoFail { inner, error: None }
    }
}

impl<T: Read> Read for NoFail<T> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.error.is_some() {
            return Ok(0);
        }
        match self.inner.read(buf) {
            Ok(n) => Ok(n),
            Err(e) => {
                self.error = Some(e);
                Ok(0)
            }
        }
    }
}

impl<T: Write> Write for NoFail<T> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.error.is_none() {
            if let Err(e) = self.inner.write_all(buf) {
                self.error = Some(e);
            }
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if self.error.is_none() {
            if let Err(e) = self.inner.flush() {
                self.error = Some(e);
            }
        }
        Ok(())
    }
}

fn append_bytes(tar: &mut tar::Builder<impl Write>, name: &str, data: &[u8]) -> Result<()> {
    let mut h = tar::Header::new_gnu();
    h.set_size(data.len() as u64);
    h.set_mode(0o644);
    h.set_entry_type(tar::EntryType::Regular);
    tar.append_data(&mut h, name, data)
        .with_context(|| format!("cannot write {name} into the archive"))
}

fn append_file(tar: &mut tar::Builder<impl Write>, file: &Path, name: &Path) -> Result<()> {
    let mut f = File::open(file).with_context(|| format!("cannot read {}", file.display()))?;
    tar.append_file(name, &mut f)
        .with_context(|| format!("cannot archive {}", file.display()))
}

/// The regular files under `dir` (symbolic links and others left out).
fn append_dir(tar: &mut tar::Builder<impl Write>, dir: &Path, name: &Path) -> Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot read {}", dir.display()))?
        .flatten()
        .collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let Ok(ty) = e.file_type() else { continue };
        let n = name.join(e.file_name());
        if ty.is_dir() {
            append_dir(tar, &e.path(), &n)?;
        } else if ty.is_file() {
            append_file(tar, &e.path(), &n)?;
        }
    }
    Ok(())
}
