#!/bin/sh
# The registration cache (test/integration/mr_cache.c, TMX_MR_CACHE=8): six 64 KiB rendezvous
# messages from and into one buffer per rank, unmapped and mapped again before the third and
# released by madvise(MADV_DONTNEED) before the fifth; payloads intact, and each worker's info
# line at destroy says 3 messages took a cached registration and 3 registrations were made (the
# first, and one after each of the two releases). Skips (77) where userfaultfd is refused.
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
finish
