#!/bin/sh
# Offload on with list operations failing when posted (every 3rd ADD, every 2nd DEL and SYNC)
# and rendezvous offload off, 2 ranks: receives fall back to software, deletes are retried,
# software reads the rendezvous data, and the results must not change (run_tm.sh).
TMX_SOFT_TM_INJECT=add=3,del=2,sync=2
TMX_SOFT_TM_RNDV=no
export TMX_SOFT_TM_INJECT TMX_SOFT_TM_RNDV
exec "$(dirname "$0")/run_tm.sh" 2 default "$@"
