#!/usr/bin/env bash
# two_guests.sh: tmx across two machines joined by a wire, over verbs. Two qemu guests of
# scripts/rxe-vm2.sh (10.77.0.1 and 10.77.0.2, rxe0 on each one's virtio-net NIC, the NICs
# joined by UDP between the qemu processes); rank 0 in guest A under tmxrun --boot-listen
# 10.77.0.1 --local-ranks 0 --boot-addr-file, rank 1 in guest B started by hand with TMX_RANK,
# TMX_SIZE and that address, as a launcher on another host would start it. Every provider
# built is enabled (TMX_PROVIDERS unset): the soft device must refuse the peer of another
# boot, and the endpoints must go over verbs on rxe0.
#
#   1. tmx_pingpong -t lat,bw -m 1:64K: every size's check round compares every byte
#      received; then each side checks that its log (TMX_LOG_LEVEL=info) names the endpoint's
#      provider verbs on rxe0 and never soft, that its rxe0 sent and received at least the
#      job's packets (hw_counters), and guest A that the two guests' boot ids differ.
#   2. tmx_conformance on the 2 ranks, CONF_SCHEDULES random schedules (default 20 per ring
#      pair; the seed is printed), the same checks of the provider.
#
# Fails if the ranks fell back to another provider, shared one kernel, or lost a byte; skips
# (77, reason printed) where the pair cannot run (scripts/rxe-vm2.sh --check) or the verbs
# provider is not built, or RXE_VM2_LANE=no (scripts/test.sh sets it for its sanitizer build:
# the pair costs about 90 s). Run from the build directory (make check sets TMX_BUILDDIR).
set -uo pipefail
me=two_guests.sh
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
B=$(cd "${TMX_BUILDDIR:-$(pwd)}" && pwd)
schedules=${CONF_SCHEDULES:-20}

if [ -z "${RXE_VM2_SIDE:-}" ]; then
    # on the host: start the pair, this script on both sides
    for f in "$B/tools/tmxrun" "$B/tools/tmx_info" "$B/examples/tmx_pingpong" \
             "$B/test/conformance/tmx_conformance"; do
        [ -x "$f" ] || { echo "$me: $f not built" >&2; exit 99; }
    done
    built=$("$B/tools/tmx_info" 2>/dev/null | sed -n 's/^# providers built: //p')
    case ", $built," in
        *", verbs,"*) ;;
        *) echo "$me: the verbs provider is not built (providers built: ${built:-none}), skipping"
           exit 77 ;;
    esac
    if [ "${RXE_VM_LANE:-yes}" = no ] || [ "${RXE_VM2_LANE:-yes}" = no ]; then
        echo "$me: RXE_VM_LANE=no or RXE_VM2_LANE=no: the soft-RoCE guests are disabled, skipping"
        exit 77
    fi
    srcdir=${TMX_SRCDIR:-$(cd "$here/../.." && pwd)}
    vm2="$srcdir/scripts/rxe-vm2.sh"
    [ -f "$vm2" ] || { echo "$me: no $vm2" >&2; exit 99; }
    unset TMX_PROVIDERS
    export TMX_BUILDDIR="$B" CONF_SCHEDULES="$schedules"
    # each job has a timeout of its own within the guests' (boot, 60 s, 100 s, with room), so
    # that a job that hangs is reported by tmxrun with its output
    exec bash "$vm2" --timeout "${RXE_VM2_TIMEOUT:-240}" -- bash "$here/two_guests.sh" --- \
        bash "$here/two_guests.sh"
fi

side=$RXE_VM2_SIDE
D=${RXE_VM2_DIR:?no RXE_VM2_DIR: run under scripts/rxe-vm2.sh}
T=$(mktemp -d)
fails=0
fail() { echo "FAIL ($side): $*" >&2; fails=$((fails + 1)); }
ok() { echo "ok ($side): $*"; }
hw=/sys/class/infiniband/${RXE_VM_DEV:-rxe0}/ports/1/hw_counters
cnt() { cat "$hw/$1" 2>/dev/null || echo 0; }

unset TMX_PROVIDERS
export TMX_LOG_LEVEL=info
# a guest of one vCPU on a loaded host can leave frames unanswered for half a second (the
# default retransmission budget): a stalled wire, not a dead peer (tmx_config(7))
export TMX_VERBS_ACK_TIMEOUT=${TMX_VERBS_ACK_TIMEOUT:-1}
cat /proc/sys/kernel/random/boot_id >"$D/boot.$side"
# The guest's clock against the host's: a file made in the shared directory gets the host's
# time. Under TCG the kernel calibrates its TSC at boot; on a loaded host a bad calibration
# makes every timer of the guest (rxe's retransmissions, tmx's timeouts) run fast or slow.
clk0=$(date +%s.%N)
touch "$D/clk.$side.0"
clock_report() {
    local g h
    touch "$D/clk.$side.1"
    g=$(echo "$(date +%s.%N) $clk0" | awk '{printf "%.1f", $1 - $2}')
    h=$(echo "$(stat -c %.9Y "$D/clk.$side.1") $(stat -c %.9Y "$D/clk.$side.0")" |
        awk '{printf "%.1f", $1 - $2}')
    echo "# guest $side clock: $g s while the host's ran $h s; $(dmesg | grep -m1 -o 'tsc: Detected.*'), clocksource $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource)"
    if awk -v g="$g" -v h="$h" 'BEGIN {exit !(h > 5 && (g / h > 1.2 || g / h < 0.8))}'; then
        echo "# WARNING (guest $side): its clock is off by more than 20%: rxe's retransmission" \
             "timer and tmx's timeouts with it (scripts/rxe-vm2.sh --clocksource)"
    fi
}

# job N MINPKTS SECONDS CMD...: rank 0 here (side a, under tmxrun) or rank 1 here (side b, by hand),
# then the checks of this side: the status, the provider of the endpoints, rxe's packets.
job() {
    local n=$1 minpkts=$2 secs=$3 rc s0 r0 s1 r1 a t0
    shift 3
    s0=$(cnt sent_pkts) r0=$(cnt rcvd_pkts) t0=$(date +%s)
    if [ "$side" = a ]; then
        "$B/tools/tmxrun" -n 2 --boot-listen "$RXE_VM_IP:0" --local-ranks 0 \
            --boot-addr-file "$D/job$n.addr" --remote-timeout 90 --timeout "$secs" "$@" \
            >"$T/out.$n" 2>"$T/err.$n"
        rc=$?
    else
        a=
        for _ in $(seq 1 900); do
            [ -s "$D/job$n.addr" ] && a=$(cat "$D/job$n.addr") && [ -n "$a" ] && break
            sleep 0.1
        done
        if [ -z "$a" ]; then
            fail "job $n: no bootstrap address from guest A in 90 s"
            return
        fi
        TMX_RANK=1 TMX_SIZE=2 TMX_BOOT_ADDR=$a timeout -s KILL $((secs + 10)) "$@" >"$T/out.$n" \
            2>"$T/err.$n"
        rc=$?
    fi
    s1=$(cnt sent_pkts) r1=$(cnt rcvd_pkts)
    echo "# job $n took $(($(date +%s) - t0)) s"
    grep -v '^\[tmx .* info\]' "$T/err.$n" | sed 's/^/  err: /'
    grep -i 'seed' "$T/out.$n" | head -n 1 | sed 's/^/  out: /'
    if [ "$rc" -eq 0 ]; then
        grep -v '^#' "$T/out.$n" | tail -n 4 | sed 's/^/  out: /'
    else
        sed 's/^/  out: /' "$T/out.$n" # all of it: which case failed or hung
    fi
    [ "$rc" -eq 0 ] && ok "job $n ($(basename "$1")): exit 0" || fail "job $n ($(basename "$1")): exit $rc"
    # the endpoint to the other rank (not the one to itself, which the soft device carries)
    if grep -q 'endpoint to [0-9a-f]*: provider verbs, device rxe0' "$T/err.$n"; then
        ok "job $n: the endpoint to the other guest's rank over verbs on rxe0"
    else
        fail "job $n: no endpoint over verbs on rxe0 in the info log"
    fi
    if grep 'endpoint to [0-9a-f]*: provider' "$T/err.$n" | grep -qv 'provider verbs, device rxe0'; then
        fail "job $n: an endpoint to the peer over another provider: $(grep 'endpoint to [0-9a-f]*: ' \
              "$T/err.$n" | grep -v 'provider verbs' | head -n 1)"
    fi
    # ... while the soft device was there and reachable for this process itself
    if grep -q 'endpoint to [0-9a-f]* (self): provider soft' "$T/err.$n"; then
        ok "job $n: the soft device carried the endpoint to this rank itself and refused the peer"
    else
        fail "job $n: no endpoint to self over the soft device: was it enabled?"
    fi
    if [ $((s1 - s0)) -ge "$minpkts" ] && [ $((r1 - r0)) -ge "$minpkts" ]; then
        ok "job $n: rxe0 sent $((s1 - s0)) and received $((r1 - r0)) packets"
    else
        fail "job $n: rxe0 sent $((s1 - s0)) and received $((r1 - r0)) packets, fewer than $minpkts"
    fi
}

echo "# guest $side: ${RXE_VM_IP:-?}, peer ${RXE_VM_PEER_IP:-?}, boot id $(cat "$D/boot.$side")"
if [ "$side" = a ]; then
    # both providers usable here: the soft device could carry the job if the peer were local
    "$B/tools/tmx_info" >"$T/info" 2>&1
    grep -q '^#   device soft' "$T/info" && grep -q '^#   device rxe0' "$T/info" &&
        ok "soft and verbs (rxe0) devices both usable" ||
        fail "tmx_info does not list both soft and rxe0: $(grep '^#   device\|no devices' "$T/info" | tr '\n' ' ')"
fi

# 17 sizes x (lat 2 x 23 round trips + bw windows): far more than 500 packets each way
job 1 500 60 "$B/examples/tmx_pingpong" -t lat,bw -m 1:64K -n 20 -w 2 -W 8
job 2 200 100 "$B/test/conformance/tmx_conformance" -n "$schedules" -T 30

if [ "$side" = a ]; then
    a=$(cat "$D/boot.a" 2>/dev/null) b=$(cat "$D/boot.b" 2>/dev/null)
    if [ -n "$a" ] && [ -n "$b" ] && [ "$a" != "$b" ]; then
        ok "two kernels: boot ids $a and $b"
    else
        fail "boot ids '$a' and '$b': not two machines"
    fi
fi
clock_report
# what rxe did on the wire, retransmissions and duplicates included (for the log)
echo "# rxe0 counters of guest $side that are not 0: $(cd "$hw" && for f in *; do
    v=$(cat "$f" 2>/dev/null); [ "${v:-0}" != 0 ] && printf '%s=%s ' "$f" "$v"; done)"
rm -rf "$T"
if [ "$fails" -eq 0 ]; then
    echo "PASS ($side): $me"
    exit 0
fi
echo "FAILED ($side): $fails check(s)" >&2
exit 1
