//! Option spellings shared with perf: the old ones that perf uses for
//! something else, still taken for a release with a warning, and the
//! parsers of perf's value syntaxes (see "Coming from perf" in the user
//! guide).
//!
//! `report -n N` and `diff -n N` were `--top N`. perf report's `-n` is
//! `--show-nr-samples`, which `report -n` now is. A count after `-n` (`-n 5`,
//! `-n5`, `-n=5`) can only be the old spelling: neither command takes a
//! positional count, and `-n` takes no value. [`old_top`] rewrites it to
//! `--top N` before clap parses the command line, and says so.

use std::ffi::OsString;

use clap::Command;

/// The commands whose `-n N` was `--top N`.
const TOP_COMMANDS: [&str; 2] = ["report", "diff"];

/// `args` (the whole command line, program name first) with the old
/// `report -n N` / `diff -n N` rewritten to `--top N`, and the warning
/// that names the new spelling (none if the line has no old spelling).
/// `cmd` is the tool's command, for which options take values. Words after
/// `--`, and words that are not valid Unicode, are left as they are.
pub fn old_top(cmd: &Command, args: Vec<OsString>) -> (Vec<OsString>, Option<String>) {
    // The command: the first word after the program's own options (none
    // of which takes a value).
    let Some(at) = args
        .iter()
        .skip(1)
        .position(|a| !a.to_string_lossy().starts_with('-'))
        .map(|i| i + 1)
    else {
        return (args, None);
    };
    let name = args[at].to_string_lossy().into_owned();
    let Some(sub) = cmd
        .find_subcommand(&name)
        .filter(|_| TOP_COMMANDS.contains(&name.as_str()))
    else {
        return (args, None);
    };
    let mut out: Vec<OsString> = Vec::with_capacity(args.len() + 1);
    let mut words = args.into_iter();
    out.extend(words.by_ref().take(at + 1));
    let mut words = words.peekable();
    let mut count: Option<String> = None;
    while let Some(word) = words.next() {
        let Some(w) = word.to_str().map(str::to_owned) else {
            out.push(word);
            continue;
        };
        if w == "--" {
            out.push(word);
            out.extend(words.by_ref());
            break;
        }
        if let Some(long) = w.strip_prefix("--") {
            out.push(word);
            // `--sort dso`: the value is the next word.
            if !long.contains('=') && long_takes_value(sub, long) {
                out.extend(words.next());
            }
            continue;
        }
        let cluster = match w.strip_prefix('-') {
            Some(c) if !c.is_empty() => c,
            _ => {
                out.push(word);
                continue;
            }
        };
        // A cluster of short options (`-qn`, `-gs dso`, `-ifile`): up to
        // the first that takes a value, which takes the rest (or the next
        // word).
        let mut done = false;
        for (i, c) in cluster.char_indices() {
            let rest = &cluster[i + c.len_utf8()..];
            if c == 'n' {
                let attached = rest.strip_prefix('=').unwrap_or(rest);
                let n = if rest.is_empty() {
                    words
                        .peek()
                        .and_then(|v| v.to_str())
                        .filter(|v| is_count(v))
                        .map(str::to_owned)
                } else {
                    Some(attached.to_owned()).filter(|v| is_count(v))
                };
                if let Some(n) = n {
                    if rest.is_empty() {
                        words.next();
                    }
                    let before = &cluster[..i];
                    if !before.is_empty() {
                        out.push(format!("-{before}").into());
                    }
                    out.push("--top".into());
                    out.push(n.clone().into());
                    count.get_or_insert(n);
                    done = true;
                    break;
                }
                // `-n` alone: perf's --show-nr-samples, a flag.
                continue;
            }
            if short_takes_value(sub, c) {
                out.push(word.clone());
                if rest.is_empty() {
                    out.extend(words.next());
                }
                done = true;
                break;
            }
        }
        if !done {
            out.push(word);
        }
    }
    let warning = count.map(|n| {
        let why = match name.as_str() {
            "report" => "-n alone is perf report's -n, the samples column",
            _ => "-n is perf report's samples column",
        };
        format!("{name} -n {n} is read as --top {n}, its old spelling ({why}); use --top {n}")
    });
    (out, warning)
}

/// A row count: digits only.
fn is_count(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

fn long_takes_value(cmd: &Command, long: &str) -> bool {
    cmd.get_arguments().any(|a| {
        (a.get_long() == Some(long) || a.get_all_aliases().is_some_and(|v| v.contains(&long)))
            && a.get_action().takes_values()
    })
}

fn short_takes_value(cmd: &Command, short: char) -> bool {
    cmd.get_arguments().any(|a| {
        (a.get_short() == Some(short)
            || a.get_all_short_aliases()
                .is_some_and(|v| v.contains(&short)))
            && a.get_action().takes_values()
    })
}

/// A list of CPUs as perf takes it (`-C 0,2-3`): one piece of it, a CPU or
/// an inclusive range `A-B`, as the CPUs it names.
pub fn parse_cpus(s: &str) -> Result<CpuRange, String> {
    let t = s.trim();
    let cpu = |v: &str| -> Result<u16, String> {
        v.trim()
            .parse::<u16>()
            .map_err(|_| format!("{v:?} is not a CPU number (CPU, or a range A-B)"))
    };
    let (a, b) = match t.split_once('-') {
        Some((a, b)) => (cpu(a)?, cpu(b)?),
        None => (cpu(t)?, cpu(t)?),
    };
    if a > b {
        return Err(format!("{t:?}: the range ends before it starts"));
    }
    Ok(CpuRange(a, b))
}

/// CPUs `.0` to `.1`, both included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuRange(pub u16, pub u16);

/// The CPUs of `ranges`, in the order given, each once.
pub fn cpu_list(ranges: &[CpuRange]) -> Vec<u16> {
    let mut v: Vec<u16> = Vec::new();
    for r in ranges {
        for c in r.0..=r.1 {
            if !v.contains(&c) {
                v.push(c);
            }
        }
    }
    v
}

/// `--percent-limit PCT` as perf report takes it: a percentage, with or
/// without `%`.
pub fn parse_percent(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let v: f64 = t
        .strip_suffix('%')
        .unwrap_or(t)
        .trim()
        .parse()
        .map_err(|_| format!("{t:?} is not a percentage"))?;
    if !(0.0..=100.0).contains(&v) {
        return Err(format!("{t:?} is not a percentage from 0 to 100"));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{Arg, ArgAction};

    fn cmd() -> Command {
        let sub = |name: &'static str| {
            Command::new(name)
                .arg(Arg::new("input").short('i').long("input"))
                .arg(Arg::new("sort").short('s').long("sort"))
                .arg(Arg::new("quiet").short('q').action(ArgAction::SetTrue))
                .arg(Arg::new("g").short('g').action(ArgAction::SetTrue))
                .arg(Arg::new("nr").short('n').action(ArgAction::SetTrue))
                .arg(Arg::new("top").long("top"))
                .arg(Arg::new("comm").long("comm").alias("comms"))
        };
        Command::new("t")
            .subcommand(sub("report"))
            .subcommand(sub("diff"))
            .subcommand(sub("script"))
    }

    fn rewrite(line: &str) -> (String, Option<String>) {
        let args = line.split(' ').map(OsString::from).collect();
        let (out, w) = old_top(&cmd(), args);
        let out: Vec<String> = out
            .into_iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        (out.join(" "), w)
    }

    #[test]
    fn a_count_after_n_is_the_old_top() {
        for (from, to) in [
            ("t report -n 5", "t report --top 5"),
            ("t report -i f -n 5 -g", "t report -i f --top 5 -g"),
            ("t report -n5", "t report --top 5"),
            ("t report -n=5", "t report --top 5"),
            ("t report -qn 5", "t report -q --top 5"),
            ("t report -gqn7", "t report -gq --top 7"),
            ("t diff a b -n 3", "t diff a b --top 3"),
        ] {
            let (out, w) = rewrite(from);
            assert_eq!(out, to, "{from}");
            assert!(w.is_some(), "{from}");
        }
        let (_, w) = rewrite("t report -n 12");
        assert_eq!(
            w.as_deref(),
            Some(
                "report -n 12 is read as --top 12, its old spelling (-n alone is perf \
                 report's -n, the samples column); use --top 12"
            )
        );
    }

    #[test]
    fn everything_else_is_left_alone() {
        for line in [
            "t report -n",
            "t report -n -g",
            "t report -ng",
            "t report -n --sort dso",
            "t report -i -n 5",
            "t report --input -n 5",
            "t report -s -n",
            "t report --comms -n 5",
            "t report -- -n 5",
            "t report --top 5",
            "t report -n x",
            "t script -n 5",
            "t -q report",
            "t",
        ] {
            let (out, w) = rewrite(line);
            assert_eq!(out, line);
            assert_eq!(w, None, "{line}");
        }
        // `-in`: -i takes "n" as its value; the 5 is left to clap.
        assert_eq!(rewrite("t report -in 5").0, "t report -in 5");
    }

    #[test]
    fn cpu_lists_and_percentages() {
        let r: Vec<CpuRange> = ["0", "2-4", "3"]
            .iter()
            .map(|s| parse_cpus(s).unwrap())
            .collect();
        assert_eq!(cpu_list(&r), [0, 2, 3, 4]);
        assert!(parse_cpus("4-2").is_err());
        assert!(parse_cpus("x").is_err());
        assert!(parse_cpus("-1").is_err());
        assert_eq!(parse_percent("0.5"), Ok(0.5));
        assert_eq!(parse_percent("5%"), Ok(5.0));
        assert!(parse_percent("-1").is_err());
        assert!(parse_percent("x").is_err());
        assert!(parse_percent("101").is_err());
    }
}
