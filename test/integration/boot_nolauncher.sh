#!/bin/sh
# tmx_job with no launcher, an unreachable one, or one that goes away: a status, never a hang.
. "$(dirname "$0")/lib.sh"

P="$B/test/integration/boot_nolauncher"
for mode in alone refused badaddr gone abort lie dropped stranger; do
    run 30 "$P" "$mode"
    expect_rc 0 "tmx_job $mode"
    [ "$secs" -lt 15 ] && ok "$mode: $secs s" || fail "$mode: took $secs s"
done
finish
