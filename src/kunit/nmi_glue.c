// SPDX-License-Identifier: GPL-2.0
/*
 * C glue of the KUnit suites' NMI writers (src/kunit/nmi.rs): kernel macros
 * and inline functions Rust cannot reach. Built only with the suites
 * (OPROFILE_RS_KUNIT=1): the module itself registers no NMI handler and
 * sends no IPI.
 */
#include <linux/cpumask.h>
#include <linux/hardirq.h>
#include <linux/list.h>
#include <asm/apic.h>
#include <asm/nmi.h>

#include "nmi_glue.h"

static_assert(sizeof(struct nmiaction) <= OPROFILE_RS_NMIACTION_BYTES);
static_assert(__alignof__(struct nmiaction) <= 8);

/*
 * register_nmi_handler() is a macro that defines a static struct nmiaction;
 * this is its body for an nmiaction in caller (Rust) storage.
 */
int oprofile_rs_nmi_register_local(void *action, int (*handler)(unsigned int, struct pt_regs *),
				   const char *name)
{
	struct nmiaction *a = action;

	*a = (struct nmiaction) {
		.list = LIST_HEAD_INIT(a->list),
		.handler = handler,
		.name = name,
	};
	return __register_nmi_handler(NMI_LOCAL, a);
}

/* Not in the generated bindings (asm/nmi.h is not included there). */
void oprofile_rs_nmi_unregister_local(const char *name)
{
	unregister_nmi_handler(NMI_LOCAL, name);
}

/*
 * __apic_send_IPI_mask() is inline (a static call). The mask variant is the
 * one that delivers NMI_VECTOR as an NMI with every APIC driver, also to the
 * sending CPU itself (x2apic's send_IPI_self cannot send NMIs).
 */
void oprofile_rs_send_nmi(unsigned int cpu)
{
	__apic_send_IPI_mask(cpumask_of(cpu), NMI_VECTOR);
}

/* in_nmi() is a macro over preempt_count(). */
bool oprofile_rs_in_nmi(void)
{
	return in_nmi();
}
