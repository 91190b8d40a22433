#!/bin/bash
# compare.sh: tmx_pingpong against ucx_perftest (UCP tag API) and Open MPI (osu_pingpong_mpi),
# all over shared memory on this host, interleaved round by round. See bench/README.md.
#
#   bench/compare.sh [-r ROUNDS] [-d SECONDS] [-i SECONDS] [--full] [-s SIZES] [--tm]
#                    [--ring] [-o DIR] [BUILDDIR]
#
# BUILDDIR is a tmx build directory (tools/tmxrun and examples/tmx_pingpong in it); without it
# tmxrun and tmx_pingpong are taken from PATH. Builds only bench/osu_pingpong_mpi.c (mpicc).

set -u

usage() {
    cat <<EOF
usage: $0 [-r ROUNDS] [-d SECONDS] [-i SECONDS] [--full] [-s SIZES] [--tm] [--ring] [-o DIR]
          [BUILDDIR]
  -r ROUNDS  interleaved rounds (tmx, ucx, ompi in each); medians over them (default 3)
  -d SECONDS pause between rounds, to spread them over the VM's fast and slow
             phases (default 0)
  -i SECONDS before each round, wait up to SECONDS for other processes to use less
             than 10% of the CPUs (default 0: do not wait; the load is logged anyway)
  --full     every power of two from 1 B to 4 MiB (default 8 B, 1 KiB, 64 KiB, 1 MiB)
  -s SIZES   comma list of sizes in bytes (overrides --full)
  --tm       also run tmx with tag-matching offload on the soft device (TMX_SOFT_TM=yes)
             right after tmx in every round, and print offload on / off ratios
  --ring     also run tmx without eager-RDMA rings (TMX_RING=no) right after tmx in every
             round, and print ring / no ring ratios
  -o DIR     where raw outputs go (default bench/results/<date>-<time>)
  BUILDDIR   tmx build directory holding tools/tmxrun and examples/tmx_pingpong
             (default: tmxrun and tmx_pingpong from PATH)
EOF
}

here=$(cd "$(dirname "$0")" && pwd)
rounds=3
delay=0
idle_wait=0
sizes="8 1024 65536 1048576"
outdir=""
builddir=""
with_tm=0
with_ring=0
while [ $# -gt 0 ]; do
    case "$1" in
    -r) [ $# -ge 2 ] || { usage >&2; exit 2; }; rounds=$2; shift 2 ;;
    -i) [ $# -ge 2 ] || { usage >&2; exit 2; }; idle_wait=$2; shift 2 ;;
    -d) [ $# -ge 2 ] || { usage >&2; exit 2; }; delay=$2; shift 2 ;;
    --full) sizes=""; s=1; while [ $s -le 4194304 ]; do sizes="$sizes $s"; s=$((s * 2)); done
            shift ;;
    -s) [ $# -ge 2 ] || { usage >&2; exit 2; }; sizes=$(echo "$2" | tr ',' ' '); shift 2 ;;
    -o) [ $# -ge 2 ] || { usage >&2; exit 2; }; outdir=$2; shift 2 ;;
    --tm) with_tm=1; shift ;;
    --ring) with_ring=1; shift ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "$0: unknown option $1" >&2; usage >&2; exit 2 ;;
    *) builddir=$1; shift ;;
    esac
done
case "$rounds" in ''|*[!0-9]*|0) echo "$0: bad round count '$rounds'" >&2; exit 2 ;; esac
case "$delay" in ''|*[!0-9]*) echo "$0: bad delay '$delay'" >&2; exit 2 ;; esac
case "$idle_wait" in ''|*[!0-9]*) echo "$0: bad idle wait '$idle_wait'" >&2; exit 2 ;; esac
for s in $sizes; do
    case "$s" in ''|*[!0-9]*) echo "$0: bad size '$s'" >&2; exit 2 ;; esac
done
sizes=$(printf '%s\n' $sizes | sort -n -u | tr '\n' ' ')
min_size=$(printf '%s\n' $sizes | head -1)
max_size=$(printf '%s\n' $sizes | tail -1)

[ -n "$outdir" ] || outdir="$here/results/$(date +%Y%m%d-%H%M%S)"
mkdir -p "$outdir" || exit 1
raw="$outdir/raw"
mkdir -p "$raw"
data="$outdir/data.txt"   # lines: tool metric size round value
: > "$data"
log() { echo "$*" | tee -a "$outdir/summary.txt" >&2; }
: > "$outdir/summary.txt"

# Two cores: the two processes of every run are pinned to cores 0 and 1.
cores=$(nproc)
[ "$cores" -ge 2 ] || log "warning: only $cores core(s); client and server share a core"

# OSU's iteration counts (osu_latency, osu_bw), the same tmx_pingpong and osu_pingpong_mpi use
# by default, so every tool does the same amount of work per size.
lat_iters()  { if [ "$1" -gt 8192 ]; then echo 1000; else echo 10000; fi; }
# Latency warm-up is ten times OSU's (1000, 100 above 8 KiB) for all three tools; see run_pair.
lat_warmup_small=1000
lat_warmup() {
    if [ "$1" -gt 8192 ]; then echo $((lat_warmup_small / 10)); else echo "$lat_warmup_small"; fi
}
bw_iters()   { if [ "$1" -gt 8192 ]; then echo 20; else echo 100; fi; }
bw_warmup()  { if [ "$1" -gt 8192 ]; then echo 2; else echo 10; fi; }
window=64
run_timeout=300

# ---------------------------------------------------------------- find the three tools

. "$here/lib.sh"
tmx_find tmx_pingpong "$builddir"
pingpong=$tmx_prog

ucx_status="missing (ucx_perftest not installed: apt-get install ucx-utils)"
command -v ucx_perftest > /dev/null && ucx_status="ok"

ompi_status="missing (mpicc/mpirun not installed: apt-get install openmpi-bin libopenmpi-dev)"
osu_bin="$outdir/osu_pingpong_mpi"
if command -v mpicc > /dev/null && command -v mpirun > /dev/null; then
    if mpicc -O2 -o "$osu_bin" "$here/osu_pingpong_mpi.c" > "$raw/mpicc.txt" 2>&1; then
        ompi_status="ok"
    else
        ompi_status="missing (mpicc failed, see $raw/mpicc.txt)"
    fi
fi
# Running as root needs Open MPI's explicit consent.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# UCX over shared memory only: sm = sysv/posix (eager, active messages) + cma (zero-copy
# rendezvous); self for loopback. Without it UCX would also consider tcp over lo.
export UCX_TLS=sm,self

log "# compare.sh $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname), $cores cores," \
    "$rounds round(s), ${delay}s apart"
log "# sizes: $sizes"
log "# raw outputs: $outdir"
log "# tmx : $tmx_status${tmxrun:+ ($tmxrun -n 2 $pingpong)}"
ucx_ver=$([ "$ucx_status" = ok ] && ucx_info -v 2> /dev/null | head -1 | sed 's/^# *//')
ompi_ver=$([ "$ompi_status" = ok ] && mpirun --version 2> /dev/null | head -1)
log "# ucx : $ucx_status${ucx_ver:+ ($ucx_ver): UCX_TLS=$UCX_TLS, server on core 0, client on 1}"
log "# ompi: $ompi_status${ompi_ver:+ ($ompi_ver): mpirun -np 2 --bind-to core}"

# ---------------------------------------------------------------- runners

# Reads the csv of tmx_pingpong / osu_pingpong_mpi (size,latency_us,bandwidth_MBps) and
# appends the sizes we compare to the data file.
# Columns are found by name in the csv header (size,latency_us,bandwidth_MBps).
record_csv() { # tool round file
    awk -F, -v tool="$1" -v round="$2" -v want=" $sizes " '
        /^#/ { next }
        /^size/ { for (i = 2; i <= NF; i++) col[$i] = i; next }
        index(want, " " $1 " ") > 0 {
            if ("latency_us" in col) print tool, "lat", $1, round, $col["latency_us"]
            if ("bandwidth_MBps" in col) print tool, "bw", $1, round, $col["bandwidth_MBps"]
        }' "$3" >> "$data"
}

# tmx and ompi run latency and bandwidth separately, so that latency gets the longer warm-up
# every tool gets: a process's first size otherwise carries its start-up (page faults, caches,
# the peer still leaving the barrier) and reads several times slower than the next one.
# A size range runs every power of two in between; only the chosen sizes are kept.
run_pair() { # tool round launcher...
    local tool=$1 round=$2 test out
    shift 2
    for test in lat bw; do
        out="$raw/r$round-$tool-$test.txt"
        if [ "$test" = lat ]; then
            set -- "$@" -t lat -w "$lat_warmup_small"
        else
            set -- "${@:1:$(($# - 4))}" -t bw
        fi
        if timeout "$run_timeout" "$@" -m "$min_size:$max_size" -W "$window" -f csv \
                > "$out" 2>&1; then
            record_csv "$tool" "$round" "$out"
        else
            log "round $round: $tool $test failed (exit $?), see $out"
        fi
    done
}

run_tmx() { # round
    run_pair tmx "$1" "$tmxrun" -n 2 "$pingpong"
}

run_tmx_tm() { # round
    TMX_SOFT_TM=yes TMX_TM_OFFLOAD=yes run_pair tmxtm "$1" "$tmxrun" -n 2 "$pingpong"
}

run_tmx_noring() { # round
    TMX_RING=no run_pair tmxq "$1" "$tmxrun" -n 2 "$pingpong"
}

run_ompi() { # round
    run_pair ompi "$1" mpirun -np 2 --bind-to core "$osu_bin"
}

ucx_port=$((20000 + RANDOM % 20000))

# One ucx_perftest server/client pair; prints the client's csv result line.
ucx_one() { # test size iters warmup outfile [extra args]
    local test=$1 size=$2 iters=$3 warm=$4 out=$5 spid i
    shift 5
    ucx_port=$((ucx_port + 1))
    timeout "$run_timeout" taskset -c 0 ucx_perftest -p "$ucx_port" > "$out.server" 2>&1 &
    spid=$!
    # wait until the server listens; probing by connecting would use up its single accept
    for i in $(seq 100); do
        ss -ltn "sport = :$ucx_port" 2> /dev/null | grep -q LISTEN && break
        sleep 0.05
    done
    timeout "$run_timeout" taskset -c 1 ucx_perftest 127.0.0.1 -p "$ucx_port" -t "$test" \
        -s "$size" -n "$iters" -w "$warm" "$@" -f -v > "$out" 2>&1
    local rc=$?
    wait "$spid" 2> /dev/null
    return $rc
}

run_ucx() { # round
    local s out line
    for s in $sizes; do
        out="$raw/r$1-ucx-lat-$s.txt"
        if ucx_one tag_lat "$s" "$(lat_iters "$s")" "$(lat_warmup "$s")" "$out"; then
            # csv: iterations,50.0_percentile_lat,avg_lat,overall_lat,avg_bw,overall_bw,...
            # overall_lat is the mean one-way (half round trip) latency in us
            line=$(grep -E '^[0-9]+,' "$out" | tail -1)
            [ -n "$line" ] && echo "ucx lat $s $1 $(echo "$line" | cut -d, -f4)" >> "$data"
        else
            log "round $1: ucx tag_lat $s failed, see $out"
        fi
        # same number of messages as the window loop of the other two: window * iterations,
        # at most $window sends outstanding (-O)
        out="$raw/r$1-ucx-bw-$s.txt"
        if ucx_one tag_bw "$s" $(($(bw_iters "$s") * window)) $(($(bw_warmup "$s") * window)) \
                "$out" -O "$window"; then
            line=$(grep -E '^[0-9]+,' "$out" | tail -1)
            # ucx_perftest's MB/s are MiB/s (2^20); convert to 10^6 bytes/s
            [ -n "$line" ] && echo "ucx bw $s $1 $(echo "$line" |
                awk -F, '{ printf "%.2f", $6 * 1.048576 }')" >> "$data"
        else
            log "round $1: ucx tag_bw $s failed, see $out"
        fi
    done
}

# Percentage of CPU time that other processes used during one second, sampled between runs
# while nothing of ours is running: the machine is shared, and a busy core makes any of the
# three tools look slow (busy-polling peers lose their core).
background_busy() {
    local a b
    a=$(awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9, $5 + $6 }' /proc/stat)
    sleep 1
    b=$(awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9, $5 + $6 }' /proc/stat)
    echo "$a $b" | awk '{ busy = $3 - $1; idle = $4 - $2
                          printf "%d", (busy + idle > 0) ? 100 * busy / (busy + idle) : 0 }'
}
max_busy=0

# ---------------------------------------------------------------- the rounds

for r in $(seq "$rounds"); do
    # interleaved, because this VM drifts between a fast and a slow mode every few minutes:
    # every tool sees both modes about equally often
    [ "$r" -gt 1 ] && [ "$delay" -gt 0 ] && sleep "$delay"
    busy=$(background_busy)
    waited=0
    while [ "$busy" -ge 10 ] && [ "$waited" -lt "$idle_wait" ]; do
        busy=$(background_busy) # takes one second
        waited=$((waited + 1))
    done
    [ "$busy" -gt "$max_busy" ] && max_busy=$busy
    log "round $r/$rounds: $(date +%H:%M:%S), other processes used $busy% of the CPUs"
    [ "$tmx_status" = ok ] && run_tmx "$r"
    [ "$tmx_status" = ok ] && [ "$with_tm" = 1 ] && run_tmx_tm "$r"
    [ "$tmx_status" = ok ] && [ "$with_ring" = 1 ] && run_tmx_noring "$r"
    [ "$ucx_status" = ok ] && run_ucx "$r"
    [ "$ompi_status" = ok ] && run_ompi "$r"
done

# ---------------------------------------------------------------- medians and ratios

status_of() {
    case "$1" in
    tmx) echo "$tmx_status" ;;
    ucx) echo "$ucx_status" ;;
    ompi) echo "$ompi_status" ;;
    esac
}

{
    echo
    echo "# medians over $rounds round(s); latency in us (lower is better), bandwidth in MB/s"
    echo "# (10^6 bytes/s, higher is better); ratio = tmx / best peer; '-' = no result"
    for t in tmx ucx ompi; do
        st=$(status_of $t)
        [ "$st" = ok ] || echo "# $t: $st"
    done
    if [ "$max_busy" -gt 10 ]; then
        echo "# WARNING: other processes used up to $max_busy% of the CPUs between rounds;"
        echo "# the numbers below are disturbed (see bench/README.md, caveats)"
    fi
} | tee -a "$outdir/summary.txt"

awk -v sizes="$sizes" -v tm="$with_tm" -v ring="$with_ring" -v tmxst="$tmx_status" -v ucxst="$ucx_status" -v ompist="$ompi_status" '
    function sort(v, n,    i, j, t) {  # insertion sort of v[1..n], n is small
        for (i = 2; i <= n; i++) {
            t = v[i]
            for (j = i - 1; j >= 1 && v[j] > t; j--) v[j + 1] = v[j]
            v[j + 1] = t
        }
    }
    function mid(v, n) {  # the median of v[1..n]; leaves v sorted
        sort(v, n)
        return (n % 2) ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
    }
    function median(key,    n, i, v) {
        n = cnt[key]
        if (n == 0) return ""
        for (i = 1; i <= n; i++) v[i] = val[key, i]
        return mid(v, n)
    }
    function fmt(x, p) { return (x == "") ? "-" : sprintf("%." p "f", x) }
    function human(s) {
        if (s >= 1048576 && s % 1048576 == 0) return (s / 1048576) " MiB"
        if (s >= 1024 && s % 1024 == 0) return (s / 1024) " KiB"
        return s " B"
    }
    { key = $1 SUBSEP $2 SUBSEP $3; cnt[key]++; val[key, cnt[key]] = $5
      rv[$1, $2, $3, $4] = $5; if ($4 > maxr) maxr = $4 }
    # The ratio of tmx to the best peer within each round, where the VM was in one mode for
    # all three (mostly: a mode can flip inside a round too); the median of those.
    function round_ratio(metric, s,    r, k, t, best, x, n, v) {
        n = 0
        for (r = 1; r <= maxr; r++) {
            if (!(("tmx", metric, s, r) in rv)) continue
            best = ""
            for (k = 2; k <= 3; k++) {
                t = tools[k]
                if (!((t, metric, s, r) in rv)) continue
                x = rv[t, metric, s, r]
                if (best == "") best = x
                else if (metric == "lat" && x < best) best = x
                else if (metric == "bw" && x > best) best = x
            }
            if (best == "" || best <= 0) continue
            v[++n] = rv["tmx", metric, s, r] / best
        }
        if (n == 0) return "-"
        x = mid(v, n)
        return sprintf("%.2f (%d rounds, %.2f..%.2f)", x, n, v[1], v[n])
    }
    END {
        split("tmx ucx ompi", tools, " ")
        printf "%-10s | %9s %9s %9s %7s | %10s %10s %10s %7s\n", "size", "lat tmx", "ucx",
               "ompi", "ratio", "bw tmx", "ucx", "ompi", "ratio"
        ns = split(sizes, sz, " ")
        for (i = 1; i <= ns; i++) {
            s = sz[i]
            for (k = 1; k <= 3; k++) {
                L[tools[k]] = median(tools[k] SUBSEP "lat" SUBSEP s)
                B[tools[k]] = median(tools[k] SUBSEP "bw" SUBSEP s)
            }
            bl = ""; blt = ""; bb = ""; bbt = ""
            for (k = 2; k <= 3; k++) {
                t = tools[k]
                if (L[t] != "" && (bl == "" || L[t] < bl)) { bl = L[t]; blt = t }
                if (B[t] != "" && (bb == "" || B[t] > bb)) { bb = B[t]; bbt = t }
            }
            rl = (L["tmx"] != "" && bl != "" && bl > 0) ? L["tmx"] / bl : ""
            rb = (B["tmx"] != "" && bb != "" && bb > 0) ? B["tmx"] / bb : ""
            printf "%-10s | %9s %9s %9s %7s | %10s %10s %10s %7s\n", human(s),
                   fmt(L["tmx"], 2), fmt(L["ucx"], 2), fmt(L["ompi"], 2), fmt(rl, 2),
                   fmt(B["tmx"], 1), fmt(B["ucx"], 1), fmt(B["ompi"], 1), fmt(rb, 2)
            line[i] = human(s) ": "
            if (rl == "") {
                line[i] = line[i] "latency: no comparison (" \
                          (L["tmx"] == "" ? "no tmx result" : "no peer result") ")"
            } else {
                line[i] = line[i] sprintf("latency %.2fx the best peer (%s): tmx %s%s", rl, blt,
                          rl <= 1 ? "AHEAD" : "BEHIND",
                          (rl > 0.95 && rl < 1.05) ? " (within 5%, noise)" : "")
            }
            if (rb == "") {
                line[i] = line[i] "; bandwidth: no comparison (" \
                          (B["tmx"] == "" ? "no tmx result" : "no peer result") ")"
            } else {
                line[i] = line[i] sprintf("; bandwidth %.2fx the best peer (%s): tmx %s%s",
                          rb, bbt, rb >= 1 ? "AHEAD" : "BEHIND",
                          (rb > 0.95 && rb < 1.05) ? " (within 5%, noise)" : "")
            }
        }
        print ""
        for (i = 1; i <= ns; i++) print line[i]
        print ""
        print "# per-round ratio tmx / best peer of the same round: median (rounds, min..max)"
        for (i = 1; i <= ns; i++) {
            printf "%-10s latency %s; bandwidth %s\n", human(sz[i]), round_ratio("lat", sz[i]),
                   round_ratio("bw", sz[i])
        }
        if (tm) {
            onoff_table("# tag-matching offload on (TMX_SOFT_TM=yes) / off, per-round ratio: median",
                        "tmxtm", "tmx")
        }
        if (ring) {
            onoff_table("# eager-RDMA rings on (tmx) / off (TMX_RING=no), per-round ratio: median",
                        "tmx", "tmxq")
        }
    }
    # One feature on / off, both measured in every round: medians and the per-round ratio.
    function onoff_table(title, on, off,    i, s) {
        print ""
        print title
        print "# (rounds, min..max); latency: below 1 is faster, bandwidth: above 1 is faster"
        printf "%-10s | %9s %9s %-26s | %10s %10s %-26s\n", "size", "lat off", "on",
               "on/off", "bw off", "on", "on/off"
        for (i = 1; i <= ns; i++) {
            s = sz[i]
            printf "%-10s | %9s %9s %-26s | %10s %10s %-26s\n", human(s),
                   fmt(median(off SUBSEP "lat" SUBSEP s), 2),
                   fmt(median(on SUBSEP "lat" SUBSEP s), 2), tm_ratio(on, off, "lat", s),
                   fmt(median(off SUBSEP "bw" SUBSEP s), 1),
                   fmt(median(on SUBSEP "bw" SUBSEP s), 1), tm_ratio(on, off, "bw", s)
        }
    }
    function tm_ratio(on, off, metric, s,    r, n, v, x) {
        n = 0
        for (r = 1; r <= maxr; r++) {
            if (((off, metric, s, r) in rv) && ((on, metric, s, r) in rv) &&
                rv[off, metric, s, r] > 0) {
                v[++n] = rv[on, metric, s, r] / rv[off, metric, s, r]
            }
        }
        if (n == 0) return "-"
        x = mid(v, n)
        return sprintf("%.2f (%d, %.2f..%.2f)", x, n, v[1], v[n])
    }' "$data" | tee -a "$outdir/summary.txt"

echo "# summary: $outdir/summary.txt" >&2
