# shellcheck shell=bash
# Shared by scripts/pingpong.sh and scripts/test.sh (sourced, not run).
# Every function works from the repository root, which it finds from this file's location, so
# the scripts can be started from anywhere.

TMX_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

tmx_say()
{
    printf '==> %s\n' "$*"
}

tmx_jobs()
{
    nproc 2>/dev/null || getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2
}

# Generates ./configure when the tree comes from git (a release tarball already has it).
# Once it exists, the generated Makefiles rerun autoconf/automake themselves when
# configure.ac, Makefile.am or a fragment changes, so a second autoreconf is never needed.
tmx_bootstrap()
{
    # Automake cannot build out of tree while the source tree is configured itself; say so
    # now instead of failing in the middle of configure.
    if [ -f "$TMX_ROOT/config.status" ]; then
        echo "the source tree is configured in place (config.status): run 'make distclean'" \
             "in $TMX_ROOT first; the scripts build out of tree in build*/" >&2
        return 1
    fi
    if [ -x "$TMX_ROOT/configure" ] && [ -f "$TMX_ROOT/Makefile.in" ] &&
       [ -f "$TMX_ROOT/build-aux/test-driver" ]; then
        return 0
    fi
    tmx_say "autoreconf -fi"
    (cd "$TMX_ROOT" && autoreconf -fi) </dev/null
}

# tmx_configure DIR [configure options...]
# Configures out of tree in $TMX_ROOT/DIR unless DIR was already configured with exactly these
# options (then make alone is enough). The output goes to DIR/configure.out and is shown only
# on failure; the configure summary is printed either way.
tmx_configure()
{
    local dir="$TMX_ROOT/$1"
    shift
    local want="$*"
    mkdir -p "$dir"
    # TMX_REUSE_BUILD=1: any earlier configuration of DIR will do (pingpong.sh after test.sh
    # must not rebuild everything only because test.sh added --enable-werror).
    if [ -f "$dir/config.status" ] && [ -f "$dir/Makefile" ] &&
       { [ "${TMX_REUSE_BUILD:-0}" = 1 ] ||
         [ "$(cat "$dir/.tmx-configure-args" 2>/dev/null)" = "$want" ]; }; then
        return 0
    fi
    tmx_say "configure in ${dir#"$TMX_ROOT"/}: ${want:-(defaults)}"
    local again=no
    [ -f "$dir/config.status" ] && again=yes
    if ! (cd "$dir" && "$TMX_ROOT/configure" "$@") >"$dir/configure.out" 2>&1 </dev/null; then
        cat "$dir/configure.out" >&2
        echo "configure failed in $dir (see $dir/config.log)" >&2
        return 1
    fi
    # Configured before with other options: what was built then follows the old ones (make does
    # not see a change of flags, and libtool libraries keep the old prefix, which make install
    # refuses), so it is built again.
    if [ "$again" = yes ]; then
        make -C "$dir" clean >/dev/null 2>&1 || true
    fi
    # The configure summary: everything after the "tmx <version> configuration" line.
    sed -n '/^tmx .* configuration$/,$p' "$dir/configure.out"
    printf '%s' "$want" >"$dir/.tmx-configure-args"
}
