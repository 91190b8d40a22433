#!/usr/bin/env bash
# bench/verbs_ab.sh REF_BUILDDIR NEW_BUILDDIR [ROUNDS]: two tmx builds against each other over
# the verbs provider, inside the soft-RoCE guest of scripts/rxe-vm.sh: in each round (ROUNDS,
# default 8; odd rounds the reference first, even rounds the new build) tmx_pingpong's 8-byte
# latency (-t lat -M -m 8:8 -n 2000 -w 200: mean and median half round trip, us) and 8-byte
# bandwidth (-t bw -m 8:8 -n 40: 40 windows of 64, MB/s) of each build, then per round new/ref
# (latency median: below 1 is faster; bandwidth: above 1 is faster) and their medians. For a
# change on the small-message path, where verbs_rxe.sh compares with perftest and the host's
# load moves both by more than the change. Timed: take the bench lock; no chrt (verbs_rxe.sh
# says why). Exit 77 where the guest cannot run.
set -uo pipefail
{
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [ $# -lt 2 ]; then
    sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'
    exit 2
fi
A=$(cd "$1" && pwd) || exit 2
B=$(cd "$2" && pwd) || exit 2
R=${3:-8}
if [ "${RXE_VM:-0}" != 1 ]; then
    echo "# host load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
    bash "$here/../scripts/rxe-vm.sh" --timeout 1800 -- bash "$here/verbs_ab.sh" "$A" "$B" "$R"
    rc=$?
    echo "# host load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
    exit $rc
fi
run() {
    env TMX_PROVIDERS=verbs TMX_WAIT=spin "$1/tools/tmxrun" -n 2 --timeout 300 \
        "$1/examples/tmx_pingpong" -f csv "${@:2}" 2>/dev/null |
        awk -F, '$1 ~ /^[0-9]+$/ {print; exit}'
}
T=$(mktemp)
trap 'rm -f "$T"' EXIT
for r in $(seq 1 "$R"); do
    if [ $((r % 2)) = 1 ]; then order="ref new"; else order="new ref"; fi
    for w in $order; do
        d=$A
        [ "$w" = new ] && d=$B
        l=$(run "$d" -t lat -M -m 8:8 -n 2000 -w 200)
        b=$(run "$d" -t bw -m 8:8 -n 40)
        echo "$r $w $(echo "$l" | cut -d, -f2) $(echo "$l" | cut -d, -f3) $(echo "$b" | cut -d, -f2)" |
            tee -a "$T" | awk '{printf "# round %s %s: latency mean %s median %s us, bandwidth %s MB/s\n",
                                $1, $2, $3, $4, $5}'
    done
done
awk -v n="$R" '{m[$1, $2] = $4; b[$1, $2] = $5}
    function med(a, k,    i, j, x) {
        for (i = 2; i <= k; i++) { x = a[i]; for (j = i - 1; j >= 1 && a[j] > x; j--) a[j + 1] = a[j]
                                   a[j + 1] = x }
        return a[int((k + 1) / 2)] }
    END {
        for (r = 1; r <= n; r++) {
            if (m[r, "ref"] > 0 && b[r, "ref"] > 0 && m[r, "new"] > 0 && b[r, "new"] > 0) {
                k++; l[k] = m[r, "new"] / m[r, "ref"]; w[k] = b[r, "new"] / b[r, "ref"]
                lw += l[k] < 1; bw += w[k] > 1
                printf "# round %d new/ref: latency median %.2f, bandwidth %.2f\n", r, l[k], w[k] } }
        if (k) printf "new/ref, median of %d rounds: latency %.2f (new faster in %d), bandwidth %.2f (new faster in %d)\n",
                      k, med(l, k), lw, med(w, k), bw }' "$T"
exit 0
}
