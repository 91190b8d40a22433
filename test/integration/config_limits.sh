#!/usr/bin/env bash
# Configuration variables at the edges of what tmx_config(7) says they take, as a user coming
# from UCX or MPI tries them: each value must be taken (or refused at once, naming the
# variable), and the job must run with every payload checked (tmx_pingpong's check round).
# - TMX_SEND_QUEUE above the deepest send queue the device makes (the soft device's 4096),
#   documented up to 65536: every connection failed (the QP's creation refused the depth:
#   "invalid parameter") and tmx_pingpong could not connect. Now it is lowered to the device's
#   depth, with a warning that names the variable.
# - TMX_SOFT_MAX_QPS above 2^20 was taken, and then no peer mapped the segment ("not a valid
#   soft device segment", every connection "invalid address"): now 1048576 is the most, and
#   one more is refused at once, naming the variable.
# - TMX_LOCAL_SIZE=2147483647 (its range has no top) in a process that may run on 2 or more
#   CPUs: the processes per CPU, rounded up as local_size + cpus - 1, overflowed to a negative
#   count, which made the connect timeout negative: every send failed "destination
#   unreachable". Unbound (--bind-to none), or the count is per 1 CPU and cannot overflow.
# - TMX_EAGER_CREDITS of 2^31 or more was taken, and an endpoint's credits (an int) started
#   negative: every eager send waited for ever (tmx_pingpong hung). Now 65535 is the most (a
#   header returns at most that many at once), and 65536 is refused naming the variable.
# - TMX_SOFT_RING_SIZE (and the inbox's) smaller in one process than in its peer: the peer
#   answered a rendezvous read in records of 16 KiB, sized by its own rings, which never fit a
#   quarter of the reader's 4 KiB ones: tmx_pingpong stopped at 2 KiB, the first rendezvous
#   size, until tmxrun's timeout. Either rank with the small rings.
# - TMX_SOFT_MAX_MRS small: eager-RDMA rings (TMX_RING=yes) lent and taken took every
#   registration of the device, and a rendezvous send then waited for ever for one (8 ranks
#   with 8 or 16 registrations; mr_few.c); now rings keep to a quarter of them. Values below
#   8 (with 1 or 2 no worker started, with 3 to 6 it hung) are refused, naming the variable.
# - TMX_UNEXP_BUDGET=0: every unexpected message holds its sender's credit until received, and
#   a program that receives a sender's messages last first waits for ever once the sender has
#   TMX_EAGER_CREDITS of them out (100 of 64 credits did, silently). That is the budget's
#   purpose, but it looked like a hang with nothing said: the first message past the budget
#   is now logged once per process, naming the variables. 8 messages (fewer than the credits)
#   received last first complete (unexp_order.c), and say so once.
# - TMX_EAGER_MAX=0 (every message but an empty one by rendezvous): the conformance suite
#   itself assumed small messages go eagerly: many_to_one's wildcard buffers (2 x eager limit
#   + 5 bytes) truncated an 8-byte message, self_send's blocking send to itself waited for the
#   receive after it, directed_probe's first send for a receive posted after its second. The
#   library was right each time; the suite now sizes, skips or leaves out those steps.
. "$(dirname "$0")/lib.sh"
PP="$B/examples/tmx_pingpong"
for v in $(env | sed -n 's/^\(TMX_[A-Za-z0-9_]*\)=.*/\1/p'); do
    case $v in TMX_BUILDDIR|TMX_SRCDIR|TMX_PROVIDERS) ;; *) unset "$v" ;; esac
done

for q in 4097 65536; do
    run 120 env TMX_SEND_QUEUE=$q "$TMXRUN" -n 2 --timeout 100 "$PP" -t lat,bw -n 10 -m 1:256k
    expect_rc 0 "TMX_SEND_QUEUE=$q: tmx_pingpong 1 B to 256 KiB, its data checked"
    expect_grep "$T/out" "^262144 " "TMX_SEND_QUEUE=$q: the 256 KiB row"
    if [ "${TMX_PROVIDERS:-}" != verbs ]; then
        expect_grep "$T/err" "TMX_SEND_QUEUE=$q lowered to 4096" \
            "TMX_SEND_QUEUE=$q: lowered to the soft device's depth, with a warning naming it"
    fi
done

run 120 env TMX_SOFT_MAX_QPS=1048576 "$TMXRUN" -n 2 --timeout 100 "$PP" -t lat -n 10 -m 1:64k
expect_rc 0 "TMX_SOFT_MAX_QPS=1048576 (the most): tmx_pingpong, its data checked"
run 60 env TMX_SOFT_MAX_QPS=1048577 "$TMXRUN" -n 2 --timeout 50 "$PP" -t lat -n 10 -m 1:64k
expect_rc 1 "TMX_SOFT_MAX_QPS=1048577: refused"
expect_grep "$T/err" "invalid value '1048577' for TMX_SOFT_MAX_QPS" \
    "TMX_SOFT_MAX_QPS=1048577: the refusal names the variable"

run 120 "$TMXRUN" --bind-to none -n 2 --timeout 100 \
    sh -c "TMX_LOCAL_SIZE=2147483647 exec '$PP' -t lat,bw -n 10 -m 1:64k"
expect_rc 0 "TMX_LOCAL_SIZE=2147483647, unbound: tmx_pingpong, its data checked"

run 120 env TMX_EAGER_CREDITS=65535 "$TMXRUN" -n 2 --timeout 100 "$PP" -t lat,bw -n 10 -m 1:64k
expect_rc 0 "TMX_EAGER_CREDITS=65535 (the most): tmx_pingpong, its data checked"
for c in 65536 2147483648; do
    run 60 env TMX_EAGER_CREDITS=$c "$TMXRUN" -n 2 --timeout 50 "$PP" -t lat -n 10 -m 1:1k
    expect_rc 1 "TMX_EAGER_CREDITS=$c: refused, not a job that waits for ever"
    expect_grep "$T/err" "invalid value '$c' for TMX_EAGER_CREDITS" \
        "TMX_EAGER_CREDITS=$c: the refusal names the variable"
done

for r in 0 1; do
    run 120 "$TMXRUN" -n 2 --timeout 100 sh -c "if [ \$TMX_RANK = $r ]; then
        export TMX_SOFT_RING_SIZE=4k TMX_SOFT_INBOX_SIZE=4k TMX_SOFT_RING0_SIZE=4k; fi
        exec '$PP' -t lat,bw -n 10 -m 1:256k"
    expect_rc 0 "4 KiB soft rings on rank $r only: tmx_pingpong 1 B to 256 KiB, its data checked"
    expect_grep "$T/out" "^262144 " "4 KiB soft rings on rank $r only: the 256 KiB row"
done

for m in 8 16; do
    run 120 env TMX_SOFT_MAX_MRS=$m TMX_RING=yes "$TMXRUN" -n 8 --timeout 100 \
        "$B/test/integration/mr_few"
    expect_rc 0 "TMX_SOFT_MAX_MRS=$m, rings to 8 ranks, then rendezvous both ways"
    expect_grep "$T/out" "mr_few: rendezvous both ways" "TMX_SOFT_MAX_MRS=$m: mr_few ran"
done
run 60 env TMX_SOFT_MAX_MRS=7 "$TMXRUN" -n 2 --timeout 50 "$PP" -t lat -n 10 -m 1:1k
expect_rc 1 "TMX_SOFT_MAX_MRS=7: refused"
expect_grep "$T/err" "invalid value '7' for TMX_SOFT_MAX_MRS" \
    "TMX_SOFT_MAX_MRS=7: the refusal names the variable"

run 60 env TMX_UNEXP_BUDGET=0 "$TMXRUN" -n 2 --timeout 50 "$B/test/integration/unexp_order" 8
expect_rc 0 "TMX_UNEXP_BUDGET=0: 8 messages received last first, each checked"
n=$(grep -c "past TMX_UNEXP_BUDGET=0: credits of" "$T/err")
if [ "$n" = 1 ]; then
    ok "TMX_UNEXP_BUDGET=0: going past it said once (naming the variable)"
else
    fail "TMX_UNEXP_BUDGET=0: going past it said $n times, expected once"
    show
fi

if [ -x "$B/test/conformance/tmx_conformance" ]; then
    run 200 env TMX_EAGER_MAX=0 "$TMXRUN" -n 4 --timeout 180 \
        "$B/test/conformance/tmx_conformance" -n 50
    expect_rc 0 "TMX_EAGER_MAX=0: the conformance suite, 4 ranks, 50 random schedules"
fi

finish
