#!/bin/bash
# libfabric's own client over libtmx-fi.so: fi_pingpong (Debian's libfabric-bin) between two
# processes, `-e rdm` in tagged and in msg mode, every size it offers, data checked (-c).
# Skipped (77) without fi_pingpong.
. "${TMX_SRCDIR:-$(dirname "$0")/../..}/test/fi/lib.sh"
if ! command -v fi_pingpong >/dev/null; then
    echo "SKIP: fi_pingpong (Debian's libfabric-bin) is not installed"
    exit 77
fi
# fi_info lists the provider with its attributes
if ! command -v fi_info >/dev/null; then
    echo "SKIP: fi_info (Debian's libfabric-bin) is not installed"
    exit 77
fi
LD_PRELOAD=$TMX_FI_PRELOAD timeout -s KILL 30 fi_info -p tmx -v >"$T/info" 2>&1
for want in "prov_name: tmx" "type: FI_EP_RDM" "FI_TAGGED" "FI_ORDER_SAS" \
            "mem_tag_format: 0x7fffffffffffffff" "threading: FI_THREAD_DOMAIN"; do
    if grep -q -- "$want" "$T/info"; then
        ok "fi_info -p tmx: $want"
    else
        fail "fi_info -p tmx does not say $want"
    fi
done
if grep -q "FI_REMOTE_CQ_DATA" "$T/info"; then
    fail "fi_info -p tmx offers remote CQ data"
fi
if grep -q "FI_DIRECTED_RECV" "$T/info"; then
    ok "fi_info -p tmx: FI_DIRECTED_RECV by default"
else
    fail "fi_info -p tmx does not offer FI_DIRECTED_RECV"
fi

pp() { # mode port
    local srv i try
    # a port another process holds (the server says "Address already in use"): the next one
    for try in 1 2 3 4 5; do
        # in use already (listening, or a connection's end): not ours to wait for
        while ss -tanH "sport = :$2" 2>/dev/null | grep -q .; do
            set -- "$1" $(($2 + 7))
        done
        LD_PRELOAD=$TMX_FI_PRELOAD timeout -s KILL 60 fi_pingpong -p tmx -e rdm -m "$1" -c \
            -I 20 -B "$2" >"$T/srv" 2>&1 &
        srv=$!
        # the client must not connect before the server listens (a loaded machine starts it
        # late)
        for i in $(seq 200); do
            ss -ltn "sport = :$2" 2>/dev/null | grep -q LISTEN && break
            kill -0 "$srv" 2>/dev/null || break
            sleep 0.05
        done
        if kill -0 "$srv" 2>/dev/null || ! grep -q "Address already in use" "$T/srv"; then
            break
        fi
        wait "$srv"
        echo "port $2 is taken: trying $(($2 + 7))"
        set -- "$1" $(($2 + 7))
    done
    LD_PRELOAD=$TMX_FI_PRELOAD timeout -s KILL 60 fi_pingpong -p tmx -e rdm -m "$1" -c -I 20 \
        -P "$2" 127.0.0.1 >"$T/cli" 2>&1
    local crc=$?
    wait $srv
    local src=$?
    cat "$T/cli"
    # sizes 64 B .. 1 MiB, one line each
    local lines
    lines=$(grep -cE "^[0-9]+[kmg]? +20 +=20 " "$T/cli")
    if [ $crc -ne 0 ] || [ $src -ne 0 ] || [ "$lines" -lt 6 ]; then
        fail "fi_pingpong -m $1: client exit $crc, server exit $src, $lines sizes"
        sed 's/^/  srv | /' "$T/srv"
    else
        ok "fi_pingpong -m $1: $lines sizes, data checked"
    fi
}
# below the kernel's ephemeral ports (32768 and up here), which other tests' connections take
port=$((20000 + $$ % 12000))
pp tagged $port
pp msg $((port + 1))
[ $fails -eq 0 ]
