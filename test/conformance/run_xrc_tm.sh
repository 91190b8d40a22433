#!/bin/sh
# run_xrc_tm.sh N NODES DOMAINS [args]: the conformance suite on N ranks with tag-matching
# offload and XRC on together (doc/DESIGN.md "XRC", "TM and XRC"): the soft device offers both
# (TMX_SOFT_TM=yes, TMX_SOFT_XRC=yes), the ranks use both (TMX_TM_OFFLOAD=yes, TMX_XRC=yes).
# Tagged messages travel on the RC queue pairs of TM and are matched by the device's tag list
# (-O checks that the devices matched receives); replies and rendezvous reads travel on XRC
# (-X, added by run_xrc.sh, checks that every worker has initiators, targets and RC queue
# pairs). run_xrc.sh also requires every rank's log to say that both were on.
np=$1
nodes=$2
domains=$3
shift 3
TMX_SOFT_TM=yes
TMX_TM_OFFLOAD=yes
TMX_TM_THRESH=${TMX_TM_THRESH:-64}
TMX_XRC_EXPECT_TM=1
export TMX_SOFT_TM TMX_TM_OFFLOAD TMX_TM_THRESH TMX_XRC_EXPECT_TM
exec "$(dirname "$0")/run_xrc.sh" "$np" "$nodes" "$domains" -O "$@"
