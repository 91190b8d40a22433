#!/bin/sh
# Staging buffers of many endpoints (test/integration/rndv_stage_eps.c), on the soft device
# told to stage as over verbs (TMX_SOFT_REG_SLOW=yes): at most 8 endpoints of a worker hold a
# pool, a 9th registers; a forced close with staged sends in flight cancels them and frees the
# pool (no receive gets their data); a freed pool lets another endpoint make one. The counts
# come from each worker's info line at destroy.
. "$(dirname "$0")/lib.sh"

prog="$B/test/integration/rndv_stage_eps"

run 240 env TMX_LOG_LEVEL=info TMX_SOFT_REG_SLOW=yes TMX_PEER_TIMEOUT=5 "$TMXRUN" -n 10 \
    --timeout 200 "$prog"
expect_rc 0 "10 ranks: 9 endpoints staging, a forced close in flight, a pool freed and made again"
[ "$(grep -c "rndv_stage_eps ok" "$T/out")" -eq 10 ] && ok "every rank checked every payload" ||
    { fail "not all 10 ranks ok"; show; }
grep "rendezvous buffers\|canceled send" "$T/err" | sed 's/^/    /'
# rank 0: 8 endpoints staged, the 9th registered; 4 staged then canceled; 1 more once a pool
# was freed
[ "$(grep -c "rendezvous buffers: 1 registered per message, 0 in a tmx_mem_map range, 13 copied through staging buffers$" \
    "$T/err")" -eq 1 ] && ok "the sender: 13 staged (8 endpoints, 4 canceled, 1 after a close), 1 registered" ||
    { fail "the sender's counts are not 13 staged and 1 registered"; show; }
[ "$(grep -c "rendezvous buffers: 0 registered per message, 0 in a tmx_mem_map range, 2 copied through staging buffers$" \
    "$T/err")" -ge 1 ] && ok "rank 9 staged both its receives" ||
    { fail "rank 9 did not stage 2"; show; }
finish
