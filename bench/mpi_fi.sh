#!/usr/bin/env bash
# mpi_fi.sh: Open MPI over tmx (libtmx-fi.so: pml cm + mtl ofi + provider tmx) against Open
# MPI's own shared-memory paths (pml ob1 + btl vader, and pml ucx when Open MPI has it), with
# bench/osu_pingpong_mpi.c, 8 B to 4 MiB latency and bandwidth, the stacks interleaved round by
# round; then libfabric's fi_pingpong over tmx against libfabric's own shm provider, also
# interleaved. Prints medians and the ratio of tmx to the best of the others. A benchmark, not
# a test: run it on a quiet machine, with a release build.
#
# tmx runs twice per round: "tmx" with --mca mtl_ofi_tag_mode ofi_tag_1 (receives from any
# source, the source rank in the tag) and "tmxf" in Open MPI's default tag mode, which picks
# ofi_tag_full over tmx (receives directed at the source, the source rank as remote CQ data:
# what an mpirun without that option gets).
#
#   bench/mpi_fi.sh [-r rounds] BUILDDIR      (BUILDDIR: a build with libtmx-fi.so in it)
#
# Raw outputs stay in a directory it names.
set -u
rounds=3
while getopts "r:h" opt; do
    case $opt in
        r) rounds=$OPTARG ;;
        *) sed -n '2,17s/^# \{0,1\}//p' "$0"; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
B=$(cd "${1:?usage: mpi_fi.sh [-r rounds] BUILDDIR}" && pwd) || exit 2
here=$(cd "$(dirname "$0")" && pwd)
export FI_PROVIDER_PATH="$B/src/fi/.libs"
export LD_LIBRARY_PATH="$B/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
[ -e "$FI_PROVIDER_PATH/libtmx-fi.so" ] || { echo "no libtmx-fi.so in $B" >&2; exit 2; }
if grep -q -- '-O0' "$B/Makefile" 2>/dev/null; then
    echo "# warning: $B is a debug (-O0) build; numbers of a release build mean more" >&2
fi
out=$(mktemp -d "${TMPDIR:-/tmp}/mpi_fi.XXXXXX")
data="$out/data"
: > "$data"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpicc -O2 -o "$out/osu" "$here/osu_pingpong_mpi.c" || exit 1

common=(-np 2 --bind-to core)
stacks=(tmx tmxf vader)
declare -A args
args[tmx]="--mca pml cm --mca mtl ofi --mca mtl_ofi_tag_mode ofi_tag_1 --mca mtl_base_verbose 100
           -x FI_PROVIDER=tmx -x FI_PROVIDER_PATH -x LD_LIBRARY_PATH"
args[tmxf]="--mca pml cm --mca mtl ofi --mca mtl_base_verbose 100
            -x FI_PROVIDER=tmx -x FI_PROVIDER_PATH -x LD_LIBRARY_PATH"
args[vader]="--mca pml ob1 --mca btl self,vader"
if ompi_info 2>/dev/null | grep -q "MCA pml: ucx"; then
    stacks+=(ucx)
    # without an RDMA device pml ucx declines unless told any transport will do
    args[ucx]="--mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any -x UCX_TLS=sm,self"
fi
echo "# mpi_fi.sh $(date -u +%FT%TZ), $(nproc) cores, $rounds rounds, stacks: ${stacks[*]}"
echo "# $(mpirun --version 2>/dev/null | head -1); raw outputs in $out"

record() { # stack round test file
    awk -F, -v s="$1" -v r="$2" -v t="$3" '
        /^#/ || /^size/ { next }
        NF >= 2 { print s, t, $1, r, $2 }
        t == "lat" && NF >= 3 { print s, "latm", $1, r, $3 }' "$4" >> "$data"
}

for r in $(seq "$rounds"); do
    for s in "${stacks[@]}"; do
        for t in lat bw; do
            f="$out/r$r-$s-$t"
            # shellcheck disable=SC2086
            if timeout -s KILL 300 mpirun "${common[@]}" ${args[$s]} "$out/osu" -t $t -M \
                    -m 8:4194304 -f csv > "$f.csv" 2> "$f.err"; then
                if [ "${s#tmx}" != "$s" ] &&
                       [ "$(grep -c 'mtl:ofi:provider: tmx' "$f.err")" -ne 2 ]; then
                    echo "round $r: $s $t did not run over provider tmx, see $f.err" >&2
                    continue
                fi
                record "$s" "$r" "$t" "$f.csv"
            else
                echo "round $r: $s $t failed, see $f.err" >&2
            fi
        done
    done
done

# medians and ratios: latency ratio = tmx / best other (lower is better, <= 1 meets the
# target); bandwidth ratio = tmx / best other (higher is better, >= 1 meets it); one ratio per
# tmx stack, against the best of the stacks that are not tmx
table() { # test unit
    awk -v t="$1" -v unit="$2" -v stacks="${stacks[*]}" '
        function median(k,   n, i, j, a, tmp) {
            n = split(vals[k], a, " ")
            for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
                if (a[j] + 0 < a[i] + 0) { tmp = a[i]; a[i] = a[j]; a[j] = tmp }
            return n ? (n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2) : ""
        }
        $2 == t { vals[$1 SUBSEP $3] = vals[$1 SUBSEP $3] " " $5; sizes[$3] = 1 }
        END {
            ns = split(stacks, st, " ")
            printf "%-9s", "size"
            for (i = 1; i <= ns; i++) printf " %12s", st[i] " " unit
            for (i = 1; i <= ns; i++) if (st[i] ~ /^tmx/) printf " %10s", st[i] "/best"
            printf "\n"
            n = 0
            for (z in sizes) order[++n] = z + 0
            for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
                if (order[j] < order[i]) { tmp = order[i]; order[i] = order[j]; order[j] = tmp }
            for (k = 1; k <= n; k++) {
                z = order[k]; printf "%-9d", z
                best = ""
                for (i = 1; i <= ns; i++) {
                    m = median(st[i] SUBSEP z); med[i] = m
                    printf " %12s", m == "" ? "-" : sprintf("%.2f", m)
                    if (st[i] !~ /^tmx/ && m != "" &&
                        (best == "" || (t != "bw" ? m < best : m > best)))
                        best = m
                }
                for (i = 1; i <= ns; i++) {
                    if (st[i] !~ /^tmx/) continue
                    ratio = "-"
                    if (med[i] != "" && best != "" && best != 0)
                        ratio = sprintf("%.2f", med[i] / best)
                    printf " %10s", ratio
                }
                printf "\n"
            }
        }' "$data"
}
echo
echo "## MPI latency (us, median of $rounds), osu_pingpong_mpi -t lat"
table lat us
echo
echo "## MPI latency, median half round trip (us, median of $rounds), osu_pingpong_mpi -t lat -M"
echo "## (a preempted iteration does not move it: read this one on a loaded machine)"
table latm us
echo
echo "## MPI bandwidth (MB/s, median of $rounds), osu_pingpong_mpi -t bw"
table bw MB/s

# fi_pingpong: provider tmx against provider shm, interleaved
if command -v fi_pingpong >/dev/null; then
    : > "$out/fi"
    port=$((20000 + RANDOM % 20000))
    for r in $(seq "$rounds"); do
        for p in tmx shm; do
            port=$((port + 1))
            f="$out/r$r-fi-$p"
            timeout -s KILL 120 taskset -c 0 fi_pingpong -p $p -e rdm -m tagged -I 1000 \
                -B $port > "$f.srv" 2>&1 &
            spid=$!
            sleep 0.3
            if timeout -s KILL 120 taskset -c 1 fi_pingpong -p $p -e rdm -m tagged -I 1000 \
                    -P $port 127.0.0.1 > "$f.cli" 2>&1; then
                awk -v p=$p -v r="$r" '$1 ~ /^[0-9]+[kmg]?$/ && NF >= 7 {
                    print p, "lat", $1, r, $7; print p, "bw", $1, r, $6 }' "$f.cli" >> "$out/fi"
            else
                echo "round $r: fi_pingpong -p $p failed, see $f.cli" >&2
            fi
            wait $spid 2>/dev/null
        done
    done
    echo
    echo "## fi_pingpong -e rdm -m tagged -I 1000 (median of $rounds): usec/xfer, MB/s"
    awk '
        function median(k,   n, i, j, a, tmp) {
            n = split(v[k], a, " ")
            for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
                if (a[j] + 0 < a[i] + 0) { tmp = a[i]; a[i] = a[j]; a[j] = tmp }
            return n ? (n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2) : ""
        }
        { v[$1 SUBSEP $2 SUBSEP $3] = v[$1 SUBSEP $2 SUBSEP $3] " " $5
          if (!($3 in seen)) { seen[$3] = 1; order[++n] = $3 } }
        END {
            printf "%-6s %10s %10s %8s %10s %10s %8s\n", "size", "tmx us", "shm us",
                   "tmx/shm", "tmx MB/s", "shm MB/s", "tmx/shm"
            for (i = 1; i <= n; i++) {
                z = order[i]
                a = median("tmx" SUBSEP "lat" SUBSEP z); b = median("shm" SUBSEP "lat" SUBSEP z)
                c = median("tmx" SUBSEP "bw" SUBSEP z); d = median("shm" SUBSEP "bw" SUBSEP z)
                printf "%-6s %10s %10s %8s %10s %10s %8s\n", z, a, b,
                       (a != "" && b > 0) ? sprintf("%.2f", a / b) : "-", c, d,
                       (c != "" && d > 0) ? sprintf("%.2f", c / d) : "-"
            }
        }' "$out/fi"
fi
