#!/bin/sh
# Rendezvous through staging buffers (test/integration/rndv_copy.c): payloads intact across
# TMX_RNDV_COPY, a truncated receive, more sends in flight than staging buffers; the counts
# come from each worker's info line at destroy. Over verbs (TMX_PROVIDERS=verbs, as
# test/verbs/rndv_copy.sh runs it in the soft-RoCE guest) messages of up to 64 KiB go through
# staging buffers at both ends (the sender's from its endpoint's own pool, the receiver's from
# one without remote access) and the rest are registered; with TMX_RNDV_COPY=0, and on the
# soft device (whose registration is a table entry), every one is registered at both ends;
# the soft device told to report slow registration (TMX_SOFT_REG_SLOW=yes) stages as verbs.
. "$(dirname "$0")/lib.sh"

prog="$B/test/integration/rndv_copy"

# the soft device stages only when told to report slow registration, as verbs does
slow=
[ "${TMX_PROVIDERS:-}" = verbs ] || slow=TMX_SOFT_REG_SLOW=yes

run 240 env TMX_LOG_LEVEL=info TMX_EAGER_CREDITS=128 $slow "$TMXRUN" -n 2 --timeout 200 "$prog"
expect_rc 0 "rendezvous messages of 16 KiB to 200 KB, truncated, 100 in flight"
[ "$(grep -c "rndv_copy ok" "$T/out")" -eq 2 ] && ok "both ranks checked every payload" ||
    { fail "not both ranks ok"; show; }
grep "rendezvous buffers" "$T/err" | sed 's/^/    /'
# sender: 4 + 1 staged in parts 1 and 2, 8 of the 100 of part 3 (all sent at once: its
# endpoint's pool of 8 held); the receiver the same: its 100 receives post their reads
# without a poll in between (tmx_tag_recv_nb does not progress), so 8 reads hold all of
# its pool
[ "$(grep -c "rendezvous buffers: 94 registered per message, 0 in a tmx_mem_map range, 13 copied through staging buffers$" \
    "$T/err")" -eq 2 ] &&
    ok "both ranks: 13 messages of up to 64 KiB staged (8 of the 100 in flight), 94 registered" ||
    { fail "not 13 staged and 94 registered on both ranks"; show; }

run 240 env TMX_LOG_LEVEL=info TMX_EAGER_CREDITS=128 TMX_RNDV_COPY=0 $slow "$TMXRUN" -n 2 \
    --timeout 200 "$prog"
expect_rc 0 "TMX_RNDV_COPY=0: the same messages"
[ "$(grep -c "rndv_copy ok" "$T/out")" -eq 2 ] && ok "both ranks checked every payload" ||
    { fail "not both ranks ok"; show; }
[ "$(grep -c "rendezvous buffers: 107 registered per message, 0 in a tmx_mem_map range$" \
    "$T/err")" -eq 2 ] && ok "TMX_RNDV_COPY=0: every message registered at both ends" ||
    { fail "not 107 registered on both ranks"; show; }

if [ -n "$slow" ]; then
    run 240 env TMX_LOG_LEVEL=info TMX_EAGER_CREDITS=128 "$TMXRUN" -n 2 --timeout 200 "$prog"
    expect_rc 0 "the soft device as it is (registration a table entry): the same messages"
    [ "$(grep -c "rndv_copy ok" "$T/out")" -eq 2 ] && ok "both ranks checked every payload" ||
        { fail "not both ranks ok"; show; }
    [ "$(grep -c "rendezvous buffers: 107 registered per message, 0 in a tmx_mem_map range$" \
        "$T/err")" -eq 2 ] && ok "no staging buffer on the soft device by default" ||
        { fail "not 107 registered on both ranks"; show; }
fi
finish
