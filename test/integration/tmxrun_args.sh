#!/bin/sh
# Bad arguments: a clear message on stderr, exit 2, and no rank started.
. "$(dirname "$0")/lib.sh"

M="$T/marker"
: >"$T/noexec"
mkdir "$T/dir"
bad() { # what args...
    local what=$1
    shift
    run 10 "$TMXRUN" "$@"
    expect_rc 2 "$what"
    [ -s "$T/err" ] || fail "$what: no message on stderr"
    if [ -e "$M" ]; then fail "$what: a rank was started"; rm -f "$M"; fi
}
bad "no arguments"
bad "missing -n" touch "$M"
bad "-n without a value" -n
bad "-n 0" -n 0 touch "$M"
bad "-n -1" -n -1 touch "$M"
bad "-n abc" -n abc touch "$M"
bad "-n 3x" -n 3x touch "$M"
bad "-n absurd" -n 1000000 touch "$M"
bad "missing program" -n 2
bad "missing program after --" -n 2 --
bad "program not found" -n 2 "$T/does-not-exist"
bad "program not in PATH" -n 2 tmx-no-such-program-anywhere
bad "program not executable" -n 2 "$T/noexec"
bad "program is a directory" -n 2 "$T/dir"
bad "--bind with a bad value" -n 2 --bind tile touch "$M"
bad "--timeout 0" -n 2 --timeout 0 touch "$M"
bad "--timeout abc" -n 2 --timeout abc touch "$M"
bad "unknown option" -n 2 --frobnicate touch "$M"

run 10 "$TMXRUN" --help
expect_rc 0 "--help"
expect_grep "$T/out" "usage: tmxrun" "--help prints the usage"

# options after the program belong to the program
run 10 "$TMXRUN" -n 1 -- echo -n 5 --timeout
expect_rc 0 "arguments after the program are its own"
expect_grep "$T/out" "5 --timeout" "the program got its arguments"
finish
