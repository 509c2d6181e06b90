#!/bin/sh
# scripts/check_docs.sh — the documentation's promises, checked (run by
# `make test`; exits 1 with one line per broken promise):
#   1. every relative link in every tracked Markdown file, [text](path) or
#      [text](path#anchor), names a tracked file or a folder holding one, and
#      an anchor into a Markdown file names one of its headings (or <a id>);
#   2. README.md is at most 250 lines (it is a guide; details live in the
#      folder pages it links to);
#   3. README.md's layout table (under "## Layout": rows | `path` | what |)
#      matches the tree: every top-level entry of the tracked tree has a row,
#      every path a row names exists, and a row that names files of its
#      folder by bare name names all of them (a pattern such as `test_*.c`
#      counts for every file it matches);
#   4. no tracked file speaks of how the project was made: the words listed in
#      `words` below, as whole words, appear only in the lines `allowed` lists.
# usage: scripts/check_docs.sh   (from the repository's top folder)
bad=0
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
say() { echo "docs: $*"; bad=1; }

git ls-files > "$tmp/files" 2>/dev/null
[ -s "$tmp/files" ] || { echo "docs: not in a git checkout (git ls-files is empty)" >&2; exit 1; }
# every folder that holds a tracked file, at any depth
awk -F/ '{ p = ""; for (i = 1; i < NF; i++) { p = p $i "/"; print p } }' "$tmp/files" | sort -u > "$tmp/dirs"

exists() {  # a normalised path relative to the top: a tracked file or folder
    grep -qxF -- "$1" "$tmp/files" || grep -qxF -- "${1%/}/" "$tmp/dirs"
}
normalise() {  # resolve . and .. in a relative path
    printf '%s\n' "$1" | awk -F/ '{
        n = 0
        for (i = 1; i <= NF; i++) {
            if ($i == "" || $i == ".") continue
            if ($i == "..") { if (n > 0) n--; else { print "../"; exit } continue }
            s[++n] = $i
        }
        out = ""; for (i = 1; i <= n; i++) out = out (i > 1 ? "/" : "") s[i]
        print out
    }'
}

# ---- 1. links ----------------------------------------------------------------
grep '\.md$' "$tmp/files" | while read -r md; do
    dir=$(dirname "$md")
    # inline links outside code spans: drop `...` first, then take ](target)
    sed 's/`[^`]*`//g' "$md" | grep -o '\]([^) ]*)' | sed 's/^](//; s/)$//' | while read -r target; do
        case "$target" in
            http://*|https://*|mailto:*|'#'*|'') continue ;;
        esac
        path=${target%%#*}
        [ "$dir" = "." ] && full=$path || full=$dir/$path
        norm=$(normalise "$full")
        exists "$norm" || echo "docs: $md links to $target, which is not a tracked file or folder"
    done
done > "$tmp/links"
# an anchor into a Markdown file (its own, or [text](page.md#anchor)) names a
# heading of it, as GitHub makes a heading's anchor (lower case, the text's
# letters, digits, spaces as -, _ and -), or an <a id="..."> in it
python3 - "$tmp/files" >> "$tmp/links" <<'PY'
import os, re, sys
files = set(open(sys.argv[1]).read().split())
anchors = {}
def of(md):
    if md not in anchors:
        text = open(md, encoding="utf-8").read()
        text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
        a = set(re.findall(r'<a id="([^"]+)"', text))
        for h in re.findall(r"^#{1,6}[ \t]+(.+?)[ \t]*#*$", text, flags=re.M):
            h = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", h).lower()
            a.add(re.sub(r"[^\w\- ]", "", h).replace(" ", "-"))
        anchors[md] = a
    return anchors[md]
for md in sorted(f for f in files if f.endswith(".md")):
    text = re.sub(r"`[^`]*`", "", open(md, encoding="utf-8").read())
    for target in re.findall(r"\]\(([^) ]*)\)", text):
        if "#" not in target or re.match(r"(https?|mailto):", target):
            continue
        path, anchor = target.split("#", 1)
        dest = os.path.normpath(os.path.join(os.path.dirname(md), path)) if path else md
        if dest.endswith(".md") and dest in files and anchor not in of(dest):
            print("docs: %s links to %s: %s has no heading or <a id> '%s'"
                  % (md, target, dest, anchor))
PY
[ -s "$tmp/links" ] && { cat "$tmp/links"; bad=1; }

# ---- 2. README length ----------------------------------------------------------
lines=$(wc -l < README.md)
[ "$lines" -le 250 ] || say "README.md has $lines lines (at most 250: move detail to a folder page)"

# ---- 3. the layout table -------------------------------------------------------
# the table under "## Layout", up to the next heading: first column a path
awk '/^## Layout/ { on = 1; next } /^## / { on = 0 } on && /^\| `/' README.md > "$tmp/layout"
[ -s "$tmp/layout" ] || say "README.md has no layout table (a '## Layout' section with rows | \`path\` | what |)"
# the top-level entries each row names in its first column
cut -d'|' -f2 "$tmp/layout" | grep -o '`[^`]*`' | tr -d '`' > "$tmp/first"
# every top-level entry of the tree (files, and folders with a slash)
sed 's|/.*|/|' "$tmp/files" | sort -u | grep -v '^\.' > "$tmp/top"
while read -r entry; do
    grep -qxF -- "$entry" "$tmp/first" || grep -q "^${entry%/}/" "$tmp/first" \
        || say "layout table: no row for $entry"
done < "$tmp/top"
# every path a row names exists (a path from the top when its first part is a
# top-level entry, else inside the row's folder); a row that names files of
# its folder by bare name names all of them
while IFS= read -r row; do
    first=$(printf '%s\n' "$row" | cut -d'|' -f2 | grep -o '`[^`]*`' | head -n 1 | tr -d '`')
    case "$first" in */) folder=$first ;; *) folder= ;; esac
    printf '%s\n' "$row" | cut -d'|' -f3- | grep -o '`[^`]*`' | tr -d '`' | while read -r tok; do
        case "$tok" in *' '*|*'('*|*'$'*|*=*|-*) continue ;; esac
        case "$tok" in
            bin/*|build/*|results/*) continue ;;   # made by make, not tracked
            */*) grep -qxF -- "${tok%%/*}/" "$tmp/top" && p=$tok || p=$folder$tok ;;
            *.*) [ -n "$folder" ] && p=$folder$tok || continue ;;
            *) continue ;;
        esac
        case "$p" in
            results/*|bin/*|build/*) ;;   # made by make, not tracked
            *'*'*|*'?'*)
                re=$(printf '%s' "$p" | sed 's/\./\\./g; s/\*/[^\/]*/g; s/?/[^\/]/g')
                case "$p" in */) ;; *) re="$re\$" ;; esac   # a folder pattern matches what it holds
                grep -q "^$re" "$tmp/files" || echo "docs: layout table names $p, which matches no tracked file" ;;
            *) exists "$(normalise "$p")" || echo "docs: layout table names $p, which is not in the tree" ;;
        esac
    done
    [ -n "$folder" ] || continue
    named=$(printf '%s\n' "$row" | cut -d'|' -f3- | grep -o '`[^`/ ]*\.[^`/ ]*`' | tr -d '`')
    [ -n "$named" ] || continue
    grep "^$folder[^/]*\$" "$tmp/files" | while read -r f; do
        base=${f#"$folder"}
        hit=0
        for n in $named; do
            case "$base" in $n) hit=1 ;; esac
        done
        [ $hit -eq 1 ] || echo "docs: layout table's row for $folder does not name $base"
    done
done < "$tmp/layout" > "$tmp/rows"
[ -s "$tmp/rows" ] && { cat "$tmp/rows"; bad=1; }

# ---- 4. words about how the project was made ---------------------------------
words='\b(sessions?|breakers?|helpers?|new users?)\b'
# file:regex pairs of lines where a listed word is used in its ordinary sense
allowed='scripts/check_docs.sh:.*'
git grep -nIiE "$words" > "$tmp/words" || true
while IFS= read -r hit; do
    file=${hit%%:*}
    ok=0
    for a in $allowed; do
        af=${a%%:*}; ar=${a#*:}
        [ "$file" = "$af" ] && printf '%s\n' "${hit#*:*:}" | grep -qE -- "$ar" && ok=1
    done
    [ $ok -eq 1 ] || echo "docs: $(printf '%s' "$hit" | cut -c1-160)"
done < "$tmp/words" > "$tmp/wordhits"
if [ -s "$tmp/wordhits" ]; then
    cat "$tmp/wordhits"
    echo "docs: the files speak of the product, not of how it was made (history goes to CHANGES.md, in user terms)"
    bad=1
fi

[ $bad -eq 0 ] && echo "docs: links, README length, layout table and wording checked"
exit $bad
