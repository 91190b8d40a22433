#!/bin/sh
# Eager credits over verbs in the soft-RoCE guest: test/integration/credits.sh on rxe (the
# credit returns sent alone and the refused send attempts in each worker's info line; the
# sends are the provider's send_inline compact messages). Skips (77) with the reason where the
# guest cannot run.
here=$(cd "$(dirname "$0")" && pwd)
exec sh "$here/in_vm.sh" env TMX_PROVIDERS=verbs bash "$here/../integration/credits.sh"
