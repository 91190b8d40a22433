#!/usr/bin/env bash
# Runs two commands in two qemu guests with soft-RoCE that are joined by a wire: each guest is
# a scripts/rxe-vm.sh guest whose rxe0 sits on a virtio-net NIC, and the two NICs exchange
# their Ethernet frames as UDP datagrams between the two qemu processes (-netdev dgram on
# 127.0.0.1). Two kernels, two boot ids, two rxe devices that reach each other only through
# that wire, with rxe's own acknowledgements and retransmissions: what two hosts with RoCE
# NICs look like, without RDMA hardware, KVM or privileges.
#
#   scripts/rxe-vm2.sh [options] -- CMD_A [ARGS...] --- CMD_B [ARGS...]
#   scripts/rxe-vm2.sh --check
#
#   --check        say whether the pair can run here and why not (exit 0 yes, 77 no)
#   --timeout S    kill each guest after S seconds (default 300)
#   --smp N        CPUs of each guest (default 1: the two guests together have no more vCPUs
#                  than this machine's 2 cores)
#   --mem M        memory of each guest in MiB (default 768)
#   --rw DIR       share DIR read-write with both guests; repeatable
#   --grace S      once one guest failed, give the other S seconds to finish (default 20),
#                  then kill it: a command waiting for its failed peer does not hold the pair
#                  until --timeout
#   --clocksource C  the guests' clocksource (default hpet, see below; RXE_VM_CLOCKSOURCE)
#   -v             scripts/rxe-vm.sh -v for both
#
# Clock: under TCG a guest kernel calibrates its TSC against the emulated HPET at boot, and on
# a loaded host that can go wrong: once a guest's clock ran 2.5 times as fast as the host's,
# and with it rxe's retransmission timer (67 ms, 7 tries) and tmx's timeouts: rxe gave up on
# the other guest ("transport retry exceeded"). qemu's HPET counts the host's time, so the
# guests keep time with clocksource=hpet whatever the calibration (clock_gettime becomes a
# system call; the pair's test and benchmark times did not change measurably).
#
# Guest A is 10.77.0.1 and runs CMD_A, guest B 10.77.0.2 and runs CMD_B. Each command runs as
# under scripts/rxe-vm.sh (the host's root read-only, the same directory and environment) and
# also sees RXE_VM2_SIDE (a or b), RXE_VM_PEER_IP (the other guest's address) and RXE_VM2_DIR:
# a directory shared read-write by both guests and the host, fresh for this run, where one
# side leaves what the other needs (tmxrun --boot-addr-file). Output lines are prefixed with
# [a] or [b].
#
# Exit status: 0 when both commands exited 0; the first failure otherwise (A's when both
# failed); 77 when the pair cannot run here (the reason is printed: everything rxe-vm.sh
# --check needs, and a qemu with -netdev dgram, which came in qemu 7.2); 124 on timeout.
#
# Environment: RXE_VM2_TIMEOUT, RXE_VM2_SMP, RXE_VM2_MEM (defaults of the options above), and
# what scripts/rxe-vm.sh reads (RXE_VM_KERNEL, RXE_VM_CACHE, RXE_VM_QEMU...).
set -uo pipefail
{

me=rxe-vm2
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
vm="$root/scripts/rxe-vm.sh"
timeout_s=${RXE_VM2_TIMEOUT:-300}
smp=${RXE_VM2_SMP:-1}
mem=${RXE_VM2_MEM:-768}
grace=20
clocksource=${RXE_VM_CLOCKSOURCE:-hpet}
check=no
vflag=()
rw=()

usage() { sed -n '2,/^set -uo/{/^set -uo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; }

while [ $# -gt 0 ]; do
    case "$1" in
        --check)   check=yes ;;
        --timeout) timeout_s=${2:?--timeout needs seconds}; shift ;;
        --smp)     smp=${2:?--smp needs a number}; shift ;;
        --mem)     mem=${2:?--mem needs MiB}; shift ;;
        --rw)      rw+=(--rw "${2:?--rw needs a directory}"); shift ;;
        --grace)   grace=${2:?--grace needs seconds}; shift ;;
        --clocksource) clocksource=${2:?--clocksource needs a name}; shift ;;
        -v)        vflag=(-v) ;;
        -h|--help) usage; exit 0 ;;
        --)        shift; break ;;
        *)         echo "$me: unknown option '$1' (try --help)" >&2; exit 2 ;;
    esac
    shift
done
for n in "$timeout_s" "$smp" "$mem" "$grace"; do
    case "$n" in
        ''|*[!0-9]*) echo "$me: '$n' is not a number" >&2; exit 2 ;;
    esac
done
cmd_a=()
cmd_b=()
if [ "$check" = no ]; then
    while [ $# -gt 0 ] && [ "$1" != --- ]; do cmd_a+=("$1"); shift; done
    [ $# -gt 0 ] && shift
    cmd_b=("$@")
    if [ ${#cmd_a[@]} -eq 0 ] || [ ${#cmd_b[@]} -eq 0 ]; then
        echo "$me: usage: $me [options] -- CMD_A [ARGS...] --- CMD_B [ARGS...] (try --help)" >&2
        exit 2
    fi
fi

[ -f "$vm" ] || { echo "$me: no $vm" >&2; exit 99; }
# everything one guest needs (prints its reason and exits 77 when something is missing)
bash "$vm" --check >/dev/null || exit $?
qemu=${RXE_VM_QEMU:-$(command -v qemu-system-x86_64)}
if ! "$qemu" -netdev help 2>/dev/null | grep -qx 'dgram'; then
    echo "$me: cannot run the two-guest pair here: $qemu has no -netdev dgram (qemu 7.2 or" \
         "later: $("$qemu" --version | head -n 1))" >&2
    exit 77
fi
if [ "$check" = yes ]; then
    echo "$me: the pair can run: two guests of $qemu joined by -netdev dgram"
    exit 0
fi

# Two free UDP ports of 127.0.0.1 (another pair may run at the same time as ours only if it
# does not hold our lock, see below; ports are still checked against what is bound).
pick_port() {
    local p i
    for i in $(seq 1 50); do
        p=$((20000 + RANDOM % 40000))
        if command -v ss >/dev/null 2>&1 && ss -Hlun "sport = :$p" 2>/dev/null | grep -q .; then
            continue
        fi
        [ "$p" != "${1:-}" ] && { echo "$p"; return 0; }
    done
    return 1
}
pa=$(pick_port) && pb=$(pick_port "$pa") || { echo "$me: no free UDP port" >&2; exit 99; }

dir=$(mktemp -d "${TMPDIR:-/tmp}/tmx-rxe-vm2.XXXXXX") || { echo "$me: mktemp failed" >&2; exit 99; }
chmod 0700 "$dir"
trap 'rm -rf "$dir"' EXIT

# The pair holds the lock of scripts/rxe-vm.sh (one guest or one pair at a time per user) and
# starts its guests with --no-lock.
if command -v flock >/dev/null 2>&1; then
    lockfile="${TMPDIR:-/tmp}/tmx-rxe-vm-$(id -u).lock"
    exec 9>>"$lockfile"
    if ! flock -n 9; then
        echo "$me: waiting for another guest to finish ($lockfile)" >&2
        flock 9
    fi
fi

# guest SIDE IP LPORT RPORT PEER_IP CMD...: one guest in the background (its pid in $gpid),
# its output prefixed with [SIDE]; the pid is rxe-vm.sh's own, which stops its qemu on SIGTERM.
guest() {
    local side=$1 ip=$2 lp=$3 rp=$4 peer=$5
    shift 5
    RXE_VM2_SIDE=$side RXE_VM_PEER_IP=$peer RXE_VM2_DIR=$dir \
        bash "$vm" --no-lock ${vflag[@]+"${vflag[@]}"} --timeout "$timeout_s" --smp "$smp" \
        --mem "$mem" --clocksource "$clocksource" --ip "$ip" --net-dgram "$lp:$rp" --rw "$dir" ${rw[@]+"${rw[@]}"} \
        -- "$@" </dev/null > >(sed -u "s/^/[$side] /") 2>&1 &
    gpid=$!
}

t0=$(date +%s)
guest a 10.77.0.1 "$pa" "$pb" 10.77.0.2 "${cmd_a[@]}"
pid_a=$gpid
guest b 10.77.0.2 "$pb" "$pa" 10.77.0.1 "${cmd_b[@]}"
pid_b=$gpid
trap 'kill -TERM $pid_a $pid_b 2>/dev/null; wait $pid_a $pid_b; rm -rf "$dir"
      echo "$me: interrupted" >&2; exit 130' INT TERM HUP

# The first to end: if it failed, the other gets --grace seconds (it may be waiting for a
# peer that is gone) and is then stopped.
rc_a= rc_b= done_pid=
wait -n -p done_pid $pid_a $pid_b
rc_first=$?
if [ "$done_pid" = "$pid_a" ]; then first=a rc_a=$rc_first other=$pid_b
else first=b rc_b=$rc_first other=$pid_a; fi
if [ "$rc_first" -ne 0 ]; then
    for _ in $(seq 1 $((grace * 5))); do
        kill -0 "$other" 2>/dev/null || break
        sleep 0.2
    done
    if kill -0 "$other" 2>/dev/null; then
        echo "$me: guest $first failed (exit $rc_first); stopping the other after $grace s" >&2
        kill -TERM "$other" 2>/dev/null
    fi
fi
if [ $first = a ]; then wait $pid_b; rc_b=$?; else wait $pid_a; rc_a=$?; fi
trap 'rm -rf "$dir"' EXIT
trap - INT TERM HUP
echo "$me: guest a exited $rc_a, guest b $rc_b ($(($(date +%s) - t0)) s)" >&2

if [ "$rc_a" -eq 0 ] && [ "$rc_b" -eq 0 ]; then exit 0; fi
if { [ "$rc_a" -eq 0 ] || [ "$rc_a" -eq 77 ]; } && { [ "$rc_b" -eq 0 ] || [ "$rc_b" -eq 77 ]; }; then
    exit 77
fi
if [ "$rc_a" -ne 0 ] && [ "$rc_a" -ne 77 ]; then exit "$rc_a"; fi
exit "$rc_b"
}
