#!/usr/bin/env bash
# Checks that what the README and the man pages promise is true of the tree:
#   1. the example program of README.md ("A first program") compiles warning-free as strict
#      C11 against the public headers and the built libtmx and runs alone (a job of one that
#      sends to itself); then the README's shell commands that build and run it, exactly as
#      written, work after the quick start: run in a directory where build/ is this build
#      tree, without PKG_CONFIG_PATH or LD_LIBRARY_PATH, they build the program and run it as
#      4 ranks under tmxrun;
#   2. every public function of include/tmx/tmx.h has its section in doc/man/tmx.3.md;
#   3. every doc/ file the README links to exists, every path of the tree that README.md or
#      a man page names exists (in the source tree, or built), and the scripts parse;
#   4. every option of configure.ac (--enable-X, --disable-X, --with-X) is in README.md, and
#      every --enable-, --disable- or --with- option README.md names is one of them;
#   5. every TMX_* name in README.md and doc/man/*.md is a name of the public headers, a
#      configuration variable, a page title or a name the library knows not to be
#      configuration (TMX_BUILDDIR, TMX_SRCDIR, TMX_LOCAL_RANK).
# Run by `make check` (TMX_BUILDDIR, TMX_SRCDIR set); exit 77 (skip) when run without them.
set -u

if [ -z "${TMX_BUILDDIR:-}" ] || [ -z "${TMX_SRCDIR:-}" ]; then
    echo "check_tree: TMX_BUILDDIR/TMX_SRCDIR not set (run through make check)"
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

# A make variable of the configured build (CC, CFLAGS, LDFLAGS, TMX_CFLAGS), so the example is
# built the way the library was (a sanitized library needs a sanitized program).
make_var()
{
    sed -n "s/^$1 = //p" "$bld/Makefile" | head -n 1
}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/tmx_check_tree.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT

# --- 1. the README example ---------------------------------------------------------------
# The first ```c block after the "## A first program" heading, fences excluded.
awk '/^## A first program/ { sect = 1 }
     sect && /^```c$/      { code = 1; next }
     code && /^```$/       { exit }
     code                  { print }' "$src/README.md" >"$tmp/ring.c"
if [ ! -s "$tmp/ring.c" ]; then
    fail "no \`\`\`c block under '## A first program' in README.md"
elif [ ! -e "$bld/.libs/libtmx.so" ]; then
    fail "$bld/.libs/libtmx.so is not built"
else
    cc=$(make_var CC)
    # shellcheck disable=SC2046 # flags are lists of words
    if ! ${cc:-cc} $(make_var TMX_CFLAGS) $(make_var CFLAGS) -std=c11 -Wpedantic -Werror \
            -I"$src/include" "$tmp/ring.c" -o "$tmp/ring" $(make_var LDFLAGS) \
            -L"$bld/.libs" -Wl,-rpath,"$bld/.libs" -ltmx 2>"$tmp/cc.err"; then
        cat "$tmp/cc.err"
        fail "the README example does not compile"
    else
        echo "README example compiled"
        if ! (cd "$tmp" && timeout 60 ./ring) >"$tmp/run1.out" 2>&1; then
            cat "$tmp/run1.out"
            fail "the README example fails as a job of one"
        elif ! grep -q '^rank 0 of 1: got 0 with tag 0$' "$tmp/run1.out"; then
            cat "$tmp/run1.out"
            fail "the README example printed something else than 'rank 0 of 1: got 0 with tag 0'"
        else
            echo "README example ran alone: $(cat "$tmp/run1.out")"
        fi
    fi
fi

# The README's commands: the first ```sh block after the program, run as they are, in a
# directory that holds ring.c and where build/ is this build tree (the quick start builds in
# build/ at the top of the tree). `cc` is the compiler of this build (a sanitized library
# needs the same compiler's runtime; everywhere else cc and gcc are the same compiler).
awk '/^## A first program/ { sect = 1 }
     sect && /^```c$/      { seen_c = 1 }
     seen_c && /^```sh$/   { code = 1; next }
     code && /^```$/       { exit }
     code                  { print }' "$src/README.md" >"$tmp/readme.sh"
if [ ! -s "$tmp/readme.sh" ]; then
    fail "no \`\`\`sh block after the program under '## A first program' in README.md"
elif [ -s "$tmp/ring.c" ] && [ -e "$bld/.libs/libtmx.so" ]; then
    mkdir "$tmp/user" "$tmp/bin"
    cp "$tmp/ring.c" "$tmp/user/ring.c"
    ln -s "$bld" "$tmp/user/build"
    printf '#!/bin/sh\nexec %s "$@"\n' "$(make_var CC)" >"$tmp/bin/cc"
    chmod +x "$tmp/bin/cc"
    echo "README commands:"
    sed 's/^/    /' "$tmp/readme.sh"
    if ! (cd "$tmp/user" &&
          env -u PKG_CONFIG_PATH -u PKG_CONFIG_LIBDIR -u LD_LIBRARY_PATH \
              PATH="$tmp/bin:$PATH" timeout 180 sh -e "$tmp/readme.sh") >"$tmp/run4.out" 2>&1; then
        cat "$tmp/run4.out"
        fail "the README's commands to build and run the example fail after the quick start"
    elif [ "$(grep -c -E '^rank [0-3] of 4: got [0-3] with tag [0-3]$' "$tmp/run4.out")" != 4 ]
    then
        cat "$tmp/run4.out"
        fail "the README's 'tmxrun -n 4 ./ring' did not print one line per rank"
    elif command -v readelf >/dev/null 2>&1 && [ -e "$tmp/user/ring" ] &&
         ! readelf -d "$tmp/user/ring" | grep -F PATH | grep -q -F "$bld/.libs"; then
        readelf -d "$tmp/user/ring"
        fail "the README's commands did not link the library of this build tree (no rpath to it)"
    else
        echo "README commands built the example and ran it under tmxrun -n 4"
    fi
fi

# --- 2. every public function of tmx.h is in tmx.3.md -------------------------------------
man3="$src/doc/man/tmx.3.md"
if [ ! -f "$man3" ]; then
    fail "doc/man/tmx.3.md is missing"
else
    # Declarations look like "TMX_API <type> <name>(" possibly with a '*' before the name.
    funcs=$(sed -n 's/^TMX_API .*[ *]\(tmx_[a-z0-9_]*\)(.*/\1/p' "$src/include/tmx/tmx.h")
    for f in $funcs tmx_context_create; do
        if ! grep -q "^### .*\b$f\b" "$man3"; then
            fail "doc/man/tmx.3.md has no '### $f' section"
        fi
    done
fi

# --- 3. README links and scripts -----------------------------------------------------------
# shellcheck disable=SC2013 # links never hold spaces
for link in $(grep -o '](doc/[^)#]*)' "$src/README.md" | sed 's/^](//; s/)$//' | sort -u); do
    if [ ! -e "$src/$link" ]; then
        fail "README.md links to $link, which does not exist"
    fi
done
# Paths of the tree that README.md and the man pages name (test/..., bench/..., src/...): a
# file of the source tree or, for a program, of the build tree.
tree_path='(^|[^A-Za-z0-9_./-])(test|bench|scripts|src|tools|examples|doc|include)/'
tree_path="${tree_path}[A-Za-z0-9_./-]*[A-Za-z0-9_]"
for doc in "$src/README.md" "$src"/doc/man/*.md; do
    # shellcheck disable=SC2013 # paths hold no spaces
    for p in $(grep -o -E "$tree_path" "$doc" | sed -E 's|^[^a-z]||' | sort -u); do
        if [ ! -e "$src/$p" ] && [ ! -e "$bld/$p" ]; then
            fail "${doc#"$src"/} names $p, which is neither in the source tree nor built"
        fi
    done
done
for script in "$src"/scripts/*.sh "$src/.ci/run"; do
    if [ -f "$script" ] && ! bash -n "$script"; then
        fail "$script does not parse"
    fi
done

# --- 4. configure options -------------------------------------------------------------------
# configure.ac's own options: AC_ARG_ENABLE (--enable-X or --disable-X), and the yes|no|auto
# switches of m4/tmx_check.m4 (TMX_CHECK_*: --enable-X and its synonym --with-X).
opts=$( (sed -n 's/^ *AC_ARG_ENABLE(\[\([a-z0-9-]*\)\].*/enable:\1/p' "$src/configure.ac"
         sed -n 's/^ *AC_ARG_WITH(\[\([a-z0-9-]*\)\].*/with:\1/p' "$src/configure.ac"
         sed -n 's/^ *TMX_CHECK_[A-Z]*(\[\([a-z0-9-]*\)\].*/enable:\1 with:\1/p' \
             "$src/configure.ac") | tr ' ' '\n' | sort -u)
if [ -z "$opts" ]; then
    fail "found no options in configure.ac"
fi
for o in $opts; do
    name=${o#*:}
    case $o in
        enable:*) grep -q -e "--enable-$name\b" -e "--disable-$name\b" "$src/README.md" ||
                      fail "configure's --enable-$name (or --disable-$name) is not in README.md" ;;
        with:*)   grep -q -e "--with-$name\b" "$src/README.md" ||
                      fail "configure's --with-$name is not in README.md" ;;
    esac
done
# shellcheck disable=SC2013 # option names hold no spaces
for o in $(grep -o -e '--\(enable\|disable\|with\)-[a-z0-9-]*[a-z0-9]' "$src/README.md" |
           sort -u); do
    name=${o#--*-}
    case $o in
        --with-*) want="with:$name" ;;
        *)        want="enable:$name" ;;
    esac
    if ! printf '%s\n' "$opts" | grep -q -x -e "$want"; then
        fail "README.md names $o, which configure.ac does not have"
    fi
done

# --- 5. TMX_* names in the documentation --------------------------------------------------
# Known: the public headers' names, the configuration table's variables (config.c), the names
# config.c knows are not configuration, the pages' titles. A name ending in _ is a prefix
# (TMX_ERR_\*); TMX_EAGERMAX is tmx_config(7)'s example of a typo, TMX_NAME a placeholder.
{
    cat "$src"/include/tmx/*.h | grep -o '\bTMX_[A-Z0-9_]*'
    sed -n 's/.*TMX_CONFIG_FIELD("\([A-Z0-9_]*\)".*/TMX_\1/p' "$src/src/util/config.c"
    sed -n '/tmx_config_ignored\[\]/,/NULL/s/^ *"\([A-Z0-9_]*\)",.*/TMX_\1/p' \
        "$src/src/util/config.c"
    sed -n 's/^title: \(TMX[A-Z0-9_]*\)$/\1/p' "$src"/doc/man/*.md
    printf '%s\n' TMX_EAGERMAX TMX_NAME
} >"$tmp/known"
if [ "$(grep -c -x 'TMX_EAGER_MAX\|TMX_LOCAL_RANK\|TMX_OK\|TMX_INFO' "$tmp/known")" -lt 4 ]; then
    fail "the list of known TMX_* names is incomplete (config.c or the headers changed shape)"
fi
for doc in "$src/README.md" "$src"/doc/man/*.md; do
    # shellcheck disable=SC2013 # names hold no spaces
    for n in $(grep -o '\bTMX_[A-Z0-9_]*[A-Z0-9]\b' "$doc" | sort -u); do
        if ! grep -q -x -e "$n" "$tmp/known"; then
            fail "${doc#"$src"/} names $n, which is not in the public headers," \
                 "the configuration table or a page title"
        fi
    done
done

if [ "$failures" -gt 0 ]; then
    echo "check_tree: $failures failure(s)"
    exit 1
fi
echo "check_tree: ok"
exit 0
