#!/bin/sh
# A rendezvous receive whose sender died fails with "peer failed", on the cross-memory attach
# path (the default) and through the rings (TMX_SOFT_CMA=no).
. "$(dirname "$0")/lib.sh"

for cma in auto no; do
    run 60 env TMX_SOFT_CMA=$cma "$TMXRUN" -n 2 --timeout 50 "$B/test/integration/peer_dies" rndv
    expect_rc 0 "TMX_SOFT_CMA=$cma: the job ends well"
    expect_grep "$T/out" "rank 0 ok" "TMX_SOFT_CMA=$cma: the receive failed with peer failed"
done
finish
