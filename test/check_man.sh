#!/usr/bin/env bash
# Checks the man pages (doc/man/*.md, converted by doc/md2man.awk):
#   1. every page converts, its front matter matches its file name (title, section), and
#      groff -ww finds nothing to warn about in the result (when groff is installed);
#   2. every page is built into doc/man/manN/ of the build tree (listed in
#      doc/Makefile.include, so `make install` installs it);
#   3. every tmx page a page refers to, as *name*(N) or **name**(N), exists: a page of that
#      name and section, or for section 3 a function of the public headers;
#   4. the converter refuses a page without front matter;
#   5. it converts a page with every construct and with what roff reads specially (leading
#      dots and quotes, backslashes, non-ASCII) into roff that groff -ww takes silently;
#   6. the OUTPUT samples of tmx_pingpong(1) and tmx_alltoall(1) have the shape of what the
#      programs print with the defaults: the same comment lines (numbers aside) and, for
#      tmx_alltoall, the same lines in the same order with the same keys.
# Run by `make check` (TMX_BUILDDIR, TMX_SRCDIR set); exit 77 (skip) when run without them.
set -u

if [ -z "${TMX_BUILDDIR:-}" ] || [ -z "${TMX_SRCDIR:-}" ]; then
    echo "check_man: TMX_BUILDDIR/TMX_SRCDIR not set (run through make check)"
    exit 77
fi
src=$TMX_SRCDIR
bld=$TMX_BUILDDIR
failures=0

fail()
{
    echo "FAIL: $*"
    failures=$((failures + 1))
}

awk_prog=$(sed -n 's/^AWK = //p' "$bld/Makefile" | head -n 1)
awk_prog=${awk_prog:-awk}
md2man="$src/doc/md2man.awk"
have_groff=yes
if ! command -v groff >/dev/null 2>&1; then
    have_groff=no
    echo "note: groff is not installed, the pages are converted but not checked with groff"
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/tmx_check_man.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT

pages=0
for md in "$src"/doc/man/*.md; do
    [ -f "$md" ] || continue
    pages=$((pages + 1))
    page=${md##*/}
    page=${page%.md}            # tmx_info.1
    name=${page%.*}             # tmx_info
    sec=${page##*.}             # 1
    case "$sec" in
        [1-8]) ;;
        *) fail "doc/man/${page}.md: the file name is not NAME.SECTION.md"; continue ;;
    esac

    # 1. conversion, front matter, groff
    if ! LC_ALL=C "$awk_prog" -v version=test -f "$md2man" "$md" >"$tmp/$page" 2>"$tmp/err"
    then
        cat "$tmp/err"
        fail "doc/man/${page}.md does not convert"
        continue
    fi
    want_title=$(printf '%s' "$name" | tr '[:lower:]' '[:upper:]')
    if ! grep -q "^\.TH \"$want_title\" \"$sec\" " "$tmp/$page"; then
        fail "doc/man/${page}.md: front matter says $(grep '^\.TH' "$tmp/$page"), expected title $want_title, section $sec"
    fi
    if [ "$have_groff" = yes ]; then
        groff -man -Tutf8 -ww -z "$tmp/$page" >"$tmp/groff.out" 2>&1
        if [ -s "$tmp/groff.out" ]; then
            sed "s|$tmp/||" "$tmp/groff.out" | head -n 20
            fail "groff warns about doc/man/${page}.md"
        fi
    fi

    # 2. built (and so installed)
    if [ ! -s "$bld/doc/man/man$sec/$page" ]; then
        fail "doc/man/${page}.md is not built into doc/man/man$sec/$page: add it to doc/Makefile.include"
    fi
done
if [ "$pages" -eq 0 ]; then
    fail "no man pages in $src/doc/man"
fi

# 3. references between pages. Public functions count as section 3 names (tmx(3) documents
# them all, check_tree.sh checks that).
funcs=" $(cat "$src"/include/tmx/*.h | sed -n 's/^TMX_API .*[ *]\(tmx_[a-z0-9_]*\)(.*/\1/p' |
          tr '\n' ' ') tmx_context_create "
refs=$(cat "$src"/doc/man/*.md "$src/README.md" |
       grep -o '[*][*]*tmx[a-z0-9_]*[*][*]*([1-8])' | tr -d '*' | sort -u)
for ref in $refs; do
    name=${ref%(*}
    sec=${ref#*(}
    sec=${sec%)}
    if [ -f "$src/doc/man/$name.$sec.md" ]; then
        continue
    fi
    if [ "$sec" = 3 ] && [ "${funcs#* "$name" }" != "$funcs" ]; then
        continue
    fi
    fail "$ref is referred to, but there is no doc/man/$name.$sec.md (nor a public function $name)"
done

# 4. the converter fails clearly on a page it cannot handle
printf '# NAME\n\nno front matter\n' >"$tmp/bad.md"
if LC_ALL=C "$awk_prog" -v version=test -f "$md2man" "$tmp/bad.md" >/dev/null 2>"$tmp/err"; then
    fail "md2man.awk accepted a page without front matter"
elif ! grep -q 'front matter' "$tmp/err"; then
    cat "$tmp/err"
    fail "md2man.awk failed on a page without front matter, but did not say why"
fi

# 5. the converter on the constructs the pages may use, with what roff reads specially: lines
# that start with '.' or "'", backslashes, non-ASCII characters
cat >"$tmp/all.1.md" <<'PAGE'
---
title: ALL
section: 1
header: tmx manual
---

# NAME

all - every construct \* of md2man

## Sub

**-a** *arg*
:   text, `code \n`
    ...more

    a second paragraph

```c
.not_a_request();
'neither
```

- item — 10 µs
  continued
- 'item

| a | b |
|---|---|
| × | **y** |

    indented code \fB
.PP
PAGE
if ! LC_ALL=C "$awk_prog" -v version=test -f "$md2man" "$tmp/all.1.md" >"$tmp/all.1" \
        2>"$tmp/err"; then
    cat "$tmp/err"
    fail "md2man.awk fails on the constructs test page"
else
    if [ "$have_groff" = yes ]; then
        groff -man -Tutf8 -ww -z "$tmp/all.1" >"$tmp/groff.out" 2>&1
        if [ -s "$tmp/groff.out" ]; then
            cat "$tmp/groff.out"
            fail "groff warns about md2man.awk's output for the constructs test page"
        fi
    fi
    for want in '^\\&\.not_a_request' '^\\&'"'"'neither' '\\\[u00D7\]' '\\\[u00B5\]s' \
                '^\.TP$' '^\.IP \\(bu 2$' 'indented code \\efB' '^\\&\.PP$'; do
        if ! grep -q "$want" "$tmp/all.1"; then
            fail "md2man.awk: no line matching '$want' in the constructs test page"
        fi
    done
    if grep -q '^\.not_a_request' "$tmp/all.1"; then
        fail "md2man.awk let a line of text through as a roff request"
    fi
fi

# 6. the OUTPUT samples against the programs (2 ranks, a few iterations, the soft device and
# the defaults: a user's own TMX_* settings or an adapter would change the header lines)
sample()
{
    awk '/^# OUTPUT/ { sect = 1; next } sect && /^```/ { if (code) exit; code = 1; next }
         code { print }' "$1"
}
shape()
{
    # numbers are the run's; "key=value" keeps its key
    sed 's/=[^ ]*/=/g; s/[0-9][0-9.]*/N/g; s/  */ /g'
}
clean_env=$(env | sed -n 's/^\(TMX_[A-Za-z0-9_]*\)=.*/-u \1/p' |
            grep -v -e '-u TMX_BUILDDIR$' -e '-u TMX_SRCDIR$' | tr '\n' ' ')
if [ -x "$bld/tools/tmxrun" ] && [ -x "$bld/examples/tmx_pingpong" ]; then
    sample "$src/doc/man/tmx_pingpong.1.md" | grep '^#' | shape >"$tmp/pp.sample"
    # shellcheck disable=SC2086 # clean_env is a list of -u NAME
    if ! env $clean_env TMX_PROVIDERS=soft timeout 120 "$bld/tools/tmxrun" -n 2 \
            "$bld/examples/tmx_pingpong" -t lat,bw -m 1:2 -n 10 -w 1 >"$tmp/pp.out" 2>&1; then
        cat "$tmp/pp.out"
        fail "tmx_pingpong did not run for the OUTPUT check"
    elif [ ! -s "$tmp/pp.sample" ]; then
        fail "doc/man/tmx_pingpong.1.md: no comment lines in the OUTPUT sample"
    else
        shape <"$tmp/pp.out" >"$tmp/pp.shape"
        while IFS= read -r line; do
            if ! grep -q -x -F -e "$line" "$tmp/pp.shape"; then
                sed 's/^/    | /' "$tmp/pp.out"
                fail "doc/man/tmx_pingpong.1.md's OUTPUT has '$line'," \
                     "which tmx_pingpong does not print"
            fi
        done <"$tmp/pp.sample"
    fi
fi
if [ -x "$bld/tools/tmxrun" ] && [ -x "$bld/examples/tmx_alltoall" ]; then
    sample "$src/doc/man/tmx_alltoall.1.md" | shape >"$tmp/a2a.sample"
    # shellcheck disable=SC2086 # clean_env is a list of -u NAME
    if ! env $clean_env TMX_PROVIDERS=soft timeout 120 "$bld/tools/tmxrun" -n 2 \
            "$bld/examples/tmx_alltoall" -n 2 -w 1 -T "$(date +%s%N)" >"$tmp/a2a.out" 2>&1; then
        cat "$tmp/a2a.out"
        fail "tmx_alltoall did not run for the OUTPUT check"
    elif ! shape <"$tmp/a2a.out" | diff -u "$tmp/a2a.sample" - >"$tmp/a2a.diff"; then
        cat "$tmp/a2a.diff"
        fail "doc/man/tmx_alltoall.1.md's OUTPUT (-) differs from what tmx_alltoall -T prints (+)"
    fi
fi

if [ "$failures" -gt 0 ]; then
    echo "check_man: $failures failure(s)"
    exit 1
fi
echo "check_man: $pages pages ok"
exit 0
