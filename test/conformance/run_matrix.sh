#!/bin/sh
# run_matrix.sh [args]: the conformance suite on 2 ranks under every combination of the soft
# device's answers and the core's features that changes a data path (issue 9):
#
#   data-in-order answer  whole | aligned128 | none     (TMX_SOFT_DATA_IN_ORDER)
#   out-of-order placement off | on                     (TMX_SOFT_OOO + TMX_OOO)
#   XRC                   off | 1 domain | 2 domains    (TMX_SOFT_XRC + TMX_XRC, TMX_XRC_DOMAINS)
#   tag-matching offload  off | on                      (TMX_SOFT_TM)
#
# with eager-RDMA rings lent from the first message (TMX_RING=yes). The combinations that cannot
# change a path are left out: the in-order answer only chooses the ring's mode, and a ring is
# never lent to an XRC or offloaded endpoint, so with XRC or TM the answer varies only with OOO.
# For each combination the rank logs (info level) must show the path the core should have
# chosen from what the device answered, nothing else:
#   - TM on: every rank's device has offload on (tmx_conformance -O also checks that the device
#     matched receives), and no ring is lent;
#   - XRC on: every rank says XRC is on with that many domains, and no endpoint fell back to RC;
#     XRC together with TM: both on (TM on RC, the rest on XRC); tmx_conformance -X checks
#     that every worker holds initiators and targets (and RC queue pairs with offload);
#   - OOO on (RC endpoints): placement on and the ring, if any, on immediate data (never polled);
#   - otherwise the ring's mode follows the answer: whole -> whole, aligned128 -> aligned128,
#     none -> imm.
# COUNT random schedules per combination (default 300; tmx_conformance's -n). Exit 77 (skip)
# without tmxrun.
me="run_matrix.sh"
builddir=${TMX_BUILDDIR:-$(pwd)}
tmxrun="$builddir/tools/tmxrun"
prog="$builddir/test/conformance/tmx_conformance"
count=${TMX_MATRIX_COUNT:-300}
if [ ! -x "$tmxrun" ]; then
    echo "$me: $tmxrun not built, skipping"
    exit 77
fi
logs=${TMPDIR:-/tmp}/tmx_matrix.$$
mkdir "$logs" || exit 1
trap 'rm -rf "$logs"' EXIT

fails=0
runs=0
# expect PATTERN MIN WHAT: at least MIN rank logs contain PATTERN (grep -E)
expect() {
    n=$(grep -lE "$1" "$logs"/rank.* 2>/dev/null | wc -l)
    if [ "$n" -lt "$2" ]; then
        echo "$me: [$combo] $3: $n of 2 rank logs say so" >&2
        bad=1
    fi
}
# refuse PATTERN WHAT: no rank log contains PATTERN
refuse() {
    if grep -qE "$1" "$logs"/rank.* 2>/dev/null; then
        echo "$me: [$combo] $2:" >&2
        grep -hE "$1" "$logs"/rank.* | head -3 >&2
        bad=1
    fi
}

one() { # tm xrc ooo dio
    tm=$1 xrc=$2 ooo=$3 dio=$4
    combo="tm=$tm xrc=$xrc ooo=$ooo in-order=$dio"
    rm -f "$logs"/rank.*
    if [ "$xrc" = 0 ]; then
        set -- TMX_SOFT_XRC=no TMX_XRC=no
    else
        set -- TMX_SOFT_XRC=yes TMX_XRC=yes TMX_XRC_DOMAINS="$xrc"
    fi
    oflag=
    [ "$tm" = yes ] && oflag=-O
    [ "$xrc" != 0 ] && oflag="$oflag -X" # every worker holds XRC initiators and targets
    env "$@" TMX_SOFT_TM="$tm" TMX_TM_OFFLOAD=auto TMX_SOFT_OOO="$ooo" TMX_OOO="$ooo" \
        TMX_SOFT_DATA_IN_ORDER="$dio" TMX_RING=yes TMX_RING_SLOTS=4 TMX_RING_SLOT_SIZE=256 \
        TMX_LOG_LEVEL=info TMX_LOG_FILE="$logs/rank.%p" \
        "$tmxrun" -n 2 --timeout 120 "$prog" -n "$count" $oflag $extra > "$logs/out" 2>&1
    rc=$?
    runs=$((runs + 1))
    bad=0
    if [ $rc -ne 0 ]; then
        echo "$me: [$combo] the suite failed (exit $rc):" >&2
        tail -20 "$logs/out" >&2
        bad=1
    fi
    if [ "$tm" = yes ]; then
        expect "tag-matching offload on" 2 "tag-matching offload on"
        refuse "eager-RDMA ring (whole|aligned128|imm) \\(" "a ring lent beside offload"
    else
        refuse "tag-matching offload on" "offload on though TMX_SOFT_TM=no"
    fi
    if [ "$xrc" != 0 ]; then
        expect "XRC on, $xrc domain" 2 "XRC on with $xrc domain(s)"
        refuse "one RC queue pair per peer" "an endpoint fell back to RC"
        [ "$tm" = yes ] && expect "tagged messages on RC \\(tag-matching offload\\), the rest on XRC" \
            2 "XRC beside offload"
        refuse "eager-RDMA ring (whole|aligned128|imm) \\(" "a ring lent to an XRC endpoint"
    elif [ "$ooo" = yes ]; then
        expect "out-of-order placement on" 2 "out-of-order placement on"
        refuse "eager-RDMA ring (whole|aligned128) \\(" "a ring polled on data with OOO on"
        [ "$tm" = no ] && expect "eager-RDMA ring imm \\(" 2 "rings on immediate data"
    elif [ "$tm" = no ]; then
        case $dio in
            whole) mode=whole ;;
            aligned128) mode=aligned128 ;;
            *) mode=imm ;;
        esac
        expect "eager-RDMA ring $mode \\(" 2 "rings in mode $mode"
        other=$(grep -hE "eager-RDMA ring (whole|aligned128|imm) \\(" "$logs"/rank.* |
                grep -vc "ring $mode (")
        if [ "$other" -ne 0 ]; then
            echo "$me: [$combo] $other endpoints chose another ring mode than $mode" >&2
            bad=1
        fi
    fi
    if [ $bad -ne 0 ]; then
        fails=$((fails + 1))
        cat "$logs"/rank.* | cut -c1-160 | sort | uniq -c | sort -rn | head -20 >&2
    else
        echo "$me: [$combo] passed"
    fi
}

extra="$*"
for ooo in no yes; do
    for dio in whole aligned128 none; do
        one no 0 "$ooo" "$dio"
    done
    if [ "$ooo" = no ]; then dio=whole; else dio=none; fi
    one no 1 "$ooo" "$dio"
    one no 2 "$ooo" "$dio"
    one yes 0 "$ooo" "$dio"
    one yes 2 "$ooo" "$dio"
done
echo "$me: $runs combinations, $fails failed, $count random schedules each"
[ $fails -eq 0 ]
