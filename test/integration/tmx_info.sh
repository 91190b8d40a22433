#!/usr/bin/env bash
# tmx_info: what it prints with no option (version, providers, devices and their caps), -d,
# -c, and its exit status on a malformed TMX_* variable (1, as tmx_info(1) says) and on a bad
# option (2).
. "$(dirname "$0")/lib.sh"
INFO="$B/tools/tmx_info"
if [ ! -x "$INFO" ]; then
    echo "no tmx_info at $INFO" >&2
    exit 99
fi
# A user's own settings must not change what is tested.
for v in $(env | sed -n 's/^\(TMX_[A-Za-z0-9_]*\)=.*/\1/p'); do
    case $v in TMX_BUILDDIR|TMX_SRCDIR) ;; *) unset "$v" ;; esac
done

# No option: the version, then the providers and the soft device with its capabilities.
run 30 "$INFO"
expect_rc 0 "tmx_info with no option"
for pattern in '^# tmx version ' '^# providers built: .*soft' '^# provider soft' \
               '^#   device ' '^#      caps  ' '^#      max_msg '; do
    if ! grep -q "$pattern" "$T/out"; then
        fail "tmx_info with no option: no line matching '$pattern'"
        sed 's/^/    | /' "$T/out" >&2
    fi
done
if grep -q '^TMX_' "$T/out"; then
    fail "tmx_info with no option printed the configuration table"
fi

run 30 "$INFO" -d
expect_rc 0 "tmx_info -d"
expect_grep "$T/out" '^#   device ' "tmx_info -d lists the devices"

# No usable device (the providers selected have none; here verbs, when it was built, on a
# machine without an RDMA port): -d and the default print what they found and exit 1, as
# tmx_info(1) says. A machine with an RDMA port has a device: exit 0.
for opt in -d ""; do
    # shellcheck disable=SC2086 # an empty $opt is no argument
    run 30 env TMX_PROVIDERS=verbs "$INFO" $opt
    if grep -q '^# providers built: .*verbs' "$T/out"; then
        if grep -q '^#   device ' "$T/out"; then
            expect_rc 0 "TMX_PROVIDERS=verbs tmx_info $opt with an RDMA device"
        else
            expect_rc 1 "TMX_PROVIDERS=verbs tmx_info $opt without a usable device"
            expect_grep "$T/err" 'no usable device' "TMX_PROVIDERS=verbs tmx_info $opt says why"
        fi
    fi
done

run 30 "$INFO" -v
expect_rc 0 "tmx_info -v"
if grep -q '^# provider' "$T/out"; then
    fail "tmx_info -v printed more than the version"
fi

run 30 "$INFO" -c
expect_rc 0 "tmx_info -c"
expect_grep "$T/out" '^TMX_EAGER_MAX=' "tmx_info -c prints the table"

# A malformed variable: the library names it on stderr, tmx_info exits 1 and prints no table.
for opt in -c "" -d -w -a; do
    # shellcheck disable=SC2086 # an empty $opt is no argument
    run 30 env TMX_EAGER_MAX=12q "$INFO" $opt
    expect_rc 1 "TMX_EAGER_MAX=12q tmx_info $opt"
    expect_grep "$T/err" 'TMX_EAGER_MAX' "TMX_EAGER_MAX=12q tmx_info $opt names the variable"
    if grep -q '^TMX_' "$T/out"; then
        fail "TMX_EAGER_MAX=12q tmx_info $opt printed the table"
    fi
done
run 30 env TMX_PROVIDERS=nosuch "$INFO" -c
expect_rc 1 "TMX_PROVIDERS=nosuch tmx_info -c"
expect_grep "$T/err" "nosuch" "TMX_PROVIDERS=nosuch tmx_info -c names the provider"

# Tag-matching offload: software by default; with the soft device as a TM adapter, -d shows
# the capability and -w the device the worker offloads to, with its list size.
run 30 "$INFO" -w
expect_rc 0 "tmx_info -w"
expect_grep "$T/out" '^#   tag matching     software' "tmx_info -w: software matching by default"
run 30 env TMX_SOFT_TM=yes TMX_SOFT_TM_TAGS=16 "$INFO" -w
expect_rc 0 "TMX_SOFT_TM=yes tmx_info -w"
expect_grep "$T/out" '^#   tag matching     offloaded to soft:shm: 16 tags' \
    "TMX_SOFT_TM=yes tmx_info -w: offloaded, 16 tags"
expect_grep "$T/out" '^#   tag list counters offered 0' "TMX_SOFT_TM=yes tmx_info -w: counters"
run 30 env TMX_SOFT_TM=yes TMX_TM_OFFLOAD=no "$INFO" -w
expect_grep "$T/out" '^#   tag matching     software' "TMX_TM_OFFLOAD=no tmx_info -w: software"

# Eager-RDMA ring: the mode a connection into the worker takes, from the device's answer.
expect_grep "$T/out" '^#   tag matching     software' "(offload off again)"
run 30 "$INFO" -w
expect_grep "$T/out" '^#   eager-RDMA ring  whole: ' "tmx_info -w: rings polled on a flag"
expect_grep "$T/out" '^#   ring limits      8 senders at most, 32 slots of 2048 bytes' \
    "tmx_info -w: ring limits"
run 30 env TMX_SOFT_DATA_IN_ORDER=aligned128 "$INFO" -w
expect_grep "$T/out" '^#   eager-RDMA ring  aligned128: ' "aligned128 answer: block stamps"
run 30 env TMX_SOFT_DATA_IN_ORDER=none "$INFO" -w
expect_grep "$T/out" '^#   eager-RDMA ring  imm: ' "no answer: write with immediate"
run 30 env TMX_RING=no "$INFO" -w
expect_grep "$T/out" '^#   eager-RDMA ring  none ' "TMX_RING=no: no ring"

# Offload and XRC together: one worker has both (tagged messages on RC, the rest on XRC); a
# worker that dropped either would show software matching or "xrc off".
run 30 env TMX_SOFT_TM=yes TMX_SOFT_XRC=yes TMX_XRC=yes "$INFO" -w
expect_rc 0 "TMX_SOFT_TM=yes TMX_SOFT_XRC=yes tmx_info -w"
expect_grep "$T/out" '^#   tag matching     offloaded to soft:shm' "TM and XRC: offload on"
expect_grep "$T/out" '^#   xrc              on soft:shm: 2 domains' "TM and XRC: XRC on"
expect_grep "$T/out" 'srqs 3)' "TM and XRC: the TM SRQ and an XRC SRQ per domain"

run 30 "$INFO" -x
expect_rc 2 "tmx_info -x"
run 30 "$INFO" extra
expect_rc 2 "tmx_info extra"

finish
