#!/bin/sh
# libtmx-fi.so used the wrong way round, in one process (test/fi/fi_bad.c): libfabric's error
# codes, no crash, no hang, and nothing of tmx's left over for it to warn about at close.
. "${TMX_SRCDIR:-$(dirname "$0")/../..}/test/fi/lib.sh"
timeout -s KILL 120 "$B/test/fi/fi_bad" 2>"$T/err"
rc=$?
cat "$T/err" >&2
[ "$rc" -eq 0 ] || fail "fi_bad exited with $rc"
if grep -q 'still in use at cleanup' "$T/err"; then
    fail "tmx found requests or messages of the provider's left over at close"
fi
[ "$fails" -eq 0 ] || exit 1
echo PASS
