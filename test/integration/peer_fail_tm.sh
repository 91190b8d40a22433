#!/bin/sh
# peer_fail.sh with tag-matching offload on the soft device. Its "pending" mode posts 64-byte
# receives, which then sit in the device's tag list when the peer dies: failure pending, a
# match by the device afterwards, and cancels (list deletes) are checked with the list holding
# them, and the mode checks through the worker query that they really were offered.
TMX_SOFT_TM=yes
TMX_TM_OFFLOAD=yes
TMX_TM_THRESH=64
export TMX_SOFT_TM TMX_TM_OFFLOAD TMX_TM_THRESH
exec sh "$(dirname "$0")/peer_fail.sh" "$@"
