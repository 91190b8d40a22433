#!/bin/sh
# A rank that breaks the bootstrap protocol fails the job with a message, never hangs or
# crashes tmxrun; a stray connection (garbage, a wrong cookie) is dropped and the job goes on.
. "$(dirname "$0")/lib.sh"

P="$B/test/integration/boot_evil"
for mode in garbage badcookie; do
    run 30 "$TMXRUN" -n 2 --timeout 20 "$P" "$mode" 1
    expect_rc 0 "$mode from a stray connection: the job goes on"
    [ "$(grep -c 'status: ' "$T/out")" -eq 2 ] && ok "$mode: both ranks did their barriers" ||
        fail "$mode: $(cat "$T/out")"
done
for mode in garbage-exit badrank badsize dup biglen mismatch trunc badop; do
    n=2
    [ "$mode" = dup ] && n=3
    run 30 "$TMXRUN" -n $n --timeout 20 "$P" "$mode" 1
    expect_rc 1 "$mode: the job fails"
    expect_grep "$T/err" "bootstrap: " "$mode: tmxrun says why"
    [ "$secs" -lt 15 ] && ok "$mode: ended in $secs s" || fail "$mode: took $secs s"
done
# A flood of connections that never speak, from one rank, while 8 ranks start: every rank
# joins (tmxrun drops the oldest silent connection to make room, a rank dropped that way
# connects again), and the drops are counted rather than reported one by one.
run 60 "$TMXRUN" -n 8 --timeout 50 "$P" flood 3
expect_rc 0 "flood of silent connections: the job goes on"
c=$(grep -c 'status: ' "$T/out")
[ "$c" -eq 8 ] && ok "flood: all 8 ranks did their barriers" || fail "flood: $c of 8 ranks: $(cat "$T/out")"
expect_grep "$T/err" "dropped [0-9]* connections in all" "flood: tmxrun counts the drops"
c=$(grep -c 'bootstrap: dropped a connection' "$T/err")
[ "$c" -le 8 ] && ok "flood: $c drops reported one by one" || fail "flood: $c drop messages"
# Ranks that connect and stay silent a while before their hello, 64 of them at once (more than
# the 16 strangers tmxrun tolerates): each is a rank that has not joined yet, not a stranger,
# and none may be dropped (tmxrun_start.sh starts 64 real ranks, but their hellos come right
# after their connections, so that few are ever silent at once)
run 60 nice -n 19 "$TMXRUN" -n 64 --timeout 50 "$P" late 0
expect_rc 0 "late: 64 ranks silent for a second after connecting"
c=$(grep -c '^late ok$' "$T/out")
[ "$c" -eq 64 ] && ok "late: all 64 ranks were welcomed" || fail "late: $c of 64 ranks welcomed"
if grep -q 'dropped' "$T/err"; then
    fail "late: tmxrun dropped connections of ranks that had not said hello yet"
    show
fi
finish
