#!/bin/sh
# tests/run.sh — run every cmocka test binary given, then print one closing line
# "tests: N passed, N failed" that sums the cmocka groups and, when $PYTEST is
# set, the pytest run it names. Exit 1 if any failed.
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
# the Python module's pytest suite, when $PYTEST names it: its summary line
# ("N passed, M skipped" or "N failed, M passed") joins the count
if [ -n "${PYTEST:-}" ]; then
    out=$($PYTEST 2>&1); rc=$?
    printf '%s\n' "$out"
    last=$(printf '%s\n' "$out" | tail -n 1)
    p=$(printf '%s\n' "$last" | grep -o '[0-9][0-9]* passed' | awk '{print $1}')
    f=$(printf '%s\n' "$last" | grep -o '[0-9][0-9]* failed' | awk '{print $1}')
    e=$(printf '%s\n' "$last" | grep -o '[0-9][0-9]* error' | awk '{print $1}')
    passed=$((passed + ${p:-0})); failed=$((failed + ${f:-0} + ${e:-0}))
    if [ $rc -ne 0 ] && [ "${f:-0}" -eq 0 ] && [ "${e:-0}" -eq 0 ]; then
        echo "pytest: exited with status $rc outside any test" >&2
        broken=$((broken + 1)); failed=$((failed + 1))
    fi
fi
echo "tests: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
