/* SPDX-License-Identifier: (GPL-2.0 WITH Linux-syscall-note) OR MIT */
/*
 * oprofile_rs: the user-space interface of /dev/oprofile/buffer, for C.
 *
 * The stream a read() returns, the ioctls of the device and the page a
 * mapping of it starts with. The one definition is src/format.rs (the
 * module's and the host tools' code); this header says the same for C, and
 * a host test (crates/format/tests/uapi_header.rs) compiles it and checks
 * every constant, size and field offset against that definition.
 * Documentation/stream-format.md and Documentation/mmap.md say what the
 * fields mean.
 *
 * Every integer of the stream is in the byte order of the machine that
 * wrote it (the header's `endian`: OPROFILE_RS_ENDIAN_LITTLE or _BIG);
 * read on the same machine, the structures below can be used as they are.
 * Records are 8-byte aligned and start with a struct oprofile_rs_prefix
 * whose `size` covers the whole record: skip unknown types by it.
 */
#ifndef _UAPI_OPROFILE_RS_H
#define _UAPI_OPROFILE_RS_H

#include <linux/ioctl.h>
#include <linux/types.h>

#define OPROFILE_RS_DEVICE "/dev/oprofile/buffer"

/* ------------------------------------------------------------ the header */

/* The stream's first 8 bytes: "OPRFRS\0\n". */
#define OPROFILE_RS_MAGIC "OPRFRS\0\n"
#define OPROFILE_RS_MAGIC_LEN 8
/* The version written; readers of this header read versions 1 and 2. */
#define OPROFILE_RS_VERSION 2
#define OPROFILE_RS_MIN_VERSION 1
#define OPROFILE_RS_HEADER_LEN 96
#define OPROFILE_RS_MIN_HEADER_LEN 64
#define OPROFILE_RS_WORD_SIZE 8
#define OPROFILE_RS_ENDIAN_LITTLE 1
#define OPROFILE_RS_ENDIAN_BIG 2
#define OPROFILE_RS_CLOCK_LOCAL 1
#define OPROFILE_RS_SOURCE_HARDWARE 1
#define OPROFILE_RS_SOURCE_SOFTWARE 2
#define OPROFILE_RS_EVENT_NAME_LEN 48

struct oprofile_rs_header {
	char magic[OPROFILE_RS_MAGIC_LEN];
	__u16 version;
	__u16 header_size;	/* records start here (>= MIN_HEADER_LEN) */
	__u8 word_size;
	__u8 endian;
	__u8 clock;
	__u8 sample_source;
	__u32 nr_cpus;		/* possible CPUs: records' cpu is below */
	__u32 backtrace_depth;
	__u64 sample_period;
	__u64 sample_freq;
	__u64 start_time;
	char event_name[OPROFILE_RS_EVENT_NAME_LEN];	/* NUL-padded */
};

/* ------------------------------------------------------------ the records */

#define OPROFILE_RS_SAMPLE 1
#define OPROFILE_RS_COMM 2
#define OPROFILE_RS_LOST 3
#define OPROFILE_RS_TRACING 4
#define OPROFILE_RS_CONFIG 5
#define OPROFILE_RS_SNAPSHOT 6
#define OPROFILE_RS_SWITCH 7

#define OPROFILE_RS_RECORD_ALIGN 8

/* The 8 bytes every record starts with. */
struct oprofile_rs_prefix {
	__u16 type;		/* OPROFILE_RS_SAMPLE, ... */
	__u16 size;		/* bytes of the whole record */
	__u16 cpu;
	__u8 b6;		/* SAMPLE flags, TRACING state, CONFIG events, SNAPSHOT end,
				   SWITCH flags */
	__u8 b7;		/* SAMPLE kernel depth, CONFIG mode, SWITCH reason */
};

/* SAMPLE flags (prefix.b6). */
#define OPROFILE_RS_SAMPLE_FLAG_KERNEL 1	/* taken in kernel mode */
#define OPROFILE_RS_SAMPLE_FLAG_EXT 2		/* the extended form (period, event, user chain) */
#define OPROFILE_RS_SAMPLE_FLAG_THROTTLED 4	/* perf throttled the counter after it */
#define OPROFILE_RS_SAMPLE_FLAG_USER_STACK 8	/* a user stack part follows the chains */

#define OPROFILE_RS_SAMPLE_LEN 32
#define OPROFILE_RS_SAMPLE_EXT_LEN 48
#define OPROFILE_RS_MAX_DEPTH 64
#define OPROFILE_RS_MAX_USER_DEPTH 64
#define OPROFILE_RS_MAX_USER_STACK 8192
#define OPROFILE_RS_USER_STACK_REGS_LEN 32

/*
 * SAMPLE: prefix.b7 kernel callchain entries (__u64, innermost caller
 * first) follow the fixed part, then (extended form) user_depth user ones,
 * then (OPROFILE_RS_SAMPLE_FLAG_USER_STACK) a struct
 * oprofile_rs_user_stack and user_stack bytes of stack.
 */
struct oprofile_rs_sample {
	struct oprofile_rs_prefix prefix;
	__u64 time;
	__u64 pc;
	__u32 pid;		/* thread */
	__u32 tgid;		/* process */
	/* the extended form (OPROFILE_RS_SAMPLE_FLAG_EXT) only: */
	__u64 period;		/* events this sample stands for (0: not known) */
	__u16 event;		/* index into the latest CONFIG's events */
	__u8 user_depth;
	__u8 reserved0;
	__u16 user_stack;	/* bytes of stack copied after the regs */
	__u16 reserved1;
};

/* The registers before a SAMPLE's stack copy. */
struct oprofile_rs_user_stack {
	__u64 ip;
	__u64 sp;		/* the address of the copy's first byte */
	__u64 bp;
	__u64 copied;		/* bytes read (the rest of the copy is zeros) */
};

#define OPROFILE_RS_COMM_LEN 40
#define OPROFILE_RS_COMM_NAME_LEN 16

struct oprofile_rs_comm {
	struct oprofile_rs_prefix prefix;
	__u64 time;
	__u32 pid;
	__u32 tgid;
	char comm[OPROFILE_RS_COMM_NAME_LEN];	/* NUL-padded */
};

#define OPROFILE_RS_LOST_LEN 24

/* `count` samples of prefix.cpu its buffer could not take. */
struct oprofile_rs_lost {
	struct oprofile_rs_prefix prefix;
	__u64 time;
	__u64 count;
};

#define OPROFILE_RS_TRACING_LEN 16

/* tracing_on switched to prefix.b6 (1 on, 0 off). */
struct oprofile_rs_tracing {
	struct oprofile_rs_prefix prefix;
	__u64 time;
};

#define OPROFILE_RS_CONFIG_LEN 48
#define OPROFILE_RS_CONFIG_EXT_LEN 16
#define OPROFILE_RS_EVENT_DESC_LEN 48
#define OPROFILE_RS_EVENT_DESC_NAME_LEN 24
#define OPROFILE_RS_MAX_EVENTS 8
#define OPROFILE_RS_MODE_CONSUME 0
#define OPROFILE_RS_MODE_OVERWRITE 1
#define OPROFILE_RS_EVENT_FLAG_FREQ 1		/* value is a frequency */
#define OPROFILE_RS_EVENT_FLAG_EXCLUDE_USER 2
#define OPROFILE_RS_EVENT_FLAG_EXCLUDE_KERNEL 4
#define OPROFILE_RS_EVENT_FLAG_NMI 8

/* One event of a CONFIG record. */
struct oprofile_rs_event_desc {
	__u32 perf_type;	/* perf_event_attr.type */
	__u8 flags;		/* OPROFILE_RS_EVENT_FLAG_* */
	__u8 reserved[3];
	__u64 config;		/* perf_event_attr.config */
	__u64 value;		/* period, or frequency with _FLAG_FREQ */
	char name[OPROFILE_RS_EVENT_DESC_NAME_LEN];	/* NUL-terminated */
};

/*
 * CONFIG: the settings in force; prefix.b6 events follow the fixed part,
 * then (records of this version) a struct oprofile_rs_config_ext.
 * prefix.b7 is the mode (OPROFILE_RS_MODE_*).
 */
struct oprofile_rs_config {
	struct oprofile_rs_prefix prefix;
	__u64 time;
	__u32 generation;
	__u8 backtrace_depth;
	__u8 user_backtrace_depth;
	__u16 reserved;
	__u64 cpu_buffer_size;
	__u64 buffer_size;
	__u64 buffer_watershed;
};

struct oprofile_rs_config_ext {
	__u64 cgroup;		/* cgroup v2 id of the filter, 0: none */
	__u32 pid;		/* the profiled process, 0: every task */
	__u32 reserved;
};

#define OPROFILE_RS_SNAPSHOT_LEN 40

/* Frames a snapshot: one BEGIN per CPU (prefix.b6 0), then END (1). */
struct oprofile_rs_snapshot {
	struct oprofile_rs_prefix prefix;
	__u64 time;
	__u32 seq;
	__u32 reserved;
	__u64 overwritten;
	__u64 records;
};

#define OPROFILE_RS_SWITCH_LEN 48
#define OPROFILE_RS_SWITCH_FLAG_RUN_DELAY 0x01

/* SWITCH reasons (prefix.b7). */
#define OPROFILE_RS_SWITCH_PREEMPTED 0
#define OPROFILE_RS_SWITCH_SLEEP 1
#define OPROFILE_RS_SWITCH_BLOCKED 2
#define OPROFILE_RS_SWITCH_EXIT 3
#define OPROFILE_RS_SWITCH_STOPPED 4
#define OPROFILE_RS_SWITCH_OTHER 5
#define OPROFILE_RS_SWITCH_IDLE 6 /* TASK_IDLE: waiting for work, not load */

/*
 * A task leaves its CPU (the context-switches event); the SAMPLE with its
 * stacks follows, of the same cpu, time and pid.
 */
struct oprofile_rs_switch {
	struct oprofile_rs_prefix prefix;
	__u64 time;
	__u32 pid;
	__u32 tgid;
	__u32 state;		/* the task's raw __state */
	__u32 reserved;
	__u64 exec_runtime;	/* ns run since created */
	__u64 run_delay;	/* ns waited on run queues, if SWITCH_FLAG_RUN_DELAY */
};

/* ------------------------------------------------------------ the ioctls */

#define OPROFILE_RS_IOC_MAGIC 'O'

/* ptr/len of a configuration text buffer (SET_CONFIG, GET_CONFIG). */
struct oprofile_rs_config_text {
	__u64 ptr;
	__u64 len;
};

/* The consumer position seen and the one after the records processed. */
struct oprofile_rs_consume {
	__u64 tail;
	__u64 new_tail;
};

/*
 * An unwind table (UNWIND_TABLE): struct oprofile_rs_unwind_table_head,
 * then rows rows of struct oprofile_rs_unwind_row sorted by strictly
 * increasing addr, the last one OPROFILE_RS_UNWIND_UNKNOWN
 * (Documentation/design.md, "In-kernel unwinding").
 */
struct oprofile_rs_unwind_table {
	__u64 ptr;
	__u64 len;
};

#define OPROFILE_RS_UNWIND_MAGIC 0x4f525501
#define OPROFILE_RS_UNWIND_MAX_ROWS (1 << 22)

struct oprofile_rs_unwind_table_head {
	__u32 magic;		/* OPROFILE_RS_UNWIND_MAGIC */
	__u32 rows;
	__u64 reserved;		/* 0 */
};

#define OPROFILE_RS_UNWIND_END 0	/* the outermost frame */
#define OPROFILE_RS_UNWIND_CFA_SP 1	/* CFA = sp + cfa */
#define OPROFILE_RS_UNWIND_CFA_BP 2	/* CFA = bp + cfa */
#define OPROFILE_RS_UNWIND_UNKNOWN 3	/* no rule: the walk is cut */

struct oprofile_rs_unwind_row {
	__u32 addr;	/* the binary's own address where the row starts */
	__u8 rule;	/* OPROFILE_RS_UNWIND_* */
	__s8 bp;	/* caller's rbp at CFA + 8 * bp (< 0), or 0: unchanged */
	__u16 cfa;	/* CFA offset, bytes */
};

/* Unwind [start, end) of process pid with table (as UNWIND_TABLE returned it). */
struct oprofile_rs_unwind_map {
	__u32 pid;
	__u32 table;
	__u64 start;
	__u64 end;
	__u64 bias;	/* run-time address minus the table's */
	__u64 inode;	/* of the mapped file; 0: of none (the vDSO) */
};

/* The user callchain entry after the last frame of a cut walk with tables. */
#define OPROFILE_RS_CHAIN_CUT ((__u64)-1024)

#define OPROFILE_RS_IOC_TRACING_ON _IO(OPROFILE_RS_IOC_MAGIC, 1)
#define OPROFILE_RS_IOC_TRACING_OFF _IO(OPROFILE_RS_IOC_MAGIC, 2)
#define OPROFILE_RS_IOC_FLUSH _IO(OPROFILE_RS_IOC_MAGIC, 3)
#define OPROFILE_RS_IOC_GET_TRACING _IOR(OPROFILE_RS_IOC_MAGIC, 4, __u32)
#define OPROFILE_RS_IOC_CONSUME _IOW(OPROFILE_RS_IOC_MAGIC, 5, struct oprofile_rs_consume)
#define OPROFILE_RS_IOC_SNAPSHOT _IO(OPROFILE_RS_IOC_MAGIC, 32)
#define OPROFILE_RS_IOC_SET_CONFIG _IOW(OPROFILE_RS_IOC_MAGIC, 33, struct oprofile_rs_config_text)
#define OPROFILE_RS_IOC_GET_CONFIG _IOWR(OPROFILE_RS_IOC_MAGIC, 34, struct oprofile_rs_config_text)
#define OPROFILE_RS_IOC_UNWIND_TABLE _IOW(OPROFILE_RS_IOC_MAGIC, 35, struct oprofile_rs_unwind_table)
#define OPROFILE_RS_IOC_UNWIND_MAP _IOW(OPROFILE_RS_IOC_MAGIC, 36, struct oprofile_rs_unwind_map)
#define OPROFILE_RS_IOC_UNWIND_RESET _IO(OPROFILE_RS_IOC_MAGIC, 37)

/* ------------------------------------------------------------ mmap */

#define OPROFILE_RS_META_VERSION 1

/* The first page of a mapping of the device (Documentation/mmap.md). */
struct oprofile_rs_meta {
	__u32 version;		/* OPROFILE_RS_META_VERSION */
	__u32 meta_size;	/* bytes of this page */
	__u64 data_offset;	/* mmap offset of the ring's data */
	__u64 data_size;	/* bytes of ring storage */
	__u64 head;		/* bytes ever appended (load with acquire) */
	__u64 tail;		/* bytes ever consumed */
	__u64 opening;		/* bytes read() must deliver first; 0 once read */
	__u64 full;		/* appends refused because the ring was full */
};

#endif /* _UAPI_OPROFILE_RS_H */
