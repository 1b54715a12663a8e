//! `list`: the events the module can count (its `Event::name`s, which
//! `record -e` passes on), as `perf list` shows them, with whether this
//! machine can count each. The module opens its counters in the kernel
//! (`perf_event_create_kernel_counter`), so `perf_event_paranoid` does not
//! apply; what decides is whether the kernel has the PMU: software events
//! need perf events (`/sys/bus/event_source/devices/software`), hardware
//! ones the CPU's PMU (`/sys/bus/event_source/devices/cpu`, or `cpu_core`
//! and `cpu_atom` on hybrid Intel parts), which a virtual machine often
//! lacks.

use std::io::Write;
use std::path::Path;

/// Hardware (the CPU's PMU) or software (the kernel's clocks and counts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Hardware,
    Software,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Hardware => "hardware",
            Kind::Software => "software",
        }
    }
}

/// The module's events (`src/shims/perf.rs`, `Event::ALL`), with their kind,
/// the name of their file in a PMU's sysfs `events/` directory where it
/// lists them, and what they count.
pub const EVENTS: [(&str, Kind, Option<&str>, &str); 11] = [
    ("cycles", Kind::Hardware, Some("cpu-cycles"), "CPU cycles"),
    (
        "instructions",
        Kind::Hardware,
        Some("instructions"),
        "instructions retired",
    ),
    (
        "cache-references",
        Kind::Hardware,
        Some("cache-references"),
        "last-level cache accesses",
    ),
    (
        "cache-misses",
        Kind::Hardware,
        Some("cache-misses"),
        "last-level cache misses",
    ),
    (
        "branch-instructions",
        Kind::Hardware,
        Some("branch-instructions"),
        "branch instructions retired",
    ),
    (
        "branch-misses",
        Kind::Hardware,
        Some("branch-misses"),
        "mispredicted branches",
    ),
    (
        "cpu-clock",
        Kind::Software,
        None,
        "CPU clock (a per-CPU timer), ns",
    ),
    (
        "task-clock",
        Kind::Software,
        None,
        "clock of the task on the CPU, ns",
    ),
    ("page-faults", Kind::Software, None, "page faults"),
    ("context-switches", Kind::Software, None, "context switches"),
    (
        "cpu-migrations",
        Kind::Software,
        None,
        "migrations of a task to another CPU",
    ),
];

/// One event and whether this machine can count it (`Err`: why not).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    pub name: &'static str,
    pub kind: Kind,
    pub what: &'static str,
    pub available: Result<(), String>,
}

/// The events and their availability, with the kernel's PMUs read under
/// `sys` (`/sys` on the running machine; a fake tree in tests).
pub fn list(sys: &Path) -> Vec<Listed> {
    let devices = sys.join("bus/event_source/devices");
    let has_perf = devices.is_dir();
    let software = devices.join("software").is_dir();
    let cpu_pmus: Vec<std::path::PathBuf> = ["cpu", "cpu_core", "cpu_atom"]
        .iter()
        .map(|n| devices.join(n))
        .filter(|p| p.is_dir())
        .collect();
    EVENTS
        .iter()
        .map(|&(name, kind, sysfs, what)| {
            let available = if !has_perf {
                Err(format!(
                    "this kernel has no perf events ({} is missing)",
                    devices.display()
                ))
            } else {
                match kind {
                    Kind::Software if software => Ok(()),
                    Kind::Software => Err(format!(
                        "no software PMU ({} is missing)",
                        devices.join("software").display()
                    )),
                    Kind::Hardware if cpu_pmus.is_empty() => Err(format!(
                        "no hardware PMU ({} is missing: a VM without a virtual PMU, or a CPU the kernel has no driver for)",
                        devices.join("cpu").display()
                    )),
                    Kind::Hardware => {
                        // A PMU that lists its events and not this one cannot
                        // count it (the generic event maps to nothing).
                        let listed = |pmu: &std::path::PathBuf| {
                            let events = pmu.join("events");
                            !events.is_dir() || sysfs.is_some_and(|f| events.join(f).exists())
                        };
                        if cpu_pmus.iter().any(listed) {
                            Ok(())
                        } else {
                            Err(format!(
                                "the CPU's PMU does not list it ({} is missing)",
                                cpu_pmus[0]
                                    .join("events")
                                    .join(sysfs.unwrap_or(name))
                                    .display()
                            ))
                        }
                    }
                }
            };
            Listed {
                name,
                kind,
                what,
                available,
            }
        })
        .collect()
}

/// `perf list`'s layout: the name to pass to `record -e`, its kind,
/// whether it can be counted here (`no (N)`: note N below says why), what
/// it counts.
pub fn print(listed: &[Listed], out: &mut dyn Write) -> std::io::Result<()> {
    let width = listed.iter().map(|l| l.name.len()).max().unwrap_or(0);
    let mut notes: Vec<&str> = Vec::new();
    writeln!(out, "# oprofile-rs record -e NAME[,NAME...]")?;
    writeln!(
        out,
        "# {:width$}  {:10}  {:9}  counts",
        "name", "kind", "here"
    )?;
    for l in listed {
        let here = match &l.available {
            Ok(()) => "yes".to_string(),
            Err(why) => {
                let n = match notes.iter().position(|w| w == why) {
                    Some(i) => i + 1,
                    None => {
                        notes.push(why);
                        notes.len()
                    }
                };
                format!("no ({n})")
            }
        };
        writeln!(
            out,
            "  {:width$}  {:10}  {here:9}  {}",
            l.name,
            l.kind.name(),
            l.what
        )?;
    }
    for (i, why) in notes.iter().enumerate() {
        writeln!(out, "({}) not countable on this machine: {why}", i + 1)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(dirs: &[&str], files: &[&str]) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        for p in dirs {
            std::fs::create_dir_all(d.path().join(p)).unwrap();
        }
        for f in files {
            std::fs::write(d.path().join(f), "event=0x3c\n").unwrap();
        }
        d
    }

    fn avail(l: &[Listed]) -> Vec<(&str, bool)> {
        l.iter().map(|l| (l.name, l.available.is_ok())).collect()
    }

    /// The module's `Event::name`s, read from its source (`src/shims/perf.rs`),
    /// in its order, with their kind.
    #[test]
    fn the_list_is_the_modules_events() {
        let src = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../src/shims/perf.rs"
        ))
        .unwrap();
        let body = &src[src
            .find("fn name(self) -> &'static str {\n        match self {\n            Event::")
            .unwrap()..];
        let body = &body[..body.find("        }\n").unwrap()];
        let module: Vec<(&str, &str)> = body
            .lines()
            .filter_map(|l| {
                let (variant, name) = l.trim().split_once(" => ")?;
                Some((
                    variant.trim_start_matches("Event::"),
                    name.trim_end_matches(',').trim_matches('"'),
                ))
            })
            .collect();
        assert_eq!(module.len(), 11, "{module:?}");
        let ours: Vec<&str> = EVENTS.iter().map(|e| e.0).collect();
        assert_eq!(ours, module.iter().map(|m| m.1).collect::<Vec<_>>());
        // Software: the variants `raw()` gives PERF_TYPE_SOFTWARE.
        for (variant, name) in &module {
            let software = src
                .lines()
                .any(|l| l.contains(&format!("Event::{variant} => (PERF_TYPE_SOFTWARE")));
            let e = EVENTS.iter().find(|e| e.0 == *name).unwrap();
            let want = if software {
                Kind::Software
            } else {
                Kind::Hardware
            };
            assert_eq!(e.1, want, "{name}");
        }
    }

    #[test]
    fn without_a_pmu_only_software_events_are_available() {
        // This machine's tree: software, tracepoint... and no cpu.
        let d = tree(
            &[
                "bus/event_source/devices/software",
                "bus/event_source/devices/tracepoint",
            ],
            &[],
        );
        let l = list(d.path());
        for e in &l {
            assert_eq!(e.available.is_ok(), e.kind == Kind::Software, "{e:?}");
        }
        let why = l[0].available.clone().unwrap_err();
        assert!(why.contains("no hardware PMU"), "{why}");
        assert!(why.contains("devices/cpu is missing"), "{why}");
    }

    #[test]
    fn a_pmu_counts_the_events_it_lists() {
        let d = tree(
            &[
                "bus/event_source/devices/software",
                "bus/event_source/devices/cpu/events",
            ],
            &[
                "bus/event_source/devices/cpu/events/cpu-cycles",
                "bus/event_source/devices/cpu/events/instructions",
            ],
        );
        let l = list(d.path());
        let a = avail(&l);
        assert_eq!(a[0], ("cycles", true));
        assert_eq!(a[1], ("instructions", true));
        assert_eq!(a[3], ("cache-misses", false));
        let why = l[3].available.clone().unwrap_err();
        assert!(why.contains("does not list it"), "{why}");
        assert!(why.contains("events/cache-misses"), "{why}");
        // A PMU without an events directory: every hardware event.
        let d = tree(
            &[
                "bus/event_source/devices/software",
                "bus/event_source/devices/cpu",
            ],
            &[],
        );
        assert!(list(d.path()).iter().all(|e| e.available.is_ok()));
        // Hybrid parts: cpu_core.
        let d = tree(
            &[
                "bus/event_source/devices/software",
                "bus/event_source/devices/cpu_core",
            ],
            &[],
        );
        assert!(list(d.path()).iter().all(|e| e.available.is_ok()));
    }

    #[test]
    fn a_kernel_without_perf_events_counts_nothing() {
        let d = tree(&[], &[]);
        let l = list(d.path());
        assert!(l.iter().all(|e| e
            .available
            .as_ref()
            .is_err_and(|w| w.contains("no perf events"))));
    }

    #[test]
    fn the_listing_shows_name_kind_and_availability() {
        let d = tree(&["bus/event_source/devices/software"], &[]);
        let mut out = Vec::new();
        print(&list(d.path()), &mut out).unwrap();
        let out = String::from_utf8(out).unwrap();
        let line = |n: &str| {
            let l = out
                .lines()
                .find(|l| l.trim_start().starts_with(&format!("{n} ")))
                .unwrap_or_else(|| panic!("{n} in {out}"));
            l.split_whitespace().collect::<Vec<_>>().join(" ")
        };
        assert_eq!(line("cycles"), "cycles hardware no (1) CPU cycles");
        assert_eq!(line("page-faults"), "page-faults software yes page faults");
        // The reason, once, for the six hardware events.
        let notes: Vec<&str> = out.lines().filter(|l| l.starts_with('(')).collect();
        assert_eq!(notes.len(), 1, "{out}");
        assert!(notes[0].starts_with("(1) not countable on this machine: no hardware PMU"));
        assert_eq!(out.matches("no (1)").count(), 6, "{out}");
    }
}
