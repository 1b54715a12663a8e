// SPDX-License-Identifier: GPL-2.0

//! The profiler: per-CPU samplers and one counter per (online CPU, event),
//! the event buffer and the sync work, started at load and stopped at
//! unload.
//!
//! Counters follow the CPUs through hotplug callbacks, which run under the
//! CPU hotplug lock. Counters of the clocks and of the PMU are made and
//! released in the callbacks (as the kernel's own hard-lockup watchdog makes
//! its PMU counter). Those of perf's other software events (page-faults,
//! context-switches, cpu-migrations) cannot be: perf switches a static key
//! when it makes or frees one (`perf_swevent_init` and
//! `sw_perf_event_destroy`: `static_key_slow_inc/dec`), which on a kernel
//! with `CONFIG_JUMP_LABEL` (every distribution kernel) takes
//! `cpus_read_lock()`; in the `cpuhp/N` thread of a CPU coming up, whose
//! `cpu_up()` holds that lock for writing, this deadlocks. The callbacks
//! therefore only tell the [`WorkItem`] `software` what they want, and it
//! makes and releases those counters outside the lock: the watchdog's
//! pattern for its release (`hardlockup_detector_perf_cleanup`). A CPU's
//! sampler ignores overflows outside `online`..`offline` (`CpuSampler::up`),
//! so a counter waiting for its release records nothing after the CPU's
//! last drain.

use kernel::{
    bindings,
    cpu::{nr_cpu_ids, CpuId},
    new_mutex,
    prelude::*,
    sync::{
        atomic::{Atomic, Full, Relaxed},
        Arc, Mutex,
    },
};

use crate::{
    control::{
        counter_table::CounterTable,
        params::{Config, EventChoice, RecordMode},
        settings::Settings,
        task_counters::TaskCounters,
    },
    format::MAX_EVENTS,
    path::{reader_state::ReaderState, sampler::CpuSampler, sync::Buffers},
    ringbuf::{RecordSwitch, Switches},
    shims::{
        cpu::cpu_online,
        cpu_work::CpuWorks,
        hotplug::{self, HotplugHandler},
        perf::{Counter, Event, Target, Trampoline},
        ratelimit::pr_ratelimited,
        task::TaskRef,
        work_item::{WorkHandler, WorkItem},
    },
};

/// The global record switch, bound to debugfs `tracing_on`.
pub(crate) static TRACING_ON: RecordSwitch = RecordSwitch::new(true);
/// The switch of this module's buffer set: off while starting and stopping.
static RUNNING: RecordSwitch = RecordSwitch::new(false);

/// The profiler.
///
/// Locks, outermost first (never taken the other way round):
///
/// 1. `control`: `tracing_on`, `flush`, snapshot and configuration writers
///    (`config.rs`), one at a time;
/// 2. `hotplug` (the registration): `start`, `stop` and configuration
///    writers; a configuration writer holds `control` and `hotplug` while it
///    drops and re-creates the registration, which takes the CPU hotplug
///    lock (`cpus_read_lock()`) and runs the callbacks;
/// 3. the CPU hotplug lock: the callbacks (`online`, `offline`) run under
///    it and take only the leaves below, never `control` or `hotplug`, so a
///    configuration writer waiting for a CPU hotplug operation in progress
///    never waits for itself;
/// 4. leaves, held only for a copy or a short update, never across
///    anything that waits for the others: `settings`, `counted`,
///    `counters`, and those of `buffers` (a CPU's sync state, then
///    `events`; see [`Buffers`]). `counters` is also held while its
///    counters are started or stopped (`tracing_on`), which takes perf's
///    event context locks and waits for the counters' CPUs, never for a
///    lock of ours.
///
/// The work `software` takes only leaves, one at a time, and none across
/// making or releasing a counter (which may take the CPU hotplug lock for
/// reading); it is flushed with `control` and `hotplug` held, never under
/// the CPU hotplug lock.
///
/// `reader` is taken only by the one reader of the moment (the device's busy
/// flag) with no other lock but `settings` (a copy, for the stream header)
/// and `events`.
#[pin_data(PinnedDrop)]
pub(crate) struct Profiler {
    /// Makes and releases the counters of perf's task-context software
    /// events outside the CPU hotplug lock (see the file's documentation).
    /// First: dropped (cancelled) before anything it uses.
    #[pin]
    software: WorkItem<Profiler>,
    /// The first error (a negative errno) the work `software` met making a
    /// counter for a CPU that stayed up, since `register` cleared it (0:
    /// none).
    software_error: Atomic<i32>,
    /// The configuration in force (a leaf lock: held only to copy or
    /// replace it): what the `config` text, `GET_CONFIG` and a new stream's
    /// header show.
    #[pin]
    pub(crate) settings: Mutex<Settings>,
    /// The settings the counters are made of (a leaf lock, as `settings`):
    /// those in force, except while a configuration change brings the CPUs
    /// up with the settings it tries (`config.rs`), which become those in
    /// force only if every step of the change succeeds.
    #[pin]
    counted: Mutex<Settings>,
    /// Each (CPU, event index) counter's overflow context, at
    /// `cpu * MAX_EVENTS + index`: that CPU's sampler, tagged with the
    /// index.
    trampolines: KVVec<Trampoline>,
    /// The per-CPU sync works, calling `buffers` (stopped while a CPU is
    /// offline and after `stop`).
    works: CpuWorks<Buffers>,
    /// The CPUs' samplers, the event buffer and what the sync moves.
    #[pin]
    pub(crate) buffers: Buffers,
    /// Serialises `tracing_on`, `flush`, snapshot and configuration
    /// writers (the outermost lock).
    #[pin]
    pub(crate) control: Mutex<()>,
    /// What the stream delivered (see `reader_state.rs`).
    #[pin]
    pub(crate) reader: Mutex<ReaderState>,
    /// Set while a `read` of the device is in progress (one at a time, also
    /// for threads sharing the file).
    pub(crate) read_busy: Atomic<bool>,
    /// The counters, and what the hotplug callbacks asked the work
    /// `software` for.
    #[pin]
    counters: Mutex<CounterTable<Counter>>,
    /// The counters bound to the profiled process (`pid=N`, see
    /// `task_counters.rs`); `None` with `pid=0`. A leaf lock, held only to
    /// put or take them (they are released outside it).
    #[pin]
    tasks: Mutex<Option<TaskCounters>>,
    /// Set while `start` brings the online CPUs up: a failure then fails the load.
    starting: Atomic<bool>,
    /// The hotplug registration, from `start` to `stop`.
    #[pin]
    pub(crate) hotplug: Mutex<Option<hotplug::Registration<Profiler>>>,
    /// Set while `/dev/oprofile/buffer` is open (one reader at a time).
    pub(crate) reader_open: Atomic<bool>,
    /// The cgroup filter in force (`config.cgroup` is its id); set under
    /// `control`. Removed when the profiler goes, after its counters.
    pub(crate) filter: crate::path::cgroup::Filter,
    /// The unwind tables loaded through the device (`unwind_loader.rs`): a
    /// leaf lock, held across a grace period when the registry changes.
    #[pin]
    pub(crate) unwind: Mutex<crate::control::unwind_loader::UnwindLoader>,
}

impl Profiler {
    /// Allocates everything and starts sampling.
    pub(crate) fn new(
        config: Config,
        filter: Option<crate::path::cgroup::Cgroup>,
    ) -> Result<Arc<Self>> {
        TRACING_ON.set(true);
        let n = nr_cpu_ids();
        let switches = Switches {
            global: &TRACING_ON,
            set: &RUNNING,
        };
        // Per possible CPU: bookkeeping, and the ring of a CPU online now;
        // the others get theirs when they come online (`online`,
        // `Buffers::provision`), a placeholder until then. (Given here,
        // a ring needs no resize, whose grace period would be one per CPU
        // at load.) The staging and scratch areas come at `online`.
        let mut cpus = KVVec::with_capacity(n as usize, GFP_KERNEL)?;
        let overwrite = config.mode == RecordMode::Overwrite;
        for cpu in 0..n {
            let sampler = if CpuId::from_u32(cpu).is_some_and(cpu_online) {
                CpuSampler::new(
                    cpu,
                    config.cpu_buffer_size,
                    config.backtrace_depth,
                    config.user_backtrace_depth,
                    switches,
                    &crate::path::cgroup::IN_FORCE,
                    overwrite,
                )?
            } else {
                CpuSampler::placeholder(
                    cpu,
                    config.backtrace_depth,
                    config.user_backtrace_depth,
                    switches,
                    &crate::path::cgroup::IN_FORCE,
                    overwrite,
                )?
            };
            sampler.set_user_stack(config.user_stack_size, config.user_stack_fit);
            cpus.push(sampler, GFP_KERNEL)?;
        }
        // Each counter's overflow context: the sampler of its CPU and the
        // event's index. They point into the heap buffer of `cpus`, which
        // never moves or grows.
        let mut trampolines = KVVec::with_capacity(n as usize * MAX_EVENTS, GFP_KERNEL)?;
        for s in cpus.iter() {
            for i in 0..MAX_EVENTS {
                trampolines.push(Trampoline::new(s, i as u16), GFP_KERNEL)?;
            }
        }
        let buffers = Buffers::new(
            cpus,
            config.buffer_size,
            config.buffer_watershed,
            config.mode == RecordMode::Overwrite,
            config.cpu_buffer_size,
        )?;
        let p = Arc::pin_init(
            try_pin_init!(&this in Self {
                // SAFETY: the work is the first field, so dropped (cancelled)
                // before the rest of `self`, and `self` is pinned.
                software <- unsafe { WorkItem::new(this.as_ptr()) },
                software_error: Atomic::new(0),
                // `default` is resolved at start.
                settings <- new_mutex!(Settings::new(config, Event::CpuClock, 1)),
                counted <- new_mutex!(Settings::new(config, Event::CpuClock, 1)),
                trampolines,
                buffers <- buffers,
                // SAFETY: `buffers` is initialised above and pinned; the
                // works are declared before it, so dropped before it.
                works: unsafe { CpuWorks::new(&(*this.as_ptr()).buffers, sync_interval())? },
                control <- new_mutex!(()),
                reader <- new_mutex!(ReaderState::new(
                    n as usize,
                    Settings::new(config, Event::CpuClock, 1).record(0)
                )?),
                read_busy: Atomic::new(false),
                counters <- new_mutex!(CounterTable::new(n as usize)?),
                tasks <- new_mutex!(None),
                starting: Atomic::new(false),
                hotplug <- new_mutex!(None),
                unwind <- new_mutex!(crate::control::unwind_loader::UnwindLoader::new()),
                reader_open: Atomic::new(false),
                filter: crate::path::cgroup::Filter::new(filter),
            }? Error),
            GFP_KERNEL,
        )?;
        p.start()?;
        Ok(p)
    }

    /// The configuration in force.
    pub(crate) fn settings(&self) -> Settings {
        *self.settings.lock()
    }

    /// The settings the counters are made of (see `counted`).
    fn counted(&self) -> Settings {
        *self.counted.lock()
    }

    /// Makes the counters of CPUs that come up from now on of `settings`
    /// (a configuration change: the settings it tries, or those it keeps).
    pub(crate) fn set_counted(&self, settings: Settings) {
        *self.counted.lock() = settings;
    }

    /// Makes the counter of event index `i` of `settings` on `cpu`, calling
    /// that CPU's sampler; running if `enabled` (else stopped).
    fn counter(&self, cpu: u32, settings: &Settings, i: usize, enabled: bool) -> Result<Counter> {
        let attr = settings.attr(i).ok_or(EINVAL)?;
        let t = self
            .trampolines
            .get(cpu as usize * MAX_EVENTS + i)
            .ok_or(EINVAL)?;
        // SAFETY: `t` and the sampler it calls live in `self`, which outlives
        // every counter: `stop` drops them all before the module drops `self`.
        unsafe { Counter::new(Target::Cpu(cpu), &attr, t, enabled) }
    }

    /// Binds the events of `settings` to `threads` (the process of
    /// `settings.config.pid`), replacing the task-bound counters in force
    /// (see `task_counters.rs`). The CPUs must be up with no per-CPU
    /// counters (`pid` not 0). On an error nothing is bound.
    pub(crate) fn bind_tasks(&self, threads: &[TaskRef], settings: &Settings) -> Result {
        // SAFETY: the samplers live in `self`, which outlives the counters:
        // `stop` and every configuration change release them first.
        let made = unsafe { TaskCounters::attach(threads, settings, &self.buffers.cpus) }?;
        pr_info!(
            "pid {}: {} counters bound to its {} threads, inherited by the tasks they create\n",
            settings.config.pid,
            made.len(),
            threads.len()
        );
        let old = self.tasks.lock().replace(made);
        drop(old);
        Ok(())
    }

    /// Releases the task-bound counters (no overflow of theirs runs after).
    pub(crate) fn unbind_tasks(&self) {
        let old = self.tasks.lock().take();
        drop(old);
    }

    /// What `default` samples: cycles if this machine can count them (tried
    /// on one online CPU), else cpu-clock.
    fn resolve_default(&self, config: &Config) -> Event {
        let Some(cpu) = (0..nr_cpu_ids())
            .filter_map(CpuId::from_u32)
            .find(|c| cpu_online(*c))
        else {
            return Event::CpuClock;
        };
        let probe = Settings::new(*config, Event::Cycles, 0);
        // RUNNING is off, or TRACING_ON (a runtime change): a sample of this
        // probe is not recorded.
        // Stopped: its making is the probe.
        match self.counter(cpu.as_u32(), &probe, 0, false) {
            Ok(_probe) => Event::Cycles,
            Err(e) => {
                pr_ratelimited!(
                    pr_info,
                    "no hardware PMU (cycles: error {}): sampling cpu-clock in hard-IRQ context\n",
                    e.to_errno()
                );
                Event::CpuClock
            }
        }
    }

    /// The settings of `config` at `generation`, `default` resolved.
    pub(crate) fn resolve(&self, config: Config, generation: u32) -> Settings {
        let default = if config
            .events
            .as_slice()
            .iter()
            .any(|s| s.choice == EventChoice::Default)
        {
            self.resolve_default(&config)
        } else {
            Event::CpuClock
        };
        Settings::new(config, default, generation)
    }

    fn start(&self) -> Result {
        let mut hotplug = self.hotplug.lock();
        // Each sampler may run its CPU's sync before its period ends.
        for (cpu, s) in self.buffers.cpus.iter().enumerate() {
            if let Some(k) = self.works.kick(cpu as u32) {
                // SAFETY: the works outlive every counter: `drop` stops
                // the profiler (releasing the counters) before its fields
                // go.
                unsafe { s.set_kick(k) };
            }
        }
        let settings = {
            let config = self.settings.lock().config;
            self.resolve(config, 1)
        };
        *self.settings.lock() = settings;
        self.set_counted(settings);
        self.reader
            .lock()
            .set_initial_config(settings.record(crate::shims::clock::now()));
        RUNNING.set(true);
        let registration = self.register().inspect_err(|_| {
            RUNNING.set(false);
        })?;
        let online = self.counters.lock().live_count();
        for (i, a) in (0..settings.events().len())
            .filter_map(|i| settings.attr(i))
            .enumerate()
        {
            let unit = if a.freq != 0 {
                "Hz"
            } else if a.event.is_clock() {
                "ns period"
            } else {
                "events period"
            };
            pr_info!(
                "event {i}: sampling {} ({}) at {} {unit} ({online} counters)\n",
                a.event.name(),
                a.event.context().name(),
                a.period.max(a.freq)
            );
        }
        *hotplug = Some(registration);
        Ok(())
    }

    /// Registers the hotplug callbacks, bringing every online CPU up with
    /// the counted settings (those in force, or those a configuration change
    /// tries); a failure (a counter that cannot be made) fails it, every
    /// counter made released. `RUNNING` is left as it is: a configuration
    /// change that fails here goes on recording with what it keeps.
    ///
    /// Process context, without the CPU hotplug lock (it waits for the
    /// work `software`, which may take it).
    pub(crate) fn register(&self) -> Result<hotplug::Registration<Profiler>> {
        self.starting.store(true, Relaxed);
        self.software_error.store(0, Relaxed);
        // SAFETY: `self` outlives the registration: `stop` (at the latest
        // in `drop`) drops it.
        let registration = unsafe { hotplug::Registration::new(self) };
        self.starting.store(false, Relaxed);
        let registration = registration.inspect_err(|_| self.software.flush())?;
        // The software events' counters of every online CPU.
        self.software.flush();
        match self.software_error.xchg(0, Relaxed) {
            0 => Ok(registration),
            errno => {
                drop(registration);
                self.software.flush();
                Err(Error::from_errno(errno))
            }
        }
    }

    /// Stops sampling: no overflow handler and no sync work runs after this.
    pub(crate) fn stop(&self) {
        let registration = self.hotplug.lock().take();
        if registration.is_some() {
            // Brings every CPU down; then the software events' counters go,
            // and those bound to a process.
            drop(registration);
            self.software.flush();
            self.unbind_tasks();
            RUNNING.set(false);
        }
        self.flush();
    }

    /// Pushes everything buffered to the event buffer and wakes readers.
    pub(crate) fn flush(&self) {
        let _control = self.control.lock();
        self.buffers.sync_all();
        self.buffers.wake_readers();
    }

    /// `tracing_on`: 0 stops every CPU before returning and hands everything
    /// recorded until then to the reader (as a flush does), then stops the
    /// counters (an idle module interrupts no CPU); 1 starts them and
    /// resumes.
    /// Writers are serialised; writing the current state changes nothing.
    ///
    /// The stream's promise, whatever the fill of the event buffer: every
    /// sample taken before an off switch is before its TRACING record (or
    /// counted in a LOST record: what does not fit is dropped and counted),
    /// and no sample comes between an off record and the next on record.
    /// The off record always fits (the sync keeps room for it, see
    /// `sync.rs`); an on record that does not fit waits, and no record
    /// moves before it; an off switch while it still waits cancels both.
    pub(crate) fn set_tracing(&self, on: bool) {
        let _control = self.control.lock();
        if TRACING_ON.is_on() == on {
            return;
        }
        if on {
            // The counters first: what they deliver before the switch is
            // refused, as while off.
            self.counters.lock().set_running(true);
            self.buffers.mark_on();
            TRACING_ON.set(true);
        } else {
            stop_recording(&TRACING_ON);
            self.buffers.mark_off();
            // Off costs nothing: the counters stand still (no interrupt), and
            // those a CPU coming up or a configuration change makes join
            // stopped (`counter_table.rs`).
            self.counters.lock().set_running(false);
        }
    }
}

impl Profiler {
    /// A flight-recorder snapshot (`mode=overwrite`, see `snapshot.rs`):
    /// `EINVAL` in consume mode (logged), `ENOSPC` if the event buffer
    /// cannot take it (read the stream and retry). Serialised with the other
    /// snapshots and `tracing_on` changes.
    pub(crate) fn snapshot(&self) -> Result<crate::path::snapshot::SnapshotStats> {
        let _control = self.control.lock();
        self.buffers
            .snapshot(&RUNNING, TRACING_ON.is_on())
            .inspect_err(|e| {
                if *e == EINVAL {
                    pr_ratelimited!(
                        pr_info,
                        "snapshot: refused (EINVAL): the module records in consume mode (switch it: tracing_on=0, then overwrite to mode)\n"
                    );
                }
            })
    }
}

impl HotplugHandler for Profiler {
    /// A CPU came online: give it its buffers if it has none yet (before
    /// anything can write to them), a counter per event and a sync work.
    /// Those of perf's task-context software events come from the work
    /// `software`, queued here (see the file's documentation).
    ///
    /// A CPU whose buffers cannot be allocated (`ENOMEM`, also past the
    /// cap of a quarter of RAM) is refused: it stays offline (its `online`
    /// write fails with `ENOMEM`; at load or a configuration change, that
    /// fails), with a rate-limited log line.
    fn online(&self, cpu: u32) -> Result {
        if let Err(e) = self.buffers.provision(cpu) {
            pr_ratelimited!(
                pr_err,
                "cpu{cpu}: no memory for its buffers (error {}): the CPU is refused (stays offline)\n",
                e.to_errno()
            );
            return Err(e);
        }
        let settings = self.counted();
        if let Some(s) = self.buffers.cpus.get(cpu as usize) {
            s.up.xchg(true, Full);
        }
        // Made stopped while recording is off (a hint: the table gives each
        // counter the state in force as it joins).
        let running = self.counters.lock().running();
        let mut made: [Option<Counter>; MAX_EVENTS] = Default::default();
        // Profiling one process (`pid`): its counters follow its tasks onto
        // this CPU (`task_counters.rs`), none is bound to the CPU.
        let per_cpu = if settings.config.pid == 0 {
            settings.events().len()
        } else {
            0
        };
        for (i, slot) in made.iter_mut().enumerate().take(per_cpu) {
            let event = settings.attr(i).map_or(Event::CpuClock, |a| a.event);
            if event.made_outside_hotplug() {
                continue;
            }
            match self.counter(cpu, &settings, i, running) {
                Ok(c) => *slot = Some(c),
                Err(e) => {
                    pr_ratelimited!(
                        pr_err,
                        "cpu{cpu}: cannot sample {}: error {}{}\n",
                        event.name(),
                        e.to_errno(),
                        if event.is_hardware() {
                            " (no hardware PMU for it on this machine?)"
                        } else {
                            ""
                        }
                    );
                    // At load (or a runtime change) this fails it (perf's
                    // ENOENT, "no PMU for this event", as EOPNOTSUPP:
                    // insmod's ENOENT text speaks of unknown symbols), the
                    // counters made so far released; a CPU hotplugged later
                    // stays online without this event's samples.
                    if !self.starting.load(Relaxed) {
                        continue;
                    }
                    if let Some(s) = self.buffers.cpus.get(cpu as usize) {
                        s.up.xchg(false, Full);
                    }
                    return Err(load_error(e));
                }
            }
        }
        {
            let mut table = self.counters.lock();
            table.came_up(cpu);
            for (i, c) in made.into_iter().enumerate() {
                if let Some(c) = c {
                    table.set_live(cpu, i, c);
                }
            }
        }
        self.software.queue();
        // Overwrite mode: no periodic sync (a snapshot moves the records).
        if !self.buffers.overwrite() {
            self.works.start(cpu);
        }
        pr_debug!("cpu{cpu}: online, sampling\n");
        Ok(())
    }

    /// A CPU goes offline: release its counters, stop its work, drain its
    /// buffer.
    /// Those of perf's task-context software events are handed to the work
    /// `software` for their release (see the file's documentation).
    fn offline(&self, cpu: u32) {
        // From here on this CPU's sampler ignores every overflow.
        if let Some(s) = self.buffers.cpus.get(cpu as usize) {
            s.up.xchg(false, Full);
        }
        let taken = self.counters.lock().went_down(cpu);
        // Released outside the lock; no overflow handler runs after this.
        drop(taken);
        self.software.queue();
        // Stopping a work that never started is a no-op.
        self.works.stop(cpu);
        self.buffers.sync_one(cpu);
        pr_debug!("cpu{cpu}: offline, drained\n");
    }
}

impl WorkHandler for Profiler {
    /// Releases the counters the `offline` callbacks handed over, then
    /// makes the software events' counters of every CPU that is up and
    /// lacks them, with the settings in force. A counter made for a CPU
    /// that went down (or down and up) meanwhile is released again: perf
    /// detached it from that CPU, and the next run makes a new one.
    fn run(&self) {
        let n = nr_cpu_ids() as usize;
        for i in 0..n * MAX_EVENTS {
            let dead = self.counters.lock().take_dead(i);
            drop(dead);
        }
        for cpu in 0..n as u32 {
            for i in 0..MAX_EVENTS {
                let Some(epoch) = self.counters.lock().wants(cpu, i) else {
                    continue;
                };
                // Read after the epoch: a configuration change sets the
                // counted settings before the CPUs come up again with a new
                // epoch.
                let settings = self.counted();
                if settings.config.pid != 0
                    || !settings
                        .attr(i)
                        .is_some_and(|a| a.event.made_outside_hotplug())
                {
                    continue;
                }
                let running = self.counters.lock().running();
                match self.counter(cpu, &settings, i, running) {
                    Ok(c) => {
                        let stale = self.counters.lock().fill(cpu, i, epoch, c);
                        drop(stale);
                    }
                    Err(e) => {
                        if self.counters.lock().epoch_of(cpu) != Some(epoch) {
                            // The CPU went down meanwhile (perf's ENODEV).
                            continue;
                        }
                        let event = settings.attr(i).map_or(Event::CpuClock, |a| a.event);
                        pr_ratelimited!(
                            pr_err,
                            "cpu{cpu}: cannot sample {}: error {}\n",
                            event.name(),
                            e.to_errno()
                        );
                        let _ = self
                            .software_error
                            .cmpxchg(0, load_error(e).to_errno(), Relaxed);
                    }
                }
            }
        }
    }
}

/// A counter that cannot be made at load or at a runtime change, as the
/// load's error: perf's ENOENT or ENODEV ("no PMU for this event") is
/// EOPNOTSUPP, since insmod's text for ENOENT speaks of unknown symbols.
fn load_error(e: Error) -> Error {
    if e == ENOENT || e == ENODEV {
        EOPNOTSUPP
    } else {
        e
    }
}

#[pinned_drop]
impl PinnedDrop for Profiler {
    fn drop(self: Pin<&mut Self>) {
        // The hotplug callbacks and sync works hold pointers into `self`:
        // they must be gone before its memory is (a no-op if the module
        // already stopped it; this covers a load that fails after `new`).
        self.stop();
    }
}

/// Turns `switch` off and waits until every overflow handler that may have
/// seen it on has returned: when this returns, no CPU records anything more
/// through it, and a handler that passed the switch check before has
/// committed its record and updated its counters, so a sync afterwards sees
/// all of it (tested by the `oprofile_rs_quiesce` KUnit suite).
///
/// Handlers run in hard-IRQ (the clocks), NMI (hardware events) or task
/// context with preemption off (the other software events, under perf's
/// `rcu_read_lock()`); `synchronize_rcu()` waits for all of them (every
/// preemption-disabled region is an RCU read-side critical section).
/// Process context only (it sleeps).
pub(crate) fn stop_recording(switch: &RecordSwitch) {
    switch.set(false);
    kernel::sync::rcu::synchronize_rcu();
}

/// The sync's period, one second (HZ jiffies): each CPU's sync runs sooner
/// when half its ring has been written since the last, or when the reader
/// must load unwind tables (`sampler.rs`, a kick). At 100 ms (oprofile's),
/// the sync's worker preempted the sampled program ten times a second per
/// CPU: a busy loop's samples in kernel mode, 3 % without syncs (overwrite
/// mode) and with perf, were 8 % (`Documentation/benchmarks.md`, "Samples
/// in step with the tick").
fn sync_interval() -> kernel::ffi::c_ulong {
    (bindings::HZ as kernel::ffi::c_ulong).max(1)
}
