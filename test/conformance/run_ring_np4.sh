#!/bin/sh
# The conformance suite on 4 ranks with eager-RDMA rings (TMX_RING=yes) bounded to 2 per
# worker (TMX_RING_PEERS=2): each rank lends rings to two of its four senders (itself
# included) at a time, taking one back from an idle sender for a busier one, and takes the
# others' messages through the queue; the rings must be in use.
builddir=${TMX_BUILDDIR:-$(pwd)}
logs=${TMPDIR:-/tmp}/tmx_ring_np4.$$
mkdir "$logs" || exit 1
trap 'rm -rf "$logs"' EXIT
TMX_RING=yes
TMX_RING_PEERS=2
TMX_LOG_LEVEL=info
TMX_LOG_FILE="$logs/rank.%p"
export TMX_RING TMX_RING_PEERS TMX_LOG_LEVEL TMX_LOG_FILE
"$(dirname "$0")/run_np.sh" 4 "$@"
rc=$?
[ $rc -eq 0 ] || exit $rc
# a ring of an idle sender is asked back for a busier one (ring.h): rings move, but a rank
# never holds more than one per receiver at a time, and a receiver never lends more than 2
given=0
for f in "$logs"/rank.*; do
    lent=$(grep -c "eager-RDMA ring [a-z0-9]* (.*messages up to" "$f")
    back=$(grep -c "eager-RDMA ring given back (idle)" "$f")
    if [ $((lent - back)) -gt 4 ] || [ "$back" -gt "$lent" ]; then
        echo "run_ring_np4.sh: $f took $lent rings and gave $back back, from 4 receivers" >&2
        exit 1
    fi
    given=$((given + back))
done
taken=$(grep -h "eager-RDMA ring [a-z0-9]* (.*messages up to" "$logs"/rank.* | wc -l)
if [ "$taken" -lt 8 ] || [ $((taken - given)) -gt 8 ]; then
    echo "run_ring_np4.sh: $taken rings taken, $given given back: want 4 ranks x 2 at most" \
         "at a time, and all of them lent" >&2
    exit 1
fi
echo "run_ring_np4.sh: $taken rings lent, $given taken back from idle senders (2 per rank at" \
     "a time)"
exit 0
