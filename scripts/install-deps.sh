#!/usr/bin/env bash
# Installs the Debian/Ubuntu packages tmx needs to build and test, and only those that are
# missing, so that running it on a ready machine costs nothing (no apt-get update, no sudo).
#
#   scripts/install-deps.sh [--bench] [--no-lane] [--dry-run]
#
#   --bench    also the packages bench/compare.sh compares against (UCX, Open MPI)
#   --no-lane  not the packages of the verbs lane (a qemu guest with soft-RoCE,
#              scripts/rxe-vm.sh; about 100 MB with the kernel); its tests then skip
#   --dry-run  print what would be installed, install nothing
set -euo pipefail

PACKAGES=(autoconf automake libtool pkg-config make gcc groff-base libfabric-bin
          libibverbs-dev librdmacm-dev libhwloc-dev libfabric-dev libcriterion-dev)
BENCH_PACKAGES=(ucx-utils openmpi-bin libopenmpi-dev)
# The verbs lane (scripts/rxe-vm.sh, test/verbs): qemu without KVM, Debian's kernel (its
# modules hold rdma_rxe), a static busybox for the guest's initramfs, the rdma-core tools and
# the rxe userspace provider, perftest (RDMA WRITE/READ and the raw-verbs reference of the
# benchmarks), xz to unpack the kernel once (it boots 3 s faster uncompressed).
LANE_PACKAGES=(qemu-system-x86 linux-image-amd64 busybox-static rdma-core ibverbs-providers
               ibverbs-utils iproute2 kmod cpio perftest xz-utils)

bench=no
lane=yes
dry_run=no
for arg in "$@"; do
    case "$arg" in
        --bench)   bench=yes ;;
        --no-lane) lane=no ;;
        --dry-run) dry_run=yes ;;
        -h|--help) sed -n '2,10s/^# \{0,1\}//p' "$0"; exit 0 ;;
        *)         echo "install-deps: unknown option '$arg' (try --help)" >&2; exit 2 ;;
    esac
done
if [ "$bench" = yes ]; then
    PACKAGES+=("${BENCH_PACKAGES[@]}")
fi
# The lane boots an amd64 Debian kernel: elsewhere its tests skip and say why.
if [ "$lane" = yes ]; then
    arch=$(dpkg --print-architecture 2>/dev/null || uname -m)
    if [ "$arch" = amd64 ] || [ "$arch" = x86_64 ]; then
        # shellcheck source=/dev/null
        os_id=$(. /etc/os-release 2>/dev/null && echo "${ID:-}")
        if [ "$os_id" != debian ]; then
            # linux-image-amd64 is Debian's; elsewhere a kernel image with rdma_rxe in /boot
            # is the user's choice (Ubuntu: linux-modules-extra), or the lane's tests skip.
            LANE_PACKAGES=("${LANE_PACKAGES[@]/linux-image-amd64}")
            echo "install-deps: not Debian (${os_id:-unknown}): the verbs lane needs a kernel" \
                 "image in /boot whose modules have rdma_rxe; install one yourself"
        fi
        for pkg in "${LANE_PACKAGES[@]}"; do
            [ -n "$pkg" ] && PACKAGES+=("$pkg")
        done
    else
        echo "install-deps: the verbs lane needs an amd64 machine ($arch): its tests will skip"
    fi
fi

if ! command -v dpkg-query >/dev/null 2>&1; then
    # Not Debian: we cannot tell what is installed, so say what is needed and let the build
    # (configure) report what is really missing.
    echo "install-deps: no dpkg-query (not a Debian system); please install the equivalents of:"
    echo "  ${PACKAGES[*]}"
    exit 0
fi

# "install ok installed" is the only state in which a package is usable; "deinstall" or
# half-configured packages count as missing.
missing=()
for pkg in "${PACKAGES[@]}"; do
    state=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
    if [ "$state" != "install ok installed" ]; then
        missing+=("$pkg")
    fi
done

if [ "${#missing[@]}" -eq 0 ]; then
    echo "install-deps: all ${#PACKAGES[@]} packages already installed"
    exit 0
fi

echo "install-deps: installing ${missing[*]}"
if [ "$dry_run" = yes ]; then
    exit 0
fi

sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then
    if ! command -v sudo >/dev/null 2>&1; then
        echo "install-deps: not root and no sudo; install these as root: ${missing[*]}" >&2
        exit 1
    fi
    # -n: never wait for a password on a CI machine without a terminal.
    if [ -t 0 ]; then sudo_cmd=(sudo); else sudo_cmd=(sudo -n); fi
fi

export DEBIAN_FRONTEND=noninteractive
apt_opts=(-q -y -o Dpkg::Use-Pty=0 --no-install-recommends)
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# Quiet on success, the whole apt output on failure so the cause is visible.
if ! "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -q update >"$log" 2>&1 ||
   ! "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive \
        apt-get install "${apt_opts[@]}" "${missing[@]}" >>"$log" 2>&1; then
    # The lane's packages (a kernel among them) are the likeliest to fail in a container:
    # without them the build and every other test still work, and the lane's tests skip and
    # say why. So the rest is tried alone before giving up.
    core=()
    for pkg in "${missing[@]}"; do
        case " ${LANE_PACKAGES[*]} " in
            *" $pkg "*) ;;
            *) core+=("$pkg") ;;
        esac
    done
    if [ "${#core[@]}" -lt "${#missing[@]}" ] &&
       { [ "${#core[@]}" -eq 0 ] ||
         "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive \
             apt-get install "${apt_opts[@]}" "${core[@]}" >>"$log" 2>&1; }; then
        tail -n 20 "$log" >&2
        echo "install-deps: the verbs lane's packages could not be installed (the end of apt's" \
             "output above): its tests will skip; everything else is installed" >&2
        exit 0
    fi
    cat "$log" >&2
    echo "install-deps: apt-get failed (output above)" >&2
    exit 1
fi
echo "install-deps: done"
