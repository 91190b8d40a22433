#!/bin/sh
# Several threads of each rank share one TMX_THREAD_MODE_MULTI worker: each waits for its own
# requests (wait, test without progress, callbacks, free before completion, probe and cancel)
# while others progress. Under ThreadSanitizer (the build-tsan/ build of scripts/test.sh) a data
# race report fails the test.
. "$(dirname "$0")/lib.sh"

run 240 "$TMXRUN" -n 2 --timeout 200 "$B/test/integration/threads_multi" -t 5 -n 200
expect_rc 0 "5 threads x 200 messages per rank on a MULTI worker"
c=$(grep -c "rank [01] ok" "$T/out")
[ "$c" -eq 2 ] && ok "both ranks checked every message" || { fail "$c of 2 ranks ok"; show; }
if grep -q "ThreadSanitizer" "$T/err"; then
    fail "ThreadSanitizer reported"
    show
fi
finish
