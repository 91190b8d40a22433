#!/bin/sh
# XRC on 2 ranks: same node, one domain (run_xrc.sh).
exec "$(dirname "$0")/run_xrc.sh" 2 1 1 "$@"
