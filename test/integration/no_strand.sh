#!/bin/sh
# A send reported complete needs nothing more from its process: 16 eager-sized messages,
# then straight into a barrier, all arrive (they used to wait in the sender's device queue
# for progress it never made). Also with TMX_EAGER_MAX above what the device carries in one
# piece: it is lowered, with a warning naming the variable. And a rank waiting in
# tmx_job_barrier still serves the peers that wait for it.
. "$(dirname "$0")/lib.sh"

prog="$B/test/integration/no_strand"

run 60 env TMX_EAGER_MAX=64k "$TMXRUN" -n 2 --timeout 50 "$prog" eager 65536 16
expect_rc 0 "16 sends of 64 KiB at TMX_EAGER_MAX=64k, then a barrier"
expect_grep "$T/out" "rank 1 received 16 of 16" "every message arrived intact"

run 60 env TMX_EAGER_MAX=256k "$TMXRUN" -n 2 --timeout 50 "$prog" eager 200000 8
expect_rc 0 "8 sends of 200000 bytes at TMX_EAGER_MAX=256k (the ring size), then a barrier"
expect_grep "$T/out" "rank 1 received 8 of 8" "every message arrived intact"
expect_grep "$T/err" "TMX_EAGER_MAX=262144 lowered to" "the lowered setting is named"

run 60 env TMX_EAGER_MAX=64m "$TMXRUN" -n 2 --timeout 50 "$prog" eager 1000000 4
expect_rc 0 "TMX_EAGER_MAX=64m: worker creation is quick and small, 1 MB messages arrive"
expect_grep "$T/out" "rank 1 received 4 of 4" "every message arrived intact"
[ "$secs" -lt 20 ] && ok "done in $secs s" || fail "took $secs s"

# MPI's Irecv + Barrier + Wait against Send + Ssend + Barrier: the barrier progresses.
run 60 "$TMXRUN" -n 2 --timeout 50 "$prog" barrier
expect_rc 0 "blocking sends to a rank that waits in tmx_job_barrier"
expect_grep "$T/out" "rendezvous and the synchronous message: intact" "both arrived intact"

run 30 env TMX_EAGER_MAX=64m "$B/tools/tmx_info" -w
expect_rc 0 "tmx_info -w with TMX_EAGER_MAX=64m"
expect_grep "$T/out" "eager max *65432$" "tmx_info shows the eager limit in effect"
expect_grep "$T/err" "TMX_EAGER_MAX=67108864 lowered to 65432" "and warns, naming the variable"
finish
