#!/bin/sh
# A FLUSH close after the peer closed in order, with nothing in flight, returns TMX_OK.
. "$(dirname "$0")/lib.sh"

run 60 "$TMXRUN" -n 2 --timeout 50 "$B/test/integration/close_after_peer"
expect_rc 0 "close after the peer closed in order"
c=$(grep -c "rank [01] ok" "$T/out")
[ "$c" -eq 2 ] && ok "both ranks checked every status" || fail "$c of 2 ranks ok"
finish
