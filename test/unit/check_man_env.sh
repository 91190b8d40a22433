#!/bin/sh
# The ENVIRONMENT section of tmx_config(7) must name exactly the variables that
# `tmx_info -c` prints (the configuration table), with the same defaults and what each
# accepts (enumeration words, string length, power of two, range bounds). Exit 77 (skip) if
# tmx_info is not built.
builddir=${TMX_BUILDDIR:-.}
srcdir=${TMX_SRCDIR:-.}
info="$builddir/tools/tmx_info"
man="$srcdir/doc/man/tmx_config.7.md"

if [ ! -x "$info" ]; then
    echo "check_man_env: $info not built; skipping"
    exit 77
fi
if [ ! -r "$man" ]; then
    echo "check_man_env: $man missing" >&2
    exit 1
fi

tmp=${TMPDIR:-/tmp}/check_man_env.$$
mkdir "$tmp" || exit 1
trap 'rm -rf "$tmp"' EXIT

# A user's own TMX_* settings could make tmx_info fail; run it with a clean slate.
for v in $(env | sed -n 's/^\(TMX_[A-Za-z0-9_]*\)=.*/\1/p'); do
    case $v in TMX_BUILDDIR|TMX_SRCDIR) ;; *) unset "$v" ;; esac
done

if ! "$info" -c > "$tmp/info.out"; then
    echo "check_man_env: $info -c failed" >&2
    exit 1
fi
sed -n 's/^\(TMX_[A-Z0-9_]*\)=.*/\1/p' "$tmp/info.out" | sort > "$tmp/info"

# In the ENVIRONMENT section (from "# ENVIRONMENT" to the next top-level heading), a variable
# is documented by a definition term that starts the line with its bold name: **TMX_NAME**.
# Mentions inside descriptions are indented and do not count.
awk '/^# /{ in_env = ($0 ~ /^# ENVIRONMENT/); next } in_env' "$man" |
    sed -n 's/^\*\*\(TMX_[A-Z0-9_]*\)\*\*.*/\1/p' | sort -u > "$tmp/man"

if [ ! -s "$tmp/info" ]; then
    echo "check_man_env: $info -c printed no TMX_ variables" >&2
    exit 1
fi
if ! diff -u "$tmp/info" "$tmp/man" > "$tmp/diff"; then
    echo "check_man_env: tmx_info -c (-) and ENVIRONMENT of tmx_config.7.md (+) differ:" >&2
    cat "$tmp/diff" >&2
    exit 1
fi
# The defaults stated in the page, "(default: X)" on the term line, must be the table's.
awk '/^# default: /{ d = substr($0, 12); if (d == "(empty)") d = "empty" }
     /^TMX_[A-Z0-9_]*=/{ sub(/=.*/, ""); print $0, d }' "$tmp/info.out" | sort > "$tmp/info.dflt"
awk '/^# /{ in_env = ($0 ~ /^# ENVIRONMENT/); next } in_env' "$man" |
    sed -n 's/^\*\*\(TMX_[A-Z0-9_]*\)\*\*.*(default: \([^)]*\)).*/\1 \2/p' |
    sort > "$tmp/man.dflt"
if ! diff -u "$tmp/info.dflt" "$tmp/man.dflt" > "$tmp/diff"; then
    echo "check_man_env: defaults of tmx_info -c (-) and tmx_config.7.md (+) differ:" >&2
    cat "$tmp/diff" >&2
    exit 1
fi
# What the page says a variable accepts, between " = " and "(default: ...)" on the term line,
# must agree with the syntax the table prints (# syntax:): the same words of an enumeration
# (yes|no, auto|yes|no, ...), "at most N characters" for a string of at most N, "power of two"
# where the table asks for one, and every bound of a range (4096..1073741824, >= 1, <= 600)
# among the page's numbers, with k, m and g read as the table reads them (4k, 1g).
awk '/^# syntax: /{ s = substr($0, 12); sub(/^ */, "", s) }
     /^TMX_[A-Z0-9_]*=/{ sub(/=.*/, ""); print $0 "\t" s }' "$tmp/info.out" |
    LC_ALL=C sort > "$tmp/info.syntax"
awk '/^# /{ in_env = ($0 ~ /^# ENVIRONMENT/); next } in_env' "$man" |
    sed -n 's/^\*\*\(TMX_[A-Z0-9_]*\)\*\* = \(.*\) *(default: [^)]*).*/\1\t\2/p' |
    LC_ALL=C sort > "$tmp/man.syntax"
LC_ALL=C join -t "$(printf '\t')" "$tmp/info.syntax" "$tmp/man.syntax" > "$tmp/syntax"
if [ "$(wc -l < "$tmp/syntax")" -ne "$(wc -l < "$tmp/info")" ]; then
    echo "check_man_env: $(wc -l < "$tmp/syntax") of $(wc -l < "$tmp/info") variables have a" \
         "term line '**TMX_NAME** = syntax (default: value)' in tmx_config.7.md" >&2
    exit 1
fi
awk -F '\t' '
    function num(t,    v, u) {
        u = substr(t, length(t), 1)
        v = t + 0
        if (u == "k") v *= 1024
        if (u == "m") v *= 1048576
        if (u == "g") v *= 1073741824
        return sprintf("%.6g", v)
    }
    function bad(why) {
        printf "  %s: tmx_info -c says \"%s\", the page \"%s\": %s\n", $1, $2, $3, why
        nbad++
    }
    {
        tbl = $2; pg = $3
        if (tbl ~ /^[a-z0-9]+(\|[a-z0-9]+)+$/) {            # an enumeration or yes|no
            w = pg; gsub(/[* ]/, "", w)
            if (w != tbl) bad("not the same words")
            next
        }
        if (match(tbl, /^string of at most [0-9]+ characters/)) {
            n = tbl; sub(/^string of at most /, "", n); sub(/ .*/, "", n)
            if (index(pg, "at most " n " characters") == 0) bad("no \"at most " n " characters\"")
            next
        }
        if (index(tbl, "power of two") && !index(pg, "power of two")) bad("no \"power of two\"")
        # the numbers the page states
        split("", have)
        rest = pg
        while (match(rest, /-?[0-9]+(\.[0-9]+)?[kmg]?/)) {
            have[num(substr(rest, RSTART, RLENGTH))] = 1
            rest = substr(rest, RSTART + RLENGTH)
        }
        # the bounds the table states: "A..B", ">= A", "<= B"
        rest = tbl
        while (match(rest, /(-?[0-9.]+\.\.-?[0-9.]+|>= -?[0-9.]+|<= -?[0-9.]+)/)) {
            r = substr(rest, RSTART, RLENGTH); rest = substr(rest, RSTART + RLENGTH)
            gsub(/[<>=]/, "", r); n = split(r, b, /\.\./)
            for (i = 1; i <= n; i++) {
                v = b[i]; gsub(/ /, "", v)
                if (!(num(v) in have)) bad("the bound " v " is not stated")
            }
        }
    }
    END { exit nbad > 0 }' "$tmp/syntax" > "$tmp/syntax.diff"
if [ -s "$tmp/syntax.diff" ]; then
    echo "check_man_env: what tmx_config.7.md says a variable accepts differs from the table:" >&2
    cat "$tmp/syntax.diff" >&2
    exit 1
fi
echo "check_man_env: $(wc -l < "$tmp/info") variables, their defaults and syntax match"
exit 0
