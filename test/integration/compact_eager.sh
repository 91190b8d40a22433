#!/usr/bin/env bash
# Compact eager messages (src/proto/proto.h): an EAGER with the tag of the previous one goes
# without a header, its credits in the immediate data, to a peer that lends no polling ring.
# - Without rings (TMX_RING=no) both ranks of tmx_pingpong send them (the worker's info line
#   at destroy counts them) and its check rounds find every byte in place, from 0 bytes to
#   the eager limit, one message at a time (latency) and 64 in flight (bandwidth, where
#   credits come back in the compact messages' immediate data).
# - The conformance suite (tags, sources, synchronous sends, immediate data, cancels mixed with
#   compact messages) passes on 2 ranks without rings.
# - With a ring in IMM mode (TMX_RING_MODE=imm), whose messages arrive in the same completion
#   stream, the messages that do not go into the ring are compact as well.
# - With a polling ring (TMX_RING=yes: the soft device promises whole-message order), whose
#   messages number the SENDs in their immediate data, none is sent.
. "$(dirname "$0")/lib.sh"
PP="$B/examples/tmx_pingpong"
CONF="$B/test/conformance/tmx_conformance"
for v in $(env | sed -n 's/^\(TMX_[A-Za-z0-9_]*\)=.*/\1/p'); do
    case $v in TMX_BUILDDIR|TMX_SRCDIR) ;; *) unset "$v" ;; esac
done

# compact_sent FILE: the smallest count of compact messages sent over the ranks' info lines,
# or -1 when a rank printed none
compact_sent() {
    awk '/compact eager messages/ {n++; for (i = 1; i <= NF; i++) if ($i == "sent,") v = $(i - 1) + 0;
                                   if (min == "" || v < min) min = v}
         END {print (n >= 2 ? min : -1)}' "$1"
}

run 120 env TMX_RING=no TMX_LOG_LEVEL=info "$TMXRUN" -n 2 --timeout 100 "$PP" -t lat,bw \
    -m 0:16k -n 20 -w 2
expect_rc 0 "TMX_RING=no: tmx_pingpong 0 B to 16 KiB, its data checked"
n=$(compact_sent "$T/err")
if [ "$n" -gt 0 ]; then
    ok "TMX_RING=no: both ranks sent compact messages (at least $n)"
else
    fail "TMX_RING=no: a rank sent no compact message ($n)"
    show
fi

if [ -x "$CONF" ]; then
    run 300 env TMX_RING=no TMX_LOG_LEVEL=info "$TMXRUN" -n 2 --timeout 240 "$CONF" -n 100
    expect_rc 0 "TMX_RING=no: the conformance suite on 2 ranks"
    n=$(compact_sent "$T/err")
    if [ "$n" -gt 0 ]; then
        ok "TMX_RING=no: the suite's ranks sent compact messages (at least $n)"
    else
        fail "TMX_RING=no: a rank of the suite sent no compact message ($n)"
    fi
else
    echo "no $CONF: the conformance part is skipped"
fi

# A ring in IMM mode (RDMA writes with immediate data, no numbering) takes the small messages;
# those that find it full go by the queue, compact when their tag repeats: both in one stream.
run 120 env TMX_RING=yes TMX_RING_MODE=imm TMX_LOG_LEVEL=info "$TMXRUN" -n 2 --timeout 100 "$PP" \
    -t lat,bw -m 0:16k -n 20 -w 2
expect_rc 0 "TMX_RING_MODE=imm: tmx_pingpong, its data checked"
expect_grep "$T/err" 'eager-RDMA ring imm' "TMX_RING_MODE=imm: the ring is in IMM mode"
n=$(compact_sent "$T/err")
if [ "$n" -gt 0 ]; then
    ok "TMX_RING_MODE=imm: compact messages beside the ring's (at least $n)"
else
    fail "TMX_RING_MODE=imm: a rank sent no compact message ($n)"
    show
fi

# Compact messages count towards lending a ring (a few eager messages by the queue, TMX_RING=auto)
# as the others do: 4 KiB messages, all compact after the first, still get their sender a ring.
run 120 env TMX_RING=auto TMX_RING_MODE=imm TMX_LOG_LEVEL=info "$TMXRUN" -n 2 --timeout 100 \
    "$PP" -t lat -m 4k:4k -n 50 -w 5
expect_rc 0 "TMX_RING=auto TMX_RING_MODE=imm: 4 KiB ping-pong"
expect_grep "$T/err" 'endpoint to .*eager-RDMA ring imm (' \
    "TMX_RING=auto: a sender of compact messages is lent a ring"

run 120 env TMX_RING=yes TMX_LOG_LEVEL=info "$TMXRUN" -n 2 --timeout 100 "$PP" -t lat,bw \
    -m 0:16k -n 20 -w 2
expect_rc 0 "TMX_RING=yes: tmx_pingpong"
expect_grep "$T/err" 'eager-RDMA ring whole' "TMX_RING=yes: the ring polls (whole)"
if grep -q 'compact eager messages' "$T/err"; then
    fail "TMX_RING=yes: compact messages sent to a peer that numbers SENDs"
    show
else
    ok "TMX_RING=yes: no compact message to a peer with a polling ring"
fi
finish
