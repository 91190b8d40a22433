#!/bin/sh
# run_tm.sh N TAGS [args]: the conformance suite on N ranks with tag-matching offload on the
# soft device (TMX_SOFT_TM=yes, TMX_TM_OFFLOAD=yes) and a tag list of TAGS entries ("default":
# the device's default). Receives from 64 bytes up are offered (TMX_TM_THRESH=64), so most of
# the suite's receives go to the device's list and the smallest stay in software, which also
# exercises the rule that keeps younger receives out of the list behind them. Every case is
# checked against the reference model of MPI matching, as without offload. The environment may
# add TMX_SOFT_TM_SYNC_GAP, TMX_SOFT_TM_INJECT or TMX_SOFT_TM_RNDV (the wrappers do).
np=$1
tags=$2
shift 2
TMX_SOFT_TM=yes
TMX_TM_OFFLOAD=yes
TMX_TM_THRESH=${TMX_TM_THRESH:-64}
export TMX_SOFT_TM TMX_TM_OFFLOAD TMX_TM_THRESH
if [ "$tags" != default ]; then
    TMX_SOFT_TM_TAGS=$tags
    export TMX_SOFT_TM_TAGS
fi
exec "$(dirname "$0")/run_np.sh" "$np" -O "$@"
