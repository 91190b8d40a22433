#!/bin/sh
# TMX_WAIT=auto over verbs in the soft-RoCE guest: a ping-pong whose answers come 3 ms late
# stops sleeping on every wait (the spin grows past a wakeup's cost, which in the emulated
# guest can exceed TMX_WAIT_SPIN by itself: every round trip then paid two wakeups, 80x
# slower than spinning), and a rank still sleeps when idle (test/integration/wait_sleep.c,
# mode nearmiss). Skips (77) with the reason where the guest cannot run.
B=${TMX_BUILDDIR:-$(pwd)}
prog="$B/test/integration/wait_sleep"
if [ ! -x "$prog" ] || [ ! -x "$B/tools/tmxrun" ]; then
    echo "wait_auto.sh: $prog or $B/tools/tmxrun not built" >&2
    exit 99
fi
exec sh "$(dirname "$0")/in_vm.sh" env TMX_PROVIDERS=verbs "$B/tools/tmxrun" -n 2 --timeout 120 \
    "$prog" nearmiss
