#!/bin/sh
# Exit status: the first failing rank's, 128+signal for a killed rank; the other ranks are
# killed; the soft device's segments of the ranks are removed.
. "$(dirname "$0")/lib.sh"

run 20 "$TMXRUN" -n 3 --timeout 15 true
expect_rc 0 "all ranks exit 0"

# rank 1 fails while the others would run for a long time
S='echo $$ >"'"$T"'/pid.$TMX_RANK"; if [ "$TMX_RANK" = 1 ]; then sleep 0.3; exit 7; fi; exec sleep 60'
run 20 "$TMXRUN" -n 3 sh -c "$S"
expect_rc 7 "a rank exits 7"
[ "$secs" -lt 10 ] && ok "the job ended at once ($secs s)" || fail "the job took $secs s"
expect_grep "$T/err" "rank 1 .*status 7" "tmxrun says which rank failed and how"
expect_gone "rank exits 7" "$T"/pid.*
rm -f "$T"/pid.*

for sig in KILL USR1 SEGV; do
    [ "$sig" = KILL ] && num=9
    [ "$sig" = USR1 ] && num=10
    [ "$sig" = SEGV ] && num=11
    S='echo $$ >"'"$T"'/pid.$TMX_RANK"; if [ "$TMX_RANK" = 2 ]; then sleep 0.3; kill -'"$sig"' $$; fi; exec sleep 60'
    run 20 "$TMXRUN" -n 4 sh -c "ulimit -c 0; $S"
    expect_rc $((128 + num)) "a rank killed by SIG$sig"
    expect_grep "$T/err" "rank 2 .*signal $num" "tmxrun names the signal"
    expect_gone "rank killed by SIG$sig" "$T"/pid.*
    rm -f "$T"/pid.*
done

# the first failure wins over the ones the kill causes
run 20 "$TMXRUN" -n 2 sh -c 'if [ "$TMX_RANK" = 0 ]; then exit 3; fi; trap "exit 5" TERM; sleep 60 & wait'
expect_rc 3 "the first failing rank's status is returned"

# segments of killed ranks are unlinked, others' are not
uid=$(id -u)
other="/dev/shm/tmx-$uid-999999999-test"
: >"$other"
S='f=/dev/shm/tmx-'"$uid"'-$$-seg1; : >"$f"; echo "$f" >"'"$T"'/seg.$TMX_RANK"; kill -9 $$'
run 20 "$TMXRUN" -n 2 sh -c "$S"
expect_rc 137 "ranks killed with segments left"
nseg=0
for f in "$T"/seg.*; do
    [ -s "$f" ] || continue
    nseg=$((nseg + 1))
    seg=$(cat "$f")
    [ -e "$seg" ] && fail "segment $seg left behind" || ok "segment $(basename "$seg") removed"
done
# the first rank to die gets the other killed, maybe before it made its segment: at least
# one segment must have been checked, else the loop above checked nothing
[ "$nseg" -ge 1 ] && ok "$nseg segment(s) of killed ranks checked" ||
    fail "no rank made a segment: nothing checked"

[ -e "$other" ] && ok "a segment of another process kept" || fail "$other was removed"
rm -f "$other"
finish
