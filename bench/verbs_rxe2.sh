#!/usr/bin/env bash
# bench/verbs_rxe2.sh [BUILDDIR]: latency across two machines over soft-RoCE: tmx_pingpong
# over the verbs provider against ibv_rc_pingpong (raw verbs, RC SEND/RECV, polling), rank 0
# / the client in guest A (10.77.0.1) and rank 1 / the server in guest B (10.77.0.2) of
# scripts/rxe-vm2.sh, whose rxe devices talk only through the UDP wire between the two qemu
# processes. One pair of guests, interleaved rounds (raw then tmx for each size), sizes 8 B,
# 4 KiB and 64 KiB by default. A benchmark, not a test: rxe under emulation, one vCPU per
# guest, on a shared host, is slow and noisy in absolute terms; the ratio to raw verbs in the
# same run is what counts. The host's load average is printed before and after.
#
# Latency is the half round trip, in us: ibv_rc_pingpong's usec/iter is one round trip (each
# iteration a send and a receive on each side), halved here; tmx_pingpong's mean and median
# (-M) of blocking send/recv. Two ways of waiting, both in every round: "poll" (ibv_rc_pingpong
# as it is, tmx with TMX_WAIT=spin) and "event" (ibv_rc_pingpong -e, which sleeps on the
# completion channel; tmx with TMX_WAIT=sleep). With one vCPU per guest a poller holds the
# CPU that rxe's kernel work (its tasklets, the NIC's softirq) needs, until the scheduler's
# tick: polling is the slow way here. Packets: rxe0's counters in guest A (sent_pkts +
# rcvd_pkts: data and acknowledgements both ways, retransmissions included) per round trip,
# which the host's load changes only through retransmissions: tmx's include its warmup, check
# round and connection set-up, spread over the round trips. A third mode, "eager" (sizes above 16 KiB only), is
# "event" with TMX_EAGER_MAX=128k: the message goes as one eager send like ibv_rc_pingpong's,
# instead of the rendezvous (RTS, RDMA READ, FIN: two more trips over the wire). Each cell is the median of ROUNDS rounds (default 3);
# every round is printed too.
#
# Environment: ROUNDS, SIZES (default "8 4096 65536"), LAT_ITERS (round trips per size, 200;
# a fifth above 8 KiB, the same for both programs), MODES (default "poll event"),
# RXE_VM2_TIMEOUT (900), RXE_VM2_SMP (vCPUs per guest, 1).
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
B=$(cd "${1:-${TMX_BUILDDIR:-$(pwd)}}" && pwd)
rounds=${ROUNDS:-3}
sizes=${SIZES:-8 4096 65536}
lat_iters=${LAT_ITERS:-200}
modes=${MODES:-poll event eager}

if [ -z "${RXE_VM2_SIDE:-}" ]; then
    vm2=${RXE_VM2_SCRIPT:-$here/../scripts/rxe-vm2.sh}
    [ -f "$vm2" ] || { echo "verbs_rxe2.sh: no $vm2" >&2; exit 77; }
    for p in "$B/tools/tmxrun" "$B/examples/tmx_pingpong"; do
        [ -x "$p" ] || { echo "verbs_rxe2.sh: $p not built" >&2; exit 77; }
    done
    command -v ibv_rc_pingpong >/dev/null 2>&1 ||
        { echo "verbs_rxe2.sh: no ibv_rc_pingpong (Debian package ibverbs-utils)" >&2; exit 77; }
    echo "# host load average before: $(cut -d' ' -f1-3 /proc/loadavg) ($(nproc) CPUs)"
    export ROUNDS="$rounds" SIZES="$sizes" LAT_ITERS="$lat_iters" MODES="$modes"
    bash "$vm2" --timeout "${RXE_VM2_TIMEOUT:-900}" -- bash "$here/verbs_rxe2.sh" "$B" --- \
        bash "$here/verbs_rxe2.sh" "$B"
    rc=$?
    echo "# host load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
    exit $rc
fi

side=$RXE_VM2_SIDE
D=$RXE_VM2_DIR
dev=${RXE_VM_DEV:-rxe0}
gid=${RXE_VM_GID_INDEX:-1}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
unset TMX_PROVIDERS # every provider: the soft device refuses the other machine's rank

# wait_file F: up to 120 s
hw=/sys/class/infiniband/$dev/ports/1/hw_counters
pk() { echo $(( $(cat "$hw/sent_pkts" 2>/dev/null || echo 0) + $(cat "$hw/rcvd_pkts" 2>/dev/null || echo 0) )); }
wait_file() {
    local i
    for i in $(seq 1 1200); do [ -s "$1" ] && return 0; sleep 0.1; done
    echo "verbs_rxe2.sh ($side): no $1 after 120 s" >&2
    return 1
}
n_of() { if [ "$1" -gt 8192 ]; then echo $((lat_iters / 5)); else echo "$lat_iters"; fi; }

step=0
for r in $(seq 1 "$rounds"); do
  for s in $sizes; do
    for m in $modes; do
        [ "$m" = eager ] && [ "$s" -le 16384 ] && continue
        n=$(n_of "$s")
        ev=() wait_mode=spin eager=16k
        [ "$m" != poll ] && ev=(-e) wait_mode=sleep
        [ "$m" = eager ] && eager=128k
        # raw verbs: the server in B, the client in A (which retries until B listens)
        step=$((step + 1))
        port=$((19000 + step))
        if [ "$side" = b ]; then
            timeout -s KILL 300 ibv_rc_pingpong -d "$dev" -g "$gid" -s "$s" -n "$n" -p "$port" \
                ${ev[@]+"${ev[@]}"} >"$T/raw" 2>&1 &
            sp=$!
            sleep 0.5
            echo go >"$D/raw.$step"
            wait $sp
        else
            wait_file "$D/raw.$step" || exit 1
            p0=$(pk)
            row=
            for _ in $(seq 1 20); do
                timeout -s KILL 300 ibv_rc_pingpong -d "$dev" -g "$gid" -s "$s" -n "$n" -p "$port" \
                    ${ev[@]+"${ev[@]}"} "$RXE_VM_PEER_IP" >"$T/raw" 2>&1 &&
                    row=$(sed -n 's/.* = \([0-9.]*\) usec\/iter.*/\1/p' "$T/raw") && break
                sleep 0.5
            done
            awk -v v="${row:-nan}" 'BEGIN {print (v == "nan" ? "nan" : v / 2)}' >>"$T/raw.$m.$s"
            awk -v a="$p0" -v b="$(pk)" -v n="$n" 'BEGIN {printf "%.2f\n", (b - a) / n}' >>"$T/rpk.$m.$s"
        fi
        # tmx: rank 0 in A under tmxrun, rank 1 in B by hand
        tn=$n tw=$((n / 10 > 0 ? n / 10 : 1))
        [ "$s" -gt 8192 ] && tn=$((n * 10)) tw=$((tw * 10)) # tmx_pingpong divides by 10
        args=(-t lat -M -m "$s:$s" -n "$tn" -w "$tw" -f csv)
        if [ "$side" = a ]; then
            p0=$(pk)
            TMX_WAIT=$wait_mode TMX_EAGER_MAX=$eager "$B/tools/tmxrun" -n 2 --boot-listen "$RXE_VM_IP:0" \
                --local-ranks 0 --boot-addr-file "$D/tmx.$step.addr" --remote-timeout 120 \
                --timeout 600 "$B/examples/tmx_pingpong" "${args[@]}" >"$T/tmx" 2>"$T/tmx.err"
            awk -F, '$1 ~ /^[0-9]+$/ {print $2, $3; f = 1; exit} END {if (!f) print "nan nan"}' \
                "$T/tmx" >>"$T/tmx.$m.$s"
            awk -v a="$p0" -v b="$(pk)" -v n="$n" -v w="$((n / 10 > 0 ? n / 10 : 1))" \
                'BEGIN {printf "%.2f\n", (b - a) / (n + w + 1)}' >>"$T/tpk.$m.$s"
            echo "# round $r size $s $m: raw $(tail -n 1 "$T/raw.$m.$s") us, tmx mean/median" \
                 "$(tail -n 1 "$T/tmx.$m.$s") us" >&2
        else
            wait_file "$D/tmx.$step.addr" || exit 1
            TMX_WAIT=$wait_mode TMX_EAGER_MAX=$eager TMX_RANK=1 TMX_SIZE=2 TMX_BOOT_ADDR=$(cat "$D/tmx.$step.addr") \
                timeout -s KILL 600 "$B/examples/tmx_pingpong" "${args[@]}" >/dev/null \
                2>"$T/tmx.err" ||
                { echo "verbs_rxe2.sh (b): tmx_pingpong rank 1 failed:" >&2; cat "$T/tmx.err" >&2; }
        fi
    done
  done
done
[ "$side" = b ] && exit 0
echo "# rxe0 counters of guest A that are not 0 (the whole run): $(cd "$hw" && for f in *; do
    v=$(cat "$f" 2>/dev/null); [ "${v:-0}" != 0 ] && printf '%s=%s ' "$f" "$v"; done)"

median() { grep -v '^nan$' | sort -g | awk '{a[NR] = $1} END {if (NR) print a[int((NR + 1) / 2)]; else print "nan"}'; }
echo "# tmx over verbs vs ibv_rc_pingpong across two guests (rxe0 on virtio-net, -netdev dgram),"
echo "# ${RXE_VM2_SMP:-1} vCPU(s) each; half round trip in us, median of $rounds rounds; poll: raw"
echo "# polls, TMX_WAIT=spin; event: ibv_rc_pingpong -e, TMX_WAIT=sleep; eager: event with"
echo "# TMX_EAGER_MAX=128k"
printf "%-6s %-6s %10s %10s %10s %8s %8s %7s %7s\n" mode size raw tmx_mean tmx_med mean/raw \
    med/raw pk_raw pk_tmx
for m in $modes; do
    for s in $sizes; do
        [ -f "$T/raw.$m.$s" ] || continue
        raw=$(median <"$T/raw.$m.$s")
        tm=$(awk '{print $1}' "$T/tmx.$m.$s" | median)
        td=$(awk '{print $2}' "$T/tmx.$m.$s" | median)
        pr=$(median <"$T/rpk.$m.$s")
        pt=$(median <"$T/tpk.$m.$s")
        awk -v m="$m" -v s="$s" -v r="$raw" -v a="$tm" -v d="$td" -v pr="$pr" -v pt="$pt" 'BEGIN {
            printf "%-6s %-6s %10.1f %10.1f %10.1f %8.2f %8.2f %7.2f %7.2f\n", m, s, r, a, d,
                   (r > 0 ? a / r : 0), (r > 0 ? d / r : 0), pr, pt}'
    done
done
echo "# every round: raw | tmx mean median"
for m in $modes; do
    for s in $sizes; do
        [ -f "$T/raw.$m.$s" ] || continue
        echo "#   $m $s: raw $(paste -sd' ' "$T/raw.$m.$s") | tmx $(paste -sd';' "$T/tmx.$m.$s")"
    done
done
