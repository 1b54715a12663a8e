// SPDX-License-Identifier: GPL-2.0
/*
 * C glue for oprofile_rs: only kernel inline functions and macros that Rust
 * cannot reach through bindings. Each helper is a one-line forwarder.
 */
#include <linux/hardirq.h>

#include "glue.h"

/* in_nmi() is a macro over preempt_count(). */
bool oprofile_rs_in_nmi(void)
{
	return in_nmi();
}
