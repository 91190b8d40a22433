#!/bin/sh
# run_xrc.sh N NODES DOMAINS [args]: the conformance suite on N ranks through XRC domains: the
# soft device offers XRC (TMX_SOFT_XRC=yes), the ranks use it (TMX_XRC=yes) with DOMAINS
# domains per node, and the ranks are spread over NODES simulated nodes (TMX_NODE_ID = rank mod
# NODES), so that a rank reaches some peers through its own node's domains and others through
# another node's. Every rank's log (info level) must say that XRC was on, and none may have
# connected an endpoint otherwise; the suite's -X check asks every rank's worker for its XRC
# initiators and targets. With TMX_XRC_EXPECT_TM=1 (run_xrc_tm.sh) every rank must also have
# had tag-matching offload on, with the tagged stream on RC and the rest on XRC. Exit 77
# (skip) without tmxrun.
np=$1
nodes=$2
domains=$3
shift 3
me="run_xrc.sh"
builddir=${TMX_BUILDDIR:-$(pwd)}
tmxrun="$builddir/tools/tmxrun"
prog="$builddir/test/conformance/tmx_conformance"
if [ ! -x "$tmxrun" ]; then
    echo "$me: $tmxrun not built, skipping"
    exit 77
fi
logs=${TMPDIR:-/tmp}/tmx_xrc.$$
mkdir "$logs" || exit 1
trap 'rm -rf "$logs"' EXIT
TMX_SOFT_XRC=yes
TMX_XRC=yes
TMX_XRC_DOMAINS=$domains
TMX_LOG_LEVEL=info
TMX_LOG_FILE="$logs/rank.%p"
export TMX_SOFT_XRC TMX_XRC TMX_XRC_DOMAINS TMX_LOG_LEVEL TMX_LOG_FILE
"$tmxrun" -n "$np" --timeout 300 sh -c \
    'TMX_NODE_ID=xrc-node-$((TMX_RANK % '"$nodes"')) exec "$0" "$@"' "$prog" -X "$@"
rc=$?
[ $rc -eq 0 ] || exit $rc
n=$(grep -l "XRC on, $domains domain" "$logs"/rank.* 2>/dev/null | wc -l)
if [ "$n" -ne "$np" ]; then
    echo "$me: XRC with $domains domains was on in $n of $np rank logs" >&2
    exit 1
fi
if grep -l "one RC queue pair per peer" "$logs"/rank.* >/dev/null 2>&1; then
    echo "$me: a rank fell back to RC" >&2
    exit 1
fi
if [ "${TMX_XRC_EXPECT_TM:-0}" = 1 ]; then
    n=$(grep -l "tag-matching offload on" "$logs"/rank.* 2>/dev/null | wc -l)
    m=$(grep -l "tagged messages on RC (tag-matching offload), the rest on XRC" "$logs"/rank.* \
        2>/dev/null | wc -l)
    if [ "$n" -ne "$np" ] || [ "$m" -ne "$np" ]; then
        echo "$me: offload on in $n and XRC beside it in $m of $np rank logs" >&2
        exit 1
    fi
fi
nodes_seen=$(grep -h "XRC on" "$logs"/rank.* | sed -n 's/.* of node \([0-9a-f]*\),.*/\1/p' |
             sort -u | wc -l)
if [ "$nodes_seen" -ne "$nodes" ]; then
    echo "$me: the ranks were on $nodes_seen nodes, not $nodes" >&2
    exit 1
fi
echo "$me: XRC on in $n rank logs, $domains domain(s), $nodes node(s)"
exit 0
