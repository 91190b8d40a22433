#!/bin/sh
# fi_close of an endpoint with several peers (test/fi/fi_close.c): peers that are alive but do
# not progress cost the close one TMX_PEER_TIMEOUT (two with sends in flight), not one per peer;
# peers that progress receive everything sent before the close.
. "${TMX_SRCDIR:-$(dirname "$0")/../..}/test/fi/lib.sh"
if TMX_PEER_TIMEOUT=1 timeout -s KILL 120 "$B/test/fi/fi_close" silent; then
    ok "close with silent peers: one timeout, not one per peer"
else
    fail "close with silent peers"
fi
if timeout -s KILL 120 "$B/test/fi/fi_close" data; then
    ok "close with peers that progress: every message sent before it arrived"
else
    fail "close with peers that progress"
fi
[ "$fails" -eq 0 ] || exit 1
echo PASS
