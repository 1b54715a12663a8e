// SPDX-License-Identifier: GPL-2.0

//! The profiler: per-CPU samplers and counters, the event buffer and the
//! sync work, started at load and stopped at unload.

use core::{
    ffi::{c_int, c_void},
    sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicU8, Ordering},
};
use kernel::{
    bindings,
    cpu::{nr_cpu_ids, CpuId},
    cpumask::Cpumask,
    new_mutex, new_poll_condvar,
    prelude::*,
    sync::{poll::PollCondVar, Arc, Mutex},
};

use crate::{
    event_buffer::EventBuffer,
    format::{self, Endian},
    params::{Config, EventChoice},
    perf::{Attr, Counter, Event, Trampoline},
    ratelimit::pr_ratelimited,
    reader_state::ReaderState,
    ringbuf::{RecordSwitch, Switches},
    sampler::{now, CpuSampler},
    sync::{self, CpuSync, Reserve, Target},
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

mod ffi {
    use core::ffi::{c_int, c_void};
    extern "C" {
        pub(super) fn oprofile_rs_sync_alloc(
            context: *mut c_void,
            interval: kernel::ffi::c_ulong,
        ) -> *mut c_void;
        pub(super) fn oprofile_rs_sync_start_cpu(s: *mut c_void, cpu: u32);
        pub(super) fn oprofile_rs_sync_stop_cpu(s: *mut c_void, cpu: u32);
        pub(super) fn oprofile_rs_sync_free(s: *mut c_void);
        pub(super) fn oprofile_rs_hotplug_start(
            context: *mut c_void,
            err: *mut c_int,
        ) -> *mut c_void;
        pub(super) fn oprofile_rs_hotplug_stop(h: *mut c_void);
    }
}

/// Called by CPU `cpu`'s sync work (glue.c).
///
/// # Safety
///
/// `context` is the `&Profiler` given to `oprofile_rs_sync_alloc`, alive
/// until `oprofile_rs_sync_free`.
#[unsafe(no_mangle)]
unsafe extern "C" fn oprofile_rs_sync_work(context: *mut c_void, cpu: u32) {
    // SAFETY: see the function's safety section.
    let p = unsafe { &*context.cast::<Profiler>() };
    p.sync_one(cpu);
}

/// CPU hotplug: `cpu` came online (also called for every online CPU at start).
///
/// # Safety
///
/// `context` is the `&Profiler` given to `oprofile_rs_hotplug_start`, alive
/// until `oprofile_rs_hotplug_stop` returns.
#[unsafe(no_mangle)]
unsafe extern "C" fn oprofile_rs_cpu_up(context: *mut c_void, cpu: u32) -> c_int {
    // SAFETY: see the function's safety section.
    let p = unsafe { &*context.cast::<Profiler>() };
    match p.cpu_up(cpu) {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

/// CPU hotplug: `cpu` goes offline (also called for every CPU at stop).
///
/// # Safety
///
/// As [`oprofile_rs_cpu_up`].
#[unsafe(no_mangle)]
unsafe extern "C" fn oprofile_rs_cpu_down(context: *mut c_void, cpu: u32) -> c_int {
    // SAFETY: see the function's safety section.
    let p = unsafe { &*context.cast::<Profiler>() };
    p.cpu_down(cpu);
    0
}

/// The hotplug registration, created by [`Profiler::start`], removed by
/// [`Profiler::stop`].
struct Running {
    hotplug: *mut c_void,
}

// SAFETY: the handle is only passed back to glue.c, from any thread.
unsafe impl Send for Running {}

/// The profiler.
///
/// Locks, outermost first (never taken the other way round): `control`
/// (tracing_on and flush writers, one at a time), a CPU's `cpu_sync` (one
/// at a time, never two), `events`. `reader` is taken only by the one
/// reader of the moment (the device's busy flag) and never held with
/// another. `counters` and `running` are leaves. CPU hotplug callbacks run
/// under the hotplug lock and take a `cpu_sync` and `events`; nothing here
/// takes the hotplug lock while holding one of these.
#[pin_data(PinnedDrop)]
pub(crate) struct Profiler {
    pub(crate) config: Config,
    /// The sampled event ([`Event::index`]), resolved at start.
    active: AtomicU8,
    /// Per possible CPU (kvmalloc: large `nr_cpu_ids` need no high-order
    /// allocation).
    pub(crate) cpus: KVVec<CpuSampler>,
    trampolines: KVVec<Trampoline>,
    /// Per possible CPU: its sync state, behind its own mutex.
    cpu_sync: KVVec<Pin<KBox<Mutex<CpuSync>>>>,
    /// What the sync keeps free in the event buffer for `tracing_on=0`.
    reserve: Reserve,
    /// The latest time stamp of a record moved to the event buffer.
    last_ts: AtomicU64,
    /// The time of a TRACING on record that did not fit in the event buffer
    /// yet (0: none). The sync writes it before any other record.
    pending_on: AtomicU64,
    #[pin]
    control: Mutex<()>,
    #[pin]
    pub(crate) events: Mutex<EventBuffer>,
    /// Woken when data arrives, at a flush, when the event buffer is full,
    /// and when the reader slot's busy flag clears.
    #[pin]
    pub(crate) readers: PollCondVar,
    /// What the stream delivered (see `reader_state.rs`).
    #[pin]
    pub(crate) reader: Mutex<ReaderState>,
    /// Set while a `read` of the device is in progress (one at a time, also
    /// for threads sharing the file).
    pub(crate) read_busy: AtomicBool,
    /// One counter slot per possible CPU: `Some` while the CPU is online.
    #[pin]
    counters: Mutex<KVVec<Option<Counter>>>,
    /// The per-CPU sync works (glue.c), from start to stop.
    sync_works: AtomicPtr<c_void>,
    /// Set while `start` brings the online CPUs up: a failure then fails the load.
    starting: AtomicBool,
    #[pin]
    running: Mutex<Option<Running>>,
    /// Set while `/dev/oprofile/buffer` is open (one reader at a time).
    pub(crate) reader_open: AtomicBool,
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
        let reserve = Reserve::new(n as usize);
        // Room for the reserve and a few of the largest records besides.
        if config.buffer_size < 2 * reserve.bytes() + 4 * format::MAX_RECORD {
            pr_err!(
                "buffer_size={} is too small for {} CPUs: at least {} bytes\n",
                config.buffer_size,
                n,
                2 * reserve.bytes() + 4 * format::MAX_RECORD
            );
            return Err(EINVAL);
        }
        let mut cpus = KVVec::with_capacity(n as usize, GFP_KERNEL)?;
        let mut slots = KVVec::with_capacity(n as usize, GFP_KERNEL)?;
        let mut cpu_sync = KVVec::with_capacity(n as usize, GFP_KERNEL)?;
        for cpu in 0..n {
            cpu_sync.push(KBox::pin_init(CpuSync::new(), GFP_KERNEL)?, GFP_KERNEL)?;
            cpus.push(
                CpuSampler::new(
                    cpu,
                    config.cpu_buffer_size,
                    config.backtrace_depth,
                    switches,
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
        let p = Arc::pin_init(
            try_pin_init!(Self {
                config,
                active: AtomicU8::new(Event::CpuClock.index()),
                cpus,
                trampolines,
                cpu_sync,
                reserve,
                last_ts: AtomicU64::new(0),
                pending_on: AtomicU64::new(0),
                control <- new_mutex!(()),
                events <- new_mutex!(EventBuffer::new(config.buffer_size)?),
                readers <- new_poll_condvar!(),
                reader <- new_mutex!(ReaderState::new(n as usize)?),
                read_busy: AtomicBool::new(false),
                counters <- new_mutex!(slots),
                sync_works: AtomicPtr::new(core::ptr::null_mut()),
                starting: AtomicBool::new(false),
                running <- new_mutex!(None),
                reader_open: AtomicBool::new(false),
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

    fn start(self: &Arc<Self>) -> Result {
        let mut running = self.running.lock();
        let event = self.resolve_event();
        self.active.store(event.index(), Ordering::Relaxed);
        let me = core::ptr::from_ref(&**self).cast_mut().cast::<c_void>();
        // SAFETY: `self` outlives the works: `stop` frees them before the
        // module drops its reference.
        let works = unsafe { ffi::oprofile_rs_sync_alloc(me, sync_interval()) };
        if works.is_null() {
            return Err(ENOMEM);
        }
        self.sync_works.store(works, Ordering::Release);
        RUNNING.set(true);
        self.starting.store(true, Ordering::Relaxed);
        let mut err: c_int = 0;
        // SAFETY: as above, `stop` unregisters before `self` can go.
        let hotplug = unsafe { ffi::oprofile_rs_hotplug_start(me, &mut err) };
        self.starting.store(false, Ordering::Relaxed);
        if hotplug.is_null() {
            RUNNING.set(false);
            self.sync_works
                .store(core::ptr::null_mut(), Ordering::Release);
            // SAFETY: every CPU that came up was brought down again by the
            // rollback of the failed registration: no work runs.
            unsafe { ffi::oprofile_rs_sync_free(works) };
            return Err(Error::from_errno(err));
        }
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
        *running = Some(Running { hotplug });
        Ok(())
    }

    /// A CPU came online: give it a counter and a sync work.
    fn cpu_up(&self, cpu: u32) -> Result {
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
                return if !self.starting.load(Ordering::Relaxed) {
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
        let works = self.sync_works.load(Ordering::Acquire);
        if !works.is_null() {
            // SAFETY: `works` is live from start to stop and `cpu` < nr_cpu_ids.
            unsafe { ffi::oprofile_rs_sync_start_cpu(works, cpu) };
        }
        pr_debug!("cpu{cpu}: online, sampling\n");
        Ok(())
    }

    /// A CPU goes offline: release its counter, stop its work, drain its buffer.
    fn cpu_down(&self, cpu: u32) {
        let counter = self
            .counters
            .lock()
            .get_mut(cpu as usize)
            .and_then(Option::take);
        // Released outside the lock; no overflow handler runs after this.
        drop(counter);
        let works = self.sync_works.load(Ordering::Acquire);
        if !works.is_null() {
            // SAFETY: as in `cpu_up`; stopping a work that never started is a no-op.
            unsafe { ffi::oprofile_rs_sync_stop_cpu(works, cpu) };
        }
        self.sync_one(cpu);
        pr_debug!("cpu{cpu}: offline, drained\n");
    }

    /// The event being sampled.
    pub(crate) fn event(&self) -> Event {
        Event::from_index(self.active.load(Ordering::Relaxed))
    }

    /// Stops sampling: no overflow handler and no sync work runs after this.
    pub(crate) fn stop(&self) {
        let running = self.running.lock().take();
        if let Some(r) = running {
            // SAFETY: `hotplug` came from `oprofile_rs_hotplug_start` and is
            // stopped once (taken out of the mutex). It brings every CPU down.
            unsafe { ffi::oprofile_rs_hotplug_stop(r.hotplug) };
            RUNNING.set(false);
            let works = self
                .sync_works
                .swap(core::ptr::null_mut(), Ordering::AcqRel);
            if !works.is_null() {
                // SAFETY: every CPU's work was stopped by `cpu_down`.
                unsafe { ffi::oprofile_rs_sync_free(works) };
            }
        }
        self.flush();
    }
    /// What a sync of CPU `cpu` works on.
    fn target(&self, cpu: usize) -> Option<Target<'_>> {
        Some(Target {
            cpu: self.cpus.get(cpu)?,
            state: self.cpu_sync.get(cpu)?,
            events: &self.events,
            reserve: self.reserve,
            last_ts: &self.last_ts,
            pending_on: &self.pending_on,
        })
    }

    /// Moves CPU `cpu`'s records to the event buffer (its periodic work, and
    /// when it goes offline); wakes the reader past the watershed or when
    /// the event buffer is full.
    fn sync_one(&self, cpu: u32) {
        if let Some(t) = self.target(cpu as usize) {
            let moved = sync::sync_cpu(&t);
            let eb = self.events.lock();
            let wake =
                moved.full || self.nearly_full(&eb) || eb.len() >= self.config.buffer_watershed;
            drop(eb);
            if wake {
                self.readers.notify_all();
            }
        }
    }

    /// Whether the event buffer is (nearly) too full for the sync to move
    /// more: readers are woken then, whatever the watershed.
    pub(crate) fn nearly_full(&self, eb: &EventBuffer) -> bool {
        eb.free() < (self.config.buffer_size / 8).max(self.reserve.bytes() + format::MAX_RECORD)
    }

    /// Moves every CPU's records, one CPU after another.
    fn sync_all(&self) {
        for cpu in 0..self.cpus.len() {
            if let Some(t) = self.target(cpu) {
                sync::sync_cpu(&t);
            }
        }
    }

    /// Pushes everything buffered to the event buffer and wakes readers.
    pub(crate) fn flush(&self) {
        let _control = self.control.lock();
        self.sync_all();
        self.wake_readers();
    }

    /// Makes whatever the event buffer holds readable now, below the
    /// watershed too: wakes blocked readers and pollers.
    fn wake_readers(&self) {
        self.events.lock().flush_seq += 1;
        self.readers.notify_all();
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
            let t = self.marker_time();
            let rec = format::Tracing {
                cpu: 0,
                time: t,
                on: true,
            }
            .encoded(Endian::native());
            let mut eb = self.events.lock();
            if !eb.push_keeping(&rec, self.reserve.bytes()) {
                self.pending_on.store(t, Ordering::Relaxed);
            }
            drop(eb);
            TRACING_ON.set(true);
            return;
        }
        stop_recording(&TRACING_ON);
        // Under the events lock, as the sync writes a waiting on record: it
        // is either written already, or cancelled here, and until the
        // discard below is done no record moves (`sync::BLOCKED`).
        let cancelled = {
            let _eb = self.events.lock();
            self.pending_on.swap(sync::BLOCKED, Ordering::Relaxed) != 0
        };
        if !cancelled {
            self.pending_on.store(0, Ordering::Relaxed);
        }
        if !cancelled {
            self.sync_all();
        }
        for cpu in 0..self.cpus.len() {
            if let Some(t) = self.target(cpu) {
                sync::discard_cpu(&t);
            }
        }
        if cancelled {
            let _eb = self.events.lock();
            self.pending_on.store(0, Ordering::Relaxed);
        } else {
            let rec = format::Tracing {
                cpu: 0,
                time: self.marker_time(),
                on: false,
            }
            .encoded(Endian::native());
            if !self.events.lock().push(&rec) {
                // Cannot happen: the reserve keeps room for it.
                pr_ratelimited!(pr_err, "event buffer full: tracing off record dropped\n");
            }
        }
        self.wake_readers();
    }

    /// A TRACING record's time: now, or the latest record's time if a CPU
    /// clock ahead of this one stamped it later, so that the record's time
    /// is not before that of a sample it follows in the stream.
    fn marker_time(&self) -> u64 {
        now().max(self.last_ts.load(Ordering::Relaxed))
    }
}

#[pinned_drop]
impl PinnedDrop for Profiler {
    fn drop(self: Pin<&mut Self>) {
        // The hotplug callbacks and sync works hold raw pointers to `self`:
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
    (kernel::bindings::HZ as kernel::ffi::c_ulong / 10).max(1)
}
