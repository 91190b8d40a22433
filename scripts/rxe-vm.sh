#!/usr/bin/env bash
# Runs a command inside a qemu guest that has a real kernel RDMA stack: soft-RoCE (rdma_rxe)
# on a dummy netdev. No RDMA hardware, no KVM and no network are needed: the Debian kernel
# boots under TCG with a small busybox initramfs (built once, cached), the host's root
# filesystem is shared read-only over virtio-9p and the guest chroots into it, so every host
# binary and library (libibverbs, the rxe provider, the build tree and its libtool wrappers)
# runs unchanged at the same absolute path, in the same working directory, with the same
# environment. The command's output streams to stdout; its exit status is this script's.
#
#   scripts/rxe-vm.sh [options] -- CMD [ARGS...]
#   scripts/rxe-vm.sh --check
#
#   --check        say whether the lane can run here and why not (exit 0 yes, 77 no)
#   --timeout S    kill the guest after S seconds (default 300; exit 124)
#   --smp N        guest CPUs (default 2: with 1, rxe's deferred work makes UD 100x slower)
#   --mem M        guest memory in MiB (default 1024)
#   --rw DIR       share DIR (an existing host directory) read-write at the same path in the
#                  guest; repeatable. Everything else is read-only; /tmp /var/tmp /run
#                  /dev/shm are empty tmpfs, except that the working directory, TMX_SRCDIR and
#                  TMX_BUILDDIR are shared read-only when they lie under one of them
#   --ro DIR       share DIR read-only over such a tmpfs; repeatable
#   --kernel F     kernel image (default: the newest /boot/vmlinuz-* whose modules hold
#                  rdma_rxe); its version is taken from the name (vmlinuz-VERSION)
#   --cache DIR    where the initramfs is cached (default build/cache/rxe-vm of the tree)
#   --accel A      tcg (default, what CI has) or kvm (faster, when /dev/kvm is usable)
#   --no-lock      do not wait for other guests (by default one guest runs at a time per
#                  user: two guests of -smp 2 on a 2-core machine slow each other 10x)
#   --ip A.B.C.D   the address of rxe's netdev (default 10.77.0.1; a /24)
#   --net-dgram LPORT:RPORT
#                  rxe on a virtio-net NIC instead of a dummy netdev, its wire a UDP socket of
#                  qemu on 127.0.0.1:LPORT that sends to 127.0.0.1:RPORT (-netdev dgram): a
#                  second guest with the ports swapped and another --ip is on the same
#                  Ethernet segment (scripts/rxe-vm2.sh runs such a pair). With perl, qemu gets
#                  a socket with 16 MiB buffers: its own 208 KiB one drops rxe's bursts
#                  whenever qemu waits for a CPU, and rxe gives up after 7 retries
#   --clocksource C  the guest kernel's clocksource (clocksource=C: tsc, hpet, acpi_pm);
#                  default the kernel's choice (tsc, its rate calibrated at boot)
#   -v             show the kernel's messages, the guest's setup steps and the times
#
# In the guest: rxe0 on netdev rxenet0 (10.77.0.1/24 or --ip), port ACTIVE and the RoCE v2
# IPv4 GID at index 1 before the command starts; the command sees RXE_VM=1, RXE_VM_DEV=rxe0,
# RXE_VM_NETDEV=rxenet0, RXE_VM_IP=10.77.0.1, RXE_VM_GID_INDEX=1, TMPDIR=/tmp and the rest of
# the caller's environment. It runs as root with stdin from /dev/null, its stdout and stderr
# both into a regular file (as under make check) which this script copies to stdout as it grows.
#
# Exit status: the command's; 77 when the lane cannot run here (the reason is printed: no
# qemu, no kernel image or modules, a kernel image that is not readable - Debian installs it
# mode 0600, so run as root or `chmod 0644` it); 99 when the guest fails to set up (modules,
# mounts, rxe) or dies without a status; 124 on timeout.
#
# Environment: RXE_VM_TIMEOUT, RXE_VM_SMP, RXE_VM_MEM, RXE_VM_KERNEL, RXE_VM_CACHE,
# RXE_VM_ACCEL, RXE_VM_VERBOSE=1 (defaults of the options above); RXE_VM_QEMU (the qemu
# binary), RXE_VM_BZIMAGE=1 (boot the compressed kernel as it is), RXE_VM_TIMING=1 (print
# the guest's times, as -v does).
set -uo pipefail
# The whole script is one compound command, read before it runs: editing the file while a
# guest runs (a long test) does not change what the running copy does next.
{

me=rxe-vm
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
script="$root/scripts/rxe-vm.sh"

timeout_s=${RXE_VM_TIMEOUT:-300}
smp=${RXE_VM_SMP:-2}
mem=${RXE_VM_MEM:-1024}
kernel=${RXE_VM_KERNEL:-}
cache=${RXE_VM_CACHE:-}
accel=${RXE_VM_ACCEL:-tcg}
verbose=${RXE_VM_VERBOSE:-0}
lock=yes
check=no
rxe_ip=10.77.0.1
dgram=
clocksource=${RXE_VM_CLOCKSOURCE:-}
shares=() # "rw DIR" or "ro DIR"

usage() { sed -n '2,/^set -uo/{/^set -uo/d;s/^# \{0,1\}//;p}' "$script"; }

while [ $# -gt 0 ]; do
    case "$1" in
        --check)     check=yes ;;
        --timeout)   timeout_s=${2:?--timeout needs seconds}; shift ;;
        --smp)       smp=${2:?--smp needs a number}; shift ;;
        --mem)       mem=${2:?--mem needs MiB}; shift ;;
        --rw)        shares+=("rw ${2:?--rw needs a directory}"); shift ;;
        --ro)        shares+=("ro ${2:?--ro needs a directory}"); shift ;;
        --kernel)    kernel=${2:?--kernel needs a file}; shift ;;
        --cache)     cache=${2:?--cache needs a directory}; shift ;;
        --accel)     accel=${2:?--accel needs tcg or kvm}; shift ;;
        --no-lock)   lock=no ;;
        --ip)        rxe_ip=${2:?--ip needs an IPv4 address}; shift ;;
        --net-dgram) dgram=${2:?--net-dgram needs LPORT:RPORT}; shift ;;
        --clocksource) clocksource=${2:?--clocksource needs a name}; shift ;;
        -v)          verbose=1 ;;
        -h|--help)   usage; exit 0 ;;
        --)          shift; break ;;
        *)           echo "$me: unknown option '$1' (try --help)" >&2; exit 2 ;;
    esac
    shift
done
if [ "$check" = no ] && [ $# -eq 0 ]; then
    echo "$me: no command given (usage: $me [options] -- CMD [ARGS...]; try --help)" >&2
    exit 2
fi
for n in "$timeout_s" "$smp" "$mem"; do
    case "$n" in
        ''|*[!0-9]*) echo "$me: '$n' is not a number" >&2; exit 2 ;;
    esac
done
if ! [[ "$rxe_ip" =~ ^(25[0-5]|2[0-4][0-9]|1?[0-9]?[0-9])(\.(25[0-5]|2[0-4][0-9]|1?[0-9]?[0-9])){3}$ ]]; then
    echo "$me: --ip '$rxe_ip' is not an IPv4 address" >&2; exit 2
fi
if [ -n "$dgram" ] && ! [[ "$dgram" =~ ^[1-9][0-9]{0,4}:[1-9][0-9]{0,4}$ ]]; then
    echo "$me: --net-dgram wants LPORT:RPORT (UDP ports of 127.0.0.1), not '$dgram'" >&2; exit 2
fi
case "$clocksource" in
    ''|[a-z]*[a-z0-9_]) ;;
    *) echo "$me: --clocksource '$clocksource' is not a clocksource name" >&2; exit 2 ;;
esac
case "$accel" in
    tcg|kvm) ;;
    *) echo "$me: --accel must be tcg or kvm, not '$accel'" >&2; exit 2 ;;
esac

# The guest's modules, in load order (each with its dependencies from modprobe, which come
# first). crc32_generic: rxe computes its ICRC with the crypto API's crc32, which no module
# dependency names; without it `rdma link add` fails with "No such file or directory".
guest_modules=(virtio_pci 9pnet_virtio 9p virtio_net crc32_generic rdma_rxe rdma_ucm dummy)
# Shared with the guest's /init below (the address and the kind of netdev come on the kernel's
# command line: one initramfs serves every guest).
rxe_dev=rxe0
rxe_netdev=rxenet0

# ---------------------------------------------------------------------------------------
# Can the lane run here? Every "no" is a reason printed by skip() and exit 77.

skip() {
    echo "$me: cannot run the soft-RoCE guest here: $*" >&2
    exit 77
}

find_modprobe() {
    local p
    for p in "$(command -v modprobe 2>/dev/null)" /usr/sbin/modprobe /sbin/modprobe; do
        if [ -n "$p" ] && [ -x "$p" ]; then echo "$p"; return 0; fi
    done
    return 1
}

# kernel_version IMAGE: the version in the image's name (vmlinuz-6.1.0-56-amd64).
kernel_version() {
    local b
    b=$(basename "$1")
    case "$b" in
        vmlinuz-*) echo "${b#vmlinuz-}" ;;
        *) return 1 ;;
    esac
}

pick_kernel() {
    local k v
    for k in /boot/vmlinuz-*; do
        v=$(kernel_version "$k") || continue
        [ -d "/lib/modules/$v/kernel/drivers/infiniband/sw/rxe" ] && echo "$k"
    done | sort -V | tail -n 1 | grep .
}

qemu=${RXE_VM_QEMU:-$(command -v qemu-system-x86_64 2>/dev/null || true)}
lane_check() {
    [ "$(uname -m)" = x86_64 ] || skip "the host is $(uname -m), the lane boots an x86_64 guest"
    if [ -z "$qemu" ] || [ ! -x "$qemu" ]; then
        skip "no qemu-system-x86_64 (Debian package qemu-system-x86;" \
             "scripts/install-deps.sh installs it)"
    fi
    if [ -z "$kernel" ]; then
        kernel=$(pick_kernel) ||
            skip "no /boot/vmlinuz-VERSION with rdma_rxe in /lib/modules/VERSION (Debian" \
                 "package linux-image-amd64; scripts/install-deps.sh installs it)"
    fi
    [ -f "$kernel" ] || skip "kernel image $kernel does not exist"
    kver=$(kernel_version "$kernel") ||
        skip "cannot tell the version of kernel image $kernel (want a name vmlinuz-VERSION)"
    if [ ! -r "$kernel" ]; then
        if [ "$(id -u)" -ne 0 ]; then
            skip "kernel image $kernel is not readable by $(id -un) (Debian installs it mode" \
                 "0600): run as root, or once: sudo chmod 0644 $kernel"
        fi
        skip "kernel image $kernel is not readable"
    fi
    moddir=/lib/modules/$kver
    [ -f "$moddir/modules.dep" ] || skip "no $moddir/modules.dep (modules of kernel $kver)"
    modprobe=$(find_modprobe) || skip "no modprobe (Debian package kmod)"
    local m
    for m in "${guest_modules[@]}"; do
        "$modprobe" -S "$kver" --show-depends "$m" >/dev/null 2>&1 ||
            skip "kernel $kver has no module $m"
    done
    busybox=
    for m in /bin/busybox /usr/bin/busybox; do
        if [ -x "$m" ] && ! LC_ALL=C ldd "$m" >/dev/null 2>&1; then busybox=$m; break; fi
    done
    [ -n "$busybox" ] || skip "no static /bin/busybox (Debian package busybox-static)"
    command -v cpio >/dev/null 2>&1 || skip "no cpio (Debian package cpio)"
    [ -x /usr/bin/ip ] || [ -x /usr/sbin/ip ] || [ -x /sbin/ip ] ||
        skip "no ip (Debian package iproute2)"
    [ -x /usr/bin/rdma ] || [ -x /usr/sbin/rdma ] || [ -x /sbin/rdma ] ||
        skip "no rdma tool (Debian package iproute2)"
    [ -x /bin/bash ] || skip "no /bin/bash"
    ls /etc/libibverbs.d/rxe.driver >/dev/null 2>&1 ||
        skip "no /etc/libibverbs.d/rxe.driver (Debian package ibverbs-providers)"
    if ! "$qemu" -device help 2>/dev/null | grep -q '"virtio-9p-pci"'; then
        skip "$qemu has no virtio-9p (virtfs) support"
    fi
    if [ "$accel" = kvm ] && ! { [ -r /dev/kvm ] && [ -w /dev/kvm ]; }; then
        skip "--accel kvm: /dev/kvm is not usable"
    fi
}

lane_check
if [ "$check" = yes ]; then
    echo "$me: the lane can run: $qemu, kernel $kernel ($kver), modules in $moddir," \
         "$busybox, accel $accel"
    exit 0
fi

# ---------------------------------------------------------------------------------------
# The initramfs: busybox, the modules and /init. Everything else comes from the host's root
# over 9p, so the image depends only on the kernel, busybox and this script: it is cached
# under a key of those and rebuilt when one changes.

if [ -z "$cache" ]; then
    if [ -w "$root" ] || [ -w "$root/build" ]; then
        cache="$root/build/cache/rxe-vm"
    else
        cache="${TMPDIR:-/tmp}/tmx-rxe-vm-cache-$(id -u)"
    fi
fi
mkdir -p "$cache" || skip "cannot create the cache directory $cache"

# The guest's /init (busybox sh). @VARS@ are filled in below.
guest_init() {
    cat <<'EOF'
#!/bin/busybox sh
# /init of the rxe-vm guest, written by scripts/rxe-vm.sh.
/bin/busybox mkdir -p /proc /sys /dev /ctl /newroot
/bin/busybox mount -t devtmpfs dev /dev
# The kernel found no /dev/console in the image: take the console now.
exec </dev/null >/dev/console 2>&1
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
# No \n -> \r\n on the serial line: the host gets the command's bytes as they are.
stty -F /dev/console -onlcr 2>/dev/null
verbose=$(sed -n 's/.*tmxvm.verbose=\([01]\).*/\1/p' /proc/cmdline)
say() { [ "$verbose" = 1 ] && echo "rxe-vm (guest) [$(cut -d" " -f1 /proc/uptime)]: $*"; }

# guest_exit CODE: CODE to the host (the status file of the control share, and qemu's exit
# status through isa-debug-exit: (CODE & 127) << 1 | 1), then off.
ctl_ok=no
guest_exit() {
    [ "$ctl_ok" = yes ] && echo "$1" >/ctl/status
    # tcsetattr(TCSADRAIN): the console's output is on the wire before qemu stops.
    stty -F /dev/console -onlcr 2>/dev/null
    printf "\\$(printf %03o $(($1 & 127)))" | dd of=/dev/port bs=1 seek=244 count=1 2>/dev/null
    poweroff -f
}
die() {
    echo "rxe-vm (guest): $*"
    guest_exit 99
}

while read -r mod args; do
    say "insmod $mod $args"
    # shellcheck disable=SC2086 # module parameters are words
    insmod "/mods/$mod" $args || die "insmod $mod failed"
done </mods/order

o9p=trans=virtio,version=9p2000.L,msize=262144
mount -t 9p -o "$o9p" tmxctl /ctl || die "cannot mount the control share"
ctl_ok=yes
# cache=loose: the root is read-only and lives for seconds, so cached metadata is never stale.
mount -t 9p -o "$o9p,cache=loose,ro" hostroot /newroot || die "cannot mount the host's root"
R=/newroot
mount -t proc proc $R/proc || die "mount $R/proc"
mount -t sysfs sys $R/sys || die "mount $R/sys"
mkdir -p /dev/pts /dev/shm
mount --bind /dev $R/dev || die "mount $R/dev"
mount -t devpts -o newinstance,ptmxmode=0666 devpts $R/dev/pts || die "mount $R/dev/pts"
for d in /dev/shm /tmp /var/tmp /run; do
    [ -d "$R$d" ] || continue
    mode=1777; [ "$d" = /run ] && mode=0755
    mount -t tmpfs -o mode=$mode tmpfs "$R$d" || die "mount tmpfs on $R$d"
done
mkdir -p $R/run/tmx-vm $R/run/lock
mount --bind /ctl $R/run/tmx-vm || die "bind the control share"
while read -r i mode path; do
    [ -n "$path" ] || continue
    say "$mode share $path"
    # under a tmpfs of the guest (/tmp, /run...) the mount point must be made first
    [ -d "$R$path" ] || mkdir -p "$R$path"
    o=; [ "$mode" = ro ] && o=,cache=loose,ro
    mount -t 9p -o "$o9p$o" "tmxsh$i" "$R$path" || die "cannot mount the $mode share $path"
done </ctl/shares

# The network rxe runs on, with the host's own tools: busybox's ip applet cannot make a
# dummy link, and busybox sh would prefer it to /usr/bin/ip.
c() { say "$*"; chroot $R "$@" || die "$* failed"; }
ip=$(sed -n 's/.*tmxvm.ip=\([0-9.]*\).*/\1/p' /proc/cmdline)
net=$(sed -n 's/.*tmxvm.net=\([a-z]*\).*/\1/p' /proc/cmdline)
c /usr/bin/ip link set lo up
if [ "$net" = nic ]; then
    # the virtio-net NIC (-netdev dgram): the only Ethernet device there is
    nic=
    for d in /sys/class/net/*; do
        [ "$(cat "$d/type" 2>/dev/null)" = 1 ] && [ -e "$d/device" ] && nic=${d##*/} && break
    done
    [ -n "$nic" ] || die "no virtio-net NIC (tmxvm.net=nic)"
    c /usr/bin/ip link set "$nic" name @NETDEV@
else
    c /usr/bin/ip link add @NETDEV@ type dummy
fi
c /usr/bin/ip addr add "$ip/24" dev @NETDEV@
c /usr/bin/ip link set @NETDEV@ up
c /usr/bin/rdma link add @DEV@ type rxe netdev @NETDEV@
# The port turns ACTIVE and the IPv4 GID (index 1) appears asynchronously.
port=/sys/class/infiniband/@DEV@/ports/1
n=0
until grep -q ACTIVE $port/state 2>/dev/null &&
      grep -q '^0000:0000:0000:0000:0000:ffff:' $port/gids/1 2>/dev/null; do
    n=$((n + 1))
    if [ $n -gt 100 ]; then
        die "@DEV@ not ready after 10 s: state '$(cat $port/state 2>&1)', gid 1 '$(cat $port/gids/1 2>&1)'"
    fi
    sleep 0.1
done
say "@DEV@ $(cat $port/state), gid 1 $(cat $port/gids/1)"

cut -d' ' -f1 /proc/uptime >/ctl/ready
# The command writes to a file of the control share, which the host follows: it sees a
# regular file as under `make check` (not the console's tty: no colours, stdio fully
# buffered), and processes it leaves behind cannot hold the output open.
chroot $R /bin/bash /run/tmx-vm/cmd.sh </dev/null >/ctl/out 2>&1
guest_exit $?
EOF
}

modprobe_order() {
    local m
    for m in "${guest_modules[@]}"; do
        "$modprobe" -S "$kver" --show-depends "$m"
    done | awk '$1 == "insmod" && !seen[$2]++ { p = $2; $1 = ""; $2 = ""; sub(/^ +/, "");
                                                 print p "\t" $0 }'
}

order=$(modprobe_order) || skip "modprobe --show-depends failed for kernel $kver"
key=$( { cat "$script"; echo "$kver"; echo "$order"; stat -Lc '%s %Y' "$busybox"
         awk -F'\t' '{ print $1 }' <<<"$order" | xargs stat -Lc '%n %s %Y'; } |
       sha256sum | cut -c1-16)
initrd="$cache/initrd-$kver-$key.cpio.gz"
if [ ! -s "$initrd" ]; then
    stage=$(mktemp -d "$cache/stage.XXXXXX") || skip "cannot write to $cache"
    trap 'rm -rf "$stage"' EXIT
    mkdir -p "$stage/bin" "$stage/mods"
    cp "$busybox" "$stage/bin/busybox"
    while IFS=$'\t' read -r path args; do
        # Compressed modules (newer Debian kernels) are unpacked here: busybox's insmod
        # hands the kernel the file as it is.
        name=$(basename "$path")
        case "$name" in
            *.ko.xz)  name=${name%.xz};  xz -dc "$path" >"$stage/mods/$name" ;;
            *.ko.zst) name=${name%.zst}; zstd -dcq "$path" >"$stage/mods/$name" ;;
            *.ko.gz)  name=${name%.gz};  gzip -dc "$path" >"$stage/mods/$name" ;;
            *)        cp "$path" "$stage/mods/$name" ;;
        esac || skip "cannot unpack the module $path"
        printf '%s %s\n' "$name" "$args" >>"$stage/mods/order"
    done <<<"$order"
    guest_init | sed -e "s/@DEV@/$rxe_dev/g" -e "s/@NETDEV@/$rxe_netdev/g" >"$stage/init"
    chmod 0755 "$stage/init"
    if ! (cd "$stage" && find . -mindepth 1 | LC_ALL=C sort |
              cpio -o -H newc -R 0:0 --quiet | gzip -1) >"$stage.cpio.gz"; then
        rm -f "$stage.cpio.gz"
        echo "$me: building the initramfs failed" >&2
        exit 99
    fi
    mv -f "$stage.cpio.gz" "$initrd"
    rm -rf "$stage"
    trap - EXIT
    # Images of other kernels or versions of this script, unused for a day (another copy of
    # the script may be booting one right now).
    find "$cache" -maxdepth 1 -name 'initrd-*.cpio.gz' ! -name "$(basename "$initrd")" \
        -mmin +1440 -delete 2>/dev/null
    find "$cache" -maxdepth 1 -name 'stage.*' -mmin +60 -exec rm -rf {} + 2>/dev/null
    [ "$verbose" = 1 ] && echo "$me: built $initrd ($(stat -c %s "$initrd") bytes)" >&2
fi

# The uncompressed kernel, booted through its PVH entry: under TCG, the bzImage spends about
# 3.5 s decompressing itself before the first line of the kernel. Cached beside the initramfs
# when the kernel has CONFIG_PVH and its payload can be unpacked here (xz, zstd or gzip);
# otherwise the bzImage boots as it is.
boot_image=$kernel
unpack_kernel() {
    local out="$cache/vmlinux-$kver" stamp magic off tool tmp
    stamp="$(stat -Lc '%s %Y' "$kernel")"
    if [ -s "$out" ] && [ "$(cat "$out.stamp" 2>/dev/null)" = "$stamp" ]; then
        boot_image=$out
        return 0
    fi
    grep -qx 'CONFIG_PVH=y' "/boot/config-$kver" 2>/dev/null || return 1
    for magic in xz zstd gzip; do
        case $magic in
            xz)   off=$(LC_ALL=C grep -abo $'\xfd7zXZ\x00' "$kernel" | head -n 1) tool=(xz -dc) ;;
            zstd) off=$(LC_ALL=C grep -abo $'\x28\xb5\x2f\xfd' "$kernel" | head -n 1) tool=(zstd -dcq) ;;
            gzip) off=$(LC_ALL=C grep -abo $'\x1f\x8b\x08' "$kernel" | head -n 1) tool=(gzip -dc) ;;
        esac
        [ -n "$off" ] && command -v "${tool[0]}" >/dev/null 2>&1 && break
        off=
    done
    [ -n "$off" ] || return 1
    off=${off%%:*}
    tmp=$(mktemp "$cache/vmlinux.XXXXXX") || return 1
    # The payload is followed by other data: the decompressor's complaint about it is expected,
    # an ELF file is what counts.
    tail -c +$((off + 1)) "$kernel" | "${tool[@]}" >"$tmp" 2>/dev/null
    if [ "$(head -c 4 "$tmp" | od -An -c | tr -d ' ')" != '177ELF' ]; then
        rm -f "$tmp"
        return 1
    fi
    mv -f "$tmp" "$out"
    echo "$stamp" >"$out.stamp"
    find "$cache" -maxdepth 1 -name 'vmlinux-*' ! -name "vmlinux-$kver*" -mmin +1440 \
        -delete 2>/dev/null
    [ "$verbose" = 1 ] && echo "$me: unpacked $kernel to $out" >&2
    boot_image=$out
}
[ "${RXE_VM_BZIMAGE:-0}" = 1 ] || unpack_kernel ||
    { [ "$verbose" = 1 ] && echo "$me: booting the compressed $kernel (slower)" >&2; }

touch "$initrd" 2>/dev/null # in use: not cleaned up by another version of this script

# ---------------------------------------------------------------------------------------
# The control share: the command, the read-write shares, and the guest's status.

ctl=$(mktemp -d "${TMPDIR:-/tmp}/tmx-rxe-vm.XXXXXX") || { echo "$me: mktemp failed" >&2; exit 99; }
trap 'rm -rf "$ctl"' EXIT
# The directories the command most likely needs, when the guest's tmpfs would hide them.
for d in "$PWD" "${TMX_SRCDIR:-}" "${TMX_BUILDDIR:-}"; do
    if [ -z "$d" ] || [ ! -d "$d" ]; then continue; fi
    d=$(cd "$d" && pwd -P)
    case "$d" in # below the tmpfs, not the tmpfs itself, which must stay writable
        /tmp/?*|/var/tmp/?*|/run/?*|/dev/shm/?*) shares+=("ro $d") ;;
    esac
done
share_args=()
declare -A shared=()
i=0
: >"$ctl/shares"
# Parents before children, each directory once (the first mode given wins).
while read -r _ mode d; do
    if [ ! -d "$d" ]; then
        echo "$me: --$mode $d: not a directory" >&2
        exit 2
    fi
    d=$(cd "$d" && pwd -P)
    [ -z "${shared[$d]:-}" ] || continue
    shared[$d]=$mode
    echo "$i $mode $d" >>"$ctl/shares"
    o=; [ "$mode" = ro ] && o=,readonly=on
    share_args+=(-virtfs "local,path=$d,mount_tag=tmxsh$i,security_model=none,multidevs=remap$o")
    i=$((i + 1))
done < <(for sh in ${shares[@]+"${shares[@]}"}; do
             printf '%d %s\n' "${#sh}" "$sh"
         done | sort -n -s -k1,1)

{
    echo "# the command of scripts/rxe-vm.sh, run in the guest by bash"
    # The caller's environment, less what describes the host's shell or terminal session.
    while read -r v; do
        case "$v" in
            BASH*|SHELLOPTS|SHLVL|PWD|OLDPWD|_|UID|EUID|PPID|TMPDIR) continue ;;
        esac
        printf 'export %s=%q\n' "$v" "${!v}"
    done < <(compgen -e)
    printf 'export RXE_VM=1 RXE_VM_DEV=%s RXE_VM_NETDEV=%s RXE_VM_IP=%s RXE_VM_GID_INDEX=1\n' \
        "$rxe_dev" "$rxe_netdev" "$rxe_ip"
    echo 'export TMPDIR=/tmp'
    printf 'cd %q || { echo "rxe-vm (guest): cannot enter %q" >&2; exit 99; }\n' "$PWD" "$PWD"
    printf 'exec'
    printf ' %q' "$@"
    printf '\n'
} >"$ctl/cmd.sh"

append="console=ttyS0 panic=-1 rdinit=/init tmxvm.verbose=$verbose tmxvm.ip=$rxe_ip"
[ -n "$clocksource" ] && append+=" clocksource=$clocksource"
net_args=()
net_wrap=()
if [ -n "$dgram" ]; then
    append+=" tmxvm.net=nic"
    # a MAC of its own per address (locally administered, from the IPv4 address)
    mac=$(printf '52:54:%02x:%02x:%02x:%02x' ${rxe_ip//./ })
    # shellcheck disable=SC2054 # the commas are qemu's
    net_args=(-netdev "dgram,id=wire,local.type=inet,local.host=127.0.0.1,local.port=${dgram%%:*},remote.type=inet,remote.host=127.0.0.1,remote.port=${dgram##*:}"
              -device "virtio-net-pci,netdev=wire,mac=$mac")
    # qemu's own UDP socket has the default receive buffer (212992 bytes), which a burst of
    # rxe (an RDMA READ of 1 MiB is 1024 frames) overflows whenever that qemu waits for a CPU
    # on a loaded host: the frames are dropped, rxe's retries (7) burst again, and it gives up
    # ("transport retry exceeded"). With perl (always there on Debian) the socket is made here,
    # with 16 MiB buffers (SO_RCVBUFFORCE as root, else up to net.core.rmem_max), bound and
    # connected, and handed to qemu as a file descriptor.
    if command -v perl >/dev/null 2>&1; then
        net_args[1]="dgram,id=wire,local.type=fd,local.str=@FD@"
        # shellcheck disable=SC2016 # perl's variables
        net_wrap=(perl -MSocket -MFcntl -e '
            my ($lp, $rp, @cmd) = @ARGV;
            socket(my $s, PF_INET, SOCK_DGRAM, 0) or die "rxe-vm: socket: $!\n";
            for ([33, SO_RCVBUF], [32, SO_SNDBUF]) { # SO_RCVBUFFORCE, SO_SNDBUFFORCE
                setsockopt($s, SOL_SOCKET, $_->[0], pack("i", 1 << 24)) or
                    setsockopt($s, SOL_SOCKET, $_->[1], pack("i", 1 << 24));
            }
            bind($s, pack_sockaddr_in($lp, inet_aton("127.0.0.1"))) or die "rxe-vm: bind $lp: $!\n";
            connect($s, pack_sockaddr_in($rp, inet_aton("127.0.0.1"))) or die "rxe-vm: connect: $!\n";
            fcntl($s, F_SETFD, 0) or die "rxe-vm: fcntl: $!\n";
            my $fd = fileno($s);
            s/\@FD\@/$fd/g for @cmd;
            exec {$cmd[0]} @cmd or die "rxe-vm: exec $cmd[0]: $!\n";' "${dgram%%:*}" "${dgram##*:}")
    fi
else
    append+=" tmxvm.net=dummy"
fi
append+=" mitigations=off nokaslr tsc=reliable no_timer_check"
# Kernel errors, oopses and panics always reach the output (loglevel 4: levels 0-3; a normal
# boot prints none); -v shows the boot too, RXE_VM_LOGLEVEL=7 everything.
if [ "$verbose" = 1 ]; then append+=" loglevel=${RXE_VM_LOGLEVEL:-5}"; else append+=" quiet loglevel=4"; fi

# shellcheck disable=SC2054 # the commas are qemu's
qemu_cmd=("$qemu" -nodefaults -no-user-config -display none -no-reboot
          -machine "pc,accel=$accel" -cpu max -smp "$smp" -m "$mem"
          -kernel "$boot_image" -initrd "$initrd" -append "$append"
          -chardev stdio,id=con,signal=on -serial chardev:con
          -device isa-debug-exit,iobase=0xf4,iosize=0x04
          ${net_args[@]+"${net_args[@]}"}
          -virtfs "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap"
          -virtfs "local,path=$ctl,mount_tag=tmxctl,security_model=none,multidevs=remap"
          ${share_args[@]+"${share_args[@]}"})

# One guest at a time: they would share the host's cores, and rxe under TCG is sensitive to
# losing its CPU (timeouts, retransmissions).
if [ "$lock" = yes ] && command -v flock >/dev/null 2>&1; then
    lockfile="${TMPDIR:-/tmp}/tmx-rxe-vm-$(id -u).lock"
    exec 9>>"$lockfile"
    tw=$(date +%s%N)
    if ! flock -n 9; then
        echo "$me: waiting for another guest to finish ($lockfile)" >&2
        flock 9
    fi
fi

[ "$verbose" = 1 ] && echo "$me: ${qemu_cmd[*]}" >&2
t0=$(date +%s%N)
# timeout(1) runs qemu in a process group of its own, which a Ctrl-C on the terminal does not
# reach: an interrupted script stops the guest itself.
timeout -s TERM -k 5 "$timeout_s" ${net_wrap[@]+"${net_wrap[@]}"} "${qemu_cmd[@]}" </dev/null &
qpid=$!
# The command's output, as the guest writes it, until qemu ends (then tail reads to the end).
: >"$ctl/out"
tail -n +1 -s 0.2 --pid=$qpid -f "$ctl/out" &
tpid=$!
trap 'kill -TERM $qpid 2>/dev/null; wait $qpid; wait $tpid; rm -rf "$ctl"; echo "$me: interrupted" >&2
      exit 130' INT TERM HUP
wait $qpid
qrc=$?
wait $tpid
trap 'rm -rf "$ctl"' EXIT
trap - INT TERM HUP
exec 9>&-
t1=$(date +%s%N)
if [ "$verbose" = 1 ] || [ "${RXE_VM_TIMING:-0}" = 1 ]; then
    ms() { printf '%d.%02d s' $(($1 / 1000000000)) $(($1 % 1000000000 / 10000000)); }
    echo "$me: the guest ran $(ms $((t1 - t0))) (qemu start to exit; boot and rxe set-up" \
         "$(cat "$ctl/ready" 2>/dev/null || echo ?) s of the guest's clock), waited" \
         "$(ms $((t0 - ${tw:-$t0}))) for other guests, qemu exit $qrc" >&2
fi

if [ -s "$ctl/status" ]; then
    rc=$(cat "$ctl/status")
    case "$rc" in
        ''|*[!0-9]*) echo "$me: bad status '$rc' from the guest" >&2; exit 99 ;;
    esac
    exit "$rc"
fi
if [ "$qrc" -eq 124 ] || [ "$qrc" -eq 137 ]; then
    echo "$me: the guest did not finish within $timeout_s s (--timeout): killed" >&2
    exit 124
fi
if [ $((qrc & 1)) -eq 1 ] && [ "$qrc" -gt 1 ]; then
    echo "$me: the guest failed before its control share was mounted (code $((qrc >> 1)))" >&2
    exit 99
fi
echo "$me: the guest ended without a status (qemu exit $qrc: a kernel panic or a qemu error;" \
     "rerun with -v to see the kernel's messages)" >&2
exit 99
}
