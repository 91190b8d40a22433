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
finish
