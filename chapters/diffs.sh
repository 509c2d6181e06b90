#!/bin/sh
# chapters/diffs.sh — keep chapters/README.md from going stale.
#
# Run by `make chapters` after the chapter programs are built (or by hand from
# anywhere). It
#   1. writes chapters/diffs/A_to_B.diff (diff -u) for each consecutive pair of
#      the reading order below and prints each diff's size;
#   2. rewrites the block between <!-- diffs:begin --> and <!-- diffs:end --> of
#      chapters/README.md with those sizes;
#   3. runs every bin/chapters/NN_name, reads its "cost ..." line, and rewrites
#      the block between <!-- costs:begin --> and <!-- costs:end --> with the
#      chapter's comparison table and the numbers the programs computed.
# Needs only POSIX sh, diff, awk.
set -eu

cd "$(dirname "$0")/.."
readme=chapters/README.md

# The reading order, as "tag:file". The two chapter-6 programs share a number,
# so their tags carry the name. 06_hybrid follows 06_kda: it keeps KDA's step
# and brings back chapter 1's attention as every fourth layer.
order="01:01_softmax_attention 02:02_linear_attention 03:03_deltanet 04:04_chunkwise
05:05_gated_deltanet 06_kda:06_kda 06_hybrid:06_hybrid"
# A branch off the order, diffed against the chapter it generalises.
branches="06_kda:06_kda:07_dplr:07_dplr"

# What each consecutive diff shows (one line each, in order).
topics='01 -> 02: the softmax goes; the cache of keys and values folds into one K x V state S
02 -> 03: the delta rule: write beta (v - S^T k), the error, instead of v
03 -> 04: the chunkwise form: A_kk, the UT transform (I + A_kk)^-1 Diag(beta), W, U, V_new
04 -> 05: a scalar decay alpha = exp(g): the state fades, the chunk gets the gamma_i/gamma_j mask
05 -> 06_kda: alpha becomes a K-vector a; the mask becomes rescaled q~, k~ per sub-chunk
06_kda -> 06_hybrid: the chunk step goes; attention returns as layer 4 of a 3:1 stack
06_kda -> 07_dplr: the boundary: the low-rank term b a^T is given; the chunk: four products, one solve'

mkdir -p chapters/diffs
rows=""
n=0
# pair PREV_TAG PREV_FILE TAG FILE: write the diff, print its size, add its
# table row (the n-th topic line)
pair() {
    n=$((n + 1))
    out="chapters/diffs/${1}_to_${3}.diff"
    rc=0
    diff -u --label "chapters/$2.c" --label "chapters/$4.c" \
        "chapters/$2.c" "chapters/$4.c" > "$out" || rc=$?
    [ "$rc" -le 1 ] || { echo "diffs.sh: diff failed on $2 -> $4" >&2; exit 1; }
    total=$(wc -l < "$out" | tr -d ' ')
    plus=$(grep -c '^+[^+]' "$out" || true)
    minus=$(grep -c '^-[^-]' "$out" || true)
    plus_empty=$(grep -c '^+$' "$out" || true)
    minus_empty=$(grep -c '^-$' "$out" || true)
    plus=$((plus + plus_empty)); minus=$((minus + minus_empty))
    topic=$(printf '%s\n' "$topics" | sed -n "${n}p" | sed 's/^[^:]*: //')
    printf '%-28s %4d lines  (+%d -%d)\n' "${1}_to_${3}.diff" "$total" "$plus" "$minus"
    rows="$rows| [\`${1}_to_${3}.diff\`](diffs/${1}_to_${3}.diff) | $total | +$plus −$minus | $topic |
"
}
prev_tag=""; prev_file=""
for entry in $order; do
    tag=${entry%%:*}; file=${entry#*:}
    [ -z "$prev_tag" ] || pair "$prev_tag" "$prev_file" "$tag" "$file"
    prev_tag=$tag; prev_file=$file
done
for b in $branches; do
    IFS=: read -r t1 f1 t2 f2 <<EOF2
$b
EOF2
    pair "$t1" "$f1" "$t2" "$f2"
done

# Replace the lines strictly between "<!-- NAME:begin -->" and "<!-- NAME:end -->".
replace_block() {
    name=$1; body_file=$2
    [ -f "$readme" ] || { echo "diffs.sh: $readme missing, block $name not written" >&2; return 0; }
    grep -q "<!-- $name:begin -->" "$readme" || { echo "diffs.sh: no $name block in $readme" >&2; return 0; }
    awk -v name="$name" -v body="$body_file" '
        $0 == "<!-- " name ":begin -->" { print; while ((getline line < body) > 0) print line; skip = 1; next }
        $0 == "<!-- " name ":end -->"   { skip = 0 }
        !skip { print }' "$readme" > "$readme.tmp" && mv "$readme.tmp" "$readme"
}

tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
{
    echo "| diff | lines | changed | what it shows |"
    echo "|---|---:|---:|---|"
    printf '%s' "$rows"
} > "$tmp"
replace_block diffs "$tmp"

# The comparison table: the chapter's qualitative columns, then the numbers the
# chapter programs print on their "cost" line.
qual='01_softmax_attention|01 · softmax attention|O(N), grows|O(N d)|n/a: nothing is overwritten|no|exact, unbounded
02_linear_attention|02 · linear attention|K × V|O(K V)|no|no|none: no decay
03_deltanet|03 · DeltaNet|K × V|O(K V)|yes, rank one|no|none
04_chunkwise|04 · DeltaNet, chunkwise|K × V|O(K V)|yes, rank one|no|none (same layer, C tokens at a time)
05_gated_deltanet|05 · Gated DeltaNet|K × V|O(K V)|yes|yes, alpha → 0|one, shared
06_kda|06 · KDA|K × V|O(K V)|yes|yes, per channel|K, independent
06_hybrid|06 · KDA + attention hybrid (3:1)|3 fixed, 1 growing|¼ O(N d)|yes|yes|K plus exact
07_dplr|07 · the DPLR boundary (given a, b)|K × V|O(K V)|yes, any rank-one term|yes, per channel|K, independent'

{
    echo "| chapter | state per layer | read per token | can target one fact? | can bulk-clear? | timescales | state bytes, K = V = 128, 8k context | flops per token at 8k | cache bytes per token of context |"
    echo "|---|---|---|---|---|---|---:|---:|---:|"
    printf '%s\n' "$qual" | while IFS='|' read -r file label state read target clear scales; do
        bin="bin/chapters/$file"
        if [ -x "$bin" ]; then
            cost=$("$bin" | awk '$1 == "cost" {
                for (i = 2; i < NF; i++) v[$i] = $(i + 1)
                printf "%s %s %s", v["state_bytes"], v["flops_per_token"], v["cache_bytes_per_token"] }')
        else
            cost=""
        fi
        if [ -z "$cost" ]; then
            echo "diffs.sh: $bin missing or printed no cost line" >&2
            echo "| $label | $state | $read | $target | $clear | $scales | ? | ? | ? |"
            continue
        fi
        echo "$cost" | awk -v pre="| $label | $state | $read | $target | $clear | $scales |" '
            function human(b) {
                if (b >= 1048576) return sprintf("%.3g MiB", b / 1048576)
                if (b >= 1024)    return sprintf("%.3g KiB", b / 1024)
                return sprintf("%d B", b)
            }
            function group(x,   s) {   # 1234567 -> 1,234,567
                s = sprintf("%d", x)
                while (s ~ /[0-9][0-9][0-9][0-9]/) sub(/[0-9][0-9][0-9]($|,)/, ",&", s)
                return s
            }
            { printf "%s %s (%s) | %s | %s |\n", pre, group($1), human($1), group($2), group($3) }'
    done
} > "$tmp"
replace_block costs "$tmp"
