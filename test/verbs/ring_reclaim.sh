#!/bin/sh
# Eager-RDMA rings taken back from idle senders, over verbs in the soft-RoCE guest:
# test/integration/ring_reclaim.sh (3 ranks, one ring to lend, rank 1's ring moves to rank 2
# while rank 1 idles, then changes hands while both send; a holder that dies without giving it
# back) on rxe instead of the soft device. rxe's inline limit takes the test's 256-byte slots
# (the default 2 KiB ones are above it: no ring over rxe by default), and rxe promises no data
# order, so the ring is of IMM mode (each message's RDMA WRITE with immediate data tells the
# receiver). TMX_SOFT_DATA_IN_ORDER means nothing here: one run polling then sleeping, one
# sleeping at once, one dead holder. Skips (77) with the reason where the guest cannot run.
here=$(cd "$(dirname "$0")" && pwd)
exec sh "$here/in_vm.sh" env TMX_PROVIDERS=verbs RING_RECLAIM_RUNS="whole:auto whole:sleep" \
    RING_RECLAIM_DEAD=whole sh "$here/../integration/ring_reclaim.sh"
