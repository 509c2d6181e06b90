#!/bin/sh
# scripts/check_mechanisms.sh — the mechanism table is the only place that
# knows a mechanism by name (run by `make test`; exits 1 with one line per
# offending line). A kernel, check, tool or Python function branches on a
# row's properties (kdalab_mechanism_has_delta, kdalab_mechanism_g_shape /
# _g_width; _lib.TABLE[name]["delta"], ["g"] in Python), never on its id:
#   - C in lib/ and tools/: no ==, !=, <, <=, >, >= or `case` against
#     KDALAB_LINEAR_ATTENTION, KDALAB_DELTANET, KDALAB_GATED_DELTANET,
#     KDALAB_KDA, KDALAB_SIMPLE_GLA or KDALAB_GLA (or the training mixer's
#     KDALAB_MIXER_ kinds of them), outside lib/core/mechanisms.c;
#   - python/kdalab: no == / != / `in` against a mechanism's name string.
# Experiments, benchmarks and tests may choose a mechanism by name (run KDA,
# compare with DeltaNet); they are not scanned.
ids='KDALAB_(MIXER_)?(LINEAR_ATTENTION|DELTANET|GATED_DELTANET|KDA|SIMPLE_GLA|GLA)'
names='"(linear_attention|deltanet|gated_deltanet|kda|simple_gla|gla)"'
bad=0
c_hits=$(grep -nE "(==|!=|<=|>=|[^-]>|<)[[:space:]]*\(?(unsigned\)[[:space:]]*)?$ids\b|\b$ids[[:space:]]*(==|!=|<=|>=|<|>)|case[[:space:]]+$ids\b" \
    $(find lib tools -name '*.[ch]' ! -path lib/core/mechanisms.c | sort))
py_hits=$(grep -nE "(==|!=)[[:space:]]*$names|$names[[:space:]]*(==|!=)|\bin[[:space:]]*\($names" \
    $(find python/kdalab -name '*.py' | sort))
for hit in $c_hits $py_hits; do :; done
if [ -n "$c_hits$py_hits" ]; then
    printf '%s\n%s\n' "$c_hits" "$py_hits" | grep . | while IFS= read -r line; do
        echo "mechanisms: compares a mechanism by name, not by a property of its row: $line"
    done
    bad=1
fi
[ "$bad" -eq 0 ] && echo "mechanisms: no kernel, tool or Python function compares a mechanism's name or id (lib/core/mechanisms.c holds the table)"
exit "$bad"
