#!/bin/sh
# tmxrun's mapping and binding (src/topo, hwloc): what each --map-by / --bind-to gives on a
# two-socket, four-NUMA-node machine (synthetic, and XML with a distance matrix) and on a
# cgroup-restricted one (XML whose allowed CPUs are 6-11,24-31), then real pinning on this
# machine, read from the ranks' /proc. The XML files are hwloc 2.9 exports of the synthetic
# topology "pack:2 numa:2 core:4 pu:2" (2 CPUs per core, CPUs numbered in order).
. "$(dirname "$0")/lib.sh"

S=${TMX_SRCDIR:-$(dirname "$0")/../..}/test/integration/topo
SYNTH="pack:2 numa:2 core:4 pu:2"

run 20 "$TMXRUN" -n 1 --report-bindings --timeout 15 true
if grep -q "built without hwloc" "$T/err"; then
    expect_rc 0 "without hwloc the default runs unbound"
    run 20 "$TMXRUN" -n 1 --bind-to core --timeout 15 true
    expect_rc 2 "without hwloc --bind-to core is refused"
    expect_grep "$T/err" "cannot bind: tmx was built without hwloc" "the refusal says why"
    finish
fi

# binds VAR VALUE NP OPTIONS...: the bindings tmxrun reports, one "rank: where cpus numa" per
# line, in $T/b
binds() {
    local var=$1 val=$2 np=$3
    shift 3
    run 20 env "$var=$val" "$TMXRUN" -n "$np" --report-bindings --timeout 15 "$@" true
    sed -n 's/^tmxrun: rank \([0-9]*\) (pid [0-9]*) \(bound to\|not bound\)\( [a-z]* [0-9]*\)\{0,1\}: cpus \([0-9,-]*\) (\(numa node [0-9]*\|several numa nodes\)).*/\1:\3 \4 \5/p' \
        "$T/err" | sort -n >"$T/b"
}

# check_all WHAT N TEXT: every one of N ranks got "TEXT"
check_all() {
    local what=$1 n=$2 i=0
    : >"$T/want"
    while [ "$i" -lt "$n" ]; do
        echo "$i: $3" >>"$T/want"
        i=$((i + 1))
    done
    if [ "$rc" -eq 0 ] && cmp -s "$T/want" "$T/b"; then ok "$what"; else fail "$what (exit $rc)"; show; fi
}

# check WHAT EXPECTED-LINES...
check() {
    local what=$1
    shift
    printf '%s\n' "$@" >"$T/want"
    if [ "$rc" -eq 0 ] && cmp -s "$T/want" "$T/b"; then
        ok "$what"
    else
        fail "$what (exit $rc)"
        diff "$T/want" "$T/b" | sed 's/^/    | /' >&2
        show
    fi
}

for src in "HWLOC_SYNTHETIC=$SYNTH" "HWLOC_XMLFILE=$S/two_socket.xml"; do
    var=${src%%=*}
    val=${src#*=}
    binds "$var" "$val" 4
    check "$var: default for 4 ranks: map by core, bind to core" \
        "0: core 0 0-1 numa node 0" "1: core 1 2-3 numa node 0" \
        "2: core 2 4-5 numa node 0" "3: core 3 6-7 numa node 0"
    binds "$var" "$val" 4 --map-by numa
    check "$var: --map-by numa: round-robin over the 4 NUMA nodes" \
        "0: core 0 0-1 numa node 0" "1: core 4 8-9 numa node 1" \
        "2: core 8 16-17 numa node 2" "3: core 12 24-25 numa node 3"
    binds "$var" "$val" 4 --map-by socket --bind-to numa
    check "$var: --map-by socket --bind-to numa" \
        "0: numa 0 0-7 numa node 0" "1: numa 2 16-23 numa node 2" \
        "2: numa 0 0-7 numa node 0" "3: numa 2 16-23 numa node 2"
    binds "$var" "$val" 3 --map-by numa --bind-to socket
    check "$var: --map-by numa --bind-to socket" \
        "0: socket 0 0-15 several numa nodes" "1: socket 0 0-15 several numa nodes" \
        "2: socket 1 16-31 several numa nodes"
    binds "$var" "$val" 16 --bind-to none
    check_all "$var: --bind-to none: every rank may use every CPU" 16 "0-31 several numa nodes"
    binds "$var" "$val" 17
    check_all "$var: default for 17 ranks on 16 cores: not bound" 17 "0-31 several numa nodes"
    expect_grep "$T/err" "" "17 ranks run"
    binds "$var" "$val" 18 --bind-to core
    [ "$(sed -n 's/^16:/16:/p' "$T/b")" = "16: core 0 0-1 numa node 0" ] &&
        ok "$var: --bind-to core with more ranks than cores wraps around" ||
        fail "$var: rank 16 of 18: $(sed -n '/^16:/p' "$T/b")"
    expect_grep "$T/err" "18 ranks on 16 allowed cores: ranks share cores" "  ... and says so"
done

# The ranks learn their binding from the environment.
run 20 env "HWLOC_SYNTHETIC=$SYNTH" "$TMXRUN" -n 2 --map-by numa --timeout 15 \
    sh -c 'echo "$TMX_RANK $TMX_BIND $TMX_BIND_CPUS $TMX_NUMA_NODE $TMX_LOCAL_SIZE"'
expect_rc 0 "the ranks' environment"
printf '0 core 0-1 0 1\n1 core 8-9 1 1\n' >"$T/want"
sort "$T/out" | cmp -s - "$T/want" && ok "TMX_BIND, TMX_BIND_CPUS, TMX_NUMA_NODE, TMX_LOCAL_SIZE" ||
    fail "the ranks' environment: $(cat "$T/out")"
run 20 env "HWLOC_SYNTHETIC=$SYNTH" "$TMXRUN" -n 4 --map-by socket --bind-to socket \
    --timeout 15 sh -c 'echo "$TMX_RANK $TMX_LOCAL_SIZE"'
[ "$(sort "$T/out" | tr '\n' ' ')" = "0 2 1 2 2 2 3 2 " ] &&
    ok "TMX_LOCAL_SIZE counts the ranks bound to the same socket" ||
    fail "TMX_LOCAL_SIZE with --bind-to socket: $(cat "$T/out")"

# --bind-to core with more ranks than cores: round-robin over the cores (rank r on core r mod
# 16), and each rank is told how many share its core, so that those that do yield.
run 20 env "HWLOC_SYNTHETIC=$SYNTH" "$TMXRUN" -n 18 --bind-to core --timeout 15 \
    sh -c 'echo "$TMX_RANK $TMX_BIND_CPUS $TMX_LOCAL_SIZE"'
[ "$(sort -n "$T/out" | sed -n '1p;2p;3p;17p;18p' | tr '\n' ' ')" = "0 0-1 2 1 2-3 2 2 4-5 1 16 0-1 2 17 2-3 2 " ] &&
    ok "--bind-to core, 18 ranks on 16 cores: 0 and 16 share core 0, 1 and 17 core 1 (TMX_LOCAL_SIZE 2)" ||
    fail "--bind-to core, 18 ranks: $(sort -n "$T/out" | tr '\n' ',')"

# A cgroup that allows CPUs 6-11 and 24-31: 7 cores on NUMA nodes 0, 1 and 3.
X="$S/cgroup.xml"
binds HWLOC_XMLFILE "$X" 3
check "cgroup: default: the allowed cores only" \
    "0: core 0 6-7 numa node 0" "1: core 1 8-9 numa node 1" "2: core 2 10-11 numa node 1"
binds HWLOC_XMLFILE "$X" 4 --map-by numa
check "cgroup: --map-by numa: the NUMA nodes with allowed CPUs" \
    "0: core 0 6-7 numa node 0" "1: core 1 8-9 numa node 1" \
    "2: core 3 24-25 numa node 3" "3: core 0 6-7 numa node 0"
binds HWLOC_XMLFILE "$X" 2 --map-by socket --bind-to socket
check "cgroup: --bind-to socket: the allowed CPUs of each socket" \
    "0: socket 0 6-11 several numa nodes" "1: socket 1 24-31 numa node 3"
binds HWLOC_XMLFILE "$X" 8
check_all "cgroup: 8 ranks on 7 allowed cores: not bound" 8 "6-11,24-31 several numa nodes"

# Usage errors.
run 20 "$TMXRUN" -n 1 --map-by none true
expect_rc 2 "--map-by none is refused"
run 20 "$TMXRUN" -n 1 --bind-to=board true
expect_rc 2 "--bind-to=board is refused"
expect_grep "$T/err" "takes none, core, numa or socket, got 'board'" "  ... naming the choices"

# This machine: the ranks' own affinity (/proc/self/status), which tmxrun set.
cpus='sed -n "s/^Cpus_allowed_list:[[:space:]]*/$TMX_RANK /p" /proc/self/status'
first=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*\([0-9]*\).*/\1/p' /proc/self/status)
run 20 "$TMXRUN" -n 1 --bind-to core --report-bindings --timeout 15 sh -c "$cpus"
expect_rc 0 "--bind-to core here"
c0=$(sed -n 's/^0 //p' "$T/out")
want=$(sed -n 's/.*rank 0 .*bound to core [0-9]*: cpus \([0-9,-]*\) .*/\1/p' "$T/err")
[ -n "$c0" ] && [ "$c0" = "$want" ] && ok "rank 0 runs on the CPUs reported ($c0)" ||
    fail "rank 0 runs on '$c0', reported '$want'"
if [ "$(nproc)" -ge 2 ]; then
    last=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*.*[,-]\([0-9]*\)$/\1/p' /proc/self/status)
    run 20 taskset -c "$last" "$TMXRUN" -n 1 --bind-to core --timeout 15 sh -c "$cpus"
    [ "$(sed -n 's/^0 //p' "$T/out")" = "$last" ] &&
        ok "taskset -c $last: bound within the allowed set" ||
        fail "taskset -c $last: rank 0 on '$(cat "$T/out")'"
    run 20 taskset -c "$first" "$TMXRUN" -n 2 --report-bindings --timeout 15 sh -c "$cpus"
    [ "$(sort "$T/out" | tr '\n' ' ')" = "0 $first 1 $first " ] &&
        ok "taskset -c $first, 2 ranks: oversubscribed, not bound, on the allowed CPU only" ||
        fail "taskset -c $first, 2 ranks: $(cat "$T/out")"
else
    echo "skip: the taskset checks need 2 CPUs"
fi
# Ranks that share a core here (--bind-to core, at least 2 per core) take themselves for
# oversubscribed (TMX_LOCAL_SIZE above their CPUs) and yield when they wait (tmx_info -w).
n=$((2 * $(nproc)))
if [ "$n" -le 32 ]; then
    run 60 "$TMXRUN" -n "$n" --bind-to core --timeout 50 "$B/tools/tmx_info" -w
    expect_rc 0 "--bind-to core, $n ranks here: tmx_info -w in every rank"
    [ "$(grep -c '^#   oversubscribed   yes, idle polls yield' "$T/out")" = "$n" ] &&
        ok "  ... every rank that shares a core is oversubscribed and yields" ||
        fail "  ... oversubscribed: $(grep '^#   oversubscribed' "$T/out" | sort | uniq -c | tr '\n' ',')"
else
    echo "skip: $(nproc) CPUs: the shared-core check runs at most 32 ranks"
fi
# Oversubscribed by default: not bound, but each rank starts on one core, round-robin as
# --report-bindings says, with TMX_LOCAL_SIZE the ranks that start there, and gets the allowed
# CPUs back once every rank is up: at the first allgather (a tmx program, boot_allgather), or
# 2 s after the start (a program that never joins, this shell).
allowed=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status)
if [ "$n" -le 32 ] && [ "$(nproc)" -ge 2 ]; then
    run 30 "$TMXRUN" -n "$n" --report-bindings --timeout 25 sh -c \
        'echo "start $TMX_RANK $TMX_LOCAL_SIZE $TMX_BIND $(sed -n "s/^Cpus_allowed_list:[[:space:]]*//p" /proc/self/status)"
         sleep 3
         echo "later $TMX_RANK $(sed -n "s/^Cpus_allowed_list:[[:space:]]*//p" /proc/self/status)"'
    expect_rc 0 "$n ranks, default placement: oversubscribed"
    sed -n 's/^tmxrun: rank \([0-9]*\) (pid [0-9]*) not bound: cpus .*, starts on core [0-9]*: cpus \([0-9,-]*\)$/\1 \2/p' \
        "$T/err" | sort -n >"$T/rep"
    awk '$1 == "start" {print $2, $5}' "$T/out" | sort -n >"$T/st"
    nstart=$(cut -d' ' -f2 "$T/st" | sort -u | wc -l)
    [ "$(wc -l <"$T/rep")" = "$n" ] && cmp -s "$T/rep" "$T/st" && [ "$nstart" -ge 2 ] &&
        ! grep -q " $allowed\$" "$T/st" &&
        ok "  ... every rank started on the one core reported, $nstart different ones" ||
        { fail "  ... start CPUs: reported $(tr '\n' ',' <"$T/rep") seen $(tr '\n' ',' <"$T/st")"; show; }
    bad=$(awk -v n="$n" -v k="$nstart" '$1 == "start" && ($3 != int((n + k - 1 - ($2 % k)) / k) || $4 != "none")' "$T/out")
    [ -z "$bad" ] && ok "  ... each told TMX_BIND=none and the ranks of its start core as TMX_LOCAL_SIZE" ||
        fail "  ... environment: $bad"
    [ "$(awk -v a="$allowed" '$1 == "later" && $3 == a' "$T/out" | wc -l)" = "$n" ] &&
        ok "  ... a program without tmx_job gets the allowed CPUs ($allowed) back after 2 s" ||
        fail "  ... later: $(awk '$1 == "later" {print $3}' "$T/out" | sort | uniq -c | tr '\n' ',')"
    run 60 env BOOT_ALLGATHER_CPUS=1 "$TMXRUN" -n "$n" --timeout 50 \
        "$B/test/integration/boot_allgather" "$n"
    expect_rc 0 "$n ranks of boot_allgather, default placement"
    [ "$(grep -c "^cpus after the first allgather: $allowed\$" "$T/out")" = "$n" ] &&
        ok "  ... every rank has the allowed CPUs back when its first allgather returns" ||
        fail "  ... after the first allgather: $(grep '^cpus' "$T/out" | sort | uniq -c | tr '\n' ',')"
    run 30 "$TMXRUN" -n "$n" --bind-to none --timeout 25 sh -c \
        'echo "start $TMX_RANK $(sed -n "s/^Cpus_allowed_list:[[:space:]]*//p" /proc/self/status)"'
    [ "$(awk -v a="$allowed" '$1 == "start" && $3 == a' "$T/out" | wc -l)" = "$n" ] &&
        ok "  ... --bind-to none: every rank starts on the allowed CPUs" ||
        fail "  ... --bind-to none: $(awk '{print $3}' "$T/out" | sort | uniq -c | tr '\n' ',')"
else
    echo "skip: $(nproc) CPUs: the default oversubscribed start needs 2 to 16 CPUs"
fi
finish
