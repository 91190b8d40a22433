#!/bin/sh
# The conformance suite on 2 ranks over verbs in the soft-RoCE guest (see conformance.sh).
exec sh "$(dirname "$0")/conformance.sh" 2 "$@"
