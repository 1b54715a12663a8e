# shellcheck shell=bash
# Common settings for oprofile-rs scripts. Source it; do not run it.
#
# Everything downloaded or built lives outside the repository, under
# $OPROFILE_RS_CACHE (default ~/.cache/oprofile-rs):
#   tools/      bindgen (cargo install --root), libclang venv
#   apt/        private apt state used to fetch Debian's linux-source-7.3
#   src/        the unpacked kernel source tree
#   kernel/     one build directory per variant, keyed by kernel version,
#               config fragment and rustc version
#   debian/     Debian's stock kernels: a trixie chroot (trixie-root/, on
#               non-trixie hosts) and per release its Rust metadata build

set -euo pipefail
shopt -s nullglob

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE=${OPROFILE_RS_CACHE:-$HOME/.cache/oprofile-rs}
TOOLS=$CACHE/tools
BINDGEN_VERSION=0.73.2
LIBCLANG_VERSION=18.1.1
KERNEL_PACKAGE=linux-source-7.3
# Debian's stock kernel the rig also tests on (scripts/vm-run --kernel stock;
# scripts/build-module-debian prepares it in $CACHE/debian/RELEASE/).
DEBIAN_STOCK_RELEASE=${OPROFILE_RS_STOCK_RELEASE:-7.3.4+deb13-amd64}
JOBS=${JOBS:-$(nproc)}

export PATH=$TOOLS/bin:$HOME/.cargo/bin:$PATH
export LIBCLANG_PATH=$TOOLS/venv/lib/python3.11/site-packages/clang/native

log() { printf '\033[1m[oprofile-rs]\033[0m %s\n' "$*" >&2; }
die() { printf '\033[1;31m[oprofile-rs] error:\033[0m %s\n' "$*" >&2; exit 1; }

# The unpacked kernel source directory (set up by scripts/setup).
kernel_src() {
    local d
    d=$(cat "$CACHE/src/CURRENT" 2>/dev/null) || die "kernel source missing: run scripts/setup"
    [ -f "$d/Makefile" ] || die "kernel source $d is incomplete: rm -rf $CACHE/src and run scripts/setup"
    echo "$d"
}

# Build directory for a kernel variant ("normal" or "debug"): a hash of
# everything that changes the result, so a change to any of them builds anew
# and an unchanged set rebuilds nothing.
kernel_build_dir() {
    local variant=$1 src key
    src=$(kernel_src)
    key=$( {
        basename "$src"; head -5 "$src/Makefile"
        cat "$REPO/scripts/kernel/base.config"
        [ "$variant" = debug ] && cat "$REPO/scripts/kernel/debug.config"
        rustc --version
        gcc --version | head -1
        echo "$BINDGEN_VERSION"
    } | sha256sum | cut -c1-12)
    echo "$CACHE/kernel/$variant-$(basename "$src")-$key"
}

# A short key of this checkout's path: build outputs are kept per checkout, so
# that two clones never share (and never take for up to date) object files
# built from the other's sources.
checkout_key() {
    printf %s "$REPO" | sha1sum | cut -c1-8
}

# module_build_dir KERNEL_BUILD_DIR [--kunit]: where scripts/build-module puts
# the module built from this checkout against that kernel (one directory per
# kernel, checkout and variant).
module_build_dir() {
    echo "$CACHE/module/$(basename "$1")${2:+-kunit}-$(checkout_key)"
}

# guest_bins: builds the guest programs (tests/guest/*.c, static) of this
# checkout into their own directory (two checkouts sharing a cache never
# run each other's) and prints that directory. A program's own compiler
# flags follow `// cflags:` on a line of its own (e.g. frame pointers).
guest_bins() {
    local dir=$CACHE/guest-bin/$(checkout_key) c
    mkdir -p "$dir"
    for c in "$REPO"/tests/guest/*.c; do
        # shellcheck disable=SC2046 # the flags are words
        gcc -static -O2 -Wall -Werror $(sed -n 's|^// cflags: ||p' "$c" | head -1) \
            -o "$dir/$(basename "$c" .c)" "$c" || die "building $c failed"
    done
    echo "$dir"
}

# Cargo's target directory for this checkout (outside the repository).
cargo_target_dir() {
    echo "$CACHE/target/$(checkout_key)"
}
