#!/bin/sh
# `make installcheck`: the installed tmx works the way README.md says ("A first program"):
#   1. the README's commands, without the line that sources build/tmx-env.sh, build the
#      example with the installed tmx.pc and run it as 4 ranks with the installed tmxrun, with
#      only PATH and PKG_CONFIG_PATH pointing at the prefix: no LD_LIBRARY_PATH;
#   2. every man page of doc/man is installed under mandir.
# Environment (set by the installcheck-local rule): TMX_SRCDIR, TMX_BINDIR, TMX_PKGCONFIGDIR,
# TMX_MANDIR, TMX_CC (the compiler of the build, used as `cc`).
set -u

if [ -z "${TMX_SRCDIR:-}" ] || [ -z "${TMX_BINDIR:-}" ] || [ -z "${TMX_PKGCONFIGDIR:-}" ] ||
   [ -z "${TMX_MANDIR:-}" ]; then
    echo "check_install: TMX_SRCDIR/TMX_BINDIR/TMX_PKGCONFIGDIR/TMX_MANDIR not set" \
         "(run through make installcheck)"
    exit 77
fi
src=$TMX_SRCDIR
failures=0

fail()
{
    echo "FAIL: $*"
    failures=$((failures + 1))
}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/tmx_check_install.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT

# --- 1. the README example against the installed tmx --------------------------------------
awk '/^## A first program/ { sect = 1 }
     sect && /^```c$/      { code = 1; next }
     code && /^```$/       { exit }
     code                  { print }' "$src/README.md" >"$tmp/ring.c"
awk '/^## A first program/ { sect = 1 }
     sect && /^```c$/      { seen_c = 1 }
     seen_c && /^```sh$/   { code = 1; next }
     code && /^```$/       { exit }
     code && !/^\. /       { print }' "$src/README.md" >"$tmp/readme.sh"
if [ ! -s "$tmp/ring.c" ] || [ ! -s "$tmp/readme.sh" ]; then
    fail "README.md has no program and commands under '## A first program'"
else
    mkdir "$tmp/bin"
    printf '#!/bin/sh\nexec %s "$@"\n' "${TMX_CC:-cc}" >"$tmp/bin/cc"
    chmod +x "$tmp/bin/cc"
    echo "README commands, with $TMX_BINDIR on PATH and PKG_CONFIG_PATH=$TMX_PKGCONFIGDIR:"
    sed 's/^/    /' "$tmp/readme.sh"
    if ! (cd "$tmp" &&
          env -u PKG_CONFIG_LIBDIR -u LD_LIBRARY_PATH PKG_CONFIG_PATH="$TMX_PKGCONFIGDIR" \
              PATH="$tmp/bin:$TMX_BINDIR:$PATH" timeout 180 sh -e "$tmp/readme.sh") \
            >"$tmp/run.out" 2>&1; then
        cat "$tmp/run.out"
        fail "the README's commands fail against the installed tmx"
    elif [ "$(grep -c -E '^rank [0-3] of 4: got [0-3] with tag [0-3]$' "$tmp/run.out")" != 4 ]
    then
        cat "$tmp/run.out"
        fail "'tmxrun -n 4 ./ring' with the installed tmx did not print one line per rank"
    else
        echo "the README example built and ran against the installed tmx"
    fi
fi

# --- 2. the man pages --------------------------------------------------------------------
for md in "$src"/doc/man/*.md; do
    [ -f "$md" ] || continue
    page=${md##*/}
    page=${page%.md}
    if [ ! -s "$TMX_MANDIR/man${page##*.}/$page" ]; then
        fail "the man page $page is not installed in $TMX_MANDIR/man${page##*.}"
    fi
done

if [ "$failures" -gt 0 ]; then
    echo "check_install: $failures failure(s)"
    exit 1
fi
echo "check_install: ok"
exit 0
