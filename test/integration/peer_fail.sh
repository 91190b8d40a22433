#!/bin/sh
# A dead peer fails what waits on it (peer_fail.c says what each mode checks).
. "$(dirname "$0")/lib.sh"

P="$B/test/integration/peer_fail"

for m in pending blocking passive; do
    run 60 env TMX_LOG_FILE="$T/log.$m.%p" "$TMXRUN" -n 2 --timeout 50 "$P" "$m"
    expect_rc 0 "$m: a rank dies, the other is told"
    expect_grep "$T/out" "rank 0 ok" "$m: rank 0 checked every status"
done
finish
