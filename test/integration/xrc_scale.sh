#!/bin/sh
# How connection state scales, RC against XRC (issue 9): a job of many simulated nodes
# (TMX_NODE_ID = rank / P) where every rank talks to every rank (xrc_scale), run once with one
# RC queue pair per peer process (TMX_XRC=no) and through XRC domains (the soft device offers
# XRC: TMX_SOFT_XRC=yes), on N nodes of P processes and D domains. Printed: the job's totals of
# what the devices hold; checked:
#
#   RC:  every rank holds 2 N P RC queue pairs (an endpoint to each rank, itself included, and
#        the passive side of each rank's endpoint to it): 2 (N P)^2 in the job
#   XRC: every rank holds N D initiators (one per node and domain), whatever P is; the job
#        N^2 P D initiators and as many target QPs (one for each), no RC queue pair; every rank
#        reports N P D receive QPs (the targets of every initiator to its node: those it created
#        and those it opened), each in RTR, in a domain it has, with its SRQ number there;
#        rendezvous data was striped over the domains
#
# so that the XRC count grows with nodes x processes per node (N^2 P D), not with the square
# of all processes (2 (N P)^2), which two layouts of the same 16 processes show (4 x 4, 2 x 8).
. "$(dirname "$0")/lib.sh"

X="$B/test/integration/xrc_scale"
unset TMX_XRC TMX_XRC_DOMAINS TMX_SOFT_XRC TMX_NODE_ID
# 16 ranks on two cores: the lowest priority, small rings (small messages, one of 256 KiB;
# eager messages fit a quarter ring)
TMX_SOFT_RING_SIZE=64k
TMX_EAGER_MAX=8k
export TMX_SOFT_RING_SIZE TMX_EAGER_MAX

printf '%-16s %6s %8s %10s %10s %6s %12s %16s\n' layout procs rc_qps xrc_ini xrc_tgt srqs \
    connections recv_contexts

# scale LABEL N P D XRC: runs, prints the totals, sets rc ini tgt srqs conn rcv qps bad strp
scale() {
    label=$1 n=$2 p=$3 d=$4 x=$5
    np=$((n * p))
    run 200 nice -n 19 env TMX_SOFT_XRC=yes TMX_XRC="$x" TMX_XRC_DOMAINS="$d" \
        "$TMXRUN" -n "$np" --timeout 190 sh -c 'TMX_NODE_ID=scale-node-$((TMX_RANK / '"$p"')) \
        exec "$0"' "$X"
    expect_rc 0 "$label: $np ranks connected all to all, every payload checked, in $secs s"
    lines=$(grep -c "^counts rank=" "$T/out")
    if [ "$lines" -ne "$np" ]; then
        fail "$label: $lines of $np ranks reported"
        show
        return
    fi
    sum() { grep "^counts rank=" "$T/out" | tr ' ' '\n' | sed -n "s/^$1=//p" |
            awk '{ s += $1 } END { print s + 0 }'; }
    rcq=$(sum rc) ini=$(sum ini) tgt=$(sum tgt) srqs=$(sum srqs) conn=$(sum conn)
    rcv=$(sum rcv) qps=$(sum rcv_qps) bad=$(sum rcv_bad) strp=$(sum striped)
    xrc_on=$(sum xrc)
    printf '%-16s %6d %8d %10d %10d %6d %12d %16d\n' "$label" "$np" "$rcq" "$ini" "$tgt" \
        "$srqs" "$conn" "$rcv"
}

# per-rank values of one field, one per line
each() { grep "^counts rank=" "$T/out" | tr ' ' '\n' | sed -n "s/^$1=//p"; }

N=4 P=4 D=2
scale "rc  ${N}x${P}" $N $P $D no
[ "$xrc_on" -eq 0 ] && ok "rc: no rank used XRC" || fail "rc: $xrc_on ranks used XRC"
want=$((2 * N * P))
[ "$(each rc | sort -u)" = "$want" ] && ok "rc: every rank holds 2 N P = $want RC queue pairs" ||
    fail "rc: RC queue pairs per rank: $(each rc | sort -u | tr '\n' ' ')(want $want)"
rc_conn=$conn
[ "$conn" -eq $((2 * N * P * N * P)) ] && ok "rc: the job holds 2 (N P)^2 = $conn connections" ||
    fail "rc: $conn connections, want $((2 * N * P * N * P))"

for layout in "4 4" "2 8"; do
    set -- $layout
    N=$1 P=$2
    scale "xrc ${N}x${P} D=$D" $N $P $D yes
    [ "$xrc_on" -eq $((N * P)) ] && ok "xrc ${N}x${P}: every rank used XRC" ||
        fail "xrc ${N}x${P}: $xrc_on of $((N * P)) ranks used XRC"
    [ "$rcq" -eq 0 ] && ok "xrc ${N}x${P}: no RC queue pair" || fail "xrc ${N}x${P}: $rcq RC QPs"
    [ "$(each ini | sort -u)" = "$((N * D))" ] &&
        ok "xrc ${N}x${P}: every rank holds N D = $((N * D)) initiators" ||
        fail "xrc ${N}x${P}: initiators per rank $(each ini | sort -u | tr '\n' ' ')" \
            "(want $((N * D)))"
    want=$((N * N * P * D))
    [ "$ini" -eq "$want" ] && [ "$tgt" -eq "$want" ] && [ "$conn" -eq "$want" ] &&
        ok "xrc ${N}x${P}: the job holds N^2 P D = $want initiators and $want target QPs" ||
        fail "xrc ${N}x${P}: $ini initiators, $tgt target QPs, $conn connections (want $want)"
    [ "$rcv" -eq $((want + N * P * (1 + D))) ] &&
        ok "xrc ${N}x${P}: receive contexts = targets + SRQs = $rcv" ||
        fail "xrc ${N}x${P}: $rcv receive contexts, want $((want + N * P * (1 + D)))"
    [ "$(each rcv_qps | sort -u)" = "$((N * P * D))" ] && [ "$bad" -eq 0 ] &&
        ok "xrc ${N}x${P}: every rank reports N P D = $((N * P * D)) receive QPs," \
            "each in RTR with its SRQ" ||
        fail "xrc ${N}x${P}: receive QPs per rank $(each rcv_qps | sort -u | tr '\n' ' ')" \
            "(want $((N * P * D))), $bad bad"
    [ "$strp" -ge $((N * P)) ] &&
        ok "xrc ${N}x${P}: $strp rendezvous messages striped over the domains" ||
        fail "xrc ${N}x${P}: only $strp rendezvous messages striped"
    [ "$conn" -lt "$rc_conn" ] ||
        fail "xrc ${N}x${P}: $conn connections, not fewer than RC's $rc_conn"
done
finish
