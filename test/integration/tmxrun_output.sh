#!/bin/sh
# The ranks' stdout and stderr reach ours: inherited by default, prefixed with --tag-output.
. "$(dirname "$0")/lib.sh"

S='echo "out $TMX_RANK"; echo "err $TMX_RANK" >&2'
run 20 "$TMXRUN" -n 4 --timeout 15 sh -c "$S"
expect_rc 0 "4 ranks write"
for r in 0 1 2 3; do
    grep -qx "out $r" "$T/out" && ok "stdout of rank $r" || fail "no stdout of rank $r"
    grep -qx "err $r" "$T/err" && ok "stderr of rank $r" || fail "no stderr of rank $r"
done

S='echo "out $TMX_RANK"; echo "err $TMX_RANK" >&2; seq 1 20000; printf "no newline"'
run 30 "$TMXRUN" -n 3 --tag-output --timeout 25 sh -c "$S"
expect_rc 0 "--tag-output"
seq 1 20000 >"$T/seq"
for r in 0 1 2; do
    grep -qx "\[$r\] out $r" "$T/out" && ok "tagged stdout of rank $r" || fail "rank $r stdout"
    grep -qx "\[$r\] err $r" "$T/err" && ok "tagged stderr of rank $r" || fail "rank $r stderr"
    grep -qx "\[$r\] no newline" "$T/out" && ok "rank $r: last line without newline" ||
        fail "rank $r: last partial line lost"
    grep "^\[$r\] [0-9]*\$" "$T/out" | sed "s/^\[$r\] //" | cmp -s - "$T/seq" &&
        ok "rank $r: 20000 lines complete and in order" || fail "rank $r: lines lost or torn"
done
[ "$(grep -cv '^\[[0-3]\] ' "$T/out")" -eq 0 ] && ok "every stdout line tagged" ||
    fail "untagged lines in stdout"

# stdin goes to rank 0 only
printf 'hello\n' >"$T/in"
timeout -s KILL 20 "$TMXRUN" -n 2 --timeout 15 sh -c 'read x; echo "$TMX_RANK:${x:-none}"' \
    <"$T/in" >"$T/out" 2>"$T/err"
rc=$?
expect_rc 0 "ranks read stdin"
grep -qx "0:hello" "$T/out" && grep -qx "1:none" "$T/out" && ok "stdin reaches rank 0 only" ||
    fail "stdin: $(cat "$T/out")"
finish
