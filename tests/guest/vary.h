// SPDX-License-Identifier: GPL-2.0
/*
 * next_count(BASE, SPAN): a count in [BASE, BASE + SPAN) that varies from
 * call to call (xorshift64 with a fixed seed: every run does the same
 * work). The workloads whose profile is known by construction (ustack.c,
 * leafcall.c) vary the length of their rounds with it, so that the rounds
 * do not keep the samples at a few fixed places of them: with a fixed
 * length close to a divisor of the sampling period the split came out at
 * 64 % where 75 % is built in.
 */
static unsigned long next_count(unsigned long base, unsigned long span)
{
	static unsigned long x = 0x9e3779b97f4a7c15ul;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return base + x % span;
}
