#!/bin/sh
# The ENVIRONMENT section of tmx_config(7) must name exactly the variables that
# `tmx_info -c` prints (the configuration table). Exit 77 (skip) if tmx_info is not built.
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
echo "check_man_env: $(wc -l < "$tmp/info") variables and their defaults match"
exit 0
