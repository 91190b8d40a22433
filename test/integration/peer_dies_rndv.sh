#!/bin/sh
# A rendezvous receive whose sender died fails with "peer failed", on the cross-memory attach
# path (TMX_SOFT_CMA_MIN=0: every read by CMA), through the rings (the default, and
# TMX_SOFT_CMA=no), and at 128 KiB (a read of a few ring records) as well as 1 MiB.
. "$(dirname "$0")/lib.sh"

for v in "TMX_SOFT_CMA=auto TMX_SOFT_CMA_MIN=0" "TMX_SOFT_CMA=auto" "TMX_SOFT_CMA=no"; do
    run 60 env $v "$TMXRUN" -n 2 --timeout 50 "$B/test/integration/peer_dies" rndv
    expect_rc 0 "$v: the job ends well"
    expect_grep "$T/out" "rank 0 ok" "$v: the receive failed with peer failed"
done
run 60 env TMX_SOFT_CMA=auto "$TMXRUN" -n 2 --timeout 50 "$B/test/integration/peer_dies" rndv 131072
expect_rc 0 "128 KiB: the job ends well"
expect_grep "$T/out" "rank 0 ok" "128 KiB: the receive failed with peer failed"
finish
