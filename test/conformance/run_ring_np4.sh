#!/bin/sh
# The conformance suite on 4 ranks with eager-RDMA rings (TMX_RING=yes) bounded to 2 per
# worker (TMX_RING_PEERS=2): each rank lends rings to two of its four senders (itself
# included) and takes the others' messages through the queue only; the rings must be in use.
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
for f in "$logs"/rank.*; do
    lent=$(grep -c "eager-RDMA ring [a-z0-9]* (.*messages up to" "$f")
    if [ "$lent" -gt 4 ]; then
        echo "run_ring_np4.sh: $f took $lent rings from 4 receivers" >&2
        exit 1
    fi
done
taken=$(grep -h "eager-RDMA ring [a-z0-9]* (.*messages up to" "$logs"/rank.* | wc -l)
if [ "$taken" -ne 8 ]; then
    echo "run_ring_np4.sh: $taken rings taken, want 4 ranks x 2" >&2
    exit 1
fi
echo "run_ring_np4.sh: $taken rings lent (2 per rank)"
exit 0
