#!/bin/sh
# Runs the conformance suite on 4 ranks of this host with one fast ring per process
# (TMX_SOFT_FAST_RINGS=1): the three peers' queue pairs compete for it, so a ring is asked
# back from an idle sender and lent to a busy one while the suite's messages flow, and the
# rest goes through the shared inbox (see run_np.sh).
TMX_SOFT_FAST_RINGS=1
export TMX_SOFT_FAST_RINGS
exec "$(dirname "$0")/run_np.sh" 4 "$@"
