// SPDX-License-Identifier: GPL-2.0
/*
 * The marker of scripts/icount-profile: `mark begin` and `mark end` run the
 * two functions whose addresses open and close the plugin's window. Linked
 * far from the other static programs (-Ttext-segment), so that no other
 * code of the guest runs at those addresses.
 */
#include <string.h>

__attribute__((noinline)) void icount_window_begin(void)
{
	__asm__ volatile("nop" ::: "memory");
}

__attribute__((noinline)) void icount_window_end(void)
{
	__asm__ volatile("nop" ::: "memory");
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "end"))
		icount_window_end();
	else
		icount_window_begin();
	return 0;
}
