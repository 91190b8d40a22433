#!/bin/sh
# tmxrun starts and serves large jobs on a small machine: 64 ranks in an all-to-all of small
# messages (every payload and tag checked), 256 ranks in a ring (endpoints to the two
# neighbours only, not 256^2 connections) and 1024 ranks through the bootstrap only (init, an
# allgather checked entry by entry, a barrier). A worker in each of 1024 ranks costs about
# 1 GB of /dev/shm and 4 GB of memory here even in a ring: too much for CI next to other
# tests. Then the open-file limit, which large jobs need raised.
. "$(dirname "$0")/lib.sh"

P="$B/test/integration/scale_job"
# 64 x 64 connections with the default 256 KiB rings map 2 GB of /dev/shm; small messages
# need little: 32 KiB rings, 260 MB
TMX_SOFT_RING_SIZE=32k
export TMX_SOFT_RING_SIZE

# Hundreds of ranks (busy in tmx's close and destroy for seconds) on two cores would starve
# the tests that make check runs next to this one: the ranks run at the lowest priority.
scale() { # N MODE CHECKS-PER-RANK
    run 150 nice -n 19 "$TMXRUN" -n "$1" --timeout 140 "$P" "$2" "$1"
    expect_rc 0 "-n $1 $2 in $secs s"
    c=$(grep -c "^rank [0-9]* of $1: $3 checks ok\$" "$T/out")
    [ "$c" -eq "$1" ] && ok "-n $1 $2: every rank made its $3 checks" ||
        fail "-n $1 $2: $c of $1 ranks made their $3 checks"
    if grep -q '^tmxrun: ' "$T/err"; then
        fail "-n $1 $2: tmxrun complained"
        show
    fi
}
scale 64 alltoall 128 # the allgather's 64 entries, 64 messages
scale 256 ring 258    # 256 entries, 2 messages
scale 1024 boot 1024

# The launcher raises its soft limit of open files for large jobs; the ranks get the limit
# they would have had without it. Beyond the hard limit: a clear message, nothing started.
hard=$(ulimit -Hn)
if [ "$hard" = unlimited ] || [ "$hard" -ge 400 ]; then
    run 60 sh -c 'ulimit -Sn 256 && exec "$0" -n 300 --timeout 50 sh -c "ulimit -Sn"' "$TMXRUN"
    expect_rc 0 "-n 300 with a soft limit of 256 open files"
    c=$(grep -c '^256$' "$T/out")
    [ "$c" -eq 300 ] && ok "every rank has the soft limit of 256" ||
        fail "$c of 300 ranks have the soft limit of 256: $(sort "$T/out" | uniq -c)"
fi
run 30 sh -c 'ulimit -n 100 && exec "$0" -n 200 true' "$TMXRUN"
expect_rc 2 "-n 200 with a hard limit of 100 open files"
expect_grep "$T/err" "needs [0-9]* open files, more than the hard limit of 100" \
    "tmxrun says how many open files it needs"
[ ! -s "$T/out" ] && ok "nothing was started" || fail "ranks ran: $(cat "$T/out")"
finish
