#!/bin/sh
# in_vm.sh CMD [ARGS...]: runs CMD inside the soft-RoCE guest of scripts/rxe-vm.sh (a qemu
# guest, no KVM needed, with rxe0 on a dummy netdev, the host's files at the same paths, the
# same working directory and environment) and exits with CMD's status. Exit 77 (skip, with
# the reason) when the guest cannot run here; 99 when the guest fails to set up rxe. Already
# inside the guest (RXE_VM=1) it runs CMD directly.
#
# How a test of the build tree runs in the lane (test/verbs/README.md has more):
#
#   test/verbs/verbs_unit.sh, registered in test/verbs/Makefile.include with
#       dist_check_SCRIPTS += test/verbs/verbs_unit.sh
#       TESTS              += test/verbs/verbs_unit.sh
#   holds:
#       #!/bin/sh
#       exec "$(dirname "$0")/in_vm.sh" "${TMX_BUILDDIR:-.}/test/verbs/test_verbs"
#
# Environment: RXE_VM_TIMEOUT (seconds the whole guest may take, default 300), RXE_VM_SMP,
# RXE_VM_MEM, RXE_VM_KERNEL, RXE_VM_CACHE, RXE_VM_ACCEL, RXE_VM_VERBOSE (scripts/rxe-vm.sh
# --help), RXE_VM_LANE=no (skip every lane test).
if [ $# -eq 0 ]; then
    echo "usage: in_vm.sh CMD [ARGS...]" >&2
    exit 2
fi
if [ "${RXE_VM:-0}" = 1 ]; then
    exec "$@"
fi
if [ "${RXE_VM_LANE:-yes}" = no ]; then
    echo "in_vm.sh: RXE_VM_LANE=no: the soft-RoCE guest is disabled, skipping"
    exit 77
fi
srcdir=${TMX_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
vm="$srcdir/scripts/rxe-vm.sh"
if [ ! -f "$vm" ]; then
    echo "in_vm.sh: no $vm" >&2
    exit 99
fi
if ! command -v bash >/dev/null 2>&1; then
    echo "in_vm.sh: no bash, which scripts/rxe-vm.sh needs: skipping"
    exit 77
fi
# rxe-vm.sh prints the reason when it cannot run (exit 77) to stderr; the harness keeps both.
exec bash "$vm" -- "$@"
