#!/bin/sh
# A dead peer fails what waits on it; a FLUSH close ends within its bound (peer_fail.c says
# what each mode checks).
. "$(dirname "$0")/lib.sh"

P="$B/test/integration/peer_fail"

for m in pending blocking passive; do
    run 60 env TMX_LOG_FILE="$T/log.$m.%p" "$TMXRUN" -n 2 --timeout 50 "$P" "$m"
    expect_rc 0 "$m: a rank dies, the other is told"
    expect_grep "$T/out" "rank 0 ok" "$m: rank 0 checked every status"
done

run 60 env TMX_PEER_TIMEOUT=1 "$TMXRUN" -n 2 --timeout 50 "$P" flush
expect_rc 0 "flush: FLUSH close of an unmatched rendezvous send times out"
c=$(grep -c "rank [01] ok" "$T/out")
[ "$c" -eq 2 ] && ok "flush: both ranks checked every status" || fail "flush: $c of 2 ranks ok"
finish
