/* SPDX-License-Identifier: GPL-2.0 */
/* Functions of glue.c called from Rust (declared there as extern "C"). */
#ifndef OPROFILE_RS_GLUE_H
#define OPROFILE_RS_GLUE_H
#include <linux/types.h>

bool oprofile_rs_in_nmi(void);

#endif
