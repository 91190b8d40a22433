#!/bin/sh
# XRC on 4 ranks: four nodes of one rank, three domains (run_xrc.sh).
exec "$(dirname "$0")/run_xrc.sh" 4 4 3 "$@"
