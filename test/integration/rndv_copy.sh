#!/bin/sh
# Rendezvous through staging buffers (test/integration/rndv_copy.c): payloads intact across
# TMX_RNDV_COPY, a truncated receive, more sends in flight than staging buffers; the counts
# come from each worker's info line at destroy. Over verbs (TMX_PROVIDERS=verbs, as
# test/verbs/rndv_copy.sh runs it in the soft-RoCE guest) the receiver reads messages of up to
# 64 KiB into its staging buffers and registers the rest, and the sender registers every one
# (no peer gets a key to a staging buffer); with TMX_RNDV_COPY=0, and on the soft device (whose
# registration is a table entry), every one is registered at both ends.
. "$(dirname "$0")/lib.sh"

prog="$B/test/integration/rndv_copy"

run 240 env TMX_LOG_LEVEL=info TMX_EAGER_CREDITS=128 "$TMXRUN" -n 2 --timeout 200 "$prog"
expect_rc 0 "rendezvous messages of 16 KiB to 200 KB, truncated, 100 in flight"
[ "$(grep -c "rndv_copy ok" "$T/out")" -eq 2 ] && ok "both ranks checked every payload" ||
    { fail "not both ranks ok"; show; }
grep "rendezvous buffers" "$T/err" | sed 's/^/    /'
if [ "${TMX_PROVIDERS:-}" = verbs ]; then
    # receiver: 4 + 1 staged in parts 1 and 2, 8 of the 100 of part 3: its 100 receives post
    # their reads without a poll in between (tmx_tag_recv_nb does not progress), so 8 reads
    # hold all of its staging buffers; the sender: every one of the 107 registered
    [ "$(grep -c "rendezvous buffers: 94 registered per message, 0 in a tmx_mem_map range, 13 copied through staging buffers$" \
        "$T/err")" -eq 1 ] &&
        ok "receiver: 13 messages of up to 64 KiB staged (8 of the 100 in flight), 94 registered" ||
        { fail "the receiver did not stage 13 and register 94"; show; }
    [ "$(grep -c "rendezvous buffers: 107 registered per message, 0 in a tmx_mem_map range$" \
        "$T/err")" -eq 1 ] &&
        ok "sender: every message registered, none sent from a staging buffer" ||
        { fail "the sender did not register all 107"; show; }
    run 240 env TMX_LOG_LEVEL=info TMX_EAGER_CREDITS=128 TMX_RNDV_COPY=0 "$TMXRUN" -n 2 \
        --timeout 200 "$prog"
    expect_rc 0 "TMX_RNDV_COPY=0: the same messages"
    [ "$(grep -c "rndv_copy ok" "$T/out")" -eq 2 ] && ok "both ranks checked every payload" ||
        { fail "not both ranks ok"; show; }
fi
[ "$(grep -c "rendezvous buffers: 107 registered per message, 0 in a tmx_mem_map range$" \
    "$T/err")" -eq 2 ] && ok "no staging buffer: every message registered at both ends" ||
    { fail "not 107 registered on both ranks"; show; }
finish
