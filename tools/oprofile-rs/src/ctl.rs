//! `oprofile-rs ctl`: the module's runtime control from the command line.
//!
//! It goes through the device's ioctls (`/dev/oprofile/buffer` opened for
//! writing only, which takes no reader slot), so it works under
//! `lockdown=integrity` (Secure Boot), where debugfs refuses writes; on a
//! module without those ioctls it writes the debugfs files instead
//! ([`ModuleControl`]). The actions run in the order given:
//!
//! - `show`: the settings (`key=value` lines) and `tracing_on=0|1`;
//! - `on`, `off`: switch recording on or off;
//! - `flush`: make everything recorded readable now;
//! - `snapshot`: take a flight-recorder snapshot (`mode=overwrite`);
//! - `KEY=VALUE...`: consecutive words are one change, all or nothing.
//!   Recording must be off (`EBUSY` otherwise), unless `--pause` switches it
//!   off around the change and back on after (also when the change fails).
//!
//! Words are checked before anything is touched: an unknown action or key,
//! a key twice in one change, or a value that is not one word is refused.

use std::io::Write;

use anyhow::{bail, Result};

use crate::control::{full_buffer_hint, refusal_hint, words, Control, ModuleControl, KEYS};
use crate::text::esc;

/// One action of the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    Show,
    On,
    Off,
    Flush,
    Snapshot,
    /// One change: `key=value` pairs in [`KEYS`] order.
    Set(Vec<(&'static str, String)>),
}

/// The actions `args` ask for (`show` when there are none).
pub fn parse(args: &[String]) -> Result<Vec<Action>> {
    let mut out: Vec<Action> = Vec::new();
    for a in args {
        if let Some((k, v)) = a.split_once('=') {
            let Some(key) = KEYS.iter().copied().find(|x| *x == k) else {
                bail!(
                    "{}: no such setting (the settings: {})",
                    esc(k),
                    KEYS.join(", ")
                );
            };
            if v.is_empty() || v.chars().any(|c| c.is_whitespace() || c == '=') {
                bail!("{}: the value must be one word", esc(a));
            }
            // Sizes as `record` takes them: bytes, or K, M, G.
            let v = if matches!(
                key,
                "cpu_buffer_size" | "buffer_size" | "buffer_watershed" | "user_stack_size"
            ) {
                crate::control::parse_size(v)
                    .map_err(|e| anyhow::anyhow!("{key}: {}", esc(&e)))?
                    .to_string()
            } else if key == "cgroup" {
                // As `record -G`: a cgroup2 directory goes by its id.
                crate::control::cgroup_value(v)?
            } else {
                v.to_string()
            };
            match out.last_mut() {
                Some(Action::Set(kv)) => {
                    if kv.iter().any(|(x, _)| *x == key) {
                        bail!("{key} is given twice in one change");
                    }
                    kv.push((key, v));
                }
                _ => out.push(Action::Set(vec![(key, v)])),
            }
            continue;
        }
        out.push(match a.as_str() {
            "show" => Action::Show,
            "on" => Action::On,
            "off" => Action::Off,
            "flush" => Action::Flush,
            "snapshot" => Action::Snapshot,
            _ => bail!(
                "{}: not an action (show, on, off, flush, snapshot) nor KEY=VALUE",
                esc(a)
            ),
        });
    }
    for a in &mut out {
        if let Action::Set(kv) = a {
            kv.sort_by_key(|(k, _)| KEYS.iter().position(|x| x == k));
        }
    }
    if out.is_empty() {
        out.push(Action::Show);
    }
    Ok(out)
}

/// Runs `actions` in order through `ctl`, writing what `show` prints to
/// `out`; stops at the first that fails, with an error that says what the
/// module's answer means.
pub fn run(
    ctl: &mut ModuleControl,
    actions: &[Action],
    pause: bool,
    out: &mut dyn Write,
) -> Result<()> {
    for a in actions {
        match a {
            Action::Show => {
                let config = ctl.config().map_err(|e| {
                    anyhow::anyhow!("cannot read the configuration ({}): {e}", ctl.describe())
                })?;
                write!(out, "{config}")?;
                let on = ctl.tracing().map_err(|e| {
                    anyhow::anyhow!("cannot read whether recording is on: {e}")
                })?;
                writeln!(out, "tracing_on={}", u8::from(on))?;
            }
            Action::On | Action::Off => {
                let on = *a == Action::On;
                ctl.set_tracing(on).map_err(|e| {
                    anyhow::anyhow!(
                        "cannot switch recording {} ({}): {e}",
                        if on { "on" } else { "off" },
                        ctl.describe()
                    )
                })?;
            }
            Action::Flush => ctl
                .flush()
                .map_err(|e| anyhow::anyhow!("cannot flush ({}): {e}", ctl.describe()))?,
            Action::Snapshot => ctl.snapshot().map_err(|e| {
                let why = match e.raw_os_error() {
                    Some(libc::EINVAL) => {
                        " (EINVAL: the module records in consume mode: `oprofile-rs ctl off mode=overwrite on`)"
                    }
                    Some(libc::ENOSPC) => {
                        " (ENOSPC: the event buffer cannot take it: read /dev/oprofile/buffer, then retry)"
                    }
                    _ => "",
                };
                anyhow::anyhow!("the module refused a snapshot: {e}{why}")
            })?,
            Action::Set(kv) => set(ctl, kv, pause)?,
        }
    }
    Ok(())
}

/// One change; with `pause`, recording is switched off around it if on.
fn set(ctl: &mut ModuleControl, kv: &[(&'static str, String)], pause: bool) -> Result<()> {
    let was_on = pause
        && ctl
            .tracing()
            .map_err(|e| anyhow::anyhow!("cannot read whether recording is on: {e}"))?;
    if was_on {
        ctl.set_tracing(false)
            .map_err(|e| anyhow::anyhow!("cannot switch recording off: {e}"))?;
    }
    let r = ctl.set_config(kv);
    if was_on {
        ctl.set_tracing(true)
            .map_err(|e| anyhow::anyhow!("cannot switch recording back on: {e}"))?;
    }
    if let Err(e) = r {
        let partly = if e.applied > 0 {
            format!(
                "; one file at a time, the first {} may have been made",
                e.applied
            )
        } else {
            String::new()
        };
        let busy = e.error.raw_os_error() == Some(libc::EBUSY);
        // Recording off at the change (--pause switched it off), and the
        // event buffer (nearly) full: that is why, and the generic hints
        // would only mislead.
        let off = pause || matches!(ctl.tracing(), Ok(false));
        let full = (busy && off)
            .then(|| ctl.event_buffer_fill())
            .flatten()
            .and_then(|(w, s)| full_buffer_hint(w, s));
        let why = if let Some(full) = full {
            full
        } else if busy && !pause {
            format!(
                "{} (`off` before it, or --pause, if recording is on)",
                refusal_hint(&e.error)
            )
        } else {
            refusal_hint(&e.error).to_string()
        };
        bail!(
            "the module refused {}: {}{why}{partly}",
            esc(&words(kv)),
            e.error
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn words_become_actions_in_order() {
        assert_eq!(parse(&[]).unwrap(), [Action::Show]);
        let a = parse(&args(&[
            "off",
            "mode=overwrite",
            "backtrace_depth=4",
            "on",
            "snapshot",
            "buffer_size=1M",
            "show",
        ]))
        .unwrap();
        assert_eq!(
            a,
            [
                Action::Off,
                // In KEYS order: backtrace_depth before mode.
                Action::Set(vec![
                    ("backtrace_depth", "4".into()),
                    ("mode", "overwrite".into())
                ]),
                Action::On,
                Action::Snapshot,
                Action::Set(vec![("buffer_size", "1048576".into())]),
                Action::Show,
            ]
        );
        for bad in [
            &["bogus"][..],
            &["bogus=1"],
            &["mode="],
            &["mode=a=b"],
            &["mode=over write"],
            &["buffer_size=1X"],
            &["mode=overwrite", "mode=consume"],
            &["ON"],
            &[""],
        ] {
            assert!(parse(&args(bad)).is_err(), "{bad:?}");
        }
        // The user stack size as sizes are taken, after the buffer sizes.
        assert_eq!(
            parse(&args(&["user_stack_size=8K", "cpu_buffer_size=1M"])).unwrap(),
            [Action::Set(vec![
                ("cpu_buffer_size", "1048576".into()),
                ("user_stack_size", "8192".into())
            ])]
        );
        assert!(parse(&args(&["user_stack_size=8Q"])).is_err());
        // The same key in two changes is two changes.
        assert_eq!(
            parse(&args(&["mode=overwrite", "on", "mode=consume"]))
                .unwrap()
                .len(),
            3
        );
    }
}
