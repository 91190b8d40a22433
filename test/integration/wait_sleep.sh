#!/bin/sh
# Blocking waits sleep instead of spinning (TMX_WAIT=auto) but not on every wait of a
# ping-pong whose answers come a little after the spin, and the worker's fd
# (tmx_worker_get_efd, tmx_worker_arm, tmx_worker_wait) says when something arrived.
. "$(dirname "$0")/lib.sh"

prog="$B/test/integration/wait_sleep"

run 60 "$TMXRUN" -n 2 --timeout 50 "$prog" block
expect_rc 0 "a rank blocked for a message that comes after 1 s sleeps, and wakes for it"
expect_grep "$T/out" "rank 1 in tmx_request_wait: waited" "the receiver's wait was measured"
expect_grep "$T/out" "rank 0 in tmx_tag_send: waited" "the rendezvous sender's wait was measured"
[ "$(grep -c "block ok" "$T/out")" -eq 2 ] && ok "both ranks checked everything" ||
    { fail "not both ranks ok"; show; }
sed 's/^/    /' "$T/out" | grep waited

run 60 env TMX_WAIT=sleep "$TMXRUN" -n 2 --timeout 50 "$prog" block
expect_rc 0 "the same with TMX_WAIT=sleep"

run 60 "$TMXRUN" -n 2 --timeout 50 "$prog" nearmiss
expect_rc 0 "TMX_WAIT=auto: waits that a sleep makes late stop sleeping (the spin grows), idle ones still sleep"
expect_grep "$T/out" "nearmiss ok" "every check held"
grep "waits of" "$T/out" | sed 's/^/    /'

run 30 "$prog" efd
expect_rc 0 "efd, arm and wait: quiet when armed, readable on arrival, busy while pending"
expect_grep "$T/out" "efd ok" "every check held"
run 30 "$prog" yield
expect_rc 0 "after a yield the next round polls the device: a queued message waits for no second yield"
expect_grep "$T/out" "yield ok" "every check held"
grep "yields before" "$T/out" | sed 's/^/    /'

# The bootstrap's waits (tmx_job_barrier, tmx_job_allgather) progress the worker: when ranks
# outnumber the CPUs they yield between a few idle rounds and then sleep (counted, not timed)
run 60 "$TMXRUN" -n 2 --timeout 50 "$prog" bootwait
expect_rc 0 "oversubscribed, a rank waiting in tmx_job_barrier yields and sleeps after 16 rounds"
expect_grep "$T/out" "bootwait ok" "every check held"
grep "polls without" "$T/out" | sed 's/^/    /'
run 60 "$TMXRUN" -n 2 --timeout 50 "$prog" bootspin
expect_rc 0 "not oversubscribed, the same wait spins without yielding before it sleeps"
expect_grep "$T/out" "bootspin ok" "every check held"
grep "polls without" "$T/out" | sed 's/^/    /'

# A blocking wait's idle rounds yield when ranks outnumber the CPUs (as Open MPI's progress
# does), through the whole spin, and then sleep; with a CPU each they poll without yielding
run 60 "$TMXRUN" -n 2 --timeout 50 "$prog" reqwait
expect_rc 0 "oversubscribed, tmx_request_wait yields in its idle rounds, then sleeps"
expect_grep "$T/out" "reqwait ok" "every check held"
grep "yields, " "$T/out" | sed 's/^/    /'
run 60 "$TMXRUN" -n 2 --timeout 50 "$prog" reqspin
expect_rc 0 "not oversubscribed, tmx_request_wait spins without yielding (under 16), then sleeps"
expect_grep "$T/out" "reqspin ok" "every check held"
grep "yields, " "$T/out" | sed 's/^/    /'
# Oversubscribed, a wait sleeps after a few turns of the processes on its CPU that brought
# nothing, not after TMX_WAIT_SPIN of yields (16 ranks on 2 cores: a few ranks left on a CPU
# yielded to one another for the whole spin)
run 60 "$TMXRUN" -n 2 --timeout 50 "$prog" reqturns
expect_rc 0 "oversubscribed, tmx_request_wait sleeps after 16 idle yields whatever TMX_WAIT_SPIN"
expect_grep "$T/out" "reqturns ok" "every check held"
grep "reqturns:" "$T/out" | sed 's/^/    /'
finish
