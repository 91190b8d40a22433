#!/bin/sh
# Offload and XRC together on 4 ranks: two nodes, three domains (run_xrc_tm.sh).
exec "$(dirname "$0")/run_xrc_tm.sh" 4 2 3 "$@"
