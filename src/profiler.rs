// SPDX-License-Identifier: GPL-2.0

//! The profiler: per-CPU samplers and counters, the event buffer and the
//! sync work, started at load and stopped at unload.

use kernel::{
    bindings,
    cpu::{nr_cpu_ids, CpuId},
    cpumask::Cpumask,
    new_mutex,
    prelude::*,
    sync::{
        atomic::{Atomic, Relaxed},
        Arc, Mutex,
    },
};

use crate::{
    cpu_work::CpuWorks,
    hotplug::{self, HotplugHandler},
    params::{Config, EventChoice, RecordMode},
    perf::{Attr, Counter, Event, Trampoline},
    ratelimit::pr_ratelimited,
    reader_state::ReaderState,
    ringbuf::{RecordSwitch, Switches},
    sampler::CpuSampler,
    sync::Buffers,
};

/// Whether `cpu` is online (the kernel's `cpu_online()`).
pub(crate) fn cpu_online(cpu: CpuId) -> bool {
    // SAFETY: `__cpu_online_mask` is a valid cpumask for the kernel's
    // lifetime, only read here.
    let online = unsafe { Cpumask::from_raw(&raw const bindings::__cpu_online_mask) };
    online.test(cpu)
}

/// The global record switch, bound to debugfs `tracing_on`.
pub(crate) static TRACING_ON: RecordSwitch = RecordSwitch::new(true);
/// The switch of this module's buffer set: off while starting and stopping.
static RUNNING: RecordSwitch = RecordSwitch::new(false);

/// The profiler.
///
/// Locks, outermost first (never taken the other way round): `control`
/// (tracing_on and flush writers, one at a time), then those of `buffers`
/// (see [`Buffers`]). `reader` is taken only by the one reader of the moment
/// (the device's busy flag) and never held with another. `counters` and
/// `hotplug` are leaves. CPU hotplug callbacks run under the hotplug lock
/// and take the locks of `buffers`; nothing here takes the hotplug lock
/// while holding one of these.
#[pin_data(PinnedDrop)]
pub(crate) struct Profiler {
    pub(crate) config: Config,
    /// The sampled event ([`Event::index`]), resolved at start.
    active: Atomic<i8>,
    /// Each CPU's counter's overflow context: that CPU's sampler.
    trampolines: KVVec<Trampoline>,
    /// The per-CPU sync works, calling `buffers` (stopped while a CPU is
    /// offline and after `stop`).
    works: CpuWorks<Buffers>,
    /// The CPUs' samplers, the event buffer and what the sync moves.
    #[pin]
    pub(crate) buffers: Buffers,
    #[pin]
    control: Mutex<()>,
    /// What the stream delivered (see `reader_state.rs`).
    #[pin]
    pub(crate) reader: Mutex<ReaderState>,
    /// Set while a `read` of the device is in progress (one at a time, also
    /// for threads sharing the file).
    pub(crate) read_busy: Atomic<bool>,
    /// One counter slot per possible CPU: `Some` while the CPU is online.
    #[pin]
    counters: Mutex<KVVec<Option<Counter>>>,
    /// Set while `start` brings the online CPUs up: a failure then fails the load.
    starting: Atomic<bool>,
    /// The hotplug registration, from `start` to `stop`.
    #[pin]
    hotplug: Mutex<Option<hotplug::Registration<Profiler>>>,
    /// Set while `/dev/oprofile/buffer` is open (one reader at a time).
    pub(crate) reader_open: Atomic<bool>,
}

impl Profiler {
    /// Allocates everything and starts sampling.
    pub(crate) fn new(config: Config) -> Result<Arc<Self>> {
        TRACING_ON.set(true);
        let n = nr_cpu_ids();
        let switches = Switches {
            global: &TRACING_ON,
            set: &RUNNING,
        };
        let mut cpus = KVVec::with_capacity(n as usize, GFP_KERNEL)?;
        let mut slots = KVVec::with_capacity(n as usize, GFP_KERNEL)?;
        for cpu in 0..n {
            cpus.push(
                CpuSampler::new(
                    cpu,
                    config.cpu_buffer_size,
                    config.backtrace_depth,
                    config.user_backtrace_depth,
                    switches,
                    config.mode == RecordMode::Overwrite,
                )?,
                GFP_KERNEL,
            )?;
            slots.push(None, GFP_KERNEL)?;
        }
        // Each counter's overflow context: the sampler of its CPU. They point
        // into the heap buffer of `cpus`, which never moves or grows.
        let mut trampolines = KVVec::with_capacity(n as usize, GFP_KERNEL)?;
        for s in cpus.iter() {
            trampolines.push(Trampoline::new(s), GFP_KERNEL)?;
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
                config,
                active: Atomic::new(Event::CpuClock.index() as i8),
                trampolines,
                buffers <- buffers,
                // SAFETY: `buffers` is initialised above and pinned; the
                // works are declared before it, so dropped before it.
                works: unsafe { CpuWorks::new(&(*this.as_ptr()).buffers, sync_interval())? },
                control <- new_mutex!(()),
                reader <- new_mutex!(ReaderState::new(n as usize)?),
                read_busy: Atomic::new(false),
                counters <- new_mutex!(slots),
                starting: Atomic::new(false),
                hotplug <- new_mutex!(None),
                reader_open: Atomic::new(false),
            }? Error),
            GFP_KERNEL,
        )?;
        p.start()?;
        Ok(p)
    }

    /// How counters sample the event `event`.
    fn attr(&self, event: Event) -> Attr {
        Attr {
            event,
            period: self.config.sample_period,
            freq: self.config.sample_freq,
            exclude_user: self.config.exclude_user,
            exclude_kernel: self.config.exclude_kernel,
        }
    }

    /// Makes a counter of `event` on `cpu` calling that CPU's sampler.
    fn counter(&self, cpu: u32, event: Event) -> Result<Counter> {
        let t = self.trampolines.get(cpu as usize).ok_or(EINVAL)?;
        // SAFETY: `t` and the sampler it calls live in `self`, which outlives
        // every counter: `stop` drops them all before the module drops `self`.
        unsafe { Counter::new(cpu, &self.attr(event), t) }
    }

    /// The event to sample: `event=`, or for the default cycles if this
    /// machine can count them (tried on one online CPU), else cpu-clock.
    fn resolve_event(&self) -> Event {
        let EventChoice::Only(event) = self.config.event else {
            let Some(cpu) = (0..nr_cpu_ids())
                .filter_map(CpuId::from_u32)
                .find(|c| cpu_online(*c))
            else {
                return Event::CpuClock;
            };
            // RUNNING is off: a sample of this probe is not recorded.
            return match self.counter(cpu.as_u32(), Event::Cycles) {
                Ok(_probe) => Event::Cycles,
                Err(e) => {
                    pr_info!(
                        "no hardware PMU (cycles: error {}): sampling cpu-clock in hard-IRQ context\n",
                        e.to_errno()
                    );
                    Event::CpuClock
                }
            };
        };
        event
    }

    fn start(&self) -> Result {
        let mut hotplug = self.hotplug.lock();
        let event = self.resolve_event();
        self.active.store(event.index() as i8, Relaxed);
        RUNNING.set(true);
        self.starting.store(true, Relaxed);
        // SAFETY: `self` outlives the registration: `stop` (at the latest
        // in `drop`) drops it.
        let registration = unsafe { hotplug::Registration::new(self) };
        self.starting.store(false, Relaxed);
        let registration = registration.inspect_err(|_| {
            RUNNING.set(false);
        })?;
        let online = self.counters.lock().iter().flatten().count();
        let mode = if self.config.sample_freq != 0 {
            "Hz"
        } else if event == Event::CpuClock {
            "ns period"
        } else {
            "events period"
        };
        pr_info!(
            "sampling {} ({}) at {} {} on {} online CPUs\n",
            event.name(),
            if event.is_hardware() {
                "NMI"
            } else {
                "hard IRQ"
            },
            self.config.sample_period.max(self.config.sample_freq),
            mode,
            online
        );
        *hotplug = Some(registration);
        Ok(())
    }

    /// The event being sampled.
    pub(crate) fn event(&self) -> Event {
        Event::from_index(self.active.load(Relaxed) as u8)
    }

    /// Stops sampling: no overflow handler and no sync work runs after this.
    pub(crate) fn stop(&self) {
        let registration = self.hotplug.lock().take();
        if registration.is_some() {
            // Brings every CPU down.
            drop(registration);
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
    /// recorded until then to the reader (as a flush does), 1 resumes.
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
            self.buffers.mark_on();
            TRACING_ON.set(true);
        } else {
            stop_recording(&TRACING_ON);
            self.buffers.mark_off();
        }
    }
}

impl Profiler {
    /// A flight-recorder snapshot (`mode=overwrite`, see `snapshot.rs`):
    /// `EINVAL` in consume mode (logged), `ENOSPC` if the event buffer
    /// cannot take it (read the stream and retry). Serialised with the other
    /// snapshots and `tracing_on` changes.
    pub(crate) fn snapshot(&self) -> Result<crate::snapshot::SnapshotStats> {
        let _control = self.control.lock();
        self.buffers
            .snapshot(&RUNNING, TRACING_ON.is_on())
            .inspect_err(|e| {
                if *e == EINVAL {
                    pr_ratelimited!(
                        pr_info,
                        "snapshot: refused (EINVAL): the module records in consume mode (load it with mode=overwrite)\n"
                    );
                }
            })
    }
}

impl HotplugHandler for Profiler {
    /// A CPU came online: give it a counter and a sync work.
    fn online(&self, cpu: u32) -> Result {
        let event = self.event();
        let counter = match self.counter(cpu, event) {
            Ok(c) => c,
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
                // At load this fails the load (perf's ENOENT, "no PMU for
                // this event", as EOPNOTSUPP: insmod's ENOENT text speaks of
                // unknown symbols); a CPU hotplugged later stays online
                // without samples.
                return if !self.starting.load(Relaxed) {
                    Ok(())
                } else if e == ENOENT || e == ENODEV {
                    Err(EOPNOTSUPP)
                } else {
                    Err(e)
                };
            }
        };
        if let Some(slot) = self.counters.lock().get_mut(cpu as usize) {
            *slot = Some(counter);
        }
        // Overwrite mode: no periodic sync (a snapshot moves the records).
        if !self.buffers.overwrite {
            self.works.start(cpu);
        }
        pr_debug!("cpu{cpu}: online, sampling\n");
        Ok(())
    }

    /// A CPU goes offline: release its counter, stop its work, drain its buffer.
    fn offline(&self, cpu: u32) {
        let counter = self
            .counters
            .lock()
            .get_mut(cpu as usize)
            .and_then(Option::take);
        // Released outside the lock; no overflow handler runs after this.
        drop(counter);
        // Stopping a work that never started is a no-op.
        self.works.stop(cpu);
        self.buffers.sync_one(cpu);
        pr_debug!("cpu{cpu}: offline, drained\n");
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
/// Handlers run in hard-IRQ (cpu-clock) or NMI (hardware events) context;
/// `synchronize_rcu()` waits for both. Process context only (it sleeps).
pub(crate) fn stop_recording(switch: &RecordSwitch) {
    switch.set(false);
    kernel::sync::rcu::synchronize_rcu();
}

/// HZ/10 in jiffies (at least 1).
fn sync_interval() -> kernel::ffi::c_ulong {
    (bindings::HZ as kernel::ffi::c_ulong / 10).max(1)
}
