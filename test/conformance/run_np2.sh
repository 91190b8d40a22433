#!/bin/sh
# Runs the conformance suite on 2 ranks of this host through tmxrun (hard timeout 300 s).
# Extra arguments go to tmx_conformance (e.g. -t random -s 42). Exit 77 (skip) without tmxrun.
builddir=${TMX_BUILDDIR:-$(pwd)}
tmxrun="$builddir/tools/tmxrun"
prog="$builddir/test/conformance/tmx_conformance"
if [ ! -x "$tmxrun" ]; then
    echo "run_np2.sh: $tmxrun not built, skipping"
    exit 77
fi
if [ ! -x "$prog" ]; then
    echo "run_np2.sh: $prog not built" >&2
    exit 1
fi
exec "$tmxrun" -n 2 --timeout 300 "$prog" "$@"
