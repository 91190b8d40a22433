#!/bin/sh
# A dead peer fails what waits on it; a FLUSH close ends within its bound; a shortage of memory
# registrations is logged once, not once per retry (peer_fail.c says what each mode checks).
. "$(dirname "$0")/lib.sh"

P="$B/test/integration/peer_fail"

for m in pending blocking directed passive; do
    run 60 env TMX_LOG_FILE="$T/log.$m.%p" "$TMXRUN" -n 2 --timeout 50 "$P" "$m"
    expect_rc 0 "$m: a rank dies, the other is told"
    expect_grep "$T/out" "rank 0 ok" "$m: rank 0 checked every status"
done

run 30 env -u TMX_RANK -u TMX_SIZE -u TMX_BOOT_ADDR TMX_PEER_TIMEOUT=1 "$P" unreachable
expect_rc 0 "unreachable: a connection that never comes up is a peer failure"
expect_grep "$T/out" "rank 0 ok" "unreachable: every status checked"
# oversubscribed (4 processes per CPU, as TMX_LOCAL_SIZE says): the connection waits 4 times
# TMX_PEER_TIMEOUT, as the peer's progress comes a turn of every other process later
run 60 env -u TMX_RANK -u TMX_SIZE -u TMX_BOOT_ADDR TMX_PEER_TIMEOUT=1 \
    TMX_LOCAL_SIZE=$((4 * $(nproc))) "$P" unreachable
expect_rc 0 "unreachable, 4 processes per CPU: still a peer failure"
if [ "$secs" -ge 3 ] && [ "$secs" -le 20 ]; then
    ok "unreachable, 4 processes per CPU: the connection waited 4 x TMX_PEER_TIMEOUT (${secs} s)"
else
    fail "unreachable, 4 processes per CPU: gave up after ${secs} s, expected about 4"
fi

run 60 env TMX_PEER_TIMEOUT=1 "$TMXRUN" -n 2 --timeout 50 "$P" flush
expect_rc 0 "flush: FLUSH close of an unmatched rendezvous send times out"
c=$(grep -c "rank [01] ok" "$T/out")
[ "$c" -eq 2 ] && ok "flush: both ranks checked every status" || fail "flush: $c of 2 ranks ok"

rm -f "$T"/log.many.*
# 64 registrations rather than the default 4096: the same shortage with a twentieth of the
# traffic (a run of 5000 sends also lapped the rings many times, which is not under test here)
run 120 env TMX_SOFT_MAX_MRS=64 TMX_LOG_FILE="$T/log.many.%p" "$TMXRUN" -n 2 --timeout 110 \
    "$P" rndvmany 300 50
expect_rc 0 "rndvmany: more rendezvous sends than registrations complete"
lines=$(cat "$T"/log.many.* 2>/dev/null | wc -l)
if grep -q "waits for a memory registration" "$T"/log.many.* 2>/dev/null; then
    ok "rndvmany: the shortage is logged"
else
    fail "rndvmany: the shortage is not logged"
fi
# one line, and one more per 10 s while it lasts: a slow machine may see a few
if [ "$lines" -le 5 ]; then
    ok "rndvmany: $lines log line(s)"
else
    fail "rndvmany: $lines log lines (a line per retry?)"
    head -5 "$T"/log.many.* >&2
fi
finish
