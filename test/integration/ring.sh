#!/bin/sh
# Eager-RDMA rings end to end (test/integration/ring.c: order of ring and queue messages, a
# full ring, a receiver asleep with no timeout, the worker query), with rings of 4 slots of
# 256 bytes lent at once, in each mode the soft device's data-in-order answer leads to; then
# the choices that refuse polling: OOO placement on (imm), tag-matching offload (none),
# TMX_RING=no (none).
. "$(dirname "$0")/lib.sh"

prog="$B/test/integration/ring"
small="TMX_RING=yes TMX_RING_SLOTS=4 TMX_RING_SLOT_SIZE=256"

for run in whole:whole aligned128:aligned128 none:imm; do
    dio=${run%%:*}
    mode=${run#*:}
    run 120 env $small TMX_SOFT_DATA_IN_ORDER=$dio RING_EXPECT_MODE=$mode \
        "$TMXRUN" -n 2 --timeout 100 "$prog"
    expect_rc 0 "rings $mode (TMX_SOFT_DATA_IN_ORDER=$dio)"
    expect_grep "$T/out" "rank 1: all ok" "rank 1 got every message in order, intact"
    expect_grep "$T/out" "rank 0: rings lent [0-9]* taken 1; sent [1-9]" "rank 0 sent by ring"
    expect_grep "$T/out" "rank 0: .*full [1-9]" "rank 0 found the ring full"
    if [ "$mode" != imm ]; then
        expect_grep "$T/out" "rank 0: .*asleep [0-9]* wakes [0-9]*" "sleep counters"
        if grep -q "rank 0: .*asleep 0 wakes 0;" "$T/out"; then
            fail "rings $mode: rank 0 never met a sleeping receiver"
        fi
    fi
done

# A receiver that polls and receives nothing: a polling ring's messages take no eager credit,
# so past the unexpected budget their slots must stay taken until a receive comes, or the
# sender floods the receiver's memory (ring.c "bound": 2000 sends, at most 400 done)
for dio in whole aligned128; do
    run 120 env $small TMX_SOFT_DATA_IN_ORDER=$dio TMX_UNEXP_BUDGET=4k RING_BOUND_MAX=400 \
        RING_EXPECT_MODE=$dio "$TMXRUN" -n 2 --timeout 100 "$prog"
    expect_rc 0 "rings $dio with a 4 KiB unexpected budget"
    expect_grep "$T/out" "rank 0: bound: [0-9]* of 2000 sends done" "the bound phase ran"
    expect_grep "$T/out" "rank 1: all ok" "rank 1 got every message in order, intact"
done

# (OOO placement on the soft device holds the receiver's credit writes back for a while when
# one could overtake another, so the ring is often full: a few ring messages are enough)
run 120 env $small TMX_SOFT_OOO=yes TMX_OOO=yes RING_EXPECT_MODE=imm RING_EXPECT_MIN=1 \
    "$TMXRUN" -n 2 --timeout 100 "$prog"
expect_rc 0 "rings with OOO placement on"
expect_grep "$T/out" "rank 1: .*whole 0 aligned128 0 imm [1-9]" "OOO on: never polled (imm)"

run 120 env $small TMX_SOFT_OOO=yes TMX_OOO=yes TMX_RING_MODE=whole RING_EXPECT_MODE=imm \
    RING_EXPECT_MIN=1 \
    "$TMXRUN" -n 2 --timeout 100 "$prog"
expect_rc 0 "TMX_RING_MODE=whole with OOO placement on"
expect_grep "$T/out" "rank 1: .*whole 0 aligned128 0 imm [1-9]" "OOO on: a forced mode cannot poll"

run 120 env $small TMX_SOFT_TM=yes RING_EXPECT_MODE=none "$TMXRUN" -n 2 --timeout 100 "$prog"
expect_rc 0 "tag-matching offload"
expect_grep "$T/out" "rank 1: rings lent 0 taken 0; sent 0 received 0" "no ring with offload"

run 120 env TMX_RING=no RING_EXPECT_MODE=none "$TMXRUN" -n 2 --timeout 100 "$prog"
expect_rc 0 "TMX_RING=no"
expect_grep "$T/out" "rank 1: rings lent 0 taken 0; sent 0 received 0" "no ring with TMX_RING=no"
expect_grep "$T/out" "rank 1: all ok" "and the messages all came"

# A window of small sends while the receiver does not call tmx (osu_bw's 64 against 32 slots):
# they fit the cells, 4 per slot, and all complete in place (ring.c "window")
run 60 env TMX_RING=yes TMX_RING_SLOTS=8 TMX_SOFT_DATA_IN_ORDER=whole "$TMXRUN" -n 2 \
    --timeout 50 "$prog" window
expect_rc 0 "a window of 24 small sends into an 8-slot ring"
expect_grep "$T/out" "rank 0: window: 24 of 24 small sends done in place" "all in place"
expect_grep "$T/out" "rank 1: window ok" "and all came, in order"

# The receiver's count of messages taken may show more than the slots outstanding, as the cells
# allow: the sender must take it (ring.c "credits"; it was dropped as nonsense, and a stream of
# small messages then met a ring it thought full once every two osu_bw windows)
run 60 env TMX_RING=yes TMX_RING_SLOTS=8 TMX_SOFT_DATA_IN_ORDER=whole TMX_UNEXP_BUDGET=0 \
    TMX_WAIT=spin "$TMXRUN" -n 2 --timeout 50 "$prog" credits
expect_rc 0 "small sends past the slots, the receiver's count more than the slots behind"
expect_grep "$T/out" "rank 0: credits: 32 of 32 small sends by the ring (0 found it full)" \
    "all by the ring"
expect_grep "$T/out" "rank 1: credits ok" "and all came, in order"

# Messages that fill more than three quarters of a slot but fit one take two positions (ring.h
# "Spans": the flag in the first slot, the message at the start of the next), starting at every
# position of the default ring, the last included, for many laps, posted and unexpected: all
# come in order, intact, and most by the ring (ring.c "span"; before spans they took the queue:
# 3 of 13 lengths by the ring, fewer than 1500 of 3000)
run 120 env TMX_RING=yes TMX_SOFT_DATA_IN_ORDER=whole RING_EXPECT_MODE=whole RING_SPAN_MIN=1500 \
    TMX_WAIT=spin "$TMXRUN" -n 2 --timeout 100 "$prog" span
expect_rc 0 "two-position messages (spans) in the default ring"
expect_grep "$T/out" "rank 0: span: [0-9]* of 3000 sends by the ring" "the span phase ran"
expect_grep "$T/out" "rank 1: span ok" "and all came, in order, intact"

# TMX_RING=auto: while the receiver has rings to spare, a sender is lent one at its first
# eager message (it was the 16th, then the 2nd: a short job's traffic met the grant midway).
# One message in the whole job: the receiver lends, the sender takes a ring.
run 60 env TMX_RING=auto "$TMXRUN" -n 2 --timeout 50 "$prog" first
expect_rc 0 "TMX_RING=auto: a ring lent at a sender's first eager message"
expect_grep "$T/out" "rank 1: first: after one eager message, rings lent 1" "rank 1 lent it"
expect_grep "$T/out" "rank 0: first: after one eager message, rings lent 0 taken 1" \
    "rank 0 took it"
# A ping-pong of 4 messages each way: both ranks take a ring.
run 60 env TMX_RING=auto TMX_LOG_LEVEL=info "$TMXRUN" -n 2 --timeout 50 \
    "$B/examples/tmx_pingpong" -t lat -m 8:8 -n 3 -w 1
expect_rc 0 "TMX_RING=auto: a ping-pong of 4 messages"
n=$(grep -c 'endpoint to .*: eager-RDMA ring [a-z0-9]* (' "$T/err")
if [ "$n" -eq 2 ]; then
    ok "TMX_RING=auto: both senders were lent a ring within 4 messages"
else
    fail "TMX_RING=auto: $n of 2 senders were lent a ring within 4 messages"
    show
fi

# An oversubscribed receiver lends only quarter rings (8 of the default 32 slots), also the
# first two, which a process with a CPU of its own lends whole: its peers cannot stream faster
# than it gets a processor, and at 8-64 ranks on 2 cores the whole rings were 40% of an
# all-to-all's shared memory (issue 11). Two ranks on one CPU (tmxrun says TMX_LOCAL_SIZE=2)
# against one rank per core.
for how in core one; do
    if [ "$how" = one ]; then
        command -v taskset > /dev/null || { echo "taskset missing: no oversubscribed run"; continue; }
        launch="taskset -c 0 $TMXRUN -n 2 --bind-to none"
        want=8
    else
        launch="$TMXRUN -n 2"
        want=32
    fi
    run 60 env TMX_RING=auto TMX_LOG_LEVEL=debug $launch --timeout 50 \
        "$B/examples/tmx_pingpong" -t lat -m 8:8 -n 3 -w 1
    expect_rc 0 "a ping-pong, $how: $launch"
    n=$(grep -c "eager-RDMA ring ([a-z0-9]*, $want x [0-9]* bytes) lent" "$T/err")
    if [ "$n" -eq 2 ]; then
        ok "$how: both rings lent have $want slots"
    else
        fail "$how: $n of 2 rings lent have $want slots"
        grep "eager-RDMA ring (\|oversub" "$T/err" | sed 's/^/    /'
    fi
done

# TMX_RING_SLOT_SIZE is payload: a slot holds that many bytes behind the header and the mode's
# flag or stamps, so a 2 KiB message (Open MPI's 2 KiB MPI_Send) fits the default slot (it did
# not when the slot was 2048 bytes in all). In whole mode a message goes by its slot only while
# it fills at most three quarters of it (ring.c TMX_RING_FILL: a full slot measured slower than
# the queue), so 1.5 KiB goes by the ring there; 2 KiB, which fits the slot, takes two
# positions (ring.h "Spans"), and only a message that does not fit a slot goes by the queue;
# aligned128 keeps 2 KiB in one slot.
# sent= the fewer ring messages of the two ranks (0 when a rank has none), sent_max= the more
# (0 when neither has any: a worker prints its ring line only when it used a ring)
ring_sent() { # size dio
    run 60 env TMX_SOFT_DATA_IN_ORDER=$2 TMX_RING=auto TMX_LOG_LEVEL=info "$TMXRUN" -n 2 \
        --timeout 50 "$B/examples/tmx_pingpong" -t lat -m "$1:$1" -n 20 -w 2
    expect_rc 0 "$1 B ping-pong, default slots ($2)"
    sent=0
    sent_max=$(sed -n 's/.*eager-RDMA rings: \([0-9]*\) messages sent.*/\1/p' "$T/err" |
        sort -n | tail -1)
    sent_max=${sent_max:-0}
    if [ "$(grep -c 'eager-RDMA rings: ' "$T/err")" -eq 2 ]; then
        sent=$(sed -n 's/.*eager-RDMA rings: \([0-9]*\) messages sent.*/\1/p' "$T/err" |
            sort -n | head -1)
    fi
}
for c in "1536 whole ring" "2048 whole ring" "2200 whole queue" "2048 aligned128 ring"; do
    size=${c%% *}
    path=${c##* }
    dio=${c#* }
    dio=${dio%% *}
    ring_sent "$size" "$dio"
    n=$sent
    if [ "$path" = ring ] && [ "${n:-0}" -ge 15 ]; then
        ok "$size B messages by the default ring ($dio): $n sent by each rank's ring at least"
    elif [ "$path" = queue ] && [ "$sent_max" -eq 0 ]; then
        # (neither rank sent by a ring: the fewer of the two, 0 when one rank used none,
        # would pass a job where only one of them took the queue)
        ok "$size B messages by the queue ($dio: more than the default slot holds)"
    else
        fail "$size B messages ($dio): ${n:-no} ring messages (up to $sent_max by a rank)," \
            "expected by the $path"
        show
    fi
done
finish
