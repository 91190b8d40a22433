#!/bin/sh
# The registration cache (test/integration/mr_cache.c, TMX_MR_CACHE=8): six 64 KiB rendezvous
# messages from and into one buffer per rank, unmapped and mapped again before the third and
# released by madvise(MADV_DONTNEED) before the fifth; payloads intact, and each worker's info
# line at destroy says 3 messages took a cached registration and 3 registrations were made (the
# first, and one after each of the two releases). Skips (77) where userfaultfd is refused.
# Then with userfaultfd refused (the cache off, every buffer registered per message), and as
# an unprivileged user (UFFD_USER_MODE_ONLY).
. "$(dirname "$0")/lib.sh"

prog="$B/test/integration/mr_cache"

run 120 env TMX_LOG_LEVEL=info TMX_MR_CACHE=8 "$TMXRUN" -n 2 --timeout 100 "$prog"
if grep -q "registration cache off" "$T/err"; then
    grep "registration cache off" "$T/err" | head -n 1
    echo "SKIP: no userfaultfd monitor here"
    exit 77
fi
expect_rc 0 "rendezvous messages from and into memory released and mapped again"
[ "$(grep -c "mr_cache ok" "$T/out")" -eq 2 ] && ok "both ranks checked every payload" ||
    { fail "not both ranks ok"; show; }
[ "$(grep -c "0 registered per message, 0 in a tmx_mem_map range, 3 in a cached registration (3 registrations made for the cache)" "$T/err")" -eq 2 ] &&
    ok "each rank: 3 messages by a cached registration, 3 registrations (the releases seen)" ||
    { fail "not the expected counts"; show; }
grep "rendezvous buffers" "$T/err" | sed 's/^/    /'

# 40 more messages, each from and into another buffer, with a cache larger than the soft
# device's registrations (TMX_SOFT_MAX_MRS=8; other devices ignore it): the cache gives its
# idle ones back when a registration is refused (without that the sends wait forever)
run 120 env TMX_MR_CACHE=4096 TMX_SOFT_MAX_MRS=8 "$TMXRUN" -n 2 --timeout 100 "$prog" 40
expect_rc 0 "40 buffers through a cache larger than the device's registrations"
[ "$(grep -c "mr_cache ok" "$T/out")" -eq 2 ] && ok "both ranks checked every payload" ||
    { fail "not both ranks ok"; show; }
# Where userfaultfd is refused (test/integration/nouffd.c, preloaded, fails it with EPERM, as a
# kernel without it or a seccomp filter would): the cache says it is off and why, and every
# buffer is registered per message, payloads intact
shim="$B/test/integration/.libs/libnouffd.so"
if [ -f "$shim" ]; then
    # a sanitized build loads its runtime after the shim, which ASan would refuse by default
    run 120 env TMX_LOG_LEVEL=info TMX_MR_CACHE=8 LD_PRELOAD="$shim" \
        ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" \
        "$TMXRUN" -n 2 --timeout 100 "$prog"
    expect_rc 0 "userfaultfd refused: messages registered per message"
    [ "$(grep -c "mr_cache ok" "$T/out")" -eq 2 ] && ok "both ranks checked every payload" ||
        { fail "not both ranks ok"; show; }
    expect_grep "$T/err" "registration cache off: userfaultfd failed (Operation not permitted)" \
        "the cache says it is off, and why"
    [ "$(grep -c "rendezvous buffers: 6 registered per message, 0 in a tmx_mem_map range$" \
        "$T/err")" -eq 2 ] && ok "each rank: 6 registrations per message, none cached" ||
        { fail "not the expected counts"; show; }
else
    fail "no userfaultfd shim at $shim"
fi

# An unprivileged user where vm.unprivileged_userfaultfd is 0 (Debian's default): the monitor
# opens its userfaultfd with UFFD_USER_MODE_ONLY (Linux 5.11 and later), which needs no
# privilege because only the events are used, so the cache works as it does for root. Run as
# nobody when this script runs as root and nobody can reach the build tree.
kver=$(uname -r | sed -n 's/^\([0-9]*\)\.\([0-9]*\).*/\1 \2/p')
if [ "$(id -u)" -ne 0 ] || ! command -v setpriv >/dev/null 2>&1; then
    echo "part skipped: unprivileged run needs root and setpriv to become nobody"
elif [ "$(cat /proc/sys/vm/unprivileged_userfaultfd 2>/dev/null)" != 0 ]; then
    echo "part skipped: vm.unprivileged_userfaultfd is not 0, any user may use userfaultfd"
elif [ -z "$kver" ] || [ "${kver% *}" -lt 5 ] ||
    { [ "${kver% *}" -eq 5 ] && [ "${kver#* }" -lt 11 ]; }; then
    echo "part skipped: Linux $(uname -r) has no UFFD_USER_MODE_ONLY"
elif ! setpriv --reuid=65534 --regid=65534 --clear-groups test -x "$prog"; then
    echo "part skipped: user nobody cannot reach $prog"
else
    run 120 setpriv --reuid=65534 --regid=65534 --clear-groups env TMPDIR=/tmp \
        TMX_LOG_LEVEL=info TMX_MR_CACHE=8 "$TMXRUN" -n 2 --timeout 100 "$prog"
    expect_rc 0 "as user nobody"
    [ "$(grep -c "mr_cache ok" "$T/out")" -eq 2 ] && ok "both ranks checked every payload" ||
        { fail "not both ranks ok"; show; }
    [ "$(grep -c "3 in a cached registration (3 registrations made for the cache)" "$T/err")" \
        -eq 2 ] && ok "as nobody the cache works: 3 cached messages, 3 registrations per rank" ||
        { fail "the cache did not work unprivileged"; show; }
fi
finish
