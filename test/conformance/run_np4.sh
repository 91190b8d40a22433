#!/bin/sh
# Runs the conformance suite on 4 ranks of this host (see run_np.sh).
exec "$(dirname "$0")/run_np.sh" 4 "$@"
