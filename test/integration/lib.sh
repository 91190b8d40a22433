# Sourced by the integration tests. TMX_BUILDDIR comes from `make check`; by hand, run from the
# build directory. Every command that could block runs under a hard timeout (SIGKILL, so that
# a hang shows as exit 137 and is never confused with tmxrun's own 124).
set -u
B=${TMX_BUILDDIR:-$(pwd)}
TMXRUN="$B/tools/tmxrun"
T=$(mktemp -d "${TMPDIR:-/tmp}/tmx-it.XXXXXX")
trap 'rm -rf "$T"' EXIT
fails=0

if [ ! -x "$TMXRUN" ]; then
    echo "no tmxrun at $TMXRUN (set TMX_BUILDDIR)" >&2
    exit 99
fi

fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
ok() { echo "ok: $*"; }

# run SECONDS cmd...: rc, $T/out, $T/err, elapsed whole seconds in $secs
run() {
    local lim=$1 t0
    shift
    t0=$(date +%s)
    timeout -s KILL "$lim" "$@" >"$T/out" 2>"$T/err" </dev/null
    rc=$?
    secs=$(($(date +%s) - t0))
}

show() { sed 's/^/    | /' "$T/err" >&2; }

expect_rc() {
    if [ "$rc" -eq "$1" ]; then
        ok "$2 (exit $rc)"
    else
        fail "$2: exit $rc, expected $1"
        show
    fi
}

expect_grep() { # file pattern what
    if grep -q -- "$2" "$1"; then ok "$3"; else fail "$3: no '$2' in $(basename "$1")"; show; fi
}

# A process that still runs (a zombie does not count: its parent just has not reaped it yet).
alive() {
    local st
    st=$(sed -n 's/^State:[[:space:]]*\([A-Z]\).*/\1/p' "/proc/$1/status" 2>/dev/null) || return 1
    [ -n "$st" ] && [ "$st" != Z ]
}

# expect_gone pidfile...: every pid written to those files is gone (grace: 2 s of reaping).
# No pid in them at all (the processes never wrote theirs, a glob that matched nothing) is a
# failure: nothing would have been checked.
expect_gone() {
    local what=$1 f p left pids=0
    shift
    for f in "$@"; do
        [ -s "$f" ] && pids=$((pids + $(wc -w <"$f")))
    done
    if [ "$pids" -eq 0 ]; then
        fail "$what: no pid recorded in $*: nothing to check"
        return
    fi
    for _ in 1 2 3 4 5 6 7 8 9 10; do
        left=
        for f in "$@"; do
            [ -s "$f" ] || continue
            for p in $(cat "$f"); do
                if alive "$p"; then left="$left $p"; fi
            done
        done
        [ -z "$left" ] && break
        sleep 0.2
    done
    if [ -z "$left" ]; then
        ok "$what: no process left ($pids checked)"
    else
        fail "$what: still alive:$left"
    fi
}

finish() {
    if [ "$fails" -eq 0 ]; then
        echo "PASS: $(basename "$0")"
        exit 0
    fi
    echo "FAILED: $fails check(s) in $(basename "$0")" >&2
    exit 1
}
