#!/bin/sh
# tmx_mem_map (test/integration/mem_map.c): rendezvous messages in a mapped range take its
# registration, the others register per message, payloads intact, an unmap while a send is in
# flight waits for it. The counts come from each worker's info line at destroy.
. "$(dirname "$0")/lib.sh"

prog="$B/test/integration/mem_map"

run 120 env TMX_LOG_LEVEL=info "$TMXRUN" -n 2 --timeout 100 "$prog"
expect_rc 0 "rendezvous messages from and into mapped and unmapped memory"
[ "$(grep -c "mem_map ok" "$T/out")" -eq 2 ] && ok "both ranks checked every payload" ||
    { fail "not both ranks ok"; show; }
expect_grep "$T/err" "rendezvous buffers: 6 registered per message, 21 in a tmx_mem_map range" \
    "the sender: 21 messages by its mappings (one unmapped in flight), 6 registered each"
expect_grep "$T/err" "rendezvous buffers: 7 registered per message, 20 in a tmx_mem_map range" \
    "the receiver: 20 messages into its mapping, 7 registered each"
grep "rendezvous buffers" "$T/err" | sed 's/^/    /'
finish
