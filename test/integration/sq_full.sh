#!/bin/sh
# Posts that find a connection's send queue full wait and are retried (TMX_SEND_QUEUE=4, the
# least): 64 rendezvous receives matched at once each need an RDMA READ on the receiver's send
# queue, which holds 4; before the retry the fifth read failed its receive with "resource
# temporarily unavailable". tmx_pingpong's bandwidth windows of 64 rendezvous messages (64 KiB,
# and 1 MiB) and its latency round trips, every byte checked in its check round, then the
# conformance suite over the same small queues; the shortage is logged once per process. Also
# the eager-RDMA ring's credit word (test/integration/ring.c "report"). The refused posts are
# counted (the worker's info line at destroy) and must stay within two per read: a queued read
# is tried again when a completion of the endpoint's makes room (about one refusal per read
# completion), not on every progress round (it was tried on every one: 47,820 to 275,026
# refused posts here on the soft device, 611,220 under ASan; now 932-1,434).
# Runs on whichever provider TMX_PROVIDERS picks (test/verbs/sq_full.sh: over verbs).
. "$(dirname "$0")/lib.sh"

pp="$B/examples/tmx_pingpong"
conf="$B/test/conformance/tmx_conformance"
q="TMX_SEND_QUEUE=4"

run 120 env $q TMX_LOG_LEVEL=info "$TMXRUN" -n 2 --timeout 100 "$pp" -t bw,lat -m 64K:1M -n 20
expect_rc 0 "$q: bandwidth windows of 64 rendezvous messages, 64 KiB to 1 MiB"
expect_grep "$T/out" "^1048576 " "$q: the 1 MiB row"
# reads of the run: 5 sizes x 6 windows (4 + 2 warmup) x 64 = 1920 bandwidth messages, and
# 5 x (2 + 1) latency round trips and the checks: at most two refused posts per read
refused=$(sed -n 's/.*send queue: \([0-9]*\) posts refused.*/\1/p' "$T/err" | sort -n | tail -n 1)
if [ -n "$refused" ] && [ "$refused" -ge 1 ] && [ "$refused" -le 4000 ]; then
    ok "$q: $refused refused read posts (1 to 4000: retried when a completion makes room)"
else
    fail "$q: refused read posts '${refused:-none counted}' (expected 1 to 4000)"
    show
fi
n=$(grep -c "waits for room in the send queue" "$T/err")
if [ "$n" -ge 1 ] && [ "$n" -le 2 ]; then
    ok "$q: the reads waited, said $n time(s) (once per process at most)"
else
    fail "$q: the shortage was logged $n times (expected 1 or 2: reads must have waited, once each)"
    show
fi
if grep -q "could not be posted" "$T/err"; then
    fail "$q: a read failed to post"
    show
fi

# A ring's credit word that finds the receiver's send queue full (test/integration/ring.c,
# "report"): rank 1's queue holds 4 rendezvous reads that wait for rank 0 while rank 0's ring
# messages arrive; the word must go once there is room, or rank 0's next 8 small messages all
# go by the queue as "ring full" (they did before the retry). Over verbs the reads finish
# without rank 0 (the adapter answers them), so the word seldom waits there.
run 60 env $q TMX_RING=yes TMX_RING_SLOTS=8 TMX_RING_SLOT_SIZE=256 TMX_WAIT=spin \
    TMX_SOFT_CMA=no TMX_LOG_LEVEL=info "$TMXRUN" -n 2 --timeout 50 "$B/test/integration/ring" report
expect_rc 0 "$q: a ring credit word that waited for the send queue"
expect_grep "$T/out" "rank 0: report ok" "$q: the sender's ring had room again after the burst"
if [ "${TMX_PROVIDERS:-}" != verbs ]; then
    expect_grep "$T/err" "[1-9][0-9]* credit reports waited for the send queue" \
        "$q: the credit word waited (the path ran)"
fi

if [ -x "$conf" ]; then
    run 200 env $q "$TMXRUN" -n 4 --timeout 180 "$conf" -n "${CONF_SCHEDULES:-100}"
    expect_rc 0 "$q: the conformance suite, 4 ranks, ${CONF_SCHEDULES:-100} random schedules"
else
    echo "no $conf: conformance part skipped"
fi
finish
