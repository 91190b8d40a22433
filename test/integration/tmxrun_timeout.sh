#!/bin/sh
# --timeout: exit 124, a clear message, and no process left behind (grandchildren included,
# and ranks that ignore SIGTERM).
. "$(dirname "$0")/lib.sh"

S='echo $$ >"'"$T"'/pid.$TMX_RANK"; sleep 60 & echo $! >"'"$T"'/child.$TMX_RANK"; wait'
run 30 "$TMXRUN" -n 2 --timeout 1 sh -c "$S"
expect_rc 124 "--timeout 1"
expect_grep "$T/err" "timeout" "tmxrun says it timed out"
[ "$secs" -lt 10 ] && ok "ended after $secs s" || fail "took $secs s"
expect_gone "--timeout" "$T"/pid.* "$T"/child.*
rm -f "$T"/pid.* "$T"/child.*

S='trap "" TERM; echo $$ >"'"$T"'/pid.$TMX_RANK"; exec sleep 60'
run 30 "$TMXRUN" -n 2 --timeout 0.5 sh -c "$S"
expect_rc 124 "--timeout with ranks that ignore SIGTERM"
expect_grep "$T/err" "SIGKILL" "tmxrun escalates to SIGKILL"
expect_gone "ranks that ignore SIGTERM" "$T"/pid.*

run 30 "$TMXRUN" -n 2 --timeout 10 true
expect_rc 0 "a job that ends before its timeout"
finish
