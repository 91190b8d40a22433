#!/usr/bin/env bash
# bench/verbs_rxe.sh [BUILDDIR]: tmx over the verbs provider against raw verbs (perftest's
# ib_send_lat and ib_send_bw) on the same soft-RoCE device, inside the qemu guest of
# scripts/rxe-vm.sh, in one run: latency and bandwidth at 8 B, 4 KiB and 64 KiB, and their
# ratios. A benchmark, not a test: rxe under emulation (TCG) is slow and jittery in absolute
# terms; the ratio to raw verbs, measured in the same guest in interleaved rounds, is what
# counts. Each cell is the median of ROUNDS rounds (default 3).
#
# Run from the host (it starts the guest itself; RXE_VM_SCRIPT names scripts/rxe-vm.sh if it
# is not in this tree), or inside the guest (RXE_VM=1). Environment: ROUNDS, SIZES (default
# "8 4096 65536"), LAT_ITERS (2000; a tenth above 8 KiB, as tmx_pingpong does), BW_ITERS
# (perftest messages per size, 400), RXE_VM_GID_INDEX (set by the guest).
#
# Latency: tmx_pingpong reports the mean half round trip; ib_send_lat reports both its
# "typical" (median) and its mean, and both ratios are shown: under emulation the mean of
# either carries long stalls (rxe's kernel work waits for a vCPU that two polling processes
# hold). Bandwidth: tmx_pingpong's window of 64 sends against ib_send_bw's average
# (perftest's MB is 2^20 bytes, converted to 10^6 here). tmx polls without sleeping
# (TMX_WAIT=spin, as perftest does; the default would sleep after 1 ms, and under emulation a
# round trip can take longer, then a wakeup costs milliseconds). No chrt in the guest: a
# real-time poller there would starve rxe's softirq work.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
B=$(cd "${1:-${TMX_BUILDDIR:-$(pwd)}}" && pwd)

if [ "${RXE_VM:-0}" != 1 ]; then
    vm=${RXE_VM_SCRIPT:-$here/../scripts/rxe-vm.sh}
    if [ ! -f "$vm" ]; then
        echo "verbs_rxe.sh: no $vm (set RXE_VM_SCRIPT to the lane's scripts/rxe-vm.sh)" >&2
        exit 77
    fi
    exec bash "$vm" --timeout "${RXE_VM_TIMEOUT:-1500}" -- env ROUNDS="${ROUNDS:-3}" \
        SIZES="${SIZES:-8 4096 65536}" LAT_ITERS="${LAT_ITERS:-2000}" \
        BW_ITERS="${BW_ITERS:-400}" bash "$here/verbs_rxe.sh" "$B"
fi

rounds=${ROUNDS:-3}
sizes=${SIZES:-8 4096 65536}
lat_iters=${LAT_ITERS:-2000}
bw_iters=${BW_ITERS:-400}
dev=${RXE_VM_DEV:-rxe0}
gid=${RXE_VM_GID_INDEX:-1}
tmxrun="$B/tools/tmxrun"
pp="$B/examples/tmx_pingpong"
for p in "$tmxrun" "$pp" ib_send_lat ib_send_bw; do
    if ! command -v "$p" >/dev/null 2>&1; then
        echo "verbs_rxe.sh: $p not found (perftest for ib_send_*; a build dir for tmx)" >&2
        exit 77
    fi
done
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
port=18515

# perftest SERVER-CLIENT pair: prints the client's result row
perf() {
    local prog=$1
    shift
    port=$((port + 1))
    "$prog" -d "$dev" -x "$gid" -F -p "$port" "$@" >"$T/srv" 2>&1 &
    local spid=$!
    sleep 0.5
    "$prog" -d "$dev" -x "$gid" -F -p "$port" "$@" 127.0.0.1 >"$T/cli" 2>&1
    wait "$spid"
    awk '$1 ~ /^[0-9]+$/ && NF >= 4 {print; exit}' "$T/cli"
}

tmx() {
    env TMX_PROVIDERS=verbs TMX_WAIT="${TMX_WAIT:-spin}" "$tmxrun" -n 2 --timeout 300 "$pp" -f csv "$@" 2>"$T/tmx.err" |
        awk -F, '$1 ~ /^[0-9]+$/ {print; exit}'
}

median() { sort -g | awk '{a[NR] = $1} END {if (NR) print a[int((NR + 1) / 2)]; else print "nan"}'; }

for s in $sizes; do
    n=$lat_iters
    [ "$s" -gt 8192 ] && n=$((lat_iters / 10))
    : >"$T/lat.$s.raw_typ" ; : >"$T/lat.$s.raw_avg" ; : >"$T/lat.$s.tmx"
    : >"$T/bw.$s.raw" ; : >"$T/bw.$s.tmx"
done
for r in $(seq 1 "$rounds"); do
    for s in $sizes; do
        n=$lat_iters
        [ "$s" -gt 8192 ] && n=$((lat_iters / 10))
        row=$(perf ib_send_lat -s "$s" -n "$n")
        echo "$row" | awk '{print $5}' >>"$T/lat.$s.raw_typ"
        echo "$row" | awk '{print $6}' >>"$T/lat.$s.raw_avg"
        tmx -t lat -m "$s:$s" -n "$n" | awk -F, '{print $2}' >>"$T/lat.$s.tmx"
        row=$(perf ib_send_bw -s "$s" -n "$bw_iters")
        echo "$row" | awk '{printf "%.2f\n", $4 * 1.048576}' >>"$T/bw.$s.raw"
        # tmx_pingpong's bandwidth: -n windows of 64 (a fifth above 8 KiB)
        tmx -t bw -m "$s:$s" -n 100 | awk -F, '{print $2}' >>"$T/bw.$s.tmx"
        echo "# round $r size $s done" >&2
    done
done

echo "# tmx over verbs vs raw verbs (perftest) on $dev, GID index $gid, median of $rounds rounds"
echo "# latency us: tmx mean | ib_send_lat typical, mean | ratio tmx/typical, tmx/mean"
echo "# bandwidth MB/s (10^6): tmx | ib_send_bw average | ratio raw/tmx (1.0 = as fast)"
printf "%-8s %10s %10s %10s %8s %8s   %10s %10s %8s\n" size tmx_lat raw_typ raw_avg \
    r_typ r_avg tmx_bw raw_bw r_bw
for s in $sizes; do
    tl=$(median <"$T/lat.$s.tmx")
    rt=$(median <"$T/lat.$s.raw_typ")
    ra=$(median <"$T/lat.$s.raw_avg")
    tb=$(median <"$T/bw.$s.tmx")
    rb=$(median <"$T/bw.$s.raw")
    awk -v s="$s" -v tl="$tl" -v rt="$rt" -v ra="$ra" -v tb="$tb" -v rb="$rb" 'BEGIN {
        printf "%-8s %10.2f %10.2f %10.2f %8.2f %8.2f   %10.2f %10.2f %8.2f\n", s, tl, rt, ra,
               (rt > 0 ? tl / rt : 0), (ra > 0 ? tl / ra : 0), tb, rb, (tb > 0 ? rb / tb : 0)}'
done
echo "# every round:"
for s in $sizes; do
    echo "#   $s: tmx lat $(paste -sd' ' "$T/lat.$s.tmx"); raw typ $(paste -sd' ' "$T/lat.$s.raw_typ")," \
         "avg $(paste -sd' ' "$T/lat.$s.raw_avg"); tmx bw $(paste -sd' ' "$T/bw.$s.tmx");" \
         "raw bw $(paste -sd' ' "$T/bw.$s.raw")"
done
