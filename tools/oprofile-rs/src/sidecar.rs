//! The capture side-car: `FILE.meta/`, next to the recorded stream `FILE`.
//!
//! ```text
//! FILE.meta/
//!   info          "key: value" lines: what was captured and what could not be
//!   kallsyms      copy of /proc/kallsyms at the start of the recording
//!   modules       copy of /proc/modules at the start of the recording
//!   kallsyms.end, modules.end
//!                 the same at the end, when modules were loaded or unloaded
//!                 while recording (the symbols of modules loaded meanwhile)
//!   maps/<tgid>   last readable copy of /proc/<tgid>/maps of every process seen
//!   perf-maps/<tgid>.map  copy of a JIT's /tmp/perf-<pid>.map
//!   namespaces    "<tgid> <mnt namespace>" of processes in another mount
//!                 namespace than the recorder's (binaries: /proc/<tgid>/root)
//!   events        the kernel's MMAP2/COMM/FORK/EXIT records while recording
//!                 (`mapevents`), one a line in time order; with them, maps/
//!                 holds only the processes running at the start
//!   vdso          the recording machine's vDSO image (64-bit)
//!   target        pids that `record -p PID` or `record -- CMD` named, one a
//!                 line (analyses keep them and their descendants)
//!   build-ids     "<image> <hex>" lines: the running kernel's GNU build-id
//!                 (`kernel`, from /sys/kernel/notes) and each module's (its
//!                 name, from /sys/module/NAME/notes/.note.gnu.build-id);
//!                 since side-car version 3
//! ```
//! Every file is optional: a missing one only makes symbolisation poorer.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::mapevents::{MapEvent, Timeline};
use crate::maps::{parse_maps, MapEntry};
use crate::symbols::Kallsyms;

pub const SIDECAR_VERSION: u32 = 3;

/// `FILE` → `FILE.meta`.
pub fn sidecar_dir(file: &Path) -> PathBuf {
    let mut s = file.as_os_str().to_owned();
    s.push(".meta");
    PathBuf::from(s)
}

/// What a side-car holds (all optional).
#[derive(Debug, Default, Clone)]
pub struct Sidecar {
    pub kallsyms: Option<String>,
    pub modules: Option<String>,
    /// kallsyms and modules at the end, where modules changed meanwhile.
    pub kallsyms_end: Option<String>,
    pub modules_end: Option<String>,
    pub maps: HashMap<u32, String>,
    pub info: Option<String>,
    /// tgid → copy of its JIT perf map.
    pub perf_maps: HashMap<u32, String>,
    /// tgid → mount namespace (`mnt:[N]`), for processes in another mount
    /// namespace than the recorder.
    pub namespaces: HashMap<u32, String>,
    /// The kernel's map records (`events` file text).
    pub events: Option<String>,
    /// The vDSO image.
    pub vdso: Option<Vec<u8>>,
    /// `record -p`/`record -- CMD`: the processes the recording is about.
    pub target: Option<Vec<u32>>,
    /// `kernel` and module names → their build-ids (hex).
    pub build_ids: HashMap<String, String>,
}

impl Sidecar {
    /// Loads `dir`; a missing directory gives an empty side-car.
    pub fn load(dir: &Path) -> std::io::Result<Sidecar> {
        let mut sc = Sidecar::default();
        if !dir.is_dir() {
            return Ok(sc);
        }
        let opt = |name: &str| std::fs::read(dir.join(name)).ok().map(text_of);
        sc.kallsyms = opt("kallsyms");
        sc.modules = opt("modules");
        sc.kallsyms_end = opt("kallsyms.end");
        sc.modules_end = opt("modules.end");
        sc.info = opt("info");
        sc.events = opt("events");
        sc.vdso = std::fs::read(dir.join("vdso")).ok();
        sc.target = opt("target").map(|t| {
            t.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect()
        });
        if let Ok(rd) = std::fs::read_dir(dir.join("perf-maps")) {
            for e in rd.flatten() {
                let name = e.file_name();
                let Some(tgid) = name
                    .to_str()
                    .and_then(|n| n.strip_suffix(".map"))
                    .and_then(|n| n.parse::<u32>().ok())
                else {
                    continue;
                };
                if let Ok(b) = std::fs::read(e.path()) {
                    sc.perf_maps
                        .insert(tgid, String::from_utf8_lossy(&b).into_owned());
                }
            }
        }
        if let Some(ids) = opt("build-ids") {
            sc.build_ids = parse_build_ids(&ids);
        }
        if let Some(ns) = opt("namespaces") {
            for line in ns.lines() {
                if let Some((t, n)) = line.split_once(' ') {
                    if let Ok(t) = t.parse() {
                        sc.namespaces.insert(t, n.trim().to_string());
                    }
                }
            }
        }
        if let Ok(rd) = std::fs::read_dir(dir.join("maps")) {
            for e in rd.flatten() {
                let Some(tgid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
                    continue;
                };
                if let Ok(b) = std::fs::read(e.path()) {
                    sc.maps
                        .insert(tgid, String::from_utf8_lossy(&b).into_owned());
                }
            }
        }
        Ok(sc)
    }

    /// Writes every present part into `dir` (created if needed).
    pub fn save(&self, dir: &Path) -> std::io::Result<()> {
        std::fs::create_dir_all(dir.join("maps"))?;
        if let Some(k) = &self.kallsyms {
            std::fs::write(dir.join("kallsyms"), k)?;
        }
        if let Some(m) = &self.modules {
            std::fs::write(dir.join("modules"), m)?;
        }
        if let Some(k) = &self.kallsyms_end {
            std::fs::write(dir.join("kallsyms.end"), k)?;
        }
        if let Some(m) = &self.modules_end {
            std::fs::write(dir.join("modules.end"), m)?;
        }
        for (tgid, text) in &self.maps {
            std::fs::write(dir.join("maps").join(tgid.to_string()), text)?;
        }
        if !self.perf_maps.is_empty() {
            std::fs::create_dir_all(dir.join("perf-maps"))?;
        }
        for (tgid, text) in &self.perf_maps {
            std::fs::write(dir.join("perf-maps").join(format!("{tgid}.map")), text)?;
        }
        if !self.namespaces.is_empty() {
            let mut v: Vec<_> = self.namespaces.iter().collect();
            v.sort();
            let text: String = v.iter().map(|(t, n)| format!("{t} {n}\n")).collect();
            std::fs::write(dir.join("namespaces"), text)?;
        }
        if let Some(e) = &self.events {
            std::fs::write(dir.join("events"), e)?;
        }
        if let Some(v) = &self.vdso {
            std::fs::write(dir.join("vdso"), v)?;
        }
        if let Some(t) = &self.target {
            let text: String = t.iter().map(|p| format!("{p}\n")).collect();
            std::fs::write(dir.join("target"), text)?;
        }
        if !self.build_ids.is_empty() {
            let mut v: Vec<_> = self.build_ids.iter().collect();
            v.sort();
            let text: String = v.iter().map(|(n, id)| format!("{n} {id}\n")).collect();
            std::fs::write(dir.join("build-ids"), text)?;
        }
        if let Some(i) = &self.info {
            std::fs::write(dir.join("info"), i)?;
        }
        Ok(())
    }

    /// The kernel's symbols: the start's, with the modules loaded while
    /// recording from the end's ([`Kallsyms::add_later_modules`]); and a
    /// warning per module whose addresses an unloaded one had used.
    pub fn kallsyms(&self) -> (Option<Kallsyms>, Vec<String>) {
        let mut warnings = Vec::new();
        let k = self.kallsyms.as_deref().map(|k| {
            let mut k = Kallsyms::parse(k, self.modules.as_deref());
            k.set_build_ids(&self.build_ids);
            if let Some(end) = &self.kallsyms_end {
                let later = Kallsyms::parse(end, self.modules_end.as_deref());
                let (_, overlapping) = k.add_later_modules(&later);
                for m in overlapping {
                    warnings.push(format!(
                        "module {m} was loaded while recording at addresses a module unloaded meanwhile \
                         had used: samples there are named after the earlier one"
                    ));
                }
            }
            k
        });
        (k, warnings)
    }

    /// Roots of the processes of other mount namespaces (`/proc/<tgid>/root`).
    pub fn roots(&self) -> HashMap<u32, PathBuf> {
        self.namespaces
            .keys()
            .map(|t| (*t, PathBuf::from(format!("/proc/{t}/root"))))
            .collect()
    }

    pub fn parsed_maps(&self) -> HashMap<u32, Vec<MapEntry>> {
        self.maps.iter().map(|(t, m)| (*t, parse_maps(m))).collect()
    }

    /// The kernel's map records, and how many lines could not be read.
    pub fn map_events(&self) -> (Vec<MapEvent>, usize) {
        self.events
            .as_deref()
            .map(crate::mapevents::parse_text)
            .unwrap_or_default()
    }

    /// Maps over time: the snapshot, then the kernel's records.
    pub fn timeline(&self) -> (Timeline, Vec<MapEvent>, usize) {
        let (events, bad) = self.map_events();
        (Timeline::new(self.parsed_maps(), &events), events, bad)
    }
}

/// The `build-ids` file: `NAME HEX` lines; lines that are not (or whose
/// id is no hex build-id) are left out.
pub fn parse_build_ids(text: &str) -> HashMap<String, String> {
    text.lines()
        .filter_map(|l| {
            let (n, id) = l.trim().split_once(' ')?;
            let id = id.trim();
            crate::buildid::valid_build_id(id).then(|| (n.to_string(), id.to_string()))
        })
        .collect()
}

/// The build-ids of the running kernel (`kernel`: `SYS/kernel/notes`) and
/// of its loaded modules (`SYS/module/NAME/notes/.note.gnu.build-id`),
/// where they can be read.
pub fn kernel_build_ids(sys: &Path) -> HashMap<String, String> {
    let mut ids = HashMap::new();
    if let Some(id) = std::fs::read(sys.join("kernel/notes"))
        .ok()
        .and_then(|d| crate::buildid::build_id_from_notes(&d))
    {
        ids.insert("kernel".to_string(), id);
    }
    if let Ok(rd) = std::fs::read_dir(sys.join("module")) {
        for e in rd.flatten() {
            // (`/sys/module/kernel` holds the core kernel's parameters.)
            let Some(name) = e.file_name().to_str().map(str::to_string) else {
                continue;
            };
            if name == "kernel" {
                continue;
            }
            if let Some(id) = std::fs::read(e.path().join("notes/.note.gnu.build-id"))
                .ok()
                .and_then(|d| crate::buildid::build_id_from_notes(&d))
            {
                ids.insert(name, id);
            }
        }
    }
    ids
}

/// `b` as text: taken as it is where it is UTF-8 (a 10 MB kallsyms is read
/// by every command: no copy), else with U+FFFD for what is not.
fn text_of(b: Vec<u8>) -> String {
    String::from_utf8(b).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

#[cfg(test)]
mod tests {
    use super::text_of;

    #[test]
    fn text_is_taken_as_it_is_or_with_replacements() {
        assert_eq!(
            text_of(b"ffffffff81000000 T _text\n".to_vec()),
            "ffffffff81000000 T _text\n"
        );
        // A name that is not UTF-8 (kallsyms is bytes) costs its own bytes only.
        assert_eq!(
            text_of(b"1 T a\xff\n2 T b\n".to_vec()),
            "1 T a\u{fffd}\n2 T b\n"
        );
    }
}
