// SPDX-License-Identifier: GPL-2.0

//! The profiler: per-CPU samplers and counters, the event buffer and the
//! sync work, started at load and stopped at unload.

use core::{
    ffi::c_void,
    sync::atomic::{AtomicBool, Ordering},
};
use kernel::{
    new_condvar, new_mutex,
    prelude::*,
    sync::{Arc, CondVar, Mutex},
};

use crate::{
    event_buffer::EventBuffer,
    params::Config,
    perf::{Counter, Event, Trampoline},
    records,
    ringbuf::{RecordSwitch, Switches},
    sampler::{now, CpuSampler},
    sync::{sync, SyncState},
};

/// The global record switch, bound to debugfs `tracing_on`.
pub(crate) static TRACING_ON: RecordSwitch = RecordSwitch::new(true);
/// The switch of this module's buffer set: off while starting and stopping.
static RUNNING: RecordSwitch = RecordSwitch::new(false);

mod ffi {
    use core::ffi::c_void;
    extern "C" {
        pub(super) fn oprofile_rs_sync_start(context: *mut c_void, interval: u64) -> *mut c_void;
        pub(super) fn oprofile_rs_sync_stop(s: *mut c_void);
    }
}

/// Called by the sync work (glue.c).
///
/// # Safety
///
/// `context` is the `&Profiler` given to `oprofile_rs_sync_start`, alive
/// until `oprofile_rs_sync_stop` returns.
#[unsafe(no_mangle)]
unsafe extern "C" fn oprofile_rs_sync_work(context: *mut c_void) {
    // SAFETY: see the function's safety section.
    let p = unsafe { &*context.cast::<Profiler>() };
    sync(p);
}

/// Running parts, created by [`Profiler::start`], torn down by [`Profiler::stop`].
struct Running {
    counters: KVec<Counter>,
    sync_work: *mut c_void,
}

// SAFETY: the sync work handle is only passed back to glue.c.
unsafe impl Send for Running {}

#[pin_data]
pub(crate) struct Profiler {
    pub(crate) config: Config,
    /// Whether the active event is the hardware cycles counter (NMI), else cpu-clock.
    hardware: AtomicBool,
    pub(crate) cpus: KVec<CpuSampler>,
    trampolines: KVec<Trampoline>,
    #[pin]
    pub(crate) events: Mutex<EventBuffer>,
    #[pin]
    pub(crate) readers: CondVar,
    #[pin]
    pub(crate) sync_state: Mutex<SyncState>,
    #[pin]
    running: Mutex<Option<Running>>,
    /// Set while `/dev/oprofile/buffer` is open (one reader at a time).
    pub(crate) reader_open: AtomicBool,
}

fn nr_cpu_ids() -> u32 {
    // SAFETY: `nr_cpu_ids` is set during boot and constant afterwards.
    unsafe { kernel::bindings::nr_cpu_ids }
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
        let mut cpus = KVec::with_capacity(n as usize, GFP_KERNEL)?;
        for cpu in 0..n {
            cpus.push(
                CpuSampler::new(cpu, config.cpu_buffer_size, switches)?,
                GFP_KERNEL,
            )?;
        }
        // Each counter's overflow context: the sampler of its CPU. They point
        // into the heap buffer of `cpus`, which never moves or grows.
        let mut trampolines = KVec::with_capacity(n as usize, GFP_KERNEL)?;
        for s in cpus.iter() {
            trampolines.push(Trampoline::new(s), GFP_KERNEL)?;
        }
        let p = Arc::pin_init(
            try_pin_init!(Self {
                config,
                hardware: AtomicBool::new(false),
                cpus,
                trampolines,
                events <- new_mutex!(EventBuffer::new(config.buffer_size)?),
                readers <- new_condvar!(),
                sync_state <- new_mutex!(SyncState::new(n as usize)?),
                running <- new_mutex!(None),
                reader_open: AtomicBool::new(false),
            }? Error),
            GFP_KERNEL,
        )?;
        p.start()?;
        Ok(p)
    }

    fn start(self: &Arc<Self>) -> Result {
        let mut running = self.running.lock();
        let mut counters = KVec::new();
        let mut event = Event::Cycles;
        for s in self.cpus.iter() {
            let Some(t) = self.trampoline(s.cpu) else {
                continue;
            };
            // SAFETY: `t` and the sampler it calls live in `self` (an Arc kept
            // by the module) until `stop` drops the counters.
            let made =
                unsafe { Counter::new(s.cpu, event, self.config.sample_period, false, false, t) };
            let made = match made {
                Err(e) if event == Event::Cycles => {
                    pr_info!("no hardware PMU (cycles: error {}): sampling with cpu-clock in hard-IRQ context\n", e.to_errno());
                    event = Event::CpuClock;
                    // SAFETY: as above.
                    unsafe {
                        Counter::new(s.cpu, event, self.config.sample_period, false, false, t)
                    }
                }
                r => r,
            };
            match made {
                Ok(c) => counters.push(c, GFP_KERNEL)?,
                // Offline or absent CPUs have no counter.
                Err(e) if s.cpu != 0 => pr_debug!("cpu{}: no counter ({})\n", s.cpu, e.to_errno()),
                Err(e) => {
                    pr_err!(
                        "cannot create a {} counter on cpu0: error {}\n",
                        event.name(),
                        e.to_errno()
                    );
                    return Err(e);
                }
            }
        }
        // SAFETY: `self` outlives the work: `stop` ends it before the last
        // reference can go (the module keeps one until after `stop`).
        let work = unsafe {
            ffi::oprofile_rs_sync_start(
                core::ptr::from_ref(&**self).cast_mut().cast(),
                sync_interval(),
            )
        };
        if work.is_null() {
            return Err(ENOMEM);
        }
        pr_info!(
            "sampling {} every {} on {} CPUs\n",
            event.name(),
            self.config.sample_period,
            counters.len()
        );
        *running = Some(Running {
            counters,
            sync_work: work,
        });
        self.hardware
            .store(event == Event::Cycles, Ordering::Relaxed);
        RUNNING.set(true);
        Ok(())
    }

    fn trampoline(&self, cpu: u32) -> Option<&Trampoline> {
        self.trampolines.get(cpu as usize)
    }

    /// The event being sampled.
    pub(crate) fn event(&self) -> Event {
        if self.hardware.load(Ordering::Relaxed) {
            Event::Cycles
        } else {
            Event::CpuClock
        }
    }

    /// Stops sampling: no overflow handler and no sync runs after this.
    pub(crate) fn stop(&self) {
        RUNNING.set(false);
        if let Some(r) = self.running.lock().take() {
            drop(r.counters);
            // SAFETY: `sync_work` came from `oprofile_rs_sync_start` and is
            // stopped once (taken out of the mutex).
            unsafe { ffi::oprofile_rs_sync_stop(r.sync_work) };
        }
        self.flush();
    }

    /// Pushes everything buffered to the event buffer and wakes readers.
    pub(crate) fn flush(&self) {
        sync(self);
        self.events.lock().flush_seq += 1;
        self.readers.notify_all();
    }

    /// `tracing_on`: 0 stops every CPU before returning, 1 resumes.
    pub(crate) fn set_tracing(&self, on: bool) {
        if on {
            self.push_marker(records::tracing(0, now(), true));
            TRACING_ON.set(true);
        } else {
            TRACING_ON.set(false);
            sync(self);
            self.push_marker(records::tracing(0, now(), false));
        }
    }

    fn push_marker(&self, record: [u8; records::TRACING_LEN]) {
        if !self.events.lock().push(&record) {
            pr_warn!("event buffer full: tracing marker dropped\n");
        }
    }
}

/// HZ/10 in jiffies (at least 1).
fn sync_interval() -> u64 {
    (u64::from(kernel::bindings::HZ) / 10).max(1)
}
