#!/bin/bash
# c2c.sh: watch the VM's phase. Builds bench/c2c.c and runs it every INTERVAL seconds for
# SECONDS seconds; prints one line per probe (UTC time, 1-min load average, median ns per
# cache-line round trip between cores 0 and 1, p10, p90, batches), then the distribution in
# 25 ns bins and the phase sequence (F fast, M middle, S slow, ? no answer: preempted).
#
#   bench/c2c.sh [SECONDS [INTERVAL]]     (default 600 s, every 3 s)
#
# Thresholds as in compare.sh: C2C_FAST_MAX (default 100 ns), C2C_SLOW_MIN (default 200 ns).
set -u
here=$(cd "$(dirname "$0")" && pwd)
secs=${1:-600}
every=${2:-3}
fmax=${C2C_FAST_MAX:-100}
smin=${C2C_SLOW_MIN:-200}
bin=$(mktemp /tmp/c2c.XXXXXX)
trap 'rm -f "$bin" "$bin.log"' EXIT
cc -O2 -pthread -o "$bin" "$here/c2c.c" || exit 1
end=$(($(date +%s) + secs))
while [ "$(date +%s)" -lt "$end" ]; do
    echo "$(date -u +%H:%M:%S) $(cut -d' ' -f1 /proc/loadavg) $("$bin" 2>&1 || true)"
    sleep "$every"
done | tee "$bin.log"
awk -v fmax="$fmax" -v smin="$smin" '
    { ok = ($3 ~ /^[0-9.]+$/ && $6 + 0 >= 10) }
    ok { h[int($3 / 25) * 25]++; n++
         c = ($3 < fmax + 0) ? "F" : ($3 >= smin + 0) ? "S" : "M"; k[c]++ }
    !ok { c = "?"; k[c]++ }
    { seq = seq c }
    END {
        print "# distribution of " n " probes (ns per round trip, 25 ns bins):"
        for (b in h) printf "%6d..%-6d %5d\n", b, b + 25, h[b] | "sort -n"
        close("sort -n")
        printf "# fast (< %s ns) %d, middle %d, slow (>= %s ns) %d, no answer %d\n", fmax,
               k["F"], k["M"], smin, k["S"], k["?"]
        print "# sequence:"
        while (length(seq) > 0) { print substr(seq, 1, 100); seq = substr(seq, 101) }
    }' "$bin.log"
