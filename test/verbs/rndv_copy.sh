#!/bin/sh
# Rendezvous through staging buffers over verbs in the soft-RoCE guest:
# test/integration/rndv_copy.sh on rxe (messages of up to TMX_RNDV_COPY copied through buffers
# registered once, the rest registered per message; and with TMX_RNDV_COPY=0). Skips (77) with
# the reason where the guest cannot run.
here=$(cd "$(dirname "$0")" && pwd)
exec sh "$here/in_vm.sh" env TMX_PROVIDERS=verbs sh "$here/../integration/rndv_copy.sh"
