#!/bin/sh
# tests/run.sh — run every cmocka test binary given, then print one closing line
# "tests: N passed, N failed" that sums the cmocka groups. Exit 1 if any failed.
passed=0; failed=0; broken=0
for t in "$@"; do
    out=$("$t" 2>&1); rc=$?
    printf '%s\n' "$out"
    # cmocka's summary lines; stdout and stderr may share a line, so no anchor
    p=$(printf '%s\n' "$out" | grep -o '\[  PASSED  \] [0-9][0-9]* test' | awk '{s+=$4} END {print s+0}')
    f=$(printf '%s\n' "$out" | grep -o '\[  FAILED  \] [0-9][0-9]* test' | awk '{s+=$4} END {print s+0}')
    passed=$((passed + p)); failed=$((failed + f))
    if [ $rc -ne 0 ] && [ "$f" -eq 0 ]; then
        echo "$t: exited with status $rc outside any test" >&2
        broken=$((broken + 1)); failed=$((failed + 1))
    fi
done
echo "tests: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
