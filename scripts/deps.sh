#!/bin/sh
# scripts/deps.sh — make sure the Debian packages a make target needs are present.
#
#   sh scripts/deps.sh build   libgsl-dev, libopenblas-dev (the library, tools,
#                              experiments; OpenBLAS is the models' CBLAS)
#   sh scripts/deps.sh test    + libcmocka-dev, python3-numpy, python3-pytest,
#                              python3-setuptools (the test suite, the Python module),
#                              parallel (GNU parallel: a sweep's jobs)
#   sh scripts/deps.sh run     + gnuplot-nox   (the plots of `make run`)
#   sh scripts/deps.sh fuzz    + clang, libclang-rt-dev (libFuzzer)
#
# The chapter programs need none of them. As root, installs what is missing
# with apt-get; otherwise prints one line naming the packages and fails.
set -eu

what=${1:-build}
missing=""
cc=${CC:-cc}
have_header() { printf '%s\n' "$1" | $cc -E -x c - >/dev/null 2>&1; }

have_header '#include <gsl/gsl_rng.h>' || missing="$missing libgsl-dev"
echo 'int main(void){return 0;}' | $cc -x c - -lopenblas -o /dev/null >/dev/null 2>&1 ||
    missing="$missing libopenblas-dev"
if [ "$what" = test ]; then
    have_header '#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>' || missing="$missing libcmocka-dev"
    py=${PYTHON:-python3}
    $py -c 'import numpy' >/dev/null 2>&1 || missing="$missing python3-numpy"
    $py -c 'import pytest' >/dev/null 2>&1 || missing="$missing python3-pytest"
    $py -c 'import setuptools' >/dev/null 2>&1 || missing="$missing python3-setuptools"
    command -v parallel >/dev/null 2>&1 || missing="$missing parallel"
fi
if [ "$what" = run ]; then
    command -v gnuplot >/dev/null 2>&1 || missing="$missing gnuplot-nox"
fi
if [ "$what" = fuzz ]; then
    command -v clang >/dev/null 2>&1 || missing="$missing clang"
    # libFuzzer's runtime ships in libclang-rt-*-dev
    echo 'int LLVMFuzzerTestOneInput(const unsigned char*d,unsigned long n){(void)d;(void)n;return 0;}' \
        | clang -fsanitize=fuzzer -x c - -o /dev/null >/dev/null 2>&1 || missing="$missing libclang-rt-dev"
fi

[ -z "$missing" ] && exit 0

if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "deps: installing$missing" >&2
    export DEBIAN_FRONTEND=noninteractive
    # another apt-get holding the package lock is waited for (up to 10 minutes),
    # not an error
    lock="-o DPkg::Lock::Timeout=600"
    # shellcheck disable=SC2086
    apt-get $lock update -qq >/dev/null
    # shellcheck disable=SC2086
    apt-get $lock install -y -qq --no-install-recommends $missing >/dev/null
    exit 0
fi

echo "kdalab needs Debian packages:$missing — run: sudo apt-get install$missing" >&2
exit 1
