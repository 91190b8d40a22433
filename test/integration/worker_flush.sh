#!/bin/sh
# tmx_worker_flush (test/integration/worker_flush.c): peers that are alive but do not progress
# cost a flush of all endpoints one TMX_PEER_TIMEOUT, not one per peer, and the endpoints stay
# open; peers that progress receive everything, each byte checked.
. "$(dirname "$0")/lib.sh"

prog="$B/test/integration/worker_flush"

run 60 env TMX_PEER_TIMEOUT=1 "$prog" silent
expect_rc 0 "flush and destroy with 4 silent peers, TMX_PEER_TIMEOUT=1"
expect_grep "$T/out" "worker_flush: [0-9]* checks ok" "every check held"
sed 's/^/    /' "$T/out"

run 120 "$TMXRUN" -n 4 --timeout 100 "$prog" data
expect_rc 0 "flush of sends to 3 ranks that start receiving later"
c=$(grep -c "worker_flush: [0-9]* checks ok" "$T/out")
[ "$c" -eq 4 ] && ok "every rank checked everything" || { fail "$c of 4 ranks ok"; show; }
finish
