#!/bin/sh
# The verbs provider's unit tests (test_verbs) against soft-RoCE inside the qemu guest of
# scripts/rxe-vm.sh; skips (77) with the reason where the guest cannot run, or where no lane
# script is there yet (then run test/verbs/test_verbs by hand on a host with an RDMA device).
B=${TMX_BUILDDIR:-$(pwd)}
prog="$B/test/verbs/test_verbs"
if [ ! -x "$prog" ]; then
    echo "verbs_unit.sh: $prog not built" >&2
    exit 99
fi
in_vm="$(dirname "$0")/in_vm.sh"
if [ ! -f "$in_vm" ]; then
    echo "verbs_unit.sh: no $in_vm (the soft-RoCE lane): running on this host"
    exec "$prog"
fi
exec sh "$in_vm" "$prog"
