#!/bin/sh
# A full send queue over verbs in the soft-RoCE guest: test/integration/sq_full.sh
# (TMX_SEND_QUEUE=4: rendezvous reads, eager sends and control messages that find the RC QP's
# send queue full wait and are retried) on rxe instead of the soft device. Skips (77) with the
# reason where the guest cannot run.
here=$(cd "$(dirname "$0")" && pwd)
exec sh "$here/in_vm.sh" env TMX_PROVIDERS=verbs CONF_SCHEDULES="${CONF_SCHEDULES:-50}" \
    sh "$here/../integration/sq_full.sh"
