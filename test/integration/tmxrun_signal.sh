#!/bin/sh
# SIGTERM (and SIGINT) to tmxrun are passed on to the ranks.
. "$(dirname "$0")/lib.sh"

for sig in TERM INT; do
    rm -f "$T"/ready.* "$T"/got.*
    S='trap "echo got >\"'"$T"'/got.$TMX_RANK\"; exit 0" '"$sig"'; echo $$ >"'"$T"'/ready.$TMX_RANK"; while :; do sleep 0.1; done'
    timeout -s KILL 30 "$TMXRUN" -n 2 --timeout 25 sh -c "$S" >"$T/out" 2>"$T/err" &
    pid=$!
    for _ in $(seq 1 100); do
        [ -e "$T/ready.0" ] && [ -e "$T/ready.1" ] && break
        sleep 0.1
    done
    # timeout(1) runs tmxrun as its child: signal tmxrun itself
    trun=$(pgrep -P "$pid" -x tmxrun || pgrep -P "$pid")
    kill -"$sig" "$trun"
    wait "$pid"
    rc=$?
    num=15
    [ "$sig" = INT ] && num=2
    expect_rc $((128 + num)) "SIG$sig to tmxrun"
    for r in 0 1; do
        [ -e "$T/got.$r" ] && ok "rank $r got SIG$sig" || fail "rank $r did not get SIG$sig"
    done
    expect_gone "SIG$sig" "$T"/ready.*
done

# tmxrun killed with SIGKILL cannot clean up: the kernel kills the ranks (PR_SET_PDEATHSIG)
rm -f "$T"/ready.*
S='echo $$ >"'"$T"'/ready.$TMX_RANK"; exec sleep 60'
"$TMXRUN" -n 2 --timeout 25 sh -c "$S" >"$T/out" 2>"$T/err" &
pid=$!
for _ in $(seq 1 100); do
    [ -e "$T/ready.0" ] && [ -e "$T/ready.1" ] && break
    sleep 0.1
done
kill -KILL "$pid"
wait "$pid"
expect_gone "tmxrun killed with SIGKILL" "$T"/ready.*
finish
