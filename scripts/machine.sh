#!/bin/sh
# scripts/machine.sh — the machine a run measured on, for the results page and
# the figures whose numbers depend on it.
#
#   sh scripts/machine.sh BIN OUT     writes OUT/machine.txt
#
# One "key=value" per line: cpu (the model name of /proc/cpuinfo), then what
# BIN/kdalab info says (simd_level, cpu_family, cpu_model, cpu_features,
# cpus_online, threads, blas_kernels), the kernel and the date. A missing
# /proc/cpuinfo or kdalab leaves its lines out.
set -eu
bin=${1:-bin}
out=${2:-results}
mkdir -p "$out"
tmp="$out/machine.txt.tmp"
info=""
if [ -x "$bin/kdalab" ]; then
    info=$("$bin/kdalab" info | grep -v '^version=' || true)
fi
{
    # the cpu line once: kdalab info's when it prints one, else /proc/cpuinfo's
    if ! printf '%s\n' "$info" | grep -q '^cpu=' && [ -r /proc/cpuinfo ]; then
        sed -n 's/^model name[[:space:]]*:[[:space:]]*//p' /proc/cpuinfo | head -n 1 | sed 's/^/cpu=/'
    fi
    [ -n "$info" ] && printf '%s\n' "$info"
    echo "kernel=$(uname -srm)"
    echo "date=$(date -u '+%Y-%m-%d %H:%M UTC')"
} > "$tmp"
mv "$tmp" "$out/machine.txt"
