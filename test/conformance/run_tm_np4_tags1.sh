#!/bin/sh
# Offload on with a tag list of one entry, 4 ranks: nearly every receive finds the list full
# and stays in software, and the one that got in must keep MPI order with them (run_tm.sh).
exec "$(dirname "$0")/run_tm.sh" 4 1 "$@"
