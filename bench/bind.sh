#!/bin/bash
# bind.sh: tmx_pingpong under tmxrun's own binding vs hand pinning with taskset vs unpinned,
# interleaved round by round so that a noisy neighbour hits all three alike. See
# bench/README.md.
#
#   bench/bind.sh [-r ROUNDS] [-s SIZES] [BUILDDIR]
#
#   default   tmxrun -n 2 tmx_pingpong                       (its default: --bind-to core)
#   taskset   tmxrun -n 2 --bind-to none sh -c 'exec taskset -c CPU_r tmx_pingpong'
#             (rank r on the r-th CPU tmxrun may use: what one would do by hand)
#   unpinned  tmxrun -n 2 --bind-to none tmx_pingpong
#
# Prints per variant and size the median and the spread (min..max) of the rounds, latency in
# us and bandwidth in MB/s.
set -u

rounds=7
sizes="8,65536,1048576"
while [ $# -gt 0 ]; do
    case "$1" in
    -r) rounds=$2; shift 2 ;;
    -s) sizes=$2; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) break ;;
    esac
done
b=${1:-.}
tmxrun=$b/tools/tmxrun
pp=$b/examples/tmx_pingpong
[ -x "$tmxrun" ] && [ -x "$pp" ] || { echo "no $tmxrun or $pp (give the build directory)" >&2; exit 2; }
out=$(mktemp -d "${TMPDIR:-/tmp}/tmx-bind.XXXXXX")
trap 'rm -rf "$out"' EXIT

# the first two CPUs this shell may use, as tmxrun's default binding picks them
mapfile -t cpus < <(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status |
    tr ',' '\n' | while IFS=- read -r a z; do seq "$a" "${z:-$a}"; done | head -n 2)
if [ "${#cpus[@]}" -lt 2 ]; then
    echo "needs 2 CPUs" >&2
    exit 2
fi

echo "# $(date -u +%FT%TZ) $(uname -r), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# $rounds rounds, sizes $sizes; taskset CPUs ${cpus[0]} and ${cpus[1]}"
"$tmxrun" -n 2 --report-bindings true 2>&1 | sed 's/^/# default: /'
for r in $(seq 1 "$rounds"); do
    for v in default taskset unpinned; do
        args=(-t lat,bw -m "${sizes%%,*}:${sizes##*,}" -f csv)
        case $v in
        default) timeout 300 "$tmxrun" -n 2 "$pp" "${args[@]}" ;;
        # TMX_LOCAL_SIZE=1: what tmxrun says of a rank alone on its CPU; with --bind-to none it
        # says 2, and a rank that taskset left one CPU then thinks itself oversubscribed and
        # yields between polls (measured: 8-byte latency 0.69 us instead of 0.37)
        taskset) timeout 300 "$tmxrun" -n 2 --bind-to none sh -c \
            'c0=$1; c1=$2; shift 2; [ "$TMX_RANK" = 0 ] && c=$c0 || c=$c1
             TMX_LOCAL_SIZE=1 exec taskset -c "$c" "$@"' \
            sh "${cpus[0]}" "${cpus[1]}" "$pp" "${args[@]}" ;;
        unpinned) timeout 300 "$tmxrun" -n 2 --bind-to none "$pp" "${args[@]}" ;;
        esac >"$out/$v.$r" 2>&1 || echo "# round $r $v failed: $(tail -1 "$out/$v.$r")"
    done
done

# the csv rows: size,latency_us,bandwidth_mbs
printf '%-9s %9s  %-26s %-26s\n' variant size "latency us: median (range)" "bandwidth MB/s: median (range)"
for v in default taskset unpinned; do
    for s in ${sizes//,/ }; do
        cat "$out/$v".* | awk -F, -v s="$s" '$1 == s && NF >= 3 { print $2, $3 }' >"$out/rows"
        [ -s "$out/rows" ] || continue
        lat=$(cut -d' ' -f1 "$out/rows" | sort -g | awk '{ a[NR] = $1 } END {
            printf "%.3f (%.3f..%.3f)", a[int((NR + 1) / 2)], a[1], a[NR] }')
        bw=$(cut -d' ' -f2 "$out/rows" | sort -g | awk '{ a[NR] = $1 } END {
            printf "%.0f (%.0f..%.0f)", a[int((NR + 1) / 2)], a[1], a[NR] }')
        printf '%-9s %9s  %-26s %-26s\n' "$v" "$s" "$lat" "$bw"
    done
done
