#!/bin/sh
# Offload on with a tag list of two entries that takes one list operation at a time, 2 ranks:
# besides a list that is nearly always full, every DEL (signaled) must wait for the completion
# of the one before it (TMX_ERR_BUSY from the device), in order (run_tm.sh).
TMX_SOFT_TM_OPS=1
export TMX_SOFT_TM_OPS
exec "$(dirname "$0")/run_tm.sh" 2 2 "$@"
