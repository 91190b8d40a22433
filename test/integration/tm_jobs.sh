#!/usr/bin/env bash
# Jobs with tag-matching offload on the soft device.
# - It must be the same in every process of a job: a process whose device matches tags expects
#   the device's header on every message. When only rank 1 turns it on, the connection is
#   refused at once with a message that names the variables, and the job fails (it neither
#   hangs nor exchanges messages that one side would misread).
# - On in both, tmx_pingpong runs and checks its data, with rendezvous offload and without:
#   its bandwidth test posts 64 receives on one buffer (as OSU's does), so whatever the device
#   writes into a receive's buffer (a rendezvous header it leaves to software) can be
#   overwritten by the next message before software reads it.
. "$(dirname "$0")/lib.sh"
PP="$B/examples/tmx_pingpong"
for v in $(env | sed -n 's/^\(TMX_[A-Za-z0-9_]*\)=.*/\1/p'); do
    case $v in TMX_BUILDDIR|TMX_SRCDIR) ;; *) unset "$v" ;; esac
done
cat > "$T/half.sh" <<'EOS'
#!/bin/sh
if [ "$TMX_RANK" = 1 ]; then TMX_SOFT_TM=yes; export TMX_SOFT_TM; fi
exec "$@"
EOS
chmod +x "$T/half.sh"

run 60 "$TMXRUN" -n 2 --timeout 40 "$T/half.sh" "$PP" -t lat -m 8:8 -n 10 -w 1
if [ "$rc" -eq 0 ] || [ "$rc" -eq 137 ] || [ "$rc" -eq 124 ]; then
    fail "rank 1 alone with TMX_SOFT_TM=yes: exit $rc, expected the job to fail at once"
    show
else
    ok "rank 1 alone with TMX_SOFT_TM=yes: the job failed (exit $rc) in $secs s"
fi
expect_grep "$T/err" 'tag-matching offload.*TMX_TM_OFFLOAD' \
    "the refusal names TMX_TM_OFFLOAD"

run 60 env TMX_SOFT_TM=yes "$TMXRUN" -n 2 --timeout 40 "$PP" -t lat,bw -m 1k:64k -n 20 -w 2
expect_rc 0 "TMX_SOFT_TM=yes in both ranks"
expect_grep "$T/out" '^# tag matching offloaded to soft:shm' "pingpong says it offloads"
run 60 env TMX_SOFT_TM=yes TMX_SOFT_TM_RNDV=no "$TMXRUN" -n 2 --timeout 40 "$PP" -t lat,bw \
    -m 1k:64k -n 20 -w 2
expect_rc 0 "TMX_SOFT_TM=yes TMX_SOFT_TM_RNDV=no in both ranks"
if grep -q warn "$T/err"; then
    fail "TMX_SOFT_TM_RNDV=no: warnings"
    show
fi
finish
