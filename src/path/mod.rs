// SPDX-License-Identifier: GPL-2.0

//! The data path: a sample's way from the overflow handler to the reader of
//! `/dev/oprofile/buffer`.
//!
//! May import: `shims`, `format`, `ringbuf` and each other (without a
//! circle); never `control` or `kunit` (a suite that needs a hook in the
//! sample path sets one, see `sampler::BEFORE_SAMPLE`).
//!
//! | file | step |
//! |---|---|
//! | `sampler.rs` | the overflow handler's work: a SAMPLE (and COMM) into this CPU's ring buffer |
//! | `user_stack.rs` | user callchains by frame pointers, and copies of the user stack |
//! | `unwind_tables.rs` | user callchains with the tool's unwind tables (code without frame pointers) |
//! | `cgroup.rs` | the cgroup filter the sampler tests first |
//! | `sync.rs` | the per-CPU buffers and the delayed-work sync that drains them |
//! | `sync_stage.rs` | a sync's staging area: records ordered by time before the event buffer |
//! | `snapshot.rs`, `snapshot_plan.rs` | flight-recorder snapshots in overwrite mode, and what they keep |
//! | `event_buffer.rs` | the event buffer the device reads (and maps) |
//! | `record_index.rs` | where each record of the event buffer starts, for `mmap` readers |
//! | `reader_state.rs` | what the reader was told (COMM, CONFIG), restated to a new reader |
//! | `buffer_memory.rs` | the memory the buffers take, and its cap |

pub(crate) mod buffer_memory;
pub(crate) mod cgroup;
pub(crate) mod event_buffer;
pub(crate) mod reader_state;
pub(crate) mod record_index;
pub(crate) mod sampler;
pub(crate) mod snapshot;
// Pure logic shared with the host crate `crates/snapshot` (hence `pub` items).
#[allow(unreachable_pub)]
pub(crate) mod snapshot_plan;
pub(crate) mod sync;
pub(crate) mod sync_stage;
pub(crate) mod unwind_tables;
pub(crate) mod user_stack;
