#!/bin/sh
# scripts/check_layout.sh — the layout promises a reader relies on, checked
# (run by `make test`; exits 1 with one line per broken promise):
#   1. every function declared in a public header (lib/kdalab*.h) has exactly
#      one definition that `grep -n '^[a-z].*\bNAME('` finds in a lib/ .c file;
#   2. every symbol libkdalab.so exports is declared in a public header;
#   3. no .c or .h file in lib/, tools/, experiments/ or tests/ is longer than 600 lines;
#   4. the generated float32 twins (scripts/make_f32.sh) are up to date;
#   5. every global symbol of the static library carries the kdalab_ prefix
#      (internal ones kdalab__), so a C program linking it cannot collide;
#   6. every public function that can fail (one returning a kdalab_status, and
#      kdalab_kv_cache_new) begins with kdalab_clear_error(), so that
#      kdalab_last_error() never holds an earlier call's message.
# usage: scripts/check_layout.sh [path/to/libkdalab.so]
so=${1:-build/libkdalab.so}
a=${so%.so}.a
cc=${CC:-cc}
bad=0
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT

# the public API as the compiler sees it: names followed by '(' in the headers
# (but not by "(*": the return type of a function-pointer typedef)
$cc -E -P -Ilib lib/kdalab.h | sed 's/([ ]*\*/<pointer>/g' | grep -o '\bkdalab_[a-z0-9_]*[ ]*(' \
    | tr -d ' (' | sort -u > "$tmp/declared"
[ -s "$tmp/declared" ] || { echo "layout: no public declarations found" >&2; exit 1; }

lib_c=$(find lib -name '*.c' | sort)
while read -r name; do
    n=$(grep -n "^[a-z].*\b$name(" $lib_c | grep -v ';[[:space:]]*$' | wc -l)
    if [ "$n" -ne 1 ]; then
        echo "layout: $name has $n definitions found by grep '^[a-z].*\\b$name(' in lib/ (want 1)"
        bad=1
    fi
done < "$tmp/declared"

# the functions that report through kdalab_last_error: their first statement
# (after the '{' that starts a line, blank and // lines skipped) clears it
{ $cc -E -P -Ilib lib/kdalab.h | tr '\n' ' ' | grep -o 'kdalab_status[ ]*kdalab_[a-z0-9_]*[ ]*(' \
      | sed 's/^kdalab_status[ ]*//' | tr -d ' ('; echo kdalab_kv_cache_new; } | sort -u \
    > "$tmp/can_fail"
while read -r name; do
    at=$(grep -n "^[a-z].*\b$name(" $lib_c | grep -v ';[[:space:]]*$' | head -n 1)
    [ -n "$at" ] || continue # reported above
    file=${at%%:*} rest=${at#*:}
    first=$(awk -v from="${rest%%:*}" 'NR < from { next }
        !open && /^\{/ { open = 1; next }
        open && /^[ \t]*(\/\/.*)?$/ { next }
        open { sub(/^[ \t]+/, ""); print; exit }' "$file")
    if [ "$first" != "kdalab_clear_error();" ]; then
        echo "layout: $name ($file) does not begin with kdalab_clear_error(); but with '$first'"
        bad=1
    fi
done < "$tmp/can_fail"

if [ -f "$so" ]; then
    nm -D --defined-only "$so" | awk '$2 ~ /^[TDBR]$/ {print $3}' | sort -u > "$tmp/exported"
    for name in $(comm -23 "$tmp/exported" "$tmp/declared"); do
        echo "layout: $so exports $name, which no public header declares"
        bad=1
    done
else
    echo "layout: $so not built; export check skipped" >&2
fi

if [ -f "$a" ]; then
    # (names starting with __ are the compiler's: AddressSanitizer's __odr_asan.*)
    for name in $(nm -g --defined-only "$a" | awk 'NF == 3 && $3 !~ /^kdalab_/ && $3 !~ /^__/ {print $3}' | sort -u); do
        echo "layout: $a defines the global symbol $name without the kdalab_ prefix"
        bad=1
    done
else
    echo "layout: $a not built; symbol prefix check skipped" >&2
fi

for f in $(find lib tools experiments tests -name '*.[ch]' | sort); do
    n=$(wc -l < "$f")
    if [ "$n" -gt 600 ]; then
        echo "layout: $f has $n lines (at most 600)"
        bad=1
    fi
done

sh scripts/make_f32.sh "$tmp/f32"
for f in "$tmp"/f32/*/*; do
    name=${f#"$tmp"/f32/}
    if ! cmp -s "$f" "lib/$name"; then
        echo "layout: lib/$name is not what scripts/make_f32.sh generates (run make f32)"
        bad=1
    fi
done

if [ "$bad" -eq 0 ]; then
    echo "layout: $(wc -l < "$tmp/declared") public functions, one definition each, the $(wc -l < "$tmp/can_fail") that can fail clearing kdalab_last_error first; exports = declarations; every global symbol kdalab_-prefixed; no file over 600 lines; float32 twins up to date"
fi
exit "$bad"
