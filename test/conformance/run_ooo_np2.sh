#!/bin/sh
# The conformance suite on 2 ranks with out-of-order data placement: the soft device offers it
# (TMX_SOFT_OOO=yes), the endpoints enable it (TMX_OOO=yes), so RDMA reads and writes of a QP
# may be overtaken where DESIGN.md's ordering table allows it without a fence, and the bytes of
# an RDMA write land scrambled (TMX_SOFT_DATA_IN_ORDER=none). Every rank's log (info level)
# must say that an endpoint really connected with it on.
builddir=${TMX_BUILDDIR:-$(pwd)}
logs=${TMPDIR:-/tmp}/tmx_ooo_np2.$$
mkdir "$logs" || exit 1
trap 'rm -rf "$logs"' EXIT
TMX_SOFT_OOO=yes
TMX_OOO=yes
TMX_SOFT_DATA_IN_ORDER=none
TMX_XRC=no # OOO placement is for RC queue pairs
TMX_LOG_LEVEL=info
TMX_LOG_FILE="$logs/rank.%p"
export TMX_SOFT_OOO TMX_OOO TMX_SOFT_DATA_IN_ORDER TMX_XRC TMX_LOG_LEVEL TMX_LOG_FILE
"$(dirname "$0")/run_np.sh" 2 "$@"
rc=$?
[ $rc -eq 0 ] || exit $rc
n=$(grep -l "out-of-order placement on" "$logs"/rank.* 2>/dev/null | wc -l)
if [ "$n" -lt 2 ]; then
    echo "run_ooo_np2.sh: OOO placement was not enabled on both ranks ($n logs say so)" >&2
    exit 1
fi
echo "run_ooo_np2.sh: OOO placement on in $n rank logs"
exit 0
