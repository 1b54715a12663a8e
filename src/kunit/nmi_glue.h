/* SPDX-License-Identifier: GPL-2.0 */
/* Functions of nmi_glue.c called from Rust (src/kunit/nmi.rs). */
#ifndef OPROFILE_RS_NMI_GLUE_H
#define OPROFILE_RS_NMI_GLUE_H
#include <linux/types.h>

struct pt_regs;

/* Bytes of caller storage for a struct nmiaction (checked in nmi_glue.c). */
#define OPROFILE_RS_NMIACTION_BYTES 64
int oprofile_rs_nmi_register_local(void *action, int (*handler)(unsigned int, struct pt_regs *),
				   const char *name);
void oprofile_rs_nmi_unregister_local(const char *name);
void oprofile_rs_send_nmi(unsigned int cpu);
bool oprofile_rs_in_nmi(void);

#endif
