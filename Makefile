# SPDX-License-Identifier: GPL-2.0
# Out-of-tree build of oprofile_rs.ko, in the style of the Rust-for-Linux
# out-of-tree module template.
#
#   make                       build against the cached test kernel
#                              (scripts/build-kernel builds it if missing)
#   make KDIR=/lib/modules/$(uname -r)/build
#                              build against your own Rust-enabled kernel
#   make MO=DIR                put the build output in DIR (kernel >= 6.13)
#   make CLIPPY=1              also run clippy (warnings are errors in CI)
#   make OPROFILE_RS_KUNIT=1   build the KUnit suites in (they run at insmod)
#   make OPROFILE_RS_BENCH=1   build only the ring-buffer benchmark module
#                              oprofile_rs_bench.ko (scripts/bench-ring)
#   make OPROFILE_RS_KERNEL_ATOMICS=1
#                              the ring core on the kernel crate's atomics
#                              instead of its x86-64 inline assembly

KDIR ?= $(shell scripts/build-kernel normal)
MO ?=

default:
	$(MAKE) -C $(KDIR) M=$(CURDIR) $(if $(MO),MO=$(MO)) modules

clean:
	$(MAKE) -C $(KDIR) M=$(CURDIR) $(if $(MO),MO=$(MO)) clean

rust-analyzer:
	$(MAKE) -C $(KDIR) M=$(CURDIR) rust-analyzer

.PHONY: default clean rust-analyzer
