#!/bin/sh
# XRC on 4 ranks: two nodes of two ranks, two domains (run_xrc.sh).
exec "$(dirname "$0")/run_xrc.sh" 4 2 2 "$@"
