#!/bin/sh
# Ranks that tmxrun does not start (--local-ranks, --boot-listen, --boot-addr-file): here the
# "remote" ranks run on this host, started by this script with TMX_RANK, TMX_SIZE and the
# TMX_BOOT_ADDR tmxrun wrote, as a launcher on another host would start them. A remote rank
# has no pid: its bootstrap connection closing without a goodbye must end the job (no hang),
# one that never joins must fail it at --remote-timeout, and a wrong cookie must still be
# refused. test/verbs/two_guests.sh runs the same across two qemu guests.
. "$(dirname "$0")/lib.sh"

P="$B/test/integration/boot_allgather"
[ -x "$P" ] || { echo "no $P" >&2; exit 99; }

# wait_addr FILE: the address tmxrun writes (at most 10 s)
wait_addr() {
    for _ in $(seq 1 100); do
        if [ -s "$1" ]; then cat "$1"; return 0; fi
        sleep 0.1
    done
    return 1
}

# remote RANK SIZE ADDR CMD...: a rank started by hand, output to $T/remote.RANK, pid in
# $T/remote.RANK.pid
remote() {
    r=$1 s=$2 a=$3
    shift 3
    env TMX_RANK="$r" TMX_SIZE="$s" TMX_BOOT_ADDR="$a" timeout -s KILL 60 "$@" \
        >"$T/remote.$r" 2>&1 </dev/null &
    echo $! >"$T/remote.$r.pid"
}

# 1. three ranks, rank 0 here and ranks 1 and 2 "elsewhere": every gathered byte checked
rm -f "$T/addr"
timeout -s KILL 60 "$TMXRUN" -n 3 --local-ranks 0 --boot-addr-file "$T/addr" --timeout 50 \
    "$P" 3 >"$T/out" 2>"$T/err" </dev/null &
tp=$!
if A=$(wait_addr "$T/addr"); then
    ok "--boot-addr-file written: $(echo "$A" | sed 's/:[0-9a-f]*$/:<cookie>/')"
    case "$A" in
        127.0.0.1:[0-9]*:[0-9a-f][0-9a-f][0-9a-f][0-9a-f]*) ok "loopback address by default" ;;
        *) fail "address '$A' is not 127.0.0.1:port:cookie" ;;
    esac
    [ "$(stat -c %a "$T/addr")" = 600 ] && ok "address file mode 0600" ||
        fail "address file mode $(stat -c %a "$T/addr")"
    remote 1 3 "$A" "$P" 3
    remote 2 3 "$A" "$P" 3
fi
wait $tp
rc=$?
wait
expect_rc 0 "3 ranks, 2 of them remote"
c=$(cat "$T/out" "$T/remote.1" "$T/remote.2" 2>/dev/null | grep -c "rank [0-9] of 3 ok")
[ "$c" -eq 3 ] && ok "all 3 ranks checked every gathered byte" || fail "$c of 3 ranks ok"
[ ! -e "$T/addr" ] && ok "address file removed at the end" || fail "address file left behind"

# 2. the local ranks' environment with --local-ranks 1-2 of 3, a fixed port, and no address
#    file: tmxrun says on stderr how to start the remote rank
env_cmd='echo "env $TMX_RANK $TMX_LOCAL_RANK $TMX_LOCAL_SIZE $TMX_BOOT_ADDR"; exec "$0" 3'
# a fixed port that may be taken meanwhile by someone else: a few tries
for try in 1 2 3 4 5; do
    port=$((20000 + ($$ * 7 + try * 4099) % 30000))
    : >"$T/err"
    timeout -s KILL 60 "$TMXRUN" -n 3 --local-ranks 1-2 --boot-listen "127.0.0.1:$port" \
        --timeout 50 sh -c "$env_cmd" "$P" >"$T/out" 2>"$T/err" </dev/null &
    tp=$!
    A=
    for _ in $(seq 1 100); do
        A=$(sed -n 's/.*TMX_BOOT_ADDR=\([^ ]*\).*/\1/p' "$T/err")
        [ -n "$A" ] && break
        grep -q "Address already in use" "$T/err" && break
        sleep 0.1
    done
    [ -n "$A" ] && break
    wait $tp
done
[ -n "$A" ] && remote 0 3 "$A" "$P" 3
wait $tp
rc=$?
wait
expect_rc 0 "--local-ranks 1-2 with rank 0 remote, --boot-listen 127.0.0.1:$port"
expect_grep "$T/err" "rank(s) 0 are not started here: start each .* TMX_RANK=<rank> TMX_SIZE=3 TMX_BOOT_ADDR=127.0.0.1:$port:" \
    "tmxrun says how to start the remote rank"
# TMX_LOCAL_SIZE: the 2 ranks of this host, or 1 when each is bound to a core of its own
grep -q "^env 1 0 [12] 127.0.0.1:$port:" "$T/out" && grep -q "^env 2 1 [12] 127.0.0.1:$port:" "$T/out" &&
    ok "local ranks 1 and 2: TMX_LOCAL_RANK 0 and 1, TMX_LOCAL_SIZE of this host, the fixed port" ||
    fail "local ranks' environment: $(grep '^env' "$T/out" | tr '\n' ';')"
grep -q "rank 0 of 3 ok" "$T/remote.0" 2>/dev/null && ok "remote rank 0 ok" ||
    fail "remote rank 0: $(cat "$T/remote.0" 2>/dev/null)"

# 3. a remote rank that dies (SIGKILL) after joining, while it waits in an allgather that
#    rank 0 (sleep) never joins: the close of its connection is its death, and the job ends
#    at once, not at --timeout
rm -f "$T/addr"
timeout -s KILL 60 "$TMXRUN" -n 2 --local-ranks 0 --boot-addr-file "$T/addr" --timeout 40 \
    sleep 30 >"$T/out" 2>"$T/err" </dev/null &
tp=$!
if A=$(wait_addr "$T/addr"); then
    env TMX_RANK=1 TMX_SIZE=2 TMX_BOOT_ADDR="$A" "$P" 2 >"$T/remote.1" 2>&1 </dev/null &
    rp=$!
    sleep 1.5
    kill -KILL $rp 2>/dev/null
fi
t0=$(date +%s)
wait $tp
rc=$?
secs=$(($(date +%s) - t0))
expect_rc 1 "a remote rank killed after joining fails the job"
[ "$secs" -lt 10 ] && ok "... at once (${secs} s), the local rank killed" ||
    fail "the job took ${secs} s after the remote rank died"
expect_grep "$T/err" "rank 1 (started elsewhere) closed its bootstrap connection without a goodbye" \
    "the remote rank's death is reported"

# 4. a remote rank that never joins: --remote-timeout
run 30 "$TMXRUN" -n 2 --local-ranks 0 --remote-timeout 1.5 --timeout 25 sleep 20
expect_rc 1 "a remote rank that never joins fails the job"
[ "$secs" -lt 10 ] && ok "... at --remote-timeout (${secs} s)" || fail "it took ${secs} s"
expect_grep "$T/err" "rank 1 (started elsewhere) did not join within 1.5 s" "the missing rank is named"

# 5. the cookie is still checked: a remote rank with a wrong cookie is refused at once
rm -f "$T/addr"
timeout -s KILL 60 "$TMXRUN" -n 2 --local-ranks 0 --boot-addr-file "$T/addr" --remote-timeout 4 \
    --timeout 40 "$P" 2 >"$T/out" 2>"$T/err" </dev/null &
tp=$!
if A=$(wait_addr "$T/addr"); then
    bad=$(echo "$A" | sed 's/:\([0-9a-f]*\)$//'):0123456789abcdef
    [ "$bad" != "$A" ] || bad=$(echo "$A" | sed 's/:\([0-9a-f]*\)$//'):fedcba9876543210
    t0=$(date +%s)
    env TMX_RANK=1 TMX_SIZE=2 TMX_BOOT_ADDR="$bad" TMX_BOOT_TIMEOUT=20 timeout -s KILL 30 "$P" 2 \
        >"$T/remote.bad" 2>&1 </dev/null
    brc=$?
    bsecs=$(($(date +%s) - t0))
    [ "$brc" -ne 0 ] && [ "$bsecs" -lt 10 ] && ok "a wrong cookie is refused (exit $brc in ${bsecs} s)" ||
        fail "a rank with a wrong cookie: exit $brc after ${bsecs} s"
fi
wait $tp
rc=$?
expect_rc 1 "the job whose only remote rank had a wrong cookie fails"
expect_grep "$T/err" "dropped a connection with a wrong cookie" "the stranger is reported"

# 6. a local rank fails: the remote rank is told (its tmx_job call fails, no hang)
rm -f "$T/addr"
timeout -s KILL 60 "$TMXRUN" -n 2 --local-ranks 0 --boot-addr-file "$T/addr" --timeout 40 \
    sh -c 'sleep 2; exit 3' >"$T/out" 2>"$T/err" </dev/null &
tp=$!
if A=$(wait_addr "$T/addr"); then
    t0=$(date +%s)
    env TMX_RANK=1 TMX_SIZE=2 TMX_BOOT_ADDR="$A" timeout -s KILL 30 "$P" 2 >"$T/remote.1" 2>&1 \
        </dev/null
    brc=$?
    bsecs=$(($(date +%s) - t0))
    [ "$brc" -ne 0 ] && [ "$bsecs" -lt 10 ] &&
        ok "the remote rank learns the job failed (exit $brc in ${bsecs} s)" ||
        fail "remote rank of a failed job: exit $brc after ${bsecs} s"
fi
wait $tp
rc=$?
expect_rc 3 "the local rank's status is the job's"

# 7. bad options: nothing is started
for bad in "--boot-listen 0.0.0.0" "--boot-listen 10.1.2.3:70000" "--boot-listen nohost" \
           "--local-ranks 2" "--local-ranks 1-0" "--local-ranks x" "--remote-timeout 0"; do
    # shellcheck disable=SC2086 # the option and its value are two words
    run 10 "$TMXRUN" -n 2 $bad true
    expect_rc 2 "tmxrun -n 2 $bad"
done
run 10 "$TMXRUN" -n 2 --local-ranks 0 --boot-listen 192.0.2.1 true
expect_rc 1 "--boot-listen on an address this host does not have"
expect_grep "$T/err" "bootstrap listener on 192.0.2.1:0" "... says so"

# 8. the default is unchanged: loopback only, all ranks local, no address printed
run 20 "$TMXRUN" -n 2 --timeout 15 sh -c 'echo "$TMX_BOOT_ADDR"'
expect_rc 0 "default job"
[ "$(grep -c '^127\.0\.0\.1:[0-9]*:[0-9a-f]\{16\}$' "$T/out")" -eq 2 ] && ok "default: loopback" ||
    fail "default address: $(cat "$T/out")"
grep -q "not started here" "$T/err" && fail "default job printed a remote-rank line" ||
    ok "default: no remote ranks, no address printed"
finish
