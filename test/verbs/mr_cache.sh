#!/bin/sh
# The registration cache over verbs in the soft-RoCE guest: test/integration/mr_cache.sh on rxe,
# where a registration pins the pages it saw, so a cache that missed an munmap or a
# madvise(MADV_DONTNEED) would send from (or receive into) the old pages and fail the payload
# check. Skips (77) with the reason where the guest cannot run.
here=$(cd "$(dirname "$0")" && pwd)
exec sh "$here/in_vm.sh" env TMX_PROVIDERS=verbs sh "$here/../integration/mr_cache.sh"
