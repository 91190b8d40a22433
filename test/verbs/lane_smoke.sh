#!/bin/sh
# lane_smoke.sh: proves that the soft-RoCE lane (scripts/rxe-vm.sh) really gives a working
# kernel RDMA stack: in the guest, ibv_devices lists the rxe device, ibv_devinfo shows its
# port ACTIVE on Ethernet, GID 1 is the RoCE v2 IPv4 GID of the dummy netdev, and two
# processes exchange data through it with RC, UD and SRQ queue pairs (ibv_*_pingpong, received
# buffers checked) and, when perftest is installed, RDMA WRITE and READ (ib_write_bw,
# ib_read_lat). Skips (77) when the guest cannot run here, fails when it runs and rxe does not
# work. Prints the times of the guest (qemu start to exit, boot and rxe set-up) and in all.
#
# On the host this script starts the guest and runs itself inside it (RXE_VM=1).
if [ "${RXE_VM:-0}" != 1 ]; then
    t0=$(date +%s%N)
    RXE_VM_TIMING=1 sh "$(dirname "$0")/in_vm.sh" sh "$0"
    rc=$?
    t1=$(date +%s%N)
    ms=$(( (t1 - t0) / 1000000 ))
    echo "lane_smoke: $((ms / 1000)).$(printf %03d $((ms % 1000))) s in all, exit $rc"
    exit $rc
fi

dev=${RXE_VM_DEV:-rxe0}
ip=${RXE_VM_IP:-10.77.0.1}
gidx=${RXE_VM_GID_INDEX:-1}
T=$(mktemp -d)
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { echo "ok: $*"; }
show() { sed 's/^/    | /' "$@"; }

# ready PORT PID: the server PID listens on the TCP port it exchanges its address on (false
# when it has exited, or after 20 s).
ready() {
    end=$(($(date +%s) + 20))
    while [ -z "$(ss -Hltn "sport = :$1" 2>/dev/null)" ]; do
        kill -0 "$2" 2>/dev/null && [ "$(date +%s)" -lt $end ] || return 1
        sleep 0.1
    done
}

# pair NAME PORT CMD...: CMD as a server in the background, then CMD as its client; both must
# exit 0 within 30 s. The client's output is in $T/NAME.client.
pair() {
    name=$1 port=$2
    shift 2
    p0=$(date +%s%N)
    timeout -s KILL 30 "$@" >"$T/$name.server" 2>&1 &
    spid=$!
    if ! ready "$port" $spid; then
        fail "$name: the server does not listen on port $port"
        show "$T/$name.server"
        kill -9 $spid 2>/dev/null
        wait $spid 2>/dev/null
        return
    fi
    timeout -s KILL 30 "$@" "$ip" >"$T/$name.client" 2>&1
    crc=$?
    wait $spid
    src=$?
    if [ $crc -eq 0 ] && [ $src -eq 0 ]; then
        ok "$name ($((($(date +%s%N) - p0) / 1000000)) ms):" \
           "$(grep -E 'usec/iter|^ *[0-9]+ +[0-9]+ ' "$T/$name.client" | tail -n 1 | tr -s ' \t' ' ')"
    else
        fail "$name: client exit $crc, server exit $src"
        echo "    server:"; show "$T/$name.server"
        echo "    client:"; show "$T/$name.client"
    fi
}

if ibv_devices >"$T/devices" 2>&1 && grep -qw "$dev" "$T/devices"; then
    ok "ibv_devices lists $dev"
else
    fail "ibv_devices does not list $dev"
    show "$T/devices"
fi
ibv_devinfo -d "$dev" >"$T/devinfo" 2>&1
if grep -q 'state:.*PORT_ACTIVE' "$T/devinfo" && grep -q 'link_layer:.*Ethernet' "$T/devinfo"; then
    ok "ibv_devinfo: $dev port 1 PORT_ACTIVE, link layer Ethernet"
else
    fail "ibv_devinfo: $dev port 1 is not ACTIVE on Ethernet"
    show "$T/devinfo"
fi
gid=$(cat "/sys/class/infiniband/$dev/ports/1/gids/$gidx" 2>&1)
gtype=$(cat "/sys/class/infiniband/$dev/ports/1/gid_attrs/types/$gidx" 2>&1)
# ::ffff:10.77.0.1 is 0000:...:ffff:0a4d:0001
# shellcheck disable=SC2086 # split into the four numbers of the address
want=$(IFS=.; printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' $ip)
if [ "$gid" = "$want" ] && [ "$gtype" = "RoCE v2" ]; then
    ok "GID $gidx is $gid ($gtype)"
else
    fail "GID $gidx is '$gid' ($gtype), expected $want (RoCE v2)"
fi

pair rc_pingpong 18515 ibv_rc_pingpong -d "$dev" -g "$gidx" -p 18515 -n 200 -s 4096 -c
pair ud_pingpong 18516 ibv_ud_pingpong -d "$dev" -g "$gidx" -p 18516 -n 200 -s 1024 -c
pair srq_pingpong 18517 ibv_srq_pingpong -d "$dev" -g "$gidx" -p 18517 -n 200 -s 4096 -q 4 -c
if command -v ib_write_bw >/dev/null 2>&1; then
    pair ib_write_bw 18518 ib_write_bw -d "$dev" -x "$gidx" -p 18518 -n 200 -s 65536
    pair ib_read_lat 18519 ib_read_lat -d "$dev" -x "$gidx" -p 18519 -n 200 -s 8
else
    echo "skip: RDMA WRITE/READ (ib_write_bw, ib_read_lat): perftest is not installed"
fi

rm -rf "$T"
if [ $fails -gt 0 ]; then
    echo "lane_smoke: $fails check(s) failed"
    exit 1
fi
echo "lane_smoke: rxe works"
exit 0
