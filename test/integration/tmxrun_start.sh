#!/bin/sh
# Starting 64 ranks at once, again and again:
# - every start joins every rank: a connection that has not said hello yet is a rank that
#   may still say it, not a stranger to drop (tmxrun dropped all beyond 16);
# - a job whose ranks fail at once is reported as that failure only: ranks forked but not yet
#   executing the program must not run tmxrun's signal handler when tmxrun sends them SIGTERM
#   (the handler told tmxrun it got SIGTERM itself, and swallowed the signal).
# The ranks run at the lowest priority so as not to starve the tests next to this one.
. "$(dirname "$0")/lib.sh"

P="$B/test/integration/scale_job"
good=0
for i in 1 2 3 4 5 6 7 8 9 10; do
    run 60 nice -n 19 "$TMXRUN" -n 64 --timeout 50 "$P" boot 64
    c=$(grep -c "^rank [0-9]* of 64: 64 checks ok\$" "$T/out")
    if [ "$rc" -eq 0 ] && [ "$c" -eq 64 ] && [ ! -s "$T/err" ]; then
        good=$((good + 1))
    else
        fail "start $i of -n 64: exit $rc, $c ranks ok"
        show
    fi
done
[ "$good" -eq 10 ] && ok "10 starts of -n 64: every rank joined every time"

good=0
for i in 1 2 3 4 5 6 7 8 9 10; do
    run 60 nice -n 19 "$TMXRUN" -n 64 --timeout 50 false
    if [ "$rc" -eq 1 ] && [ "$(wc -l <"$T/err")" -eq 1 ] &&
        grep -q '^tmxrun: rank [0-9]* (pid [0-9]*) exited with status 1; killing the other ranks$' \
            "$T/err"; then
        good=$((good + 1))
    else
        fail "run $i of -n 64 false: exit $rc, expected 1 and one line about the failed rank"
        show
    fi
done
[ "$good" -eq 10 ] && ok "10 runs of -n 64 false: only the rank's failure, no signal of ours"
finish
