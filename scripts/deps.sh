#!/bin/sh
# scripts/deps.sh — make sure the Debian packages kdalab needs are present.
#
# Run by `make` before it builds anything. As root, installs what is missing
# with apt-get; otherwise prints one line naming the packages and fails.
#   libgsl-dev     random numbers, statistics, fits, reference linear algebra
#   libcmocka-dev  the test framework
#   gnuplot-nox    the plots of `make run`
#   clang          only for `make fuzz` (libFuzzer), requested with --fuzz
set -eu

missing=""
have_header() { printf '#include <%s>\n' "$1" | ${CC:-cc} -E -x c - >/dev/null 2>&1; }

have_header gsl/gsl_rng.h || missing="$missing libgsl-dev"
printf '#include <stdarg.h>\n#include <stddef.h>\n#include <stdint.h>\n#include <setjmp.h>\n#include <cmocka.h>\n' \
    | ${CC:-cc} -E -x c - >/dev/null 2>&1 || missing="$missing libcmocka-dev"
command -v gnuplot >/dev/null 2>&1 || missing="$missing gnuplot-nox"
if [ "${1:-}" = "--fuzz" ]; then
    command -v clang >/dev/null 2>&1 || missing="$missing clang"
    # libFuzzer's runtime ships in libclang-rt-*-dev
    echo 'int LLVMFuzzerTestOneInput(const unsigned char*d,unsigned long n){(void)d;(void)n;return 0;}' \
        | clang -fsanitize=fuzzer -x c - -o /dev/null >/dev/null 2>&1 || missing="$missing libclang-rt-dev"
fi

[ -z "$missing" ] && exit 0

if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "deps: installing$missing" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    # shellcheck disable=SC2086
    apt-get install -y -qq --no-install-recommends $missing >/dev/null
    exit 0
fi

echo "kdalab needs Debian packages:$missing — run: sudo apt-get install$missing" >&2
exit 1
