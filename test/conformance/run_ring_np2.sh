#!/bin/sh
# The conformance suite on 2 ranks with eager-RDMA rings lent from the first message
# (TMX_RING=yes), once per data-in-order answer of the soft device: whole (the ring is polled
# on a flag), aligned128 (on block stamps), none (RDMA write with immediate and the CQ). The
# rings are small (4 slots of 256 bytes), so that they fill and sends fall back to the queue
# while ring and queue messages interleave; the whole-message run sleeps at once when idle
# (TMX_WAIT=sleep), so that a sender writes rings of sleeping receivers. Every rank's log (info
# level) must say which mode its rings have, and the workers must have sent through them.
builddir=${TMX_BUILDDIR:-$(pwd)}
logs=${TMPDIR:-/tmp}/tmx_ring_np2.$$
mkdir "$logs" || exit 1
trap 'rm -rf "$logs"' EXIT
TMX_RING=yes
TMX_RING_SLOTS=4
TMX_RING_SLOT_SIZE=256
TMX_LOG_LEVEL=info
export TMX_RING TMX_RING_SLOTS TMX_RING_SLOT_SIZE TMX_LOG_LEVEL
for run in whole:whole aligned128:aligned128 none:imm; do
    dio=${run%%:*}
    mode=${run#*:}
    rm -f "$logs"/rank.*
    if [ "$dio" = whole ]; then wait=sleep; else wait=auto; fi
    TMX_SOFT_DATA_IN_ORDER=$dio TMX_WAIT=$wait TMX_LOG_FILE="$logs/rank.%p" \
        "$(dirname "$0")/run_np.sh" 2 "$@"
    rc=$?
    if [ $rc -ne 0 ]; then
        echo "run_ring_np2.sh: the suite failed with TMX_SOFT_DATA_IN_ORDER=$dio" >&2
        cat "$logs"/rank.* >&2
        exit $rc
    fi
    n=$(grep -l "eager-RDMA ring $mode (" "$logs"/rank.* 2>/dev/null | wc -l)
    sent=$(grep -h "eager-RDMA rings: [1-9][0-9]* messages sent" "$logs"/rank.* 2>/dev/null |
           wc -l)
    other=$(grep -h "eager-RDMA ring [a-z0-9]* (" "$logs"/rank.* | grep -v "ring $mode (" |
            wc -l)
    if [ "$n" -lt 2 ] || [ "$sent" -lt 2 ] || [ "$other" -ne 0 ]; then
        echo "run_ring_np2.sh: with TMX_SOFT_DATA_IN_ORDER=$dio, $n rank logs choose $mode," \
             "$other choose another mode, $sent workers sent through rings" >&2
        exit 1
    fi
    echo "run_ring_np2.sh: TMX_SOFT_DATA_IN_ORDER=$dio: rings $mode in $n rank logs, used by" \
         "$sent workers"
done
exit 0
