#!/bin/sh
# Offload and XRC together on 2 ranks: one node, two domains (run_xrc_tm.sh).
exec "$(dirname "$0")/run_xrc_tm.sh" 2 1 2 "$@"
