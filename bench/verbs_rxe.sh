#!/usr/bin/env bash
# bench/verbs_rxe.sh [BUILDDIR]: tmx over the verbs provider against raw verbs (perftest's
# ib_send_lat and ib_send_bw) on the same soft-RoCE device, inside the qemu guest of
# scripts/rxe-vm.sh, in one run: latency and bandwidth at 8 B, 4 KiB and 64 KiB, and their
# ratios. A benchmark, not a test: rxe under emulation (TCG) is slow and jittery in absolute
# terms; the ratio to raw verbs, measured in the same guest in interleaved rounds, is what
# counts. Each cell is the median of ROUNDS rounds (default 5); every round's ratios are
# printed too, with the host's load average at the end of each size's round (the host side
# writes it every 2 s into a directory shared with the guest, which cannot see it), before
# and after. Odd rounds run perftest first, even rounds tmx (latency, then bandwidth), so that
# a drift of the load within a round does not always fall on the same side. The summary says
# for each size the range of the rounds' latency ratios and how many were within 1.2x.
#
# Sizes: SIZES (default "8 4096 65536 65536R"); a size ending in R runs tmx_pingpong -R
# (its buffers mapped once with tmx_mem_map, as perftest registers its own once; without it
# a rendezvous message registers and deregisters its buffers at both ends, 4 calls of 40-160
# us each in the guest) against a perftest run of its own in the same round; a size ending
# in C runs tmx with TMX_MR_CACHE=64 (the registration cache: the first message registers,
# the rest find it cached), e.g. SIZES="65536 65536C 65536R"; a size ending in N runs tmx with
# TMX_RNDV_COPY=0 (no staging buffers: each rendezvous buffer registered per message, as before
# h-verbs6), the "before" of the staging copy in the same run: SIZES="65536 65536N"; a size
# ending in A runs perftest in tmx's place too (raw against raw, same rounds, same order): the
# method's own noise, i.e. how far apart two runs of the same program land in one round, e.g.
# SIZES="8 8A 4096 4096A". Its rows are labelled tmx but are perftest's. A size ending in U
# runs tmx with tmxrun --bind-to none (its two ranks left to the scheduler, as perftest's
# processes are; by default tmxrun binds them to the two vCPUs).
#
# Run from the host (it starts the guest itself; RXE_VM_SCRIPT names scripts/rxe-vm.sh if it
# is not in this tree), or inside the guest (RXE_VM=1). Environment: ROUNDS, SIZES, LAT_ITERS
# (round trips per size, 1000; a tenth above 8 KiB for both
# programs), BW_MSGS (messages per bandwidth run, 1280 = 20 windows of 64; a fifth above
# 8 KiB for both), TMX_WAIT (spin), PP_ARGS (more tmx_pingpong options, e.g. -R: buffers
# registered once with tmx_mem_map, as perftest's are), RXE_VM_GID_INDEX (set by the guest).
#
# Same work for both: tmx_pingpong runs exactly the round trips and messages perftest does
# (its own division of -n above 8 KiB is undone here), both poll without sleeping, both on
# rxe0 through GID index 1. Latency: the median half round trip (tmx_pingpong -M against
# ib_send_lat's "typical") and the mean of each: under emulation the means carry long stalls
# (rxe's kernel work waits for a vCPU that two polling processes hold, and the host is
# shared), the medians are the common case. Bandwidth: tmx_pingpong's windows of 64 sends
# (each window ends with a 0-byte ack, a round trip perftest does not make) against
# ib_send_bw's average (perftest's MB is 2^20 bytes, converted to 10^6 here). tmx polls
# without sleeping (TMX_WAIT=spin, as perftest does; TMX_WAIT=auto, the default, measures the
# default policy: its spin grows past the guest's millisecond wakeups, tmx(7)). No chrt in
# the guest: a real-time poller there would starve rxe's softirq work.
#
# Packets: rxe's counter of packets sent (hw_counters/sent_pkts: data and acknowledgements,
# both processes) per message of each latency run, which the host's load does not change:
# the load-independent part of the comparison.
set -uo pipefail
# One compound command, read whole before it runs: the guest reads this file over 9p, and an
# edit of it during a long run must not change what the running copy does next.
{
if [ "${1:-}" = -h ] || [ "${1:-}" = --help ]; then
    sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'
    exit 0
fi
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
B=$(cd "${1:-${TMX_BUILDDIR:-$(pwd)}}" && pwd)

if [ "${RXE_VM:-0}" != 1 ]; then
    vm=${RXE_VM_SCRIPT:-$here/../scripts/rxe-vm.sh}
    if [ ! -f "$vm" ]; then
        echo "verbs_rxe.sh: no $vm (set RXE_VM_SCRIPT to the lane's scripts/rxe-vm.sh)" >&2
        exit 77
    fi
    echo "# host load average before: $(cut -d' ' -f1-3 /proc/loadavg) ($(nproc) CPUs)"
    # the host's load average, every 2 s, where the guest reads it for each round's line
    # (under TMPDIR, not in BUILDDIR: a reference build may be read-only for this user)
    ld=$(mktemp -d "${TMPDIR:-/tmp}/verbs_rxe_load.XXXXXX") || exit 1
    (while :; do cut -d' ' -f1-3 /proc/loadavg >"$ld/load.tmp" && mv "$ld/load.tmp" "$ld/load"
                 sleep 2; done) &
    lpid=$!
    bash "$vm" --timeout "${RXE_VM_TIMEOUT:-3000}" --rw "$ld" -- env ROUNDS="${ROUNDS:-5}" \
        SIZES="${SIZES:-8 4096 65536 65536R}" LAT_ITERS="${LAT_ITERS:-1000}" \
        BW_MSGS="${BW_MSGS:-1280}" TMX_WAIT="${TMX_WAIT:-spin}" PP_ARGS="${PP_ARGS:-}" \
        HOST_LOAD_FILE="$ld/load" bash "$here/verbs_rxe.sh" "$B"
    rc=$?
    kill "$lpid" 2>/dev/null
    wait "$lpid" 2>/dev/null
    rm -rf "$ld"
    echo "# host load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
    exit $rc
fi

rounds=${ROUNDS:-5}
sizes=${SIZES:-8 4096 65536 65536R}
lat_iters=${LAT_ITERS:-1000}
bw_msgs=${BW_MSGS:-1280}
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
cnt=/sys/class/infiniband/$dev/ports/1/hw_counters/sent_pkts
pkts() { cat "$cnt" 2>/dev/null || echo 0; }
# the host's load average now (1, 5, 15 min; the host side writes it), or "?"
hload() { tr ' ' / <"${HOST_LOAD_FILE:-/nonexistent}" 2>/dev/null || echo "?"; }

# perftest SERVER-CLIENT pair: prints the client's result row (nothing when it failed). The
# client starts once the server listens (under load it can take seconds: a client that comes
# too early fails, and its server would wait for ever); both are killed after 300 s.
perf() {
    local prog=$1 i
    shift
    port=$((port + 1))
    timeout -s KILL 300 "$prog" -d "$dev" -x "$gid" -F -p "$port" "$@" >"$T/srv" 2>&1 &
    local spid=$!
    for i in $(seq 1 200); do
        kill -0 "$spid" 2>/dev/null || break # the server failed: the client fails too
        if command -v ss >/dev/null 2>&1; then
            ss -ltn 2>/dev/null | grep -q ":$port " && break
        elif [ "$i" -ge 10 ]; then
            break # no ss: a second
        fi
        sleep 0.1
    done
    timeout -s KILL 300 "$prog" -d "$dev" -x "$gid" -F -p "$port" "$@" 127.0.0.1 >"$T/cli" 2>&1
    wait "$spid"
    awk '$1 ~ /^[0-9]+$/ && NF >= 4 {print; exit}' "$T/cli"
}

tmx() {
    # shellcheck disable=SC2086 # PP_ARGS: more tmx_pingpong options, word-split
    env TMX_PROVIDERS=verbs TMX_WAIT="${TMX_WAIT:-spin}" TMX_MR_CACHE="${xc:-0}" \
        ${xn:+TMX_RNDV_COPY=0} "$tmxrun" -n 2 ${xu:+--bind-to none} --timeout 300 "$pp" -f csv \
        ${PP_ARGS:-} "$@" 2>"$T/tmx.err" |
        awk -F, '$1 ~ /^[0-9]+$/ {print; exit}'
}

# raw_lat SIZE N PKTS_BEFORE TYPICAL AVG PKTS: one ib_send_lat run of N round trips; appends its
# typical and average latency and the packets per message (perftest sends 2N) to the files
raw_lat() {
    local row
    row=$(perf ib_send_lat -s "$1" -n "$2")
    echo "$row" | col 5 >>"$4"
    echo "$row" | col 6 >>"$5"
    awk -v a="$3" -v b="$(pkts)" -v n="$2" 'BEGIN {printf "%.2f\n", (b - a) / (2 * n)}' >>"$6"
}

# raw_bw SIZE N FILE: one ib_send_bw run of N messages; appends its MB/s (10^6) to FILE
raw_bw() {
    perf ib_send_bw -s "$1" -n "$2" | col 4 |
        awk '{print ($1 == "nan" ? "nan" : sprintf("%.2f", $1 * 1.048576))}' >>"$3"
}

# col N [SEP]: field N of the row on stdin, or nan when the run printed no row (it failed) or
# no number there (ib_send_lat printed "inf" for its typical latency once)
col() { awk -F"${2:- }" -v n="$1" '{v = $n} END {print (v ~ /^[0-9.eE+-]+$/ ? v : "nan")}'; }

median() { grep -v '^nan$' | sort -g | awk '{a[NR] = $1} END {if (NR) print a[int((NR + 1) / 2)]; else print "nan"}'; }

# lat_n SIZE / bw_n SIZE: round trips / messages of one run (fewer above 8 KiB)
lat_n() { if [ "$1" -gt 8192 ]; then echo $((lat_iters / 10)); else echo "$lat_iters"; fi; }
bw_n() { if [ "$1" -gt 8192 ]; then echo $((bw_msgs / 5)); else echo "$bw_msgs"; fi; }
for s in $sizes; do
    for f in lat.raw_typ lat.raw_avg lat.tmx lat.tmx_med bw.raw bw.tmx pk.raw pk.tmx rr.med rr.avg \
             rr.bw load; do : >"$T/$f.$s"; done
done
for r in $(seq 1 "$rounds"); do
    for s in $sizes; do
        z=${s%[RCNAU]} # the size; "R": tmx_pingpong -R (buffers mapped once, as perftest's are);
        xa=          # "C": TMX_MR_CACHE=64 (registrations cached, dropped by a userfaultfd
        xc=0         # monitor); "N": TMX_RNDV_COPY=0 (registered per message, no staging)
        xn=
        xu= # "U": tmxrun --bind-to none (the ranks left to the scheduler, as perftest's are)
        aa= # "A": perftest in tmx's place (raw against raw)
        [ "$z" != "$s" ] && [ "${s#"$z"}" = A ] && aa=1
        [ "$z" != "$s" ] && [ "${s#"$z"}" = N ] && xn=1
        [ "$z" != "$s" ] && [ "${s#"$z"}" = U ] && xu=1
        [ "$z" != "$s" ] && [ "${s#"$z"}" = R ] && xa=-R
        [ "$z" != "$s" ] && [ "${s#"$z"}" = C ] && xc=64
        n=$(lat_n "$z")
        m=$(bw_n "$z")
        # tmx_pingpong divides -n by 10 above 8 KiB (and the warmup too): give it 10x; its
        # warmup is the same number of round trips again, counted in its packets below
        tn=$n tw=$((n / 10 > 0 ? n / 10 : 1))
        [ "$z" -gt 8192 ] && tn=$((n * 10)) tw=$((tw * 10))
        # tmx_pingpong's bandwidth: windows of 64, a fifth of -n above 8 KiB
        bn=$(( (m + 63) / 64 ))
        [ "$z" -gt 8192 ] && bn=$((bn * 5))
        # odd rounds run perftest first, even rounds tmx: a drift of the host's load within a
        # round (or a first run's cost) does not always fall on the same side
        for who in $(if [ $((r % 2)) = 1 ]; then echo raw tmx; else echo tmx raw; fi); do
            p0=$(pkts)
            if [ "$who" = raw ]; then
                raw_lat "$z" "$n" "$p0" "$T/lat.raw_typ.$s" "$T/lat.raw_avg.$s" "$T/pk.raw.$s"
            elif [ -n "$aa" ]; then
                raw_lat "$z" "$n" "$p0" "$T/lat.tmx_med.$s" "$T/lat.tmx.$s" "$T/pk.tmx.$s"
            else
                # shellcheck disable=SC2086 # xa: no word or one
                row=$(tmx $xa -t lat -M -m "$z:$z" -n "$tn" -w "$tw")
                echo "$row" | col 2 , >>"$T/lat.tmx.$s"
                echo "$row" | col 3 , >>"$T/lat.tmx_med.$s"
                # tmx: 2 (n + n/10 warmup + 1 check) messages
                awk -v a="$p0" -v b="$(pkts)" -v n="$n" -v w="$((n / 10 > 0 ? n / 10 : 1))" \
                    'BEGIN {printf "%.2f\n", (b - a) / (2 * (n + w + 1))}' >>"$T/pk.tmx.$s"
            fi
        done
        for who in $(if [ $((r % 2)) = 1 ]; then echo raw tmx; else echo tmx raw; fi); do
            if [ "$who" = raw ]; then
                raw_bw "$z" "$m" "$T/bw.raw.$s"
            elif [ -n "$aa" ]; then
                raw_bw "$z" "$m" "$T/bw.tmx.$s"
            else
                # shellcheck disable=SC2086
                tmx $xa -t bw -m "$z:$z" -n "$bn" | col 2 , >>"$T/bw.tmx.$s"
            fi
        done
        hl=$(hload)
        echo "$hl" >>"$T/load.$s"
        echo "# round $r size $s: lat median tmx $(tail -n 1 "$T/lat.tmx_med.$s") raw" \
             "$(tail -n 1 "$T/lat.raw_typ.$s"), mean tmx $(tail -n 1 "$T/lat.tmx.$s") raw" \
             "$(tail -n 1 "$T/lat.raw_avg.$s") us; bw tmx $(tail -n 1 "$T/bw.tmx.$s") raw" \
             "$(tail -n 1 "$T/bw.raw.$s") MB/s; ratios $(paste -d' ' "$T/lat.tmx_med.$s" \
                 "$T/lat.raw_typ.$s" "$T/lat.tmx.$s" "$T/lat.raw_avg.$s" "$T/bw.tmx.$s" \
                 "$T/bw.raw.$s" | tail -n 1 |
                 awk '{printf "lat median %.2f mean %.2f, bw raw/tmx %.2f",
                       ($2 > 0 ? $1 / $2 : 0), ($4 > 0 ? $3 / $4 : 0), ($5 > 0 ? $6 / $5 : 0)}');" \
             "packets/msg tmx $(tail -n 1 "$T/pk.tmx.$s") raw $(tail -n 1 "$T/pk.raw.$s");" \
             "host load $hl" >&2
        # this round's ratios, for the median of the per-round ratios
        paste -d' ' "$T/lat.tmx_med.$s" "$T/lat.raw_typ.$s" "$T/lat.tmx.$s" "$T/lat.raw_avg.$s" \
            "$T/bw.tmx.$s" "$T/bw.raw.$s" | tail -n 1 |
            awk '{r = ($2 > 0 && $1 != "nan") ? $1 / $2 : "nan"; print r > "'"$T/rr.med.$s"'.tmp"
                  r = ($4 > 0 && $3 != "nan") ? $3 / $4 : "nan"; print r > "'"$T/rr.avg.$s"'.tmp"
                  r = ($5 > 0 && $6 != "nan") ? $6 / $5 : "nan"; print r > "'"$T/rr.bw.$s"'.tmp"}'
        for f in med avg bw; do cat "$T/rr.$f.$s.tmp" >>"$T/rr.$f.$s"; done
    done
done

echo "# tmx over verbs vs raw verbs (perftest) on $dev, GID index $gid, median of $rounds rounds"
echo "# latency us, half round trip: median (tmx_pingpong -M | ib_send_lat typical) and mean"
echo "#   (tmx_pingpong | ib_send_lat t_avg); ratios tmx/raw (1.0 = as fast)"
echo "# bandwidth MB/s (10^6): tmx | ib_send_bw average | ratio raw/tmx (1.0 = as fast)"
echo "# packets: rxe packets sent per message of the latency runs, tmx | perftest"
printf "%-6s %9s %9s %6s   %9s %9s %6s   %8s %8s %6s   %6s %6s\n" size tmx_med raw_typ r_med \
    tmx_avg raw_avg r_avg tmx_bw raw_bw r_bw pk_tmx pk_raw
for s in $sizes; do
    tm=$(median <"$T/lat.tmx_med.$s")
    rt=$(median <"$T/lat.raw_typ.$s")
    tl=$(median <"$T/lat.tmx.$s")
    ra=$(median <"$T/lat.raw_avg.$s")
    tb=$(median <"$T/bw.tmx.$s")
    rb=$(median <"$T/bw.raw.$s")
    pt=$(median <"$T/pk.tmx.$s")
    pr=$(median <"$T/pk.raw.$s")
    awk -v s="$s" -v tm="$tm" -v tl="$tl" -v rt="$rt" -v ra="$ra" -v tb="$tb" -v rb="$rb" \
        -v pt="$pt" -v pr="$pr" 'BEGIN {
        printf "%-6s %9.2f %9.2f %6.2f   %9.2f %9.2f %6.2f   %8.2f %8.2f %6.2f   %6.2f %6.2f\n",
               s, tm, rt, (rt > 0 ? tm / rt : 0), tl, ra, (ra > 0 ? tl / ra : 0), tb, rb,
               (tb > 0 ? rb / tb : 0), pt, pr}'
done
echo "# median of the per-round ratios (each round's tmx against the perftest run next to it),"
echo "# and the lowest and highest round (latency median); rounds within 1.2x; host load range"
printf "%-6s %8s %8s %8s   %11s %9s   %s\n" size r_med r_avg r_bw r_med_range "<=1.2" "host load"
for s in $sizes; do
    printf "%-6s %8.2f %8.2f %8.2f   %5.2f-%-5.2f %5s/%-3s   %s\n" "$s" "$(median <"$T/rr.med.$s")" \
        "$(median <"$T/rr.avg.$s")" "$(median <"$T/rr.bw.$s")" \
        "$(grep -v nan "$T/rr.med.$s" | sort -g | head -n 1)" \
        "$(grep -v nan "$T/rr.med.$s" | sort -g | tail -n 1)" \
        "$(awk '$1 != "nan" && $1 <= 1.2' "$T/rr.med.$s" | wc -l)" "$(grep -vc nan "$T/rr.med.$s")" \
        "$(cut -d/ -f1 "$T/load.$s" | sort -g | sed -n '1p;$p' | paste -sd-)"
done
# Modes (bimodal sizes: at 64 KiB both programs take either about 1.2-1.7 ms or 4-6 ms, the
# guest's 4 ms tick): a round's latency median is "slow" above 2.5 times the lowest median
# of its size (tmx's or raw's, over every round), else "fast" (the tick adds 2.5-4 ms to a
# message of 1.2-1.7 ms, 3-4x; halfway between). A round where only one program
# was slow says which mode it fell in, not what tmx costs: the ratios of the rounds where
# both were in the same mode are the comparison (as bench/compare.sh's phase split).
echo "# by mode (slow: a median above 2.5x the size's lowest, tmx's or raw's): rounds both"
echo "# fast, both slow, mixed (t: only tmx slow, r: only raw slow); median latency ratio and"
echo "# rounds within 1.2x of the both-fast and of the both-slow rounds"
printf "%-6s %5s %5s %9s   %8s %7s   %8s %7s\n" size fast slow "mixed t/r" r_fast "<=1.2" \
    r_slow "<=1.2"
for s in $sizes; do
    paste -d' ' "$T/lat.tmx_med.$s" "$T/lat.raw_typ.$s" | awk -v s="$s" '
        $1 != "nan" && $2 != "nan" && $1 > 0 && $2 > 0 {
            n++; t[n] = $1; r[n] = $2
            if (lo == "" || $1 < lo) lo = $1
            if ($2 < lo) lo = $2 }
        function med(a, k,    i, j, x) {   # median of a[1..k], sorted in place
            for (i = 2; i <= k; i++) { x = a[i]; for (j = i - 1; j >= 1 && a[j] > x; j--)
                a[j + 1] = a[j]; a[j + 1] = x }
            return k ? a[int((k + 1) / 2)] : 0 }
        END {
            for (i = 1; i <= n; i++) {
                ts = t[i] > 2.5 * lo; rs = r[i] > 2.5 * lo; q = t[i] / r[i]
                if (!ts && !rs) { nf++; f[nf] = q; wf += q <= 1.2 }
                else if (ts && rs) { ns++; w[ns] = q; ws += q <= 1.2 }
                else if (ts) mt++
                else mr++ }
            printf "%-6s %5d %5d %5d/%-3d   %8s %3d/%-3d   %8s %3d/%-3d\n", s, nf, ns, mt, mr,
                   nf ? sprintf("%.2f", med(f, nf)) : "-", wf, nf,
                   ns ? sprintf("%.2f", med(w, ns)) : "-", ws, ns }'
done
echo "# every round:"
for s in $sizes; do
    echo "#   $s: tmx median $(paste -sd' ' "$T/lat.tmx_med.$s"), raw typical" \
         "$(paste -sd' ' "$T/lat.raw_typ.$s"); tmx mean $(paste -sd' ' "$T/lat.tmx.$s"), raw" \
         "mean $(paste -sd' ' "$T/lat.raw_avg.$s"); tmx bw $(paste -sd' ' "$T/bw.tmx.$s"), raw" \
         "bw $(paste -sd' ' "$T/bw.raw.$s"); packets/msg tmx $(paste -sd' ' "$T/pk.tmx.$s")," \
         "raw $(paste -sd' ' "$T/pk.raw.$s"); host load $(paste -sd' ' "$T/load.$s")"
done
exit 0
}
