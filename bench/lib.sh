# Sourced by the bench scripts (bash).
#
# tmx_find PROGRAM BUILDDIR [real]: sets tmxrun, tmx_prog, tmx_libpath and tmx_status ("ok"
# or why not). With a build directory both come from it, without one from PATH. In a build
# tree PROGRAM is libtool's shell wrapper, which starts a shell in every rank; with "real"
# (a benchmark that counts start-up) the binary in .libs is taken instead, and tmx_libpath
# names the library's directory for LD_LIBRARY_PATH.
tmx_find() {
    local prog=$1 builddir=$2 real=${3:-}
    tmx_libpath=""
    if [ -n "$builddir" ]; then
        tmxrun="$builddir/tools/tmxrun"
        tmx_prog="$builddir/examples/$prog"
        if [ "$real" = real ] && [ -x "$builddir/examples/.libs/$prog" ] &&
            [ -d "$builddir/.libs" ]; then
            tmx_prog="$builddir/examples/.libs/$prog"
            tmx_libpath="$(cd "$builddir/.libs" && pwd)"
        fi
        if [ -x "$tmxrun" ] && [ -x "$tmx_prog" ]; then
            tmx_status="ok"
        else
            tmx_status="missing ($tmxrun or $tmx_prog not built)"
        fi
    else
        tmxrun=$(command -v tmxrun || true)
        tmx_prog=$(command -v "$prog" || true)
        if [ -n "$tmxrun" ] && [ -n "$tmx_prog" ]; then
            tmx_status="ok"
        else
            tmx_status="missing (tmxrun/$prog not on PATH; give a build dir)"
        fi
    fi
}
