#!/bin/sh
# Eager-RDMA rings taken back from idle senders (test/integration/ring_reclaim.c): 3 ranks, one
# ring to lend (TMX_RING_PEERS=1, lent from the first message), small slots; rank 1's ring must
# move to rank 2 while rank 1 idles, then change hands while both send, with every message
# intact and in order. Once in each polling mode and with immediate data (the mode changes how
# the receiver knows the sender's last ring message), and once with receivers that sleep at once.
. "$(dirname "$0")/lib.sh"

prog="$B/test/integration/ring_reclaim"
small="TMX_RING=yes TMX_RING_PEERS=1 TMX_RING_SLOTS=8 TMX_RING_SLOT_SIZE=256"

# RING_RECLAIM_RUNS / RING_RECLAIM_DEAD: the runs (test/verbs/ring_reclaim.sh: over verbs,
# where TMX_SOFT_DATA_IN_ORDER means nothing, fewer)
for run in ${RING_RECLAIM_RUNS:-whole:auto aligned128:auto none:auto whole:sleep}; do
    dio=${run%%:*}
    wait=${run#*:}
    what="TMX_SOFT_DATA_IN_ORDER=$dio TMX_WAIT=$wait"
    rm -f "$T"/log.*
    run 150 env $small TMX_SOFT_DATA_IN_ORDER=$dio TMX_WAIT=$wait TMX_LOG_LEVEL=info \
        TMX_LOG_FILE="$T/log.%p" "$TMXRUN" -n 3 --timeout 120 "$prog"
    expect_rc 0 "rings taken back ($what)"
    expect_grep "$T/out" "rank 0: all ok" "rank 0 got every message intact, in order ($what)"
    expect_grep "$T/out" "rank 2: move ok (rings lent 0 taken 1" \
        "rank 2 holds the ring after rank 1 idled ($what)"
    expect_grep "$T/out" "rank 1: move ok (rings lent 0 taken 0" \
        "rank 1 gave it back ($what)"
    n=$(cat "$T"/log.* 2>/dev/null | grep -c "eager-RDMA ring given back (idle)")
    if [ "$n" -ge 2 ]; then
        ok "the ring changed hands $n times ($what)"
    else
        fail "the ring was given back $n times, expected at least 2 ($what)"
        show
    fi
done
# the holder stops progressing (the request to give the ring back stays unanswered) and dies:
# its ring must come back and go to rank 2
for dio in ${RING_RECLAIM_DEAD:-whole aligned128}; do
    what="dead holder, TMX_SOFT_DATA_IN_ORDER=$dio"
    run 150 env $small TMX_SOFT_DATA_IN_ORDER=$dio TMX_LOG_LEVEL=info \
        TMX_LOG_FILE="$T/log.%p" "$TMXRUN" -n 3 --timeout 120 "$prog" dead
    expect_rc 0 "$what: rank 0 and rank 2 finish"
    expect_grep "$T/out" "rank 0: dead ok? yes" "$what: rank 2's messages intact, in order"
    expect_grep "$T/out" "rank 2: dead ok? yes" "$what: the dead rank's ring went to rank 2"
done
finish
