//! oprofile-rs user-space tool: record `/dev/oprofile/buffer` and analyse the
//! recording (report, script, folded stacks, flame graphs, pprof).
//! The binary is a thin clap front-end over these modules.

pub mod annotate;
pub mod archive;
pub mod archive_read;
pub mod buildid;
pub mod calltree;
pub mod control;
pub mod ctl;
pub mod debug_file;
pub mod debuginfod;
pub mod firefox;
pub mod folded;
pub mod html;
pub mod kernel_module;
pub mod list;
pub mod locate;
pub mod mapevents;
pub mod mapped;
pub mod maps;
pub mod off_cpu;
pub mod pprof;
pub mod profile;
pub mod record;
pub mod report;
pub mod script;
pub mod sidecar;
pub mod spelling;
pub mod symbols;
pub mod text;
pub mod unwind;
pub mod unwind_load;
pub mod unwind_table;
