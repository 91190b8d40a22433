#!/bin/sh
# A job killed with SIGKILL all at once, tmxrun included, leaves no soft device segment in
# /dev/shm: they are memfds, which go with the processes. (Named segments, TMX_SOFT_MEMFD=no,
# stay until the next tmx run sweeps them; not checked here: any tmx process that starts
# meanwhile, a parallel test, may sweep them first.)
. "$(dirname "$0")/lib.sh"

uid=$(id -u)

# kill_job MEMFD: starts 2 lingering ranks, kills the whole job; $pids are the ranks
kill_job() {
    local n=0 launcher
    # the files exist before the job starts: the loop below must not race their creation
    : >"$T/out"
    : >"$T/err"
    TMX_SOFT_MEMFD=$1 timeout -s KILL 60 "$TMXRUN" -n 2 "$B/test/integration/peer_dies" linger \
        >"$T/out" 2>"$T/err" </dev/null &
    while [ "$(grep -c '^ready' "$T/out")" -lt 2 ] && [ $n -lt 400 ]; do
        sleep 0.1
        n=$((n + 1))
    done
    pids=$(awk '/^ready/ {print $2}' "$T/out")
    launcher=$(awk '/^ready/ {print $3; exit}' "$T/out")
    if [ "$(echo $pids | wc -w)" -ne 2 ] || [ -z "$launcher" ]; then
        fail "TMX_SOFT_MEMFD=$1: the ranks did not connect"
        show
        kill -9 $launcher $pids 2>/dev/null
        wait
        return 1
    fi
    echo "$pids" >"$T/pids"
    kill -9 "$launcher" $pids
    wait
    expect_gone "TMX_SOFT_MEMFD=$1: job killed" "$T/pids"
}

segments() {
    local p
    for p in $pids; do
        ls /dev/shm/ 2>/dev/null | grep "^tmx-$uid-$p-"
    done
}

if kill_job auto; then
    left=$(segments)
    [ -z "$left" ] && ok "nothing left in /dev/shm" || fail "left in /dev/shm: $left"
fi

finish
