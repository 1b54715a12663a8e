// SPDX-License-Identifier: GPL-2.0
// cflags: -fomit-frame-pointer -fno-optimize-sibling-calls -fno-ipa-icf -fno-inline
/*
 * libhot.so: the shared library of tests/guest/shlib.c and shlib_dlopen.c
 * (tests/guest/lib/NAME.c is built, -fPIC -shared, into NAME.so beside the
 * guest programs, in the guest's /tmp). Built as distributions build
 * libraries: -O2, no frame pointers, so a frame-pointer walk cannot get
 * out of it and the callers of its hot functions are known only through
 * its .eh_frame.
 *
 * lib_outer(which, n) spins in hot_a (which != 0) or hot_b (which == 0),
 * n rounds: the programs ask for hot_a with three times the rounds of
 * hot_b. lib_outer and the hot functions are called, never jumped to
 * (-fno-optimize-sibling-calls), so each keeps its frame on the stack; the
 * hot functions are the library's own (hidden: no PLT, no interposition)
 * and stay functions of their own (noipa: not inlined, cloned or merged).
 */
volatile unsigned long hot_sink;

__attribute__((noipa, visibility("hidden"))) void hot_a(unsigned long n)
{
	for (unsigned long i = 0; i < n; i++)
		hot_sink += i * 7;
}

__attribute__((noipa, visibility("hidden"))) void hot_b(unsigned long n)
{
	for (unsigned long i = 0; i < n; i++)
		hot_sink += i * 11;
}

__attribute__((noipa)) void lib_outer(int which, unsigned long n)
{
	if (which)
		hot_a(n);
	else
		hot_b(n);
	__asm__ volatile("" ::: "memory");
}
