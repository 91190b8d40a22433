#!/bin/sh
# tmx_mem_map over verbs in the soft-RoCE guest: test/integration/mem_map.sh (rendezvous
# messages in mapped ranges use one ibv_reg_mr of the range, with its rkey at an offset; the
# others register per message; an unmap waits for the send in flight) on rxe instead of the
# soft device, with TMX_RNDV_COPY=0: the others would be copied through staging buffers
# (test/verbs/rndv_copy.sh), not registered. Skips (77) with the reason where the guest cannot
# run.
here=$(cd "$(dirname "$0")" && pwd)
exec sh "$here/in_vm.sh" env TMX_PROVIDERS=verbs TMX_RNDV_COPY=0 \
    sh "$here/../integration/mem_map.sh"
