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

# Every script that sources this answers --help (or -h) as its first argument
# with its opening comment and does nothing else (a `source` without
# arguments sees the script's own).
if [ "${1:-}" = --help ] || [ "${1:-}" = -h ]; then
    sed -n '2,/^[^#]/{ /^#/!q; s/^# \{0,1\}//p }' "$0"; exit 0
fi
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

# The Debian mirror the system already uses (its first non-security one),
# without a trailing slash; Debian's own if there is none.
debian_mirror() {
    local m
    m=$( { grep -hE '^(URIs:|deb )' /etc/apt/sources.list /etc/apt/sources.list.d/*.sources \
            /etc/apt/sources.list.d/*.list 2>/dev/null || true; } \
         | grep -oE 'https?://[^ ]+' | grep -v security | head -1)
    m=${m:-http://deb.debian.org/debian}
    echo "${m%/}"
}

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

# guest_bin SOURCE.c DIR: builds the guest program SOURCE.c, static, into
# DIR/SOURCE, with include/uapi on the include path (the programs take the
# device's interface from oprofile_rs.h). A program's own compiler flags
# follow `// cflags:` on a line of its own (e.g. frame pointers). A line
# `// dynamic: [LIB...]` links it dynamically instead, against the guest
# libraries LIB (tests/guest/lib/LIB.c, built by guest_lib into DIR/LIB.so
# first), with the rpath $ORIGIN: in the guest, it and they are in /tmp,
# and scripts/vm-run carries the host's loader and C library it needs. The
# program is replaced in one rename: a run of this checkout packing DIR
# meanwhile (another script's vm-run) gets the old one or the new one, never
# a file being written.
guest_bin() {
    local out link=(-static) l
    out=$2/$(basename "$1" .c)
    if grep -q '^// dynamic:' "$1"; then
        # shellcheck disable=SC2016 # $ORIGIN is the loader's, not the shell's
        link=(-L "$2" -Wl,-rpath,'$ORIGIN')
        for l in $(sed -n 's|^// dynamic:||p' "$1" | head -1); do link+=("-l${l#lib}"); done
    fi
    # shellcheck disable=SC2046 # the flags are words
    gcc -O2 -Wall -Werror -I "$REPO/include/uapi" $(sed -n 's|^// cflags: ||p' "$1" | head -1) \
        -o "$out.new.$$" "$1" "${link[@]}" || { rm -f "$out.new.$$"; die "building $1 failed"; }
    mv -f "$out.new.$$" "$out"
}

# guest_lib SOURCE.c DIR: builds the guest shared library SOURCE.c
# (tests/guest/lib/NAME.c, with its `// cflags:`) into DIR/NAME.so, -fPIC,
# its soname NAME.so; replaced in one rename, as guest_bin's programs.
guest_lib() {
    local name out
    name=$(basename "$1" .c).so out=$2/$(basename "$1" .c).so
    # shellcheck disable=SC2046 # the flags are words
    gcc -O2 -Wall -Werror -fPIC -shared -Wl,-soname,"$name" $(sed -n 's|^// cflags: ||p' "$1" | head -1) \
        -o "$out.new.$$" "$1" || { rm -f "$out.new.$$"; die "building $1 failed"; }
    mv -f "$out.new.$$" "$out"
}

# guest_bins: builds the guest libraries (tests/guest/lib/*.c: DIR/NAME.so)
# and programs (tests/guest/*.c) of this checkout into their own directory
# (two checkouts sharing a cache never run each other's) and prints that
# directory.
guest_bins() {
    local dir=$CACHE/guest-bin/$(checkout_key) c
    mkdir -p "$dir"
    for c in "$REPO"/tests/guest/lib/*.c; do guest_lib "$c" "$dir"; done
    for c in "$REPO"/tests/guest/*.c; do guest_bin "$c" "$dir"; done
    echo "$dir"
}

# work_dir: makes $work, a temporary directory removed when the script exits.
work_dir() {
    work=$(mktemp -d "${TMPDIR:-/tmp}/$(basename "$0").XXXXXX")
    trap 'rm -rf "$work"' EXIT
}

# guest_script FILE [NAME=VALUE]...: writes FILE, a script for the test VM
# that sets those variables, sources tests/guest/lib.sh (give vm-run
# `--add "$REPO/tests/guest/lib.sh"`) and goes on with the text on stdin.
guest_script() {
    local file=$1 v
    shift
    {
        echo '#!/bin/sh'
        for v in "$@"; do printf '%s=%q\n' "${v%%=*}" "${v#*=}"; done   # busybox sh reads %q's quoting
        echo '. /tmp/lib.sh'
        cat
    } >"$file"
}

# receive_files DIR: copies a scripts/vm-run's output from stdin to stdout,
# except the files the guest handed over with send_file (tests/guest/lib.sh):
# those it writes into DIR. A name other than letters, digits, '.', '_' and
# '-' (a path, a quote: it would leave DIR or reach the shell) is not written.
receive_files() {
    mkdir -p "$1"
    awk -v dir="$1" '
        /^=== FILE / && $3 ~ /^[A-Za-z0-9_][A-Za-z0-9._-]*$/ && NF == 3 {
                       f = dir "/" $3; cmd = "base64 -d > \"" f "\""; next }
        /^=== FILE /   { print "receive_files: refused the file name " $0 > "/dev/stderr"; skip = 1; next }
        skip && /^=== END$/ { skip = 0; next }
        skip         { next }
        /^=== END$/  { close(cmd); cmd = ""; next }
        cmd != ""    { print | cmd; next }
                     { print; fflush() }'
}

# bad_kernel_log FILE: the lines of the guest kernel log FILE (a console
# log) that show a problem: an oops, BUG, WARNING, lockdep report, a sleep in
# atomic context, a kmemleak report, the debug kernel's hang detectors, a
# failed KUnit test. The patterns are scripts/guest/bad-log-patterns (less
# bad-log-exceptions), which the guest's scenario runner uses too.
bad_kernel_log() {
    grep -naE -f "$REPO/scripts/guest/bad-log-patterns" "$1" \
        | grep -vE -f "$REPO/scripts/guest/bad-log-exceptions" || true
}
# bad_log_excerpt FILE [LINES]: LINES (40) lines of FILE from its first line
# that bad_kernel_log names (the report's head and its call trace).
bad_log_excerpt() {
    local n
    n=$(bad_kernel_log "$1" | head -1 | cut -d: -f1)
    [ -z "$n" ] || sed -n "${n},$((n + ${2:-40}))p" "$1"
}

# need_number NAME VALUE MIN [MAX [UNIT]]: dies unless VALUE is a whole number
# from MIN to MAX (without MAX: at least MIN).
need_number() {
    local name=$1 v=$2 min=$3 max=${4:-} range
    range="$min..$max${5:+ $5}"
    [ -n "$max" ] || range="at least $min"
    [ -n "$max" ] || [ "$min" != 1 ] || range="a positive number"
    [[ $v =~ ^[0-9]+$ ]] && [ "$v" -ge "$min" ] && { [ -z "$max" ] || [ "$v" -le "$max" ]; } \
        || die "$name must be $range, not '$v'"
}

# rig_options ACCEPTED "$@": takes the options that the rig's scripts share,
# those named in ACCEPTED, out of the arguments (up to a `--`), and leaves
# the others, in their order, in the array `args` for the script's own
# parsing (`set -- "${args[@]}"`). Every script that calls it takes --help
# (prints its opening comment). The options, by their name in ACCEPTED:
#   debug       --debug: the lockdep/kmemleak test kernel     kernel=debug
#   stock       --stock: Debian's own kernel                  kernel=stock
#   kernel      --kernel normal|debug|stock                   kernel=KERNEL
#   smp         --smp N: vCPUs (1..8: NR_CPUS=8)              smp=N
#   icount      --icount SHIFT (0..9): guest time counts emulated instructions
#                                                             icount=SHIFT
#   append      --append ARG: kernel command line (repeats)   append=" ARG..."
#   tsc-checks  --tsc-checks: the kernel's TSC checks on      tsc_checks=1
#   period      --period NS: the module's sample_period (10000..1000000000)
#                                                             period=NS
# kernel is "normal" and the others are empty unless given. The kernel and
# boot options (all but --smp and --period) are also collected, as
# scripts/vm-run takes them, in the array `vmopts`.
rig_options() {
    local accepted=" $1 " name
    shift
    kernel=normal smp= icount= append= tsc_checks= period= vmopts=() args=()
    while [ $# -gt 0 ]; do
        name=${1#--}
        if [ "$1" = --help ]; then
            sed -n '2,/^[^#]/{ /^#/!q; s/^# \{0,1\}//p }' "$0"; exit 0
        elif [ "$1" = -- ]; then
            break
        elif [[ $1 != --* || $accepted != *" $name "* ]]; then
            args+=("$1"); shift; continue
        fi
        case $1 in
            --debug) kernel=debug; vmopts+=(--debug) ;;
            --stock) kernel=stock; vmopts+=(--kernel stock) ;;
            --kernel) kernel=${2:?--kernel needs normal, debug or stock}; shift
                      case $kernel in normal|debug|stock) ;; *) die "--kernel must be normal, debug or stock" ;; esac
                      vmopts+=(--kernel "$kernel") ;;
            --smp) smp=${2:?--smp needs a number}; shift
                   need_number --smp "$smp" 1 8 "(the test kernel has NR_CPUS=8)" ;;
            --icount) icount=${2:?--icount needs a shift}; shift
                      need_number --icount "$icount" 0 9; vmopts+=(--icount "$icount") ;;
            --append) append+=" ${2:?--append needs an argument}"; vmopts+=(--append "$2"); shift ;;
            --tsc-checks) tsc_checks=1; vmopts+=(--tsc-checks) ;;
            --period) period=${2:?--period needs ns}; shift
                      need_number --period "$period" 10000 1000000000 "ns (the module's sample_period range)" ;;
        esac
        shift
    done
    args+=("$@")
}

# Cargo's target directory for this checkout (outside the repository). A
# checkout without one starts from a copy of the newest other checkout's:
# cargo keeps the registry crates built there and builds this checkout's own
# crates (their paths differ). A fresh clone's host stages took 14 min
# building every dependency anew. The copy leaves out what this checkout
# cannot use: the incremental caches and, in each deps/, the workspace's
# own crates and every test and program binary (not lib*): of a 16 GB
# target (old test binaries of about 100 MB each, several builds of each),
# 3.4 GB, copied in about 15 s where the whole took 70. The copy waits for
# builds running in that directory (cargo's own locks), and lands whole or
# not at all.
cargo_target_dir() {
    local dir newest cands
    dir=$CACHE/target/$(checkout_key)
    if [ ! -d "$dir" ]; then
        # (nullglob: with no other target the list is empty; `ls -td` of
        # nothing would list the working directory, which a cold run once
        # copied into its target as the "newest" one.)
        cands=("$CACHE"/target/*/debug)
        newest=
        # shellcheck disable=SC2012 # our own directory names: no newlines
        [ ${#cands[@]} -eq 0 ] || newest=$(ls -td "${cands[@]}" | grep -v '\.seed\.' | head -1 || true)
        if [ -n "$newest" ]; then
            newest=$(dirname "$newest")
            log "seeding cargo's target directory for this checkout from $newest (its built dependencies)" >&2
            local locks=() l
            for l in "$newest"/*/.cargo-lock "$newest"/*/*/.cargo-lock; do [ -f "$l" ] && locks+=(flock "$l"); done
            if mkdir -p "$dir.seed.$$" && "${locks[@]}" tar -C "$newest" -cf - --exclude=incremental \
                    --exclude='deps/[!l]*' --exclude='deps/liboprofile*' . | tar -C "$dir.seed.$$" -xf -; then
                mv -T "$dir.seed.$$" "$dir" 2>/dev/null || rm -rf "$dir.seed.$$"
            else
                rm -rf "$dir.seed.$$"
            fi
        fi
    fi
    echo "$dir"
}
