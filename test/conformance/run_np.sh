#!/bin/sh
# run_np.sh N [args]: runs the conformance suite on N ranks of this host through tmxrun (hard
# timeout 300 s). run_np2.sh and run_np4.sh call it. Extra arguments go to tmx_conformance
# (e.g. -t random -s 42). Exit 77 (skip) without tmxrun.
np=$1
shift
me="run_np$np.sh"
builddir=${TMX_BUILDDIR:-$(pwd)}
tmxrun="$builddir/tools/tmxrun"
prog="$builddir/test/conformance/tmx_conformance"
if [ ! -x "$tmxrun" ]; then
    echo "$me: $tmxrun not built, skipping"
    exit 77
fi
if [ ! -x "$prog" ]; then
    echo "$me: $prog not built" >&2
    exit 1
fi
exec "$tmxrun" -n "$np" --timeout 300 "$prog" "$@"
