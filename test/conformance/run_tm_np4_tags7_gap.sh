#!/bin/sh
# Offload on with a tag list of seven entries and a sync gap of 1, 4 ranks: the device asks
# for a SYNC after nearly every unexpected message (run_tm.sh).
TMX_SOFT_TM_SYNC_GAP=1
export TMX_SOFT_TM_SYNC_GAP
exec "$(dirname "$0")/run_tm.sh" 4 7 "$@"
