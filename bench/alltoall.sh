#!/bin/bash
# alltoall.sh: tmx_alltoall (examples/alltoall.c) against its MPI twin (bench/alltoall_mpi.c on
# Open MPI), at several rank counts on this host, interleaved round by round: time per
# all-to-all round, the job's shared and private memory, and start-up. See bench/README.md.
#
#   bench/alltoall.sh [-r ROUNDS] [-n COUNTS] [-m SIZE] [-I ITERS] [-W WARMUP] [-t SECONDS]
#                     [-i SECONDS] [-M MIB] [-e NAME=VALUE]... [-b LEVEL] [-o DIR] [BUILDDIR]
#
# BUILDDIR is a tmx build directory (tools/tmxrun and examples/tmx_alltoall in it); without it
# tmxrun and tmx_alltoall are taken from PATH. Builds only bench/alltoall_mpi.c (mpicc).

set -u

usage() {
    cat <<EOF
usage: $0 [options] [BUILDDIR]
  -r ROUNDS   interleaved rounds (every count, tmx and ompi in each); medians over them
              (default 3)
  -n COUNTS   comma list of rank counts (default 2,8,16,32,64,256)
  -m SIZE     bytes per message (default 1K; K, M suffixes)
  -I ITERS    timed all-to-all rounds in each run (default 10)
  -W WARMUP   untimed all-to-all rounds before them, the first included (default 2)
  -t SECONDS  time limit of one run; a run over it is reported as timeout (default 300)
  -i SECONDS  before each count, wait up to SECONDS for other processes to use less than
              10% of the CPUs (default 0: do not wait; the load is logged anyway)
  -M MIB      stop a run when the machine's MemAvailable falls below MIB (default: the
              larger of 4096 and a quarter of MemTotal); reported as mem-guard
  -e NAME=VAL an environment variable for the tmx runs only (repeatable), e.g.
              -e TMX_SOFT_RING_SIZE=32k
  -b LEVEL    tmxrun --bind-to LEVEL for the tmx runs (none, core, numa, socket; default:
              tmxrun's own, one rank per core, none when oversubscribed)
  -o DIR      where raw outputs go (default bench/results/alltoall-<date>-<time>)
  BUILDDIR    tmx build directory holding tools/tmxrun and examples/tmx_alltoall
              (default: tmxrun and tmx_alltoall from PATH)
EOF
}

here=$(cd "$(dirname "$0")" && pwd)
rounds=3
counts="2 8 16 32 64 256"
size=1K
iters=10
warmup=2
run_timeout=300
idle_wait=0
min_avail_mib=""
outdir=""
builddir=""
tmx_env=()
tmx_bind=()
while [ $# -gt 0 ]; do
    case "$1" in
    -r) [ $# -ge 2 ] || { usage >&2; exit 2; }; rounds=$2; shift 2 ;;
    -n) [ $# -ge 2 ] || { usage >&2; exit 2; }; counts=$(echo "$2" | tr ',' ' '); shift 2 ;;
    -m) [ $# -ge 2 ] || { usage >&2; exit 2; }; size=$2; shift 2 ;;
    -I) [ $# -ge 2 ] || { usage >&2; exit 2; }; iters=$2; shift 2 ;;
    -W) [ $# -ge 2 ] || { usage >&2; exit 2; }; warmup=$2; shift 2 ;;
    -t) [ $# -ge 2 ] || { usage >&2; exit 2; }; run_timeout=$2; shift 2 ;;
    -i) [ $# -ge 2 ] || { usage >&2; exit 2; }; idle_wait=$2; shift 2 ;;
    -M) [ $# -ge 2 ] || { usage >&2; exit 2; }; min_avail_mib=$2; shift 2 ;;
    -e) [ $# -ge 2 ] || { usage >&2; exit 2; }
        case "$2" in [A-Za-z_]*=*) ;; *) echo "$0: bad -e '$2' (NAME=VALUE)" >&2; exit 2 ;; esac
        tmx_env+=("$2"); shift 2 ;;
    -b) [ $# -ge 2 ] || { usage >&2; exit 2; }
        case "$2" in none|core|numa|socket) ;; *) echo "$0: bad -b '$2'" >&2; exit 2 ;; esac
        tmx_bind=(--bind-to "$2"); shift 2 ;;
    -o) [ $# -ge 2 ] || { usage >&2; exit 2; }; outdir=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "$0: unknown option $1" >&2; usage >&2; exit 2 ;;
    *) builddir=$1; shift ;;
    esac
done
isnum() { case "$1" in ''|*[!0-9]*) return 1 ;; esac; }
isnum "$rounds" && [ "$rounds" -gt 0 ] || { echo "$0: bad round count '$rounds'" >&2; exit 2; }
isnum "$iters" && [ "$iters" -gt 0 ] || { echo "$0: bad iteration count '$iters'" >&2; exit 2; }
isnum "$warmup" && [ "$warmup" -gt 0 ] || { echo "$0: bad warm-up '$warmup' (>= 1)" >&2; exit 2; }
isnum "$run_timeout" && [ "$run_timeout" -gt 0 ] || { echo "$0: bad time limit" >&2; exit 2; }
isnum "$idle_wait" || { echo "$0: bad idle wait '$idle_wait'" >&2; exit 2; }
for n in $counts; do
    isnum "$n" && [ "$n" -ge 2 ] || { echo "$0: bad rank count '$n' (>= 2)" >&2; exit 2; }
done
counts=$(printf '%s\n' $counts | sort -n -u | tr '\n' ' ')
mem_total_mib=$(awk '/^MemTotal:/ { print int($2 / 1024) }' /proc/meminfo)
if [ -z "$min_avail_mib" ]; then
    min_avail_mib=$((mem_total_mib / 4))
    [ "$min_avail_mib" -lt 4096 ] && min_avail_mib=4096
fi
isnum "$min_avail_mib" || { echo "$0: bad -M '$min_avail_mib'" >&2; exit 2; }

[ -n "$outdir" ] || outdir="$here/results/alltoall-$(date +%Y%m%d-%H%M%S)"
mkdir -p "$outdir/raw" || exit 1
raw="$outdir/raw"
data="$outdir/data.txt"   # lines: tool ranks round key value
: > "$data"
: > "$outdir/summary.txt"
log() { echo "$*" | tee -a "$outdir/summary.txt" >&2; }

cores=$(nproc)

# ---------------------------------------------------------------- find the two programs

. "$here/lib.sh"
tmx_find tmx_alltoall "$builddir" real
a2a=$tmx_prog

ompi_status="missing (mpicc/mpirun not installed: scripts/install-deps.sh --bench)"
mpi_bin="$outdir/alltoall_mpi"
if command -v mpicc > /dev/null && command -v mpirun > /dev/null; then
    if mpicc -O2 -o "$mpi_bin" "$here/alltoall_mpi.c" > "$raw/mpicc.txt" 2>&1; then
        ompi_status="ok"
    else
        ompi_status="missing (mpicc failed, see $raw/mpicc.txt)"
    fi
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

ompi_ver=$([ "$ompi_status" = ok ] && mpirun --version 2> /dev/null | head -1)
log "# alltoall.sh $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname), $cores cores," \
    "${mem_total_mib} MiB, $rounds round(s)"
log "# ranks: $counts; $size per message, $iters timed + $warmup warm-up all-to-all rounds" \
    "per run; ${run_timeout}s per run; runs stop below $min_avail_mib MiB available"
log "# raw outputs: $outdir"
log "# tmx : $tmx_status${tmxrun:+ ($tmxrun -n N $a2a)}${tmx_env[*]:+, env ${tmx_env[*]}}"
log "# ompi: $ompi_status${ompi_ver:+ ($ompi_ver): mpirun --oversubscribe -np N}"
log "# binding: one rank per core when N <= $cores (tmxrun's default, mpirun --bind-to core)," \
    "none above (tmxrun's default, mpirun --bind-to none)${tmx_bind[*]:+; tmx runs: tmxrun ${tmx_bind[*]}}"

# ---------------------------------------------------------------- one run

# The samplers run every 0.1 s beside the job on a machine it oversubscribes, so they start as
# few processes as they can (h-a2a5 saw a sampler that ran df, tail, tr and two awk each time
# slow the job's start-up placement): they set variables instead of printing (a command
# substitution is a process of its own), /proc/meminfo is read by the shell itself, and df is
# the one program left: with its substitution's subshell and sleep, three processes a sample
# and two programs, against seven and six before (counted with strace -f).
# sample_shm: shm_used (KiB of /dev/shm in use, empty if unknown), shmem (KiB of shmem pages
# of the machine: /dev/shm files, memfd segments, SysV; the one count that sees tmx's memfd
# segments and Open MPI's /dev/shm files alike, whether mapped or not) and avail_mib
# (MemAvailable, MiB)
sample_shm() {
    local k v _
    shm_used=$(df -k --output=used /dev/shm 2> /dev/null) || shm_used=
    shm_used=${shm_used##*$'\n'}
    shm_used=${shm_used// /}
    shmem=
    avail_mib=
    while read -r k v _; do
        case $k in
        Shmem:) shmem=$v ;;
        MemAvailable:) avail_mib=$((v / 1024)) ;;
        esac
    done < /proc/meminfo
}

# Runs one job in the background and samples, every 0.1 s while it runs, the /dev/shm usage
# (its peak minus the usage before the launch goes to the data) and the machine's available
# memory (below the guard the job is stopped: a quadratic footprint at 256 ranks must not
# push the whole machine, shared with others, into the OOM killer).
run_one() { # tool ranks round command...
    local tool=$1 n=$2 round=$3 out pid rc t0 t1 base peak status=ok guard=0 sbase speak
    local shm_used shmem avail_mib # sample_shm's
    shift 3
    out="$raw/r$round-$tool-n$n.txt"
    sample_shm
    base=$shm_used
    peak=$base
    sbase=$shmem
    speak=$sbase
    t0=$(date +%s%N)
    # -T: the launch time, from which the program measures start-up
    timeout -k 10 "$run_timeout" "$@" -T "$t0" > "$out" 2> "$out.err" < /dev/null &
    pid=$!
    while kill -0 "$pid" 2> /dev/null; do
        sample_shm
        [ -n "$shm_used" ] && [ "$shm_used" -gt "$peak" ] && peak=$shm_used
        [ -n "$shmem" ] && [ "$shmem" -gt "$speak" ] && speak=$shmem
        if [ "$guard" -eq 0 ] && [ -n "$avail_mib" ] && [ "$avail_mib" -lt "$min_avail_mib" ]; then
            guard=1
            log "round $round: $tool -n $n: MemAvailable $avail_mib MiB <" \
                "$min_avail_mib MiB: stopping the job"
            kill -TERM "$pid" 2> /dev/null
            # timeout passes TERM to the launcher, which stops its ranks
        fi
        sleep 0.1
    done
    wait "$pid"
    rc=$?
    t1=$(date +%s%N)
    if [ "$guard" -eq 1 ]; then
        status=mem-guard
    elif [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
        status=timeout
    elif [ "$rc" -ne 0 ] || ! grep -q '^result ' "$out"; then
        status=failed
    fi
    echo "$tool $n $round status $status" >> "$data"
    if [ "$status" = ok ]; then
        echo "$tool $n $round wall_ms $(((t1 - t0) / 1000000))" >> "$data"
        echo "$tool $n $round devshm_kib $((peak - base))" >> "$data"
        echo "$tool $n $round shmem_kib $((speak - sbase))" >> "$data"
        # result/memory/startup/loop lines: "word key=value ...", every key kept
        awk -v tool="$tool" -v n="$n" -v round="$round" '
            /^(result|memory|startup|loop) / {
                for (i = 2; i <= NF; i++) {
                    split($i, kv, "=")
                    if (kv[1] != "ranks" && kv[1] != "size") print tool, n, round, kv[1], kv[2]
                }
            }' "$out" >> "$data"
    else
        log "round $round: $tool -n $n: $status (exit $rc) after $(((t1 - t0) / 1000000)) ms," \
            "see $out.err"
    fi
}

run_tmx() { # ranks round
    local n=$1 qps=$((2 * $1 + 16))
    # A rank opens 2 queue pairs per peer (self included) from a table of TMX_SOFT_MAX_QPS
    # (default 4096): raise it for jobs of more than 2040 ranks, below any -e given.
    [ "$qps" -lt 4096 ] && qps=4096
    run_one tmx "$n" "$2" env TMX_SOFT_MAX_QPS="$qps" ${tmx_libpath:+LD_LIBRARY_PATH="$tmx_libpath"} \
        "${tmx_env[@]}" "$tmxrun" "${tmx_bind[@]}" -n "$n" "$a2a" -m "$size" -n "$iters" -w "$warmup" -H 300
}

run_ompi() { # ranks round
    local n=$1 bind=core
    [ "$n" -gt "$cores" ] && bind=none
    run_one ompi "$n" "$2" mpirun --oversubscribe --bind-to "$bind" -np "$n" "$mpi_bin" \
        -m "$size" -n "$iters" -w "$warmup" -H 300
}

# Percentage of CPU time that other processes used during one second (see compare.sh).
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
    for n in $counts; do
        busy=$(background_busy)
        waited=0
        while [ "$busy" -ge 10 ] && [ "$waited" -lt "$idle_wait" ]; do
            busy=$(background_busy) # takes one second
            waited=$((waited + 1))
        done
        [ "$busy" -gt "$max_busy" ] && max_busy=$busy
        log "round $r/$rounds, $n ranks: $(date +%H:%M:%S), other processes used $busy% of" \
            "the CPUs; load average $(cut -d' ' -f1-3 /proc/loadavg)"
        # interleaved, and in alternating order, so that neither always runs first after the
        # pause or always inherits the other's aftermath
        if [ $((r % 2)) -eq 1 ]; then
            [ "$tmx_status" = ok ] && run_tmx "$n" "$r"
            [ "$ompi_status" = ok ] && run_ompi "$n" "$r"
        else
            [ "$ompi_status" = ok ] && run_ompi "$n" "$r"
            [ "$tmx_status" = ok ] && run_tmx "$n" "$r"
        fi
    done
done

# ---------------------------------------------------------------- medians and ratios

{
    echo
    echo "# medians over the runs that worked (of $rounds); 'timeout', 'failed', 'mem-guard':"
    echo "# no run of that count worked, the first status is shown; (k/$rounds): only k worked"
    [ "$tmx_status" = ok ] || echo "# tmx: $tmx_status"
    [ "$ompi_status" = ok ] || echo "# ompi: $ompi_status"
    if [ "$max_busy" -gt 10 ]; then
        echo "# WARNING: other processes used up to $max_busy% of the CPUs before runs;"
        echo "# the times below are disturbed (see bench/README.md)"
    fi
} | tee -a "$outdir/summary.txt"

awk -v counts="$counts" -v rounds="$rounds" -v size="$size" '
    function sort(v, n,    i, j, t) {
        for (i = 2; i <= n; i++) {
            t = v[i]
            for (j = i - 1; j >= 1 && v[j] > t; j--) v[j + 1] = v[j]
            v[j + 1] = t
        }
    }
    function median(t, n, key,    k, i, v) {
        k = cnt[t, n, key]
        if (k == 0) return ""
        for (i = 1; i <= k; i++) v[i] = val[t, n, key, i]
        sort(v, k)
        return (k % 2) ? v[(k + 1) / 2] : (v[k / 2] + v[k / 2 + 1]) / 2
    }
    # a cell: the median scaled by div, or the status when no run worked
    function cell(t, n, key, div, prec,    m, s) {
        m = median(t, n, key)
        if (m == "") return (t SUBSEP n in firstbad) ? firstbad[t, n] : "-"
        s = sprintf("%." prec "f", m / div)
        if (okruns[t, n] < runs[t, n]) s = s " (" okruns[t, n] "/" runs[t, n] ")"
        return s
    }
    function ratio(n, key,    a, b) {
        a = median("tmx", n, key); b = median("ompi", n, key)
        if (a == "" || b == "" || b <= 0) return "-"
        return sprintf("%.2f", a / b)
    }
    $4 == "status" {
        runs[$1, $2]++
        if ($5 == "ok") okruns[$1, $2]++
        else if (!(($1, $2) in firstbad)) firstbad[$1, $2] = $5
        next
    }
    { cnt[$1, $2, $4]++; val[$1, $2, $4, cnt[$1, $2, $4]] = $5 }
    END {
        nc = split(counts, c, " ")
        mib = 1024
        print ""
        print "time per all-to-all round of " size " messages: median over runs of each run\047s median, ms"
        print ""
        print "| ranks | tmx ms | ompi ms | tmx/ompi | tmx min ms | ompi min ms |"
        print "|---|---|---|---|---|---|"
        for (i = 1; i <= nc; i++) {
            n = c[i]
            printf "| %d | %s | %s | %s | %s | %s |\n", n, cell("tmx", n, "median_us", 1000, 3),
                   cell("ompi", n, "median_us", 1000, 3), ratio(n, "median_us"),
                   cell("tmx", n, "min_us", 1000, 3), cell("ompi", n, "min_us", 1000, 3)
        }
        print ""
        print "the whole timed loop per round (barrier included): rank 0\047s wall time, ms; the job\047s"
        print "processor time (sum over its ranks, ms) and involuntary context switches (yields"
        print "and preemptions, sum over the ranks): load-independent where the times are not"
        print ""
        print "| ranks | tmx loop ms | ompi loop ms | tmx/ompi | tmx cpu ms | ompi cpu ms | tmx/ompi | tmx ivcsw | ompi ivcsw | tmx vcsw | ompi vcsw |"
        print "|---|---|---|---|---|---|---|---|---|---|---|"
        for (i = 1; i <= nc; i++) {
            n = c[i]
            printf "| %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", n,
                   cell("tmx", n, "loop_us", 1000, 3), cell("ompi", n, "loop_us", 1000, 3),
                   ratio(n, "loop_us"),
                   cell("tmx", n, "cpu_us", 1000, 3), cell("ompi", n, "cpu_us", 1000, 3),
                   ratio(n, "cpu_us"),
                   cell("tmx", n, "ivcsw", 1, 1), cell("ompi", n, "ivcsw", 1, 1),
                   cell("tmx", n, "vcsw", 1, 1), cell("ompi", n, "vcsw", 1, 1)
        }
        print ""
        print "memory of the job after the last round, MiB: sums over the ranks (launcher not counted)"
        print ""
        print "| ranks | tmx shm (Pss_Shmem) | ompi shm | tmx/ompi | tmx Shmem peak | ompi Shmem peak | tmx Pss | ompi Pss | tmx Pss_Anon | ompi Pss_Anon | tmx RSS | ompi RSS |"
        print "|---|---|---|---|---|---|---|---|---|---|---|---|"
        for (i = 1; i <= nc; i++) {
            n = c[i]
            printf "| %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", n,
                   cell("tmx", n, "pss_shmem_kib", mib, 1), cell("ompi", n, "pss_shmem_kib", mib, 1),
                   ratio(n, "pss_shmem_kib"),
                   cell("tmx", n, "shmem_kib", mib, 1), cell("ompi", n, "shmem_kib", mib, 1),
                   cell("tmx", n, "pss_kib", mib, 1), cell("ompi", n, "pss_kib", mib, 1),
                   cell("tmx", n, "pss_anon_kib", mib, 1), cell("ompi", n, "pss_anon_kib", mib, 1),
                   cell("tmx", n, "rss_kib", mib, 1), cell("ompi", n, "rss_kib", mib, 1)
        }
        print ""
        print "start-up, ms from the launch: to the end of the first all-to-all round at rank 0"
        print "(first), to init done (init: tmx_job_connect / MPI_Init returned at rank 0); job wall time"
        print ""
        print "| ranks | tmx first | ompi first | tmx/ompi | tmx init | ompi init | tmx wall | ompi wall |"
        print "|---|---|---|---|---|---|---|---|"
        for (i = 1; i <= nc; i++) {
            n = c[i]
            printf "| %d | %s | %s | %s | %s | %s | %s | %s |\n", n,
                   cell("tmx", n, "first_round_ms", 1, 0), cell("ompi", n, "first_round_ms", 1, 0),
                   ratio(n, "first_round_ms"),
                   cell("tmx", n, "init_ms", 1, 0), cell("ompi", n, "init_ms", 1, 0),
                   cell("tmx", n, "wall_ms", 1, 0), cell("ompi", n, "wall_ms", 1, 0)
        }
    }' "$data" | tee -a "$outdir/summary.txt"

echo "# summary: $outdir/summary.txt" >&2
