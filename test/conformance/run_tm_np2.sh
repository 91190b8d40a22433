#!/bin/sh
# Offload on, the default tag list, 2 ranks (run_tm.sh).
exec "$(dirname "$0")/run_tm.sh" 2 default "$@"
