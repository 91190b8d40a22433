#!/bin/bash
# compare.sh: tmx_pingpong against ucx_perftest (UCP tag API) and Open MPI (osu_pingpong_mpi),
# all over shared memory on this host, interleaved size by size within every round, with the
# VM's phase (bench/c2c.c) probed before and after every run. See bench/README.md.
#
#   bench/compare.sh [-r ROUNDS] [-d SECONDS] [-i SECONDS] [-g N] [--full] [-s SIZES] [--tm]
#                    [--ring] [-o DIR] [BUILDDIR]
#   bench/compare.sh --summary DIR      (print the summary of DIR/data.txt again)
#
# BUILDDIR is a tmx build directory (tools/tmxrun and examples/tmx_pingpong in it); without it
# tmxrun and tmx_pingpong are taken from PATH. Builds only bench/osu_pingpong_mpi.c (mpicc)
# and bench/c2c.c (cc).

set -u

usage() {
    cat <<EOF
usage: $0 [-r ROUNDS] [-d SECONDS] [-i SECONDS] [-g N] [--full] [-s SIZES] [--tm] [--ring]
          [-o DIR] [BUILDDIR]
       $0 --summary DIR
  -r ROUNDS  rounds; in each, for every size (group of sizes) and test (lat, then bw) the
             three tools run one after the other, in an order that rotates by round;
             medians over the rounds (default 3)
  -g N       sizes per group (default 1: the tools alternate at every size; more means
             fewer process launches but runs further apart in time)
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
  --ref DIR  also run the tmx build in DIR (the code before a change) next to tmx in every
             round (after it in odd rounds, before it in even ones), and print new /
             reference ratios (tool tmxref in data.txt)
  -o DIR     where raw outputs go (default bench/results/<date>-<time>)
  --summary DIR  print the summary of an earlier run from DIR/data.txt (e.g. with other
             phase thresholds), without running anything; repeated, the rounds of
             several runs together
  BUILDDIR   tmx build directory holding tools/tmxrun and examples/tmx_pingpong
             (default: tmxrun and tmx_pingpong from PATH)
Phase probe (bench/c2c.c, median cache-line round trip between cores 0 and 1, in ns): a run
is fast below C2C_FAST_MAX ns (default $c2c_fast_max), slow from C2C_SLOW_MIN ns (default
$c2c_slow_min), middle in between (environment variables).
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
refdir=""
group=1
summary_only=""
# Phase thresholds (ns per cache-line round trip), from the distribution of 2026-11-26 on this
# VM; see bench/README.md ("The VM's phase").
c2c_fast_max=${C2C_FAST_MAX:-100}
c2c_slow_min=${C2C_SLOW_MIN:-200}
while [ $# -gt 0 ]; do
    case "$1" in
    -r) [ $# -ge 2 ] || { usage >&2; exit 2; }; rounds=$2; shift 2 ;;
    -i) [ $# -ge 2 ] || { usage >&2; exit 2; }; idle_wait=$2; shift 2 ;;
    -d) [ $# -ge 2 ] || { usage >&2; exit 2; }; delay=$2; shift 2 ;;
    -g) [ $# -ge 2 ] || { usage >&2; exit 2; }; group=$2; shift 2 ;;
    --summary) [ $# -ge 2 ] || { usage >&2; exit 2; }
               summary_only="${summary_only:+$summary_only }$2"; shift 2 ;;
    --full) sizes=""; s=1; while [ $s -le 4194304 ]; do sizes="$sizes $s"; s=$((s * 2)); done
            shift ;;
    -s) [ $# -ge 2 ] || { usage >&2; exit 2; }; sizes=$(echo "$2" | tr ',' ' '); shift 2 ;;
    -o) [ $# -ge 2 ] || { usage >&2; exit 2; }; outdir=$2; shift 2 ;;
    --tm) with_tm=1; shift ;;
    --ring) with_ring=1; shift ;;
    --ref) [ $# -ge 2 ] || { usage >&2; exit 2; }; refdir=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "$0: unknown option $1" >&2; usage >&2; exit 2 ;;
    *) builddir=$1; shift ;;
    esac
done
case "$rounds" in ''|*[!0-9]*|0) echo "$0: bad round count '$rounds'" >&2; exit 2 ;; esac
case "$delay" in ''|*[!0-9]*) echo "$0: bad delay '$delay'" >&2; exit 2 ;; esac
case "$idle_wait" in ''|*[!0-9]*) echo "$0: bad idle wait '$idle_wait'" >&2; exit 2 ;; esac
case "$group" in ''|*[!0-9]*|0) echo "$0: bad group size '$group'" >&2; exit 2 ;; esac
for v in "$c2c_fast_max" "$c2c_slow_min"; do
    case "$v" in ''|*[!0-9.]*) echo "$0: bad phase threshold '$v'" >&2; exit 2 ;; esac
done
for s in $sizes; do
    case "$s" in ''|*[!0-9]*) echo "$0: bad size '$s'" >&2; exit 2 ;; esac
done
sizes=$(printf '%s\n' $sizes | sort -n -u | tr '\n' ' ')

# ---------------------------------------------------------------- the summary

# Prints the tables from a data file (also with --summary DIR, from an earlier run). Needs
# sizes, with_tm, with_ring, rounds, max_busy, the three *_status and the phase thresholds.
status_of() {
    case "$1" in
    tmx) echo "$tmx_status" ;;
    ucx) echo "$ucx_status" ;;
    ompi) echo "$ompi_status" ;;
    esac
}

summarize() { # data file
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
    }

    awk -v sizes="$sizes" -v tm="$with_tm" -v ring="$with_ring" -v ref="$with_ref" \
        -v fmax="$c2c_fast_max" \
        -v smin="$c2c_slow_min" '
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
    $2 ~ /^(lat|bw)$/ { key = $1 SUBSEP $2 SUBSEP $3; cnt[key]++; val[key, cnt[key]] = $5
                        has[$1, $2] = 1 }
    { rv[$1, $2, $3, $4] = $5; if ($4 > maxr && $1 != "round") maxr = $4 }
    $2 ~ /^c2c-.*-pre$/ { probes[++np] = $5; pc[cls($5)]++
                          if (!(cls($5) in pmin) || $5 < pmin[cls($5)]) pmin[cls($5)] = $5
                          if (!(cls($5) in pmax) || $5 > pmax[cls($5)]) pmax[cls($5)] = $5 }
    $2 ~ /^load-/ { if (nl == 0 || $5 < lmin) lmin = $5; if (nl == 0 || $5 > lmax) lmax = $5
                    nl++ }

    # ---- the phase of the VM: the probe median (ns per cache-line round trip) before and
    # after every run. F fast, M middle, S slow; x: the probes before and after differ (the
    # phase changed during the run); ?: no probe.
    function cls(ns) {
        if (ns == "") return "?"
        if (ns + 0 < fmax + 0) return "F"
        if (ns + 0 >= smin + 0) return "S"
        return "M"
    }
    function probe(tool, test, s, r, when,    k) {
        k = tool SUBSEP "c2c-" test "-" when SUBSEP s SUBSEP r
        return (k in rv) ? cls(rv[k]) : "?"
    }
    function rphase(tool, test, s, r,    a, b) {
        a = probe(tool, test, s, r, "pre"); b = probe(tool, test, s, r, "post")
        if (a == b) return a
        return (a == "?" || b == "?") ? "?" : "x"
    }
    # The ratio of tmx to the best peer in round r: sets RR (the ratio, "" if none), RP (the
    # phase of tmx, ucx, ompi: "-" for a tool without a result) and RC (the common phase,
    # F/M/S, or "" when the runs did not all see one phase).
    # A peer that has results in this data but not this one (its run failed) makes the round
    # incomplete: its best peer is unknown, so it is not judged either (counted as mixed).
    function round_ratio(metric, s, r,    k, t, best, x, p, inc) {
        RR = ""; RP = ""; RC = ""
        if (!(("tmx", metric, s, r) in rv)) return
        RP = rphase("tmx", metric, s, r); RC = RP
        best = ""; inc = 0
        for (k = 2; k <= 3; k++) {
            t = tools[k]
            if (!((t, metric, s, r) in rv)) { RP = RP "-"; if ((t, metric) in has) inc = 1; continue }
            p = rphase(t, metric, s, r)
            RP = RP p
            if (p != RC) RC = ""
            x = rv[t, metric, s, r]
            if (best == "") best = x
            else if (metric == "lat" && x < best) best = x
            else if (metric == "bw" && x > best) best = x
        }
        if (RC !~ /^[FMS]$/ || inc) RC = ""
        if (best == "" || best <= 0) { RR = ""; return }
        RR = rv["tmx", metric, s, r] / best
    }
    function behind(metric, x) { return (metric == "lat") ? (x > 1) : (x < 1) }
    function cell(v, n,    x) {  # "median (n)" of v[1..n]
        if (n == 0) return "-"
        x = mid(v, n)
        return sprintf("%.2f (%d)", x, n)
    }
    function round_tables(metric, title,    i, s, r, ln, na, nc, nf, nm, ns_, nx, va, vc,
                          vf, vm, vs, lost, L, P, tot, ph, p) {
        print ""
        print "# " title ": ratio tmx / best peer of the same round, and the phase each run saw"
        print "# (tmx ucx ompi: F fast, M middle, S slow, x changed during the run, ? no probe,"
        print "# - no result); * = mixed round: the runs did not all see one phase, or a peer"
        print "# that has results elsewhere has none here (the best peer is unknown)"
        ln = sprintf("%-10s", "size")
        for (r = 1; r <= maxr; r++) ln = ln sprintf(" | r%-10d", r)
        print ln
        for (i = 1; i <= ns; i++) {
            s = sz[i]
            ln = sprintf("%-10s", human(s))
            for (r = 1; r <= maxr; r++) {
                round_ratio(metric, s, r)
                if (RR == "") ln = ln sprintf(" | %-11s", "-")
                else ln = ln sprintf(" | %5.2f %s%s", RR, RP, (RC == "") ? "*" : " ")
            }
            print ln
        }
        print ""
        print "# " title ": median of the per-round ratios (rounds in it): all rounds,"
        print "# phase-consistent rounds only, and per phase; mixed = rounds left out of"
        print "# \"consistent\" (different phases, a change, or a peer without result), shown above"
        printf "%-10s | %-10s %-10s | %-10s %-10s %-10s | %s\n", "size", "all",
               "consistent", "fast", "middle", "slow", "mixed"
        for (i = 1; i <= ns; i++) {
            s = sz[i]
            na = nc = nf = nm = ns_ = nx = 0
            split("", va); split("", vc); split("", vf); split("", vm); split("", vs)
            for (r = 1; r <= maxr; r++) {
                round_ratio(metric, s, r)
                if (RR == "") continue
                va[++na] = RR
                if (RC == "") { nx++; continue }
                vc[++nc] = RR
                if (RC == "F") vf[++nf] = RR
                else if (RC == "M") vm[++nm] = RR
                else vs[++ns_] = RR
            }
            printf "%-10s | %-10s %-10s | %-10s %-10s %-10s | %d\n", human(s), cell(va, na),
                   cell(vc, nc), cell(vf, nf), cell(vm, nm), cell(vs, ns_), nx
        }
        # where tmx loses a phase-consistent round
        print ""
        print "# " title ": where tmx is behind the best peer in a phase-consistent round"
        print "# (" (metric == "lat" ? "ratio above 1" : "ratio below 1") \
              "); per phase: rounds lost / phase-consistent rounds (round ratio ...)"
        split("", tot)
        for (i = 1; i <= ns; i++) {
            s = sz[i]
            split("", L); split("", P); lost = 0
            for (r = 1; r <= maxr; r++) {
                round_ratio(metric, s, r)
                if (RR == "") continue
                if (RC == "") {
                    tot["mixed"]++
                    if (behind(metric, RR)) tot["mixedbehind"]++
                    continue
                }
                P[RC]++; tot["n" RC]++
                if (behind(metric, RR)) {
                    L[RC] = L[RC] sprintf(" r%d %.3f", r, RR); lost++; tot["l" RC]++
                    LN[RC]++
                }
            }
            if (lost == 0) continue
            ln = sprintf("%-10s", human(s))
            for (ph = 1; ph <= 3; ph++) {
                p = substr("FMS", ph, 1)
                if (!(p in P)) continue
                ln = ln sprintf("  %s %d/%d%s", pname[p], (p in L) ? LN[p] : 0, P[p],
                                    (p in L) ? " (" substr(L[p], 2) ")" : "")
            }
            split("", LN)
            print ln
        }
        printf "# %s: tmx behind in %d of %d phase-consistent rounds (fast %d/%d, middle %d/%d," \
               " slow %d/%d); %d mixed rounds not judged, tmx behind in %d of them\n", title,
               tot["lF"] + tot["lM"] + tot["lS"], tot["nF"] + tot["nM"] + tot["nS"],
               tot["lF"], tot["nF"], tot["lM"], tot["nM"], tot["lS"], tot["nS"],
               tot["mixed"], tot["mixedbehind"]
    }
    END {
        split("tmx ucx ompi", tools, " ")
        pname["F"] = "fast"; pname["M"] = "middle"; pname["S"] = "slow"
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

        # the phase probe
        print ""
        printf "# phase probe (bench/c2c.c, ns per cache-line round trip, core 0 <-> 1): fast" \
               " below %s ns, slow from %s ns, middle in between\n", fmax, smin
        if (np == 0) {
            print "# no probe results: every run is of unknown phase (?), no round is consistent"
        } else {
            split("", v); for (i = 1; i <= np; i++) v[i] = probes[i]
            x = mid(v, np)
            pl = sprintf("# probes before the %d runs: median %.1f ns, %.1f..%.1f;", np, x,
                           v[1], v[np])
            for (k = 1; k <= 3; k++) {
                p = substr("FMS", k, 1)
                if (p in pc)
                    pl = pl sprintf(" %s %d (%.1f..%.1f)", pname[p], pc[p], pmin[p],
                                        pmax[p])
                else
                    pl = pl sprintf(" %s 0", pname[p])
            }
            print pl
        }
        if (nl > 0)
            printf "# load average (1 min) at the start of the runs: %.2f..%.2f (our own two" \
                   " busy-polling processes add up to 2)\n", lmin, lmax
        phase_medians()
        round_tables("lat", "latency")
        round_tables("bw", "bandwidth")
        same_yardstick()
        if (tm) {
            onoff_table("# tag-matching offload on (TMX_SOFT_TM=yes) / off, per-round ratio: median",
                        "tmxtm", "tmx")
        }
        if (ring) {
            onoff_table("# eager-RDMA rings on (tmx) / off (TMX_RING=no), per-round ratio: median",
                        "tmx", "tmxq")
        }
        if (ref) {
            onoff_table("# this build (tmx) / the reference build (--ref), per-round ratio: median",
                        "tmx", "tmxref")
        }
    }
    # The table of medians again, per phase: the median of each tool over the runs that saw one
    # phase (probes before and after agree), with the number of such runs.
    function phase_medians(    i, s, k, t, m, p, ph, n, r, v, x, ln) {
        for (ph = 1; ph <= 3; ph++) {
            p = substr("FMS", ph, 1)
            if (!(p in pc)) continue
            print ""
            print "# medians of the runs that saw the " pname[p] " phase only (runs): latency in us, " \
                  "bandwidth in MB/s"
            printf "%-10s | %11s %11s %11s | %13s %13s %13s\n", "size", "lat tmx", "ucx", "ompi",
                   "bw tmx", "ucx", "ompi"
            for (i = 1; i <= ns; i++) {
                s = sz[i]
                ln = sprintf("%-10s |", human(s))
                for (m = 1; m <= 2; m++) {
                    metric = (m == 1) ? "lat" : "bw"
                    for (k = 1; k <= 3; k++) {
                        t = tools[k]; n = 0; split("", v)
                        for (r = 1; r <= maxr; r++)
                            if (((t, metric, s, r) in rv) && rphase(t, metric, s, r) == p)
                                v[++n] = rv[t, metric, s, r]
                        x = (n == 0) ? "-" : sprintf((m == 1) ? "%.2f (%d)" : "%.1f (%d)",
                                                     mid(v, n), n)
                        ln = ln sprintf((m == 1) ? " %11s" : " %13s", x)
                    }
                    if (m == 1) ln = ln " |"
                }
                print ln
            }
        }
    }
    # Every tool judged by the yardstick tmx is judged by: its per-round ratio to the best of the other two,
    # median over the rounds where all three have a result. "The best of two" is the larger of
    # two noisy numbers, so a tool exactly as fast as the others scores below 1 in most rounds
    # (with three equal tools, 1 round in 3 above 1); the scores of the peers show how far below.
    function same_yardstick(    i, s, m, metric, k, t, u, r, n, v, best, x, ln) {
        print ""
        print "# every tool against the best of the other two in the same round, median of the"
        print "# per-round ratios (rounds with all three): what the ratio of tmx is worth, since a tool"
        print "# level with the others also scores below 1 by this measure (the peers show how far)"
        printf "%-10s | %-18s %-18s %-18s | %-18s %-18s %-18s\n", "size", "lat tmx", "ucx",
               "ompi", "bw tmx", "ucx", "ompi"
        for (i = 1; i <= ns; i++) {
            s = sz[i]
            ln = sprintf("%-10s |", human(s))
            for (m = 1; m <= 2; m++) {
                metric = (m == 1) ? "lat" : "bw"
                for (k = 1; k <= 3; k++) {
                    t = tools[k]; n = 0; split("", v)
                    for (r = 1; r <= maxr; r++) {
                        best = ""
                        for (u = 1; u <= 3; u++) {
                            if (!((tools[u], metric, s, r) in rv)) { best = "none"; break }
                            if (u == k) continue
                            x = rv[tools[u], metric, s, r]
                            if (best == "" || (metric == "lat" ? x < best : x > best)) best = x
                        }
                        if (best == "none" || best <= 0) continue
                        v[++n] = rv[t, metric, s, r] / best
                    }
                    x = (n == 0) ? "-" : sprintf("%.2f (%.2f..%.2f)", mid(v, n), v[1], v[n])
                    ln = ln sprintf(" %-18s", x)
                }
                if (m == 1) ln = ln " |"
            }
            print ln
        }
    }
    # One feature on / off, both measured in every round: medians and the per-round ratio, over
    # all rounds and over the rounds where both runs saw one phase.
    function onoff_table(title, on, off,    i, s) {
        print ""
        print title
        print "# all: (rounds, min..max); cons.: rounds where both runs saw one phase (phases:"
        print "# F fast, M middle, S slow); latency: below 1 is faster, bandwidth: above 1 is faster"
        printf "%-10s | %8s %8s %-20s %-18s | %9s %9s %-20s %-18s\n", "size", "lat off", "on",
               "on/off all", "cons.", "bw off", "on", "on/off all", "cons."
        for (i = 1; i <= ns; i++) {
            s = sz[i]
            printf "%-10s | %8s %8s %-20s %-18s | %9s %9s %-20s %-18s\n", human(s),
                   fmt(median(off SUBSEP "lat" SUBSEP s), 2),
                   fmt(median(on SUBSEP "lat" SUBSEP s), 2), tm_ratio(on, off, "lat", s, 0),
                   tm_ratio(on, off, "lat", s, 1),
                   fmt(median(off SUBSEP "bw" SUBSEP s), 1),
                   fmt(median(on SUBSEP "bw" SUBSEP s), 1), tm_ratio(on, off, "bw", s, 0),
                   tm_ratio(on, off, "bw", s, 1)
        }
    }
    function tm_ratio(on, off, metric, s, cons,    r, n, v, x, p, q, ph) {
        n = 0; ph = ""
        for (r = 1; r <= maxr; r++) {
            if (((off, metric, s, r) in rv) && ((on, metric, s, r) in rv) &&
                rv[off, metric, s, r] > 0) {
                if (cons) {
                    p = rphase(on, metric, s, r); q = rphase(off, metric, s, r)
                    if (p != q || p !~ /^[FMS]$/) continue
                    ph = ph p
                }
                v[++n] = rv[on, metric, s, r] / rv[off, metric, s, r]
            }
        }
        if (n == 0) return "-"
        x = mid(v, n)
        if (cons) return sprintf("%.2f (%d, %s)", x, n, ph)
        return sprintf("%.2f (%d, %.2f..%.2f)", x, n, v[1], v[n])
    }' "$1"
}

if [ -n "$summary_only" ]; then
    # one directory, or several (--summary DIR --summary DIR2 ...): their rounds are put one
    # after the other (rounds of the second directory renumbered after the first's)
    data=$(mktemp)
    trap 'rm -f "$data"' EXIT
    off=0
    for d in $summary_only; do
        [ -r "$d/data.txt" ] || { echo "$0: no $d/data.txt" >&2; exit 1; }
        awk -v off="$off" '{ $4 += off; print }' "$d/data.txt" >> "$data"
        off=$(awk '{ if ($4 > m) m = $4 } END { print m + 0 }' "$data")
        echo "# $d: rounds up to $off" >&2
    done
    sizes=$(awk '$2 == "lat" || $2 == "bw" { print $3 }' "$data" | sort -n -u | tr '\n' ' ')
    rounds=$(awk '$1 != "round" { if ($4 > m) m = $4 } END { print m + 0 }' "$data")
    max_busy=$(awk '$1 == "round" && $2 == "busy" { if ($5 > m) m = $5 } END { print m + 0 }' \
        "$data")
    with_tm=0; with_ring=0; with_ref=0
    grep -q '^tmxtm ' "$data" && with_tm=1
    grep -q '^tmxq ' "$data" && with_ring=1
    grep -q '^tmxref ' "$data" && with_ref=1
    for t in tmx ucx ompi; do
        if grep -q "^$t \(lat\|bw\) " "$data"; then st=ok; else st="no result in the data"; fi
        eval "${t}_status=\$st"
    done
    summarize "$data"
    exit 0
fi

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
run_timeout=120

# ---------------------------------------------------------------- find the three tools

. "$here/lib.sh"
with_ref=0
if [ -n "$refdir" ]; then
    tmx_find tmx_pingpong "$refdir"
    [ "$tmx_status" = ok ] || { echo "$0: --ref $refdir: $tmx_status" >&2; exit 1; }
    ref_tmxrun=$tmxrun
    ref_pingpong=$tmx_prog
    with_ref=1
fi
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
# The phase probe: two threads on cores 0 and 1 (the cores the runs are pinned to).
c2c_status="missing (no cc)"
if command -v cc > /dev/null; then
    if cc -O2 -pthread -o "$outdir/c2c" "$here/c2c.c" > "$raw/cc-c2c.txt" 2>&1; then
        c2c_status="ok"
    else
        c2c_status="missing (cc failed, see $raw/cc-c2c.txt)"
    fi
fi
# Running as root needs Open MPI's explicit consent.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# UCX over shared memory only: sm = sysv/posix (eager, active messages) + cma (zero-copy
# rendezvous); self for loopback. Without it UCX would also consider tcp over lo.
export UCX_TLS=sm,self

log "# compare.sh $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname), $cores cores," \
    "$rounds round(s), ${delay}s apart, load average $(cut -d' ' -f1-3 /proc/loadavg)"
log "# sizes: $sizes"
log "# raw outputs: $outdir"
log "# tmx : $tmx_status${tmxrun:+ ($tmxrun -n 2 $pingpong)}"
[ "$with_ref" = 1 ] && log "# tmxref (--ref): $ref_tmxrun -n 2 $ref_pingpong"
ucx_ver=$([ "$ucx_status" = ok ] && ucx_info -v 2> /dev/null | head -1 | sed 's/^# *//')
ompi_ver=$([ "$ompi_status" = ok ] && mpirun --version 2> /dev/null | head -1)
log "# ucx : $ucx_status${ucx_ver:+ ($ucx_ver): UCX_TLS=$UCX_TLS, server on core 0, client on 1}"
log "# ompi: $ompi_status${ompi_ver:+ ($ompi_ver): mpirun -np 2 --bind-to core}"
if [ "$c2c_status" = ok ]; then
    log "# phase probe: ok (bench/c2c.c before and after every run; fast < $c2c_fast_max ns," \
        "slow >= $c2c_slow_min ns a cache-line round trip)"
else
    log "# phase probe: $c2c_status: the phase of every run is unknown"
fi
log "# interleaving: per round, for each group of $group size(s), lat then bw, the tools one" \
    "after the other"

# ---------------------------------------------------------------- runners

# Every run is measured between two phase probes (bench/c2c.c): the probe after one run is the
# probe before the next. data.txt gets, per run and size, "TOOL c2c-TEST-pre SIZE ROUND NS",
# "TOOL c2c-TEST-post ..." and "TOOL load-TEST SIZE ROUND LOADAVG1".
c2c_bin="$outdir/c2c"
last_probe="-"
probe_now() {
    local out try
    last_probe="-"
    [ "$c2c_status" = ok ] || return 0
    # a probe whose threads were preempted most of the time (fewer than 10 batches of round
    # trips, out of about 1000) says nothing about the phase: try once more, then give up
    for try in 1 2; do
        if out=$("$c2c_bin" 2>> "$raw/c2c-errors.txt") && [ "${out##* }" -ge 10 ]; then
            last_probe=${out%% *}
            return 0
        fi
        echo "$(date +%H:%M:%S) try $try: ${out:-no output}" >> "$raw/c2c-errors.txt"
    done
    probe_failures=$((probe_failures + 1))
}
probe_failures=0

# Another engineer's real-time benchmark (chrt -f) on this machine starves ours, or ours
# starves it (two SCHED_FIFO busy-pollers on one core): before every run, wait (up to
# run_timeout) until no process outside our process group runs with a real-time policy.
my_pgid=$(ps -o pgid= -p $$ | tr -d ' ')
other_rt() {
    ps -eo pgid=,cls=,pid=,args= 2> /dev/null |
        awk -v me="$my_pgid" '($2 == "FF" || $2 == "RR") && $1 != me && $1 != 0 { print; exit }'
}
rt_waits=0
wait_for_rt() {
    local w=0 quiet=0 who
    who=$(other_rt)
    [ -n "$who" ] || return 0
    rt_waits=$((rt_waits + 1))
    echo "$(date +%H:%M:%S) waiting for: $who" >> "$raw/rt-waits.txt"
    # such benchmarks come in loops of short runs: wait for 5 s without any
    while [ "$quiet" -lt 5 ] && [ "$w" -lt "$run_timeout" ]; do
        sleep 1
        w=$((w + 1))
        who=$(other_rt)
        if [ -n "$who" ]; then quiet=0; else quiet=$((quiet + 1)); fi
    done
    echo "$(date +%H:%M:%S) waited $w s" >> "$raw/rt-waits.txt"
    last_probe="-" # probe again: the phase may have changed meanwhile
}

# run_measured TOOL TEST ROUND "SIZES" command...: runs the command between two probes and
# records the probes and the load average for every size in SIZES; returns its exit status.
run_measured() {
    local tool=$1 test=$2 round=$3 szs=$4 pre load rc s
    shift 4
    wait_for_rt
    [ "$last_probe" = "-" ] && probe_now
    pre=$last_probe
    load=$(cut -d' ' -f1 /proc/loadavg)
    "$@"
    rc=$?
    probe_now
    for s in $szs; do
        [ "$pre" != - ] && echo "$tool c2c-$test-pre $s $round $pre"
        [ "$last_probe" != - ] && echo "$tool c2c-$test-post $s $round $last_probe"
        echo "$tool load-$test $s $round $load"
    done >> "$data"
    return $rc
}

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
# the peer still leaving the barrier) and reads several times slower than the next one. With
# one size per group every run measures one size (as ucx_perftest always does), so every
# size is a "first" size and gets the same treatment in all three tools.
# A group runs every power of two from its smallest to its largest size; only the chosen sizes
# are kept.
run_pair() { # tool test round "SIZES" launcher...
    local tool=$1 test=$2 round=$3 szs=$4 lo hi out
    shift 4
    lo=$(printf '%s\n' $szs | head -1)
    hi=$(printf '%s\n' $szs | tail -1)
    out="$raw/r$round-$tool-$test-$lo.txt"
    if [ "$test" = lat ]; then
        set -- "$@" -t lat -w "$lat_warmup_small"
    else
        set -- "$@" -t bw
    fi
    if run_measured "$tool" "$test" "$round" "$szs" timeout "$run_timeout" "$@" -m "$lo:$hi" \
            -W "$window" -f csv > "$out" 2>&1; then
        record_csv "$tool" "$round" "$out"
    else
        log "round $round: $tool $test $lo..$hi failed, see $out"
    fi
}

run_tmx() { # test round sizes
    run_pair tmx "$1" "$2" "$3" "$tmxrun" -n 2 "$pingpong"
}

run_tmx_tm() { # test round sizes
    TMX_SOFT_TM=yes TMX_TM_OFFLOAD=yes run_pair tmxtm "$1" "$2" "$3" "$tmxrun" -n 2 "$pingpong"
}

run_tmx_noring() { # test round sizes
    TMX_RING=no run_pair tmxq "$1" "$2" "$3" "$tmxrun" -n 2 "$pingpong"
}

run_tmx_ref() { # test round sizes
    run_pair tmxref "$1" "$2" "$3" "$ref_tmxrun" -n 2 "$ref_pingpong"
}

run_ompi() { # test round sizes
    run_pair ompi "$1" "$2" "$3" mpirun -np 2 --bind-to core "$osu_bin"
}

ucx_port=$((20000 + RANDOM % 20000))

# One ucx_perftest server/client pair; prints the client's csv result line.
ucx_one() { # test size iters warmup outfile [extra args]
    local test=$1 size=$2 iters=$3 warm=$4 out=$5 spid i try rc
    shift 5
    # other engineers run ucx_perftest too: take a port nobody listens on, and try again
    # with the next one when our server could not bind it after all
    for try in 1 2 3; do
        ucx_port=$((ucx_port + 1))
        while ss -ltn "sport = :$ucx_port" 2> /dev/null | grep -q LISTEN; do
            ucx_port=$((ucx_port + 1))
        done
        timeout "$run_timeout" taskset -c 0 ucx_perftest -p "$ucx_port" > "$out.server" 2>&1 &
        spid=$!
        # wait until the server listens; probing by connecting would use up its single accept
        for i in $(seq 100); do
            ss -ltn "sport = :$ucx_port" 2> /dev/null | grep -q LISTEN && break
            kill -0 "$spid" 2> /dev/null || break
            sleep 0.05
        done
        if ! kill -0 "$spid" 2> /dev/null && grep -q 'bind() failed' "$out.server"; then
            wait "$spid" 2> /dev/null
            continue
        fi
        timeout "$run_timeout" taskset -c 1 ucx_perftest 127.0.0.1 -p "$ucx_port" -t "$test" \
            -s "$size" -n "$iters" -w "$warm" "$@" -f -v > "$out" 2>&1
        rc=$?
        wait "$spid" 2> /dev/null
        return $rc
    done
    return 1
}

run_ucx() { # test round sizes
    local test=$1 round=$2 s out line
    for s in $3; do
        if [ "$test" = lat ]; then
            out="$raw/r$round-ucx-lat-$s.txt"
            if run_measured ucx lat "$round" "$s" ucx_one tag_lat "$s" "$(lat_iters "$s")" \
                    "$(lat_warmup "$s")" "$out"; then
                # csv: iterations,50.0_percentile_lat,avg_lat,overall_lat,avg_bw,overall_bw,...
                # overall_lat is the mean one-way (half round trip) latency in us
                line=$(grep -E '^[0-9]+,' "$out" | tail -1)
                [ -n "$line" ] && echo "ucx lat $s $round $(echo "$line" | cut -d, -f4)" >> "$data"
            else
                log "round $round: ucx tag_lat $s failed, see $out"
            fi
        else
            # same number of messages as the window loop of the other two: window * iterations,
            # at most $window sends outstanding (-O)
            out="$raw/r$round-ucx-bw-$s.txt"
            if run_measured ucx bw "$round" "$s" ucx_one tag_bw "$s" \
                    $(($(bw_iters "$s") * window)) $(($(bw_warmup "$s") * window)) \
                    "$out" -O "$window"; then
                line=$(grep -E '^[0-9]+,' "$out" | tail -1)
                # ucx_perftest's MB/s are MiB/s (2^20); convert to 10^6 bytes/s
                [ -n "$line" ] && echo "ucx bw $s $round $(echo "$line" |
                    awk -F, '{ printf "%.2f", $6 * 1.048576 }')" >> "$data"
            else
                log "round $round: ucx tag_bw $s failed, see $out"
            fi
        fi
    done
}

# The tmx block: tmx, then (with --tm / --ring) its variants right after it.
# With --ref the reference build goes right after tmx in odd rounds and right before it in even
# ones: which of two runs goes first can matter by about 10% on this VM (bench/README.md).
run_tmx_block() { # test round sizes
    [ "$tmx_status" = ok ] || return 0
    [ "$with_ref" = 1 ] && [ $(($2 % 2)) -eq 0 ] && run_tmx_ref "$@"
    run_tmx "$@"
    [ "$with_tm" = 1 ] && run_tmx_tm "$@"
    [ "$with_ring" = 1 ] && run_tmx_noring "$@"
    [ "$with_ref" = 1 ] && [ $(($2 % 2)) -eq 1 ] && run_tmx_ref "$@"
    return 0
}
run_ucx_block() { [ "$ucx_status" = ok ] && run_ucx "$@"; return 0; }
run_ompi_block() { [ "$ompi_status" = ok ] && run_ompi "$@"; return 0; }

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

# The groups of sizes, one per line (sizes ascending, $group per group).
groups=$(printf '%s\n' $sizes | awk -v g="$group" '
    { line = line (line == "" ? "" : " ") $1 }
    NR % g == 0 { print line; line = "" }
    END { if (line != "") print line }')
mapfile -t group_list <<< "$groups"

blocks=(tmx ucx ompi)
start_time=$(date +%s)
for r in $(seq "$rounds"); do
    # This VM changes between a fast and a slow mode (bench/c2c.c) within seconds to minutes:
    # the three tools run one after the other at every size (group), so the runs that one
    # ratio compares are seconds apart, and a probe before and after each run says which mode
    # it saw. The order of the tools rotates by round, so that none is always first.
    [ "$r" -gt 1 ] && [ "$delay" -gt 0 ] && sleep "$delay"
    busy=$(background_busy)
    waited=0
    while [ "$busy" -ge 10 ] && [ "$waited" -lt "$idle_wait" ]; do
        busy=$(background_busy) # takes one second
        waited=$((waited + 1))
    done
    [ "$busy" -gt "$max_busy" ] && max_busy=$busy
    echo "round busy 0 $r $busy" >> "$data"
    k=$(( (r - 1) % 3 ))
    order="${blocks[$k]} ${blocks[$(( (k + 1) % 3 ))]} ${blocks[$(( (k + 2) % 3 ))]}"
    log "round $r/$rounds: $(date +%H:%M:%S), other processes used $busy% of the CPUs," \
        "load average $(cut -d' ' -f1-3 /proc/loadavg); order: $order"
    last_probe="-"
    round_start=$(date +%s)
    for g in "${group_list[@]}"; do
        for test in lat bw; do
            for b in $order; do
                "run_${b}_block" "$test" "$r" "$g" < /dev/null
            done
        done
    done
    log "round $r/$rounds: runs took $(( $(date +%s) - round_start )) s (after ${waited} s of" \
        "waiting for an idle machine)"
done
log "# $rounds round(s) took $(( $(date +%s) - start_time )) s"
[ "$rt_waits" -gt 0 ] &&
    log "# waited $rt_waits time(s) for another real-time process, see $raw/rt-waits.txt"
[ "$probe_failures" -gt 0 ] &&
    log "# the phase probe failed $probe_failures time(s), see $raw/c2c-errors.txt"

# ---------------------------------------------------------------- medians and ratios

summarize "$data" | tee -a "$outdir/summary.txt"
echo "# summary: $outdir/summary.txt" >&2
