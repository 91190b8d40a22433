#!/bin/sh
# Offload on with a tag list of two entries, 2 ranks (run_tm.sh).
exec "$(dirname "$0")/run_tm.sh" 2 2 "$@"
