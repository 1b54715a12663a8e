use std::fs::File;
use std::io::{BufWriter, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand};

use oprofile_tool::calltree::CallGraphSpec;
use oprofile_tool::control;
use oprofile_tool::profile::{Filter, LoadOptions, Profile, TimeSpan};
use oprofile_tool::record::{self, MapsSource, RecordOptions, StopReason};
use oprofile_tool::report::{self, ReportOptions, SortKey};
use oprofile_tool::script::{self, ScriptFormat, ScriptOptions};
use oprofile_tool::symbols::SymbolizerKind;
use oprofile_tool::text::esc;
use oprofile_tool::{folded, off_cpu, pprof, spelling};

/// Record and analyse profiles from the oprofile-rs kernel module.
#[derive(Parser)]
#[command(name = "oprofile-rs", version, about)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Record /dev/oprofile/buffer to FILE (and the FILE.meta side-car).
    Record(RecordArgs),
    /// Flat profile (samples per symbol, process or CPU) and call graph.
    Report(ReportArgs),
    /// One line per sample, in time order.
    Script(ScriptArgs),
    /// Folded stacks (input for flamegraph tools).
    ///
    /// One line per distinct stack: the comm, the user frames from the
    /// outermost, then the kernel frames (`_[k]`) down to the sampled
    /// function, and the count.
    Folded(OutArgs),
    /// Flame graph SVG.
    Flamegraph(FlameArgs),
    /// Gzipped pprof profile (perftools.profiles.Profile).
    Pprof(PprofArgs),
    /// Print a pprof file's stacks as folded lines (root first) with their
    /// sample counts: for checking a written profile.
    #[command(hide = true)]
    PprofFolded(PprofFoldedArgs),
    /// Firefox Profiler JSON (every sample with its time, thread and CPU;
    /// native frames in their library, at addresses relative to it).
    Firefox(FirefoxArgs),
    /// One self-contained interactive HTML page (flame graph, call tree,
    /// functions, threads, timeline).
    ///
    /// A flame graph (or icicle) with search and zoom, the call tree, the
    /// table of functions, a selector of threads and processes, and a
    /// timeline whose dragged time range filters every view; warnings on
    /// lost samples and cut call stacks at the top. It needs no network
    /// access (data, style and script are in the file) and stays quick
    /// with 100k samples.
    Html(HtmlArgs),
    /// Per-symbol comparison of two recordings.
    Diff(DiffArgs),
    /// The events `record -e` takes, hardware or software, and whether
    /// this machine can count each (hardware ones need the CPU's PMU,
    /// which a virtual machine often lacks).
    List(ListArgs),
    /// Samples per instruction over the disassembly of a function: of a
    /// program or library, of the kernel (--vmlinux) or of a module
    /// (--modules); x86 and x86-64 code. Where DWARF has them, the hottest
    /// source lines come first and the source lines show between the
    /// instructions; call, jump and RIP-relative targets are named.
    Annotate(AnnotateArgs),
    /// One file holding the recording, its side-car and every binary,
    /// debug file, kernel image and module its analyses read (those of this
    /// machine whose build-ids are the recording's), keyed by build-id, as
    /// `perf archive`: every analysis command reads it as its -i on
    /// another machine.
    Archive(ArchiveArgs),
    /// Control the module: show its settings, switch recording on or off,
    /// flush, take a snapshot, change settings (through the device's
    /// ioctls, which work under lockdown=integrity; debugfs where the
    /// module has none).
    Ctl(CtlArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions(CompletionsArgs),
    /// Write the man pages (oprofile-rs.1 and one per command) into DIR.
    Man(ManArgs),
}

#[derive(Args)]
struct RecordArgs {
    /// Output stream file; the side-car goes to FILE.meta/.
    #[arg(short, long, value_name = "FILE", default_value = "oprofile.data")]
    output: PathBuf,
    /// Stop after this many seconds (fractions allowed).
    #[arg(long, value_name = "SECS")]
    duration: Option<f64>,
    /// The old spelling of --duration, taken with a warning for now: perf
    /// record's -d records data addresses.
    #[arg(
        short = 'd',
        value_name = "SECS",
        hide = true,
        conflicts_with = "duration"
    )]
    old_duration: Option<f64>,
    /// Stream device.
    #[arg(long, default_value = "/dev/oprofile/buffer")]
    device: PathBuf,
    /// oprofile debugfs directory (its `flush` is written on stop).
    #[arg(long, default_value = "/sys/kernel/debug/oprofile")]
    debugfs: PathBuf,
    /// procfs root used for kallsyms, modules and maps (for testing).
    #[arg(long, default_value = "/proc", hide = true)]
    proc_root: PathBuf,
    /// sysfs root the kernel's and modules' build-ids are read under (for
    /// testing).
    #[arg(long, default_value = "/sys", hide = true)]
    sys_root: PathBuf,
    /// Read buffer size in bytes (grown automatically on EINVAL).
    #[arg(long, value_name = "BYTES", default_value_t = 1 << 20)]
    read_size: usize,
    /// Sample these events (comma-separated, 1 to 8, e.g.
    /// `cycles,page-faults` or `cpu-clock,page-faults,context-switches`):
    /// PMU events (cycles, instructions, cache-references, cache-misses,
    /// branch-instructions, branch-misses), software events (cpu-clock,
    /// task-clock, page-faults, context-switches, cpu-migrations), or
    /// `default`. Each gets its default period unless -c or -F says.
    /// Like every setting below, it is applied while recording is off
    /// (the device's control ioctl, else debugfs) and put back when
    /// recording stops.
    #[arg(
        short = 'e',
        long = "event",
        value_name = "EVENT,...",
        value_delimiter = ','
    )]
    events: Vec<String>,
    /// Sampling period: one value for every event, or one per event (0:
    /// not given for that event): events (ns for cpu-clock and task-clock)
    /// between two samples.
    #[arg(
        short = 'c',
        long = "count",
        value_name = "PERIOD[,...]",
        value_delimiter = ','
    )]
    count: Vec<u64>,
    /// Sampling frequency (samples per second per CPU; perf adjusts the
    /// period, and each sample carries its own): one value for every
    /// event, or one per event (0: not given). An event takes -c or -F,
    /// not both.
    #[arg(
        short = 'F',
        long = "freq",
        value_name = "HZ[,...]",
        value_delimiter = ','
    )]
    freq: Vec<u64>,
    /// Record kernel and user call stacks by frame pointers alone (32
    /// entries each; no stack copy, no unwind tables; see --call-graph).
    #[arg(short = 'g', conflicts_with = "call_graph")]
    callchains: bool,
    /// Call stacks. By default the module walks the recorded processes'
    /// user stacks with unwind tables this command builds from their
    /// binaries' .eh_frame and loads (callers of code without frame
    /// pointers and of leaf functions, no stack copy); `cfi` is that with
    /// kernel callchains too (the depths of -g). KDEPTH[,UDEPTH] (kernel
    /// callchain and user call stack entries, 0 to 64; UDEPTH defaults to
    /// KDEPTH) and `fp` (as -g) walk frame pointers alone; `no`
    /// (none), or `dwarf[,SIZE]` as perf takes it: as -g, and SIZE bytes of
    /// the user stack copied into every sample (default 8192: a multiple of
    /// 8, at most 8192; K suffix) that the analyses unwind with the
    /// binaries' .eh_frame, for code built without frame pointers (the
    /// module's user_stack_size, put back after the recording; the CPU and
    /// event buffers are raised to hold such samples unless their sizes are
    /// given). Past the end of the copy the unwind goes on along the
    /// frame-pointer chain, so a small SIZE (dwarf,1K) is a hybrid: the copy
    /// for the frames nearest the sample (a leaf without a frame record,
    /// libraries without frame pointers), the chain beyond. Without -g and
    /// --call-graph the module's settings are used as they are.
    /// `hybrid[,SIZE]` is `dwarf,SIZE` (default 1K) with copies that fit
    /// the chain: where the frame pointer holds a plausible frame record,
    /// the copy stops after it (tens of bytes for code built with frame
    /// pointers), otherwise it is SIZE bytes.
    #[arg(long, value_name = "cfi|KDEPTH[,UDEPTH]|fp|dwarf[,SIZE]|hybrid[,SIZE]|no", value_parser = control::parse_call_graph_arg)]
    call_graph: Option<control::CallGraph>,
    /// Bytes of each CPU's ring buffer (K, M, G suffixes).
    #[arg(long, value_name = "BYTES", value_parser = control::parse_size)]
    cpu_buffer_size: Option<u64>,
    /// Bytes of the module's event buffer, read through the device (K, M,
    /// G suffixes). The read buffer is --read-size.
    #[arg(long, value_name = "BYTES", value_parser = control::parse_size)]
    buffer_size: Option<u64>,
    /// Fill of the event buffer that wakes the reader (below --buffer-size;
    /// K, M, G suffixes).
    #[arg(long, value_name = "BYTES", value_parser = control::parse_size)]
    watershed: Option<u64>,
    /// Sample user mode only (the module's exclude_kernel=1), as perf
    /// record's option of that name.
    #[arg(long, conflicts_with = "all_kernel")]
    all_user: bool,
    /// Sample kernel mode only (the module's exclude_user=1), as perf
    /// record's option of that name.
    #[arg(long)]
    all_kernel: bool,
    /// Sample only the tasks of this cgroup (v2) and of its descendants (the
    /// module's cgroup filter): its directory (/sys/fs/cgroup/...), its path
    /// as /proc/PID/cgroup shows it (/system.slice/nginx.service), or that
    /// path without the leading / as perf record's -G takes it. The filter
    /// is put back after the recording.
    #[arg(short = 'G', long, value_name = "CGROUP")]
    cgroup: Option<String>,
    /// Never show the progress line.
    #[arg(short, long)]
    quiet: bool,
    /// System-wide, as perf record -a: every task on every CPU. With a
    /// COMMAND, it only says when the recording ends (`record -a -- sleep
    /// 10`; without -a the command is profiled alone), and analyses show
    /// every process, not the command's alone.
    #[arg(short = 'a', long = "all-cpus", conflicts_with = "pid")]
    all_cpus: bool,
    /// Where process maps come from: `auto` (the kernel's records where
    /// perf_event_open allows, else polling), `events` (the kernel's
    /// MMAP2/COMM/FORK/EXIT records: exact, for every sample's time; fail if
    /// unavailable) or `poll` (re-read /proc/PID/maps every 0.5 s).
    #[arg(long, value_enum, default_value_t = MapsSource::Auto)]
    maps: MapsSource,
    /// The recording is about these processes (comma-separated pids): it
    /// stops when they have all exited, and analyses show only them and
    /// their descendants unless given --all. With one pid the module is
    /// bound to that process (the module's `pid`, put back after): its
    /// threads and the tasks they create from then on are sampled, nothing
    /// else. With several the module samples every task (it binds to one
    /// process), as it does with a module that predates `pid`.
    #[arg(
        short,
        long,
        value_name = "PID,...",
        value_delimiter = ',',
        conflicts_with = "command"
    )]
    pid: Vec<u32>,
    /// Flight recorder: the module records in overwrite mode (its per-CPU
    /// buffers keep the newest samples; switched for the recording and put
    /// back after it). Each SIGUSR2 (`kill -USR2 PID`) writes a snapshot of
    /// what they hold, the samples of the last moments, into FILE, and so
    /// does the end of the recording (SIGINT, SIGTERM, --duration, the
    /// command's exit). Each snapshot is a section of FILE: `script
    /// --events` shows them, `--snapshot N` selects one in every analysis
    /// command.
    #[arg(long)]
    snapshot: bool,
    /// Also keep the samples the module buffered before the recording
    /// started (recording is on from the module's load: unread samples wait
    /// in its buffers). By default they are read and left out before the
    /// command starts, so that the recording holds what happens from its
    /// start on (the flight recorder keeps them always).
    #[arg(long)]
    keep_backlog: bool,
    /// Also record off-CPU time: every switch-out of a sampled task (the
    /// `context-switches` event with a period of 1, added to the events;
    /// `cpu-clock` is the on-CPU event without -e), with why it left its
    /// CPU, its run time, and the stacks where it left it. `report
    /// --off-cpu`, `report --wall-clock` and `folded`/`flamegraph --off-cpu`
    /// show it. Kernel call stacks are on with it (-g's depths) unless
    /// --call-graph says otherwise. Not with --all-user (the switches are
    /// taken in the kernel).
    #[arg(long)]
    off_cpu: bool,
    /// Command to profile alone: it is started held before its exec, the
    /// module is bound to its process (the module's `pid`, put back after:
    /// its tasks and those they create are sampled through counters that
    /// follow them, other tasks cost nothing), then it runs, its start
    /// included; recording stops when it exits. Analyses show only it and
    /// its descendants unless given --all. With -a every task is sampled
    /// (the command only delimits the recording), and so with a module
    /// that predates `pid` (a note says so). It starts at the first word
    /// that is not an option (`record -g ./prog -x`, as perf record takes
    /// it), or after `--`.
    #[arg(trailing_var_arg = true, value_name = "COMMAND")]
    command: Vec<String>,
}

#[derive(Args)]
struct Input {
    /// Recorded stream, or an archive of one (`archive`: FILE.tar.zst,
    /// .tar.gz, .tar).
    #[arg(short, long, value_name = "FILE", default_value = "oprofile.data")]
    input: PathBuf,
    /// Side-car directory (default: FILE.meta).
    #[arg(long, value_name = "DIR")]
    sidecar: Option<PathBuf>,
    #[command(flatten)]
    common: Common,
}

/// Options of every analysis command.
#[derive(Args)]
struct Common {
    /// Look binaries up under this root directory.
    #[arg(long, value_name = "DIR")]
    symfs: Option<PathBuf>,
    /// Also look for separate debug files (`.gnu_debuglink` targets,
    /// `.build-id/xx/yyyy.debug`) in DIR, before /usr/lib/debug and /lib/debug.
    #[arg(long, value_name = "DIR")]
    debug_dir: Vec<PathBuf>,
    /// `dwarf`: file:line, inlined functions and separate debug files
    /// (blazesym); `symtab`: ELF symbol tables only (faster, no lines).
    #[arg(long, value_enum, default_value_t = SymbolizerKind::Dwarf)]
    symbolizer: SymbolizerKind,
    /// On corruption, analyse the records before it instead of failing.
    #[arg(long)]
    allow_corrupt: bool,
    /// Do not print warnings about the recording (one about an old option
    /// spelling is still printed).
    #[arg(short, long)]
    quiet: bool,
    /// Only samples of these processes or threads (comma-separated ids).
    #[arg(long, value_name = "PID,...", value_delimiter = ',')]
    pid: Vec<u32>,
    /// Only samples of these threads (comma-separated ids), as perf's
    /// --tid.
    #[arg(long, value_name = "TID,...", value_delimiter = ',')]
    tid: Vec<u32>,
    /// Only samples of tasks with these command names (comma-separated;
    /// --comms as perf spells it).
    #[arg(
        long,
        visible_alias = "comms",
        value_name = "COMM,...",
        value_delimiter = ','
    )]
    comm: Vec<String>,
    /// Only samples taken on these CPUs (comma-separated; ranges A-B, as
    /// perf takes them).
    #[arg(long, value_name = "CPU,...", value_delimiter = ',', value_parser = spelling::parse_cpus)]
    cpu: Vec<spelling::CpuRange>,
    /// Only samples taken in these binaries (comma-separated, as the
    /// Binary column names them, `[kernel.kallsyms]`, `libc.so.6`, or by
    /// path), as perf's --dsos.
    #[arg(long, value_name = "DSO,...", value_delimiter = ',')]
    dsos: Vec<String>,
    /// Only samples taken in START <= t < END: seconds (fractions allowed)
    /// since the recording's start, e.g. `2.5,4` or `10,` (to the end);
    /// `@SECS` is absolute, in the stream's clock (seconds since boot, as
    /// `script` prints them), e.g. `@1234.5,@1236`. A span that ends
    /// before it starts, or where it starts, is an error.
    #[arg(long, value_name = "START,END", allow_hyphen_values = true)]
    time: Option<TimeSpan>,
    /// Only samples of the flight-recorder snapshot N (`record --snapshot`;
    /// `script --events` lists the snapshots: `SNAPSHOT N end`).
    #[arg(long, value_name = "N")]
    snapshot: Option<u32>,
    /// Every process of the recording: do not limit the analysis to the
    /// command (`record -- CMD`) or the processes (`record -p`) it was
    /// recorded for, and their descendants.
    #[arg(long)]
    all: bool,
    /// Only samples of this event (a recording of several: `record -e
    /// cycles,page-faults`). Without it, `report` has a section per event,
    /// `pprof` sample types per event, `script` names each sample's event,
    /// and the views of one event (folded, flamegraph, diff, annotate,
    /// firefox) show the first and say so.
    #[arg(long, value_name = "NAME")]
    event: Option<String>,
}

impl Common {
    fn load(&self, input: &Path, sidecar: Option<PathBuf>) -> Result<Profile> {
        let mut p = Profile::load(
            input,
            &LoadOptions {
                symfs: self.symfs.clone(),
                sidecar,
                allow_corrupt: self.allow_corrupt,
                symbolizer: self.symbolizer,
                debug_dirs: self.debug_dir.clone(),
                debuginfod: oprofile_tool::debuginfod::Debuginfod::from_env(),
            },
        )?;
        // A recording made for a command or -p pids is about them and
        // their descendants, as `perf record` users expect.
        let pids = match (
            &p.target,
            self.all || !self.pid.is_empty() || !self.tid.is_empty(),
        ) {
            (Some(t), false) => t.clone(),
            _ => self.pid.clone(),
        };
        let event = match &self.event {
            Some(n) => Some((p.event_index(n)?, n.clone())),
            None => None,
        };
        if let Some(t) = &self.time {
            t.check(&input.display().to_string(), p.first_time)
                .map_err(|e| anyhow::anyhow!(e))?;
        }
        p.retain(&Filter {
            pids,
            tids: self.tid.clone(),
            comms: self.comm.clone(),
            cpus: spelling::cpu_list(&self.cpu),
            dsos: self.dsos.clone(),
            time: self.time,
            snapshot: self.snapshot,
            event,
        });
        if let Some(n) = self.snapshot {
            let seqs: Vec<u32> = p.snapshots().iter().map(|s| s.0).collect();
            if !seqs.contains(&n) {
                match (seqs.first(), seqs.last()) {
                    (Some(a), Some(b)) => {
                        anyhow::bail!("--snapshot {n}: the recording has snapshots {a} to {b}")
                    }
                    _ => anyhow::bail!(
                        "--snapshot {n}: the recording has no snapshot (record --snapshot makes them)"
                    ),
                }
            }
        }
        if !self.quiet {
            for w in &p.warnings {
                eprintln!("oprofile-rs: warning: {}", esc(w));
            }
            if p.samples.is_empty() && p.filtered_out() > 0 {
                eprintln!(
                    "oprofile-rs: warning: the filter ({}) keeps none of the {} samples",
                    esc(&p.filter.describe()),
                    p.filtered_out()
                );
            }
            if let Some(w) = self
                .time
                .and_then(|t| t.past_the_end(p.first_time, p.last_time))
            {
                eprintln!("oprofile-rs: warning: {}", esc(&w));
            }
        }
        Ok(p)
    }
}

impl Input {
    fn load(&self) -> Result<Profile> {
        self.common.load(&self.input, self.sidecar.clone())
    }

    /// Loads for a view of one event: a recording of several, without
    /// `--event`, shows its first sampled event, and says so.
    fn load_one_event(&self, view: &str) -> Result<Profile> {
        let p = self.load()?;
        Ok(one_event(p, view, self.common.quiet))
    }
}

/// `p` limited to its default event where it has several and `--event` did
/// not choose (a note on stderr names it and the others).
fn one_event(p: Profile, view: &str, quiet: bool) -> Profile {
    match p.default_event() {
        Some(i) => {
            let q = p.for_event(i);
            if !quiet {
                let name = &q.event_list[usize::from(i)].name;
                eprintln!(
                    "oprofile-rs: {view} shows event {} (the recording has {}; --event NAME for another)",
                    esc(name),
                    esc(&oprofile_tool::profile::event_names(&p.event_list))
                );
            }
            q
        }
        None => p,
    }
}

fn parse_call_graph(s: &str) -> Result<CallGraphSpec, String> {
    CallGraphSpec::parse(s)
}

#[derive(Args)]
#[command(
    mut_arg("comm", |a| a.short('c')),
    mut_arg("cpu", |a| a.short('C')),
    mut_arg("dsos", |a| a.short('d'))
)]
struct ReportArgs {
    #[command(flatten)]
    input: Input,
    /// Group rows by these keys, combined (comma-separated, in column order):
    /// symbol (or sym), dso, pid (the process; or tgid), comm, cpu, srcline
    /// (FILE:LINE of the address, DWARF).
    #[arg(
        short,
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "symbol"
    )]
    sort: Vec<SortKey>,
    /// Split rows per CPU.
    #[arg(long)]
    per_cpu: bool,
    /// Split rows per process.
    #[arg(long)]
    per_process: bool,
    /// Show the first N rows only (0 = all). Its old spelling `-n N` is
    /// taken with a warning for now.
    #[arg(long, value_name = "N", default_value_t = 0)]
    top: usize,
    /// As perf report -n: the Samples column, which is always shown.
    #[arg(short = 'n', long)]
    show_nr_samples: bool,
    /// Leave out the rows under PCT percent (of Self, or of Children with
    /// --children), and the branches of -g's trees under it, as perf
    /// report --percent-limit.
    #[arg(long, value_name = "PCT", value_parser = spelling::parse_percent)]
    percent_limit: Option<f64>,
    /// As perf report --stdio: text on stdout, the only interface.
    #[arg(long)]
    stdio: bool,
    /// Add each function's inclusive share (samples with it anywhere in the
    /// stack: kernel callchain and user call stack) and sort by it, as
    /// `perf report --children`.
    #[arg(long, overrides_with = "no_children")]
    children: bool,
    /// Without the inclusive share (the default), as perf report
    /// --no-children.
    #[arg(long, overrides_with = "children")]
    no_children: bool,
    /// Draw each row's call tree, as perf report -g: ORDER `callee` (the
    /// default) or `caller` (the default with --children); branches under
    /// PCT% hidden (default 0.5).
    ///
    /// The trees go across kernel and user frames. `callee`: from each
    /// function up to its callers (its own samples; with --children, every
    /// sample it is in). `caller`: with --children, from each function
    /// down to what it calls; without, its own samples from the outermost
    /// caller down to it. Percentages are of all samples kept; PCT
    /// defaults to --percent-limit if given, else 0.5. E.g. `-g`,
    /// `--children -g`, `-g caller,1`, `-g callee,0` (every branch).
    #[arg(
        short = 'g',
        long = "call-graph",
        value_name = "ORDER,PCT",
        num_args = 0..=1,
        default_missing_value = "",
        value_parser = parse_call_graph
    )]
    call_graph: Option<CallGraphSpec>,
    /// Print each row's direct callers and callees with their shares, as
    /// `opreport -c`.
    #[arg(long)]
    callers: bool,
    /// Only rows of these functions (comma-separated exact names; -S,
    /// --symbols as perf spells it).
    #[arg(
        short = 'S',
        long,
        visible_alias = "symbols",
        value_name = "NAME,...",
        value_delimiter = ','
    )]
    symbol: Vec<String>,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    off_cpu: OffCpuArgs,
    /// The wall-clock view (a recording of `record --off-cpu`): per
    /// thread, its time between its first and last switch-out split into
    /// on-CPU time, run-queue waits and blocked time per reason.
    #[arg(long)]
    wall_clock: bool,
}

/// The off-CPU options of the analyses.
#[derive(Args)]
struct OffCpuArgs {
    /// Off-CPU time (a recording of `record --off-cpu`): where threads
    /// blocked and for how long, per reason, function and stack, from the
    /// switch-outs the module recorded; weighted by the ns blocked.
    #[arg(long)]
    off_cpu: bool,
    /// Leave out of the off-CPU views the blocks shorter than US
    /// microseconds (counted in the report's header).
    #[arg(long, value_name = "US", default_value_t = off_cpu::DEFAULT_THRESH_US)]
    off_cpu_thresh: u64,
}

/// What folded stacks and flame graphs sum.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Weight {
    /// Samples (or the events they stand for, where periods differ).
    Samples,
    /// ns: on-CPU samples of a clock as their period, with --off-cpu the
    /// blocked time too (a wall-clock flame graph).
    Time,
}

/// The profile folded stacks and flame graphs show: the default event's
/// samples; with --off-cpu the off-CPU blocks (weighing their ns), with
/// `--weight time` the on-CPU samples weighing their ns; both together.
fn weighted_view(input: &Input, oc: &OffCpuArgs, weight: Weight, view: &str) -> Result<Profile> {
    if !oc.off_cpu {
        let p = input.load_one_event(view)?;
        return match weight {
            Weight::Samples => Ok(p),
            Weight::Time => off_cpu::on_cpu_time(&p),
        };
    }
    let p = input.load()?;
    let analysis = off_cpu::analyse(&p, oc.off_cpu_thresh.saturating_mul(1000));
    let mut q = off_cpu::as_profile(&p, &analysis);
    if weight == Weight::Time {
        let mut on = off_cpu::on_cpu_time(&p)?;
        let n = on.event_list.len() as u16;
        for s in &mut q.samples {
            s.event = n;
        }
        on.samples.append(&mut q.samples);
        on.event_list.append(&mut q.event_list);
        q = on;
    }
    Ok(q)
}

#[derive(Args)]
#[command(
    mut_arg("comm", |a| a.short('C')),
    mut_arg("dsos", |a| a.short('d'))
)]
struct DiffArgs {
    /// The baseline recording.
    #[arg(value_name = "OLD")]
    old: PathBuf,
    /// The recording compared with it.
    #[arg(value_name = "NEW")]
    new: PathBuf,
    #[command(flatten)]
    common: Common,
    /// Show the first N rows only (0 = all). Its old spelling `-n N` is
    /// taken with a warning for now.
    #[arg(long, value_name = "N", default_value_t = 0)]
    top: usize,
    /// Print the rows as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct CtlArgs {
    /// In order: show, on, off, flush, snapshot, KEY=VALUE (consecutive
    /// KEY=VALUE words are one change, all or nothing; recording must be
    /// off, see --pause). Without any: show.
    #[arg(value_name = "ACTION")]
    actions: Vec<String>,
    /// Switch recording off around each change made while it is on, and
    /// back on after it.
    #[arg(long)]
    pause: bool,
    /// The module's device.
    #[arg(long, default_value = "/dev/oprofile/buffer")]
    device: PathBuf,
    /// oprofile debugfs directory (for a module without control ioctls).
    #[arg(long, default_value = "/sys/kernel/debug/oprofile")]
    debugfs: PathBuf,
}

#[derive(Args)]
#[command(
    mut_arg("cpu", |a| a.short('C')),
    mut_arg("dsos", |a| a.short('d'))
)]
struct AnnotateArgs {
    /// The function, exactly as `report` names it.
    #[arg(value_name = "SYMBOL", required_unless_present = "symbol_opt")]
    symbol: Option<String>,
    /// The function, as perf annotate's -s takes it (instead of SYMBOL).
    #[arg(
        short = 's',
        long = "symbol",
        value_name = "SYMBOL",
        conflicts_with = "symbol"
    )]
    symbol_opt: Option<String>,
    /// As perf annotate --stdio: text on stdout, the only interface.
    #[arg(long)]
    stdio: bool,
    /// As perf annotate -l: the hottest source lines are always listed
    /// first (where DWARF has lines).
    #[arg(short = 'l', long)]
    print_line: bool,
    /// The image of the kernel recorded, with symbols (for a kernel
    /// function): a distribution's debug package's vmlinux, or the build
    /// tree's.
    #[arg(short = 'k', long, value_name = "PATH")]
    vmlinux: Option<PathBuf>,
    /// The object file of the module the function is in (`NAME.ko` or
    /// `NAME.ko.xz`), or a directory searched for it (default: the
    /// recording kernel's /lib/modules/RELEASE).
    #[arg(long, value_name = "PATH")]
    modules: Option<PathBuf>,
    #[command(flatten)]
    input: Input,
}

#[derive(Args)]
struct ListArgs {
    /// Read the kernel's PMUs under DIR instead of /sys (DIR/bus/event_source/devices).
    #[arg(long, value_name = "DIR", default_value = "/sys", hide = true)]
    sysfs: PathBuf,
}

#[derive(Args)]
struct FirefoxArgs {
    #[command(flatten)]
    input: Input,
    /// Output file (JSON, for profiler.firefox.com).
    #[arg(short, long, default_value = "profile.json")]
    output: PathBuf,
    /// (--off-cpu: one sample per off-CPU block, at its start, weighing
    /// the µs blocked, with no CPU time.)
    #[command(flatten)]
    off_cpu: OffCpuArgs,
}

#[derive(Args)]
struct HtmlArgs {
    #[command(flatten)]
    input: Input,
    /// Output file (one HTML page: open it in a browser).
    #[arg(short, long, default_value = "profile.html")]
    output: PathBuf,
    /// Title of the page (default: `oprofile-rs: FILE`).
    #[arg(long)]
    title: Option<String>,
}

#[derive(Args)]
struct CompletionsArgs {
    /// The shell, e.g. `oprofile-rs completions bash > /etc/bash_completion.d/oprofile-rs`.
    #[arg(value_enum)]
    shell: clap_complete::Shell,
}

#[derive(Args)]
struct ManArgs {
    /// Directory the pages are written to (created if needed).
    #[arg(value_name = "DIR", default_value = ".")]
    dir: PathBuf,
}

/// Writes `oprofile-rs.1` and `oprofile-rs-COMMAND.1` into `dir`.
fn write_man_pages(dir: &Path) -> Result<Vec<PathBuf>> {
    use clap::CommandFactory;
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let cmd = Cli::command();
    let mut written = Vec::new();
    let mut page = |c: clap::Command, name: String| -> Result<()> {
        let path = dir.join(format!("{name}.1"));
        let mut out = Vec::new();
        clap_mangen::Man::new(c.name(name.clone())).render(&mut out)?;
        std::fs::write(&path, out).with_context(|| format!("cannot write {}", path.display()))?;
        written.push(path);
        Ok(())
    };
    for sub in cmd.get_subcommands().filter(|c| !c.is_hide_set()) {
        page(sub.clone(), format!("oprofile-rs-{}", sub.get_name()))?;
    }
    page(cmd, "oprofile-rs".into())?;
    Ok(written)
}

#[derive(Args)]
#[command(
    mut_arg("comm", |a| a.short('c')),
    mut_arg("cpu", |a| a.short('C'))
)]
struct ScriptArgs {
    #[command(flatten)]
    input: Input,
    /// Print each sample's callchain below it: kernel callers, then the user
    /// call stack (innermost first).
    #[arg(short = 'g', long)]
    callchain: bool,
    /// Also print LOST, TRACING and SNAPSHOT events.
    #[arg(long)]
    events: bool,
    /// Output format: `oprofile` (default) or `perf` (the text of
    /// `perf script`, callchains included, for stackcollapse-perf.pl,
    /// inferno-collapse-perf, speedscope, Firefox Profiler).
    #[arg(long, value_enum, default_value_t = ScriptFormat::Oprofile)]
    format: ScriptFormat,
}

#[derive(Args)]
struct OutArgs {
    #[command(flatten)]
    input: Input,
    /// Output file (default: stdout).
    #[arg(short, long)]
    output: Option<PathBuf>,
    #[command(flatten)]
    off_cpu: OffCpuArgs,
    /// What each stack's count sums.
    #[arg(long, value_enum, default_value_t = Weight::Samples)]
    weight: Weight,
}

#[derive(Args)]
struct FlameArgs {
    #[command(flatten)]
    input: Input,
    /// Output SVG.
    #[arg(short, long, default_value = "flamegraph.svg")]
    output: PathBuf,
    /// Title of the graph.
    #[arg(long, default_value = "oprofile-rs")]
    title: String,
    #[command(flatten)]
    off_cpu: OffCpuArgs,
    /// What each frame's width sums.
    #[arg(long, value_enum, default_value_t = Weight::Samples)]
    weight: Weight,
}

#[derive(Args)]
struct ArchiveArgs {
    /// Recorded stream.
    #[arg(short, long, value_name = "FILE", default_value = "oprofile.data")]
    input: PathBuf,
    /// Side-car directory (default: FILE.meta).
    #[arg(long, value_name = "DIR")]
    sidecar: Option<PathBuf>,
    /// Read binaries under this root directory, as the analyses do.
    #[arg(long, value_name = "DIR")]
    symfs: Option<PathBuf>,
    /// Also look for separate debug files in DIR, before /usr/lib/debug
    /// and /lib/debug.
    #[arg(long, value_name = "DIR")]
    debug_dir: Vec<PathBuf>,
    /// Do not print what was left out.
    #[arg(short, long)]
    quiet: bool,
    /// The archive: FILE.tar, FILE.tar.gz or FILE.tar.zst (default: the
    /// recording's name with .tar.zst).
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// The image of the kernel recorded, with symbols (else looked for in
    /// /usr/lib/debug/boot, /boot, /lib/modules/RELEASE/build), archived
    /// where its build-id is the recording's.
    #[arg(short = 'k', long, value_name = "PATH")]
    vmlinux: Option<PathBuf>,
}

#[derive(Args)]
struct PprofFoldedArgs {
    /// A pprof profile (gzipped or not).
    #[arg(value_name = "FILE")]
    file: PathBuf,
}

#[derive(Args)]
struct PprofArgs {
    #[command(flatten)]
    input: Input,
    /// Output file (gzipped protobuf).
    #[arg(short, long, default_value = "profile.pb.gz")]
    output: PathBuf,
    /// (--off-cpu: the off-CPU blocks, sample types `samples/count` (the
    /// blocks) and `off-cpu/nanoseconds` (the time blocked).)
    #[command(flatten)]
    off_cpu: OffCpuArgs,
}

fn create(path: &PathBuf) -> Result<BufWriter<File>> {
    Ok(BufWriter::new(File::create(path).with_context(|| {
        format!("cannot create {}", path.display())
    })?))
}

fn stdout_or(path: &Option<PathBuf>) -> Result<Box<dyn Write>> {
    Ok(match path {
        Some(p) => Box::new(create(p)?),
        None => Box::new(BufWriter::new(std::io::stdout().lock())),
    })
}

fn run(cli: Cli) -> Result<ExitCode> {
    match cli.cmd {
        Cmd::Record(a) => {
            let stop = Arc::new(AtomicBool::new(false));
            let s = stop.clone();
            ctrlc::set_handler(move || {
                s.store(true, Ordering::SeqCst);
                record::wake();
            })
            .context("cannot install the SIGINT handler")?;
            let mut o = RecordOptions::new(a.output.clone());
            o.device = a.device;
            o.debugfs = a.debugfs;
            o.proc_root = a.proc_root;
            o.sys_root = a.sys_root;
            if a.old_duration.is_some() {
                old_spelling(
                    "record -d is --duration here (perf's -d records data addresses); use --duration",
                );
            }
            o.duration = match a.duration.or(a.old_duration) {
                Some(d) if d.is_finite() && d >= 0.0 => Some(Duration::from_secs_f64(d)),
                Some(d) => anyhow::bail!("invalid --duration {d}"),
                None => None,
            };
            o.command = a.command;
            o.maps = a.maps;
            o.pids = a.pid;
            o.system_wide = a.all_cpus;
            o.buffer_size = a.read_size;
            let (events, count, freq) = if a.off_cpu {
                if a.all_user {
                    anyhow::bail!(
                        "--off-cpu with --all-user: the switch-outs are taken in the kernel"
                    );
                }
                off_cpu::record_events(a.events, a.count, a.freq)?
            } else {
                (a.events, a.count, a.freq)
            };
            o.settings = control::ModuleSettings {
                events: (!events.is_empty()).then_some(events),
                count: (!count.is_empty()).then_some(count),
                freq: (!freq.is_empty()).then_some(freq),
                // -g and the depth forms: the chain alone (no copy);
                // dwarf: the copy too; neither: the module as it is.
                call_graph: match a.call_graph {
                    _ if a.callchains => Some(control::DEFAULT_CALL_GRAPH),
                    // Off-CPU time wants the kernel stack where a task
                    // blocked: -g's depths unless --call-graph says.
                    None if a.off_cpu => Some(control::DEFAULT_CALL_GRAPH),
                    c => c.map(|c| c.depths),
                },
                user_stack: match a.call_graph {
                    _ if a.callchains => Some(0),
                    c => c.map(|c| c.user_stack.unwrap_or(0)),
                },
                user_stack_fit: match a.call_graph {
                    _ if a.callchains => Some(false),
                    c => c.map(|c| c.fit),
                },
                cpu_buffer_size: a.cpu_buffer_size,
                buffer_size: a.buffer_size,
                watershed: a.watershed,
                exclude: match (a.all_user, a.all_kernel) {
                    (true, _) => Some((false, true)),
                    (_, true) => Some((true, false)),
                    _ => None,
                },
                mode: None,
                cgroup: a.cgroup.as_deref().map(control::cgroup_value).transpose()?,
                // The command's or the -p process's: record decides.
                pid: None,
            };
            // The unwind tables: the default, and `--call-graph cfi`.
            o.unwind_tables = match a.call_graph {
                _ if a.callchains => false,
                Some(c) => c.tables,
                None => true,
            };
            o.snapshot = a.snapshot;
            o.keep_backlog = a.keep_backlog;
            o.progress = !a.quiet && std::io::stderr().is_terminal();
            let sum = record::record(&o, stop)?;
            for w in &sum.warnings {
                eprintln!("oprofile-rs: warning: {}", esc(w));
            }
            // One line per reason: user call stacks make every process
            // sampled in a system call need its maps, many short-lived ones.
            let mut missing: std::collections::BTreeMap<&str, Vec<u32>> = Default::default();
            for (t, why) in &sum.maps_missing {
                missing.entry(why.as_str()).or_default().push(*t);
            }
            for (why, pids) in missing {
                let who = match pids.as_slice() {
                    [t] => format!("pid {t}"),
                    _ => {
                        let mut list: Vec<String> =
                            pids.iter().take(8).map(u32::to_string).collect();
                        if pids.len() > 8 {
                            list.push("...".into());
                        }
                        format!("{} processes (pids {})", pids.len(), list.join(", "))
                    }
                };
                eprintln!(
                    "oprofile-rs: warning: maps of {who} not captured: {}",
                    esc(why)
                );
            }
            if let Some(r) = sum.user_settings_restored() {
                eprintln!("oprofile-rs: put the module's settings back: {}", esc(&r));
            }
            eprintln!("oprofile-rs: {}", esc(&sum.line(&a.output)));
            if sum.stop == StopReason::CommandExited {
                if let Some(st) = sum.command_status {
                    if !st.success() {
                        eprintln!("oprofile-rs: command exited with {st}");
                    }
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Report(a) => {
            let p = a.input.load()?;
            if a.off_cpu.off_cpu || a.wall_clock {
                if a.json {
                    anyhow::bail!("report --off-cpu and --wall-clock have no JSON form yet");
                }
                if p.switches.is_empty() {
                    anyhow::bail!(
                        "the recording has no switch-outs: record with `record --off-cpu` \
                         (a module that writes SWITCH records)"
                    );
                }
                let oc = off_cpu::analyse(&p, a.off_cpu.off_cpu_thresh.saturating_mul(1000));
                let mut out = BufWriter::new(std::io::stdout().lock());
                if a.off_cpu.off_cpu {
                    off_cpu::write_report(&oc, a.top, &mut out)?;
                }
                if a.wall_clock {
                    if a.off_cpu.off_cpu {
                        writeln!(out)?;
                    }
                    off_cpu::write_wall_clock(&oc, &mut out)?;
                }
                out.flush()?;
                return Ok(ExitCode::SUCCESS);
            }
            let o = ReportOptions {
                sort: a.sort,
                per_cpu: a.per_cpu,
                per_process: a.per_process,
                top: a.top,
                percent_limit: a.percent_limit.unwrap_or(0.0),
                children: a.children,
                callers: a.callers,
                graph: a.call_graph.map(|g| g.resolve(a.children, a.percent_limit)),
                symbols: a.symbol,
            };
            let mut out = BufWriter::new(std::io::stdout().lock());
            if a.json {
                report::write_json(&p, &o, &mut out)?;
            } else {
                report::write(&p, &o, &mut out)?;
            }
            out.flush()?;
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Script(a) => {
            let p = a.input.load()?;
            let mut out = BufWriter::new(std::io::stdout().lock());
            script::write(
                &p,
                &ScriptOptions {
                    callchain: a.callchain,
                    events: a.events,
                    format: a.format,
                },
                &mut out,
            )?;
            out.flush()?;
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Diff(a) => {
            let old = one_event(a.common.load(&a.old, None)?, "diff", a.common.quiet);
            let mut new = a.common.load(&a.new, None)?;
            // The same event in both (the old one's, unless --event chose).
            if let Some((_, name)) = &old.filter.event {
                if new.filter.event.is_none() {
                    let i = new.event_index(name).context("the new recording")?;
                    new = new.for_event(i);
                }
            }
            let mut out = BufWriter::new(std::io::stdout().lock());
            report::write_diff(&old, &new, a.top, a.json, &mut out)?;
            out.flush()?;
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Annotate(a) => {
            let symbol = a
                .symbol
                .or(a.symbol_opt)
                .context("which function? (annotate SYMBOL)")?;
            let p = a.input.load_one_event("annotate")?;
            // The kernel that ran, for its module tree.
            let release = p.kernel_release();
            // Without --vmlinux, an archive's image of the kernel recorded.
            let archived = p
                .locator
                .kernel
                .get("kernel")
                .and_then(|id| p.locator.in_archive(id, false));
            let code = oprofile_tool::annotate::KernelCode {
                vmlinux: a.vmlinux.or(archived),
                modules: a.modules,
                release,
            };
            // Where separate debug files are looked for, as when loading.
            let symfs = a.input.common.symfs.as_deref();
            // An archive's debug files first (its .build-id/ layout is a
            // debug directory's).
            let debug_dirs: Vec<PathBuf> = p
                .locator
                .archive
                .iter()
                .cloned()
                .chain(
                    a.input
                        .common
                        .debug_dir
                        .iter()
                        .map(PathBuf::as_path)
                        .chain([Path::new("/usr/lib/debug"), Path::new("/lib/debug")])
                        .map(|d| match symfs {
                            Some(root) => root.join(d.strip_prefix("/").unwrap_or(d)),
                            None => d.to_path_buf(),
                        }),
                )
                .collect();
            let ann = oprofile_tool::annotate::annotate(&p, &symbol, symfs, &debug_dirs, &code)?;
            let mut out = BufWriter::new(std::io::stdout().lock());
            oprofile_tool::annotate::write(&ann, &mut out)?;
            out.flush()?;
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Ctl(a) => {
            let actions = oprofile_tool::ctl::parse(&a.actions)?;
            // Written to only: a control file takes no reader slot.
            let dev = std::fs::OpenOptions::new()
                .write(true)
                .open(&a.device)
                .with_context(|| {
                    format!(
                        "cannot open {} for control (is the oprofile-rs module loaded? are you root?)",
                        esc(&a.device.display().to_string())
                    )
                })?;
            let mut ctl = oprofile_tool::control::ModuleControl::new(dev, a.debugfs);
            let mut out = BufWriter::new(std::io::stdout().lock());
            oprofile_tool::ctl::run(&mut ctl, &actions, a.pause, &mut out)?;
            out.flush()?;
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Firefox(a) => {
            let p = if a.off_cpu.off_cpu {
                let p = a.input.load()?;
                let oc = off_cpu::analyse(&p, a.off_cpu.off_cpu_thresh.saturating_mul(1000));
                off_cpu::for_firefox(off_cpu::as_profile(&p, &oc))
            } else {
                a.input.load_one_event("firefox")?
            };
            let end = std::fs::metadata(&a.input.input)
                .and_then(|m| m.modified())
                .ok();
            let mut out = create(&a.output)?;
            oprofile_tool::firefox::write(&p, end, &mut out)?;
            out.flush()?;
            wrote(&a.output, p.total_samples());
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Html(a) => {
            let p = a.input.load_one_event("html")?;
            let title = a
                .title
                .unwrap_or_else(|| format!("oprofile-rs: {}", a.input.input.display()));
            // The page first: no file is left behind where there is none.
            let page = oprofile_tool::html::page(&p, &title)?;
            let mut out = create(&a.output)?;
            out.write_all(page.as_bytes())?;
            out.flush()?;
            wrote(&a.output, p.total_samples());
            Ok(ExitCode::SUCCESS)
        }
        Cmd::List(a) => {
            let mut buf = Vec::new();
            oprofile_tool::list::print(&oprofile_tool::list::list(&a.sysfs), &mut buf)?;
            std::io::stdout().lock().write_all(&buf)?;
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Completions(a) => {
            use clap::CommandFactory;
            // Into a buffer first: clap_complete panics on a write error
            // (`completions bash | head`), a closed pipe is no error here.
            let mut buf = Vec::new();
            clap_complete::generate(a.shell, &mut Cli::command(), "oprofile-rs", &mut buf);
            std::io::stdout().lock().write_all(&buf)?;
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Man(a) => {
            for p in write_man_pages(&a.dir)? {
                eprintln!("oprofile-rs: wrote {}", esc(&p.display().to_string()));
            }
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Folded(a) => {
            let p = weighted_view(&a.input, &a.off_cpu, a.weight, "folded")?;
            let mut out = stdout_or(&a.output)?;
            folded::write_folded(&p, &mut out)?;
            out.flush()?;
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Flamegraph(a) => {
            let p = weighted_view(&a.input, &a.off_cpu, a.weight, "flamegraph")?;
            let mut out = create(&a.output)?;
            folded::write_flamegraph(&p, &a.title, &mut out)?;
            out.flush()?;
            wrote(&a.output, p.total_samples());
            Ok(ExitCode::SUCCESS)
        }
        Cmd::PprofFolded(a) => {
            let data = std::fs::read(&a.file)
                .with_context(|| format!("cannot read {}", a.file.display()))?;
            let p = pprof::read(&data)?;
            let mut out = BufWriter::new(std::io::stdout().lock());
            for l in pprof::folded(&p) {
                writeln!(out, "{}", esc(&l))?;
            }
            out.flush()?;
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Archive(a) => {
            let output = a.output.clone().unwrap_or_else(|| {
                let mut s = a.input.as_os_str().to_owned();
                s.push(".tar.zst");
                PathBuf::from(s)
            });
            let sum = oprofile_tool::archive::create(&oprofile_tool::archive::ArchiveOptions {
                input: a.input.clone(),
                sidecar: a.sidecar.clone(),
                output: output.clone(),
                load: LoadOptions {
                    symfs: a.symfs.clone(),
                    sidecar: None,
                    allow_corrupt: true,
                    symbolizer: SymbolizerKind::Dwarf,
                    debug_dirs: a.debug_dir.clone(),
                    debuginfod: oprofile_tool::debuginfod::Debuginfod::from_env(),
                },
                vmlinux: a.vmlinux,
            })?;
            if !a.quiet {
                for m in &sum.missing {
                    eprintln!("oprofile-rs: warning: not archived: {}", esc(m));
                }
            }
            eprintln!(
                "oprofile-rs: wrote {} ({} bytes: the recording, its side-car and {} files by build-id)",
                esc(&output.display().to_string()),
                sum.bytes,
                sum.files.len()
            );
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Pprof(a) => {
            let mut p = a.input.load()?;
            if a.off_cpu.off_cpu {
                let oc = off_cpu::analyse(&p, a.off_cpu.off_cpu_thresh.saturating_mul(1000));
                p = off_cpu::as_profile(&p, &oc);
            }
            let mut out = create(&a.output)?;
            pprof::write(&p, &mut out)?;
            out.flush()?;
            wrote(&a.output, p.total_samples());
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// The warning that an old option spelling was used, naming the new one
/// (once a run: each caller runs once).
fn old_spelling(warning: &str) {
    eprintln!("oprofile-rs: warning: {}", esc(warning));
}

/// musl's allocator gives pages back and faults them in again; mimalloc
/// keeps them (see Cargo.toml).
#[cfg(target_env = "musl")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    use clap::CommandFactory;
    // `record -- COMMAND`'s trampoline (record.rs, `Held`): not a command
    // of its own.
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if argv
        .get(1)
        .is_some_and(|a| a == oprofile_tool::record::HELD_EXEC)
    {
        let rc = oprofile_tool::record::held_exec(argv.get(2..).unwrap_or(&[]));
        return ExitCode::from(u8::try_from(rc).unwrap_or(2));
    }
    let (args, warning) = spelling::old_top(&Cli::command(), std::env::args_os().collect());
    let cli = Cli::parse_from(args);
    if let Some(w) = warning {
        old_spelling(&w);
    }
    match run(cli) {
        Ok(c) => c,
        Err(e) => {
            // `oprofile-rs script | head` is not an error.
            if e.chain().any(|c| {
                c.downcast_ref::<std::io::Error>()
                    .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            }) {
                return ExitCode::SUCCESS;
            }
            eprintln!("oprofile-rs: error: {}", esc(&format!("{e:#}")));
            ExitCode::FAILURE
        }
    }
}

/// The line every writer of a file prints when done.
fn wrote(path: &std::path::Path, samples: u64) {
    eprintln!(
        "oprofile-rs: wrote {} ({samples} samples)",
        esc(&path.display().to_string())
    );
}
