#!/usr/bin/env bash
# bench/cg_verbs.sh [BUILDDIR]: instructions per message of tmx over the verbs provider,
# counted by callgrind inside the soft-RoCE guest of scripts/rxe-vm.sh (valgrind runs there
# from the host's root, shared read-only; no device is needed on the host). Load-independent:
# use it where the guest's timings move with the host's load.
#
# Rank CG_RANK (0) of `tmx_pingpong -t lat -m SIZE:SIZE -n ITERS` (TMX_PROVIDERS=verbs,
# TMX_WAIT=spin) runs under valgrind --tool=callgrind, the other rank natively; then, on the
# host, the inclusive instructions and calls of the functions on the message path, per call:
#   tmx_tag_send                 a blocking send: the core, the provider and rxe's post (with
#                                its write system call's user side)
#   tmx_proto_rx                 a received message: protocol, matching, completion
#   tmx_verbs_convert            a completion converted by the provider
#   tmx_iface_repost_rx          receive buffers posted again (calls: chains)
#   tmx_verbs_srq_post_recv      the provider's SRQ posts
#   tmx_verbs_send_inline        a small message's send in the provider (prov.h send_inline:
#                                the compact EAGER; rxe's post included)
#   tmx_request_wait             a blocking wait (all its progress rounds)
#   tmx_worker_progress_locked   a progress round outside tmx_request_wait (its own rounds and
#                                quiet polls are inline there: h-verbs5)
#   tmx_verbs_cq_poll            a poll of the CQ (mostly idle ones: the spin while waiting;
#                                how many depends on timing, their cost per poll does not)
#
# Environment: SIZE (8), ITERS (500), CG_RANK (the rank counted, 0 or 1; with PP_ARGS="-t bw"
# rank 0 sends the windows and rank 1 receives them), CG_OUT (a directory to keep the
# callgrind files in; default a temporary one under BUILDDIR, removed), PP_ARGS (more
# tmx_pingpong options), SLOW_PEER=1 (the other rank runs under callgrind too: the counted one
# then waits for each reply through many idle rounds, so that "wait per progress round" below
# is about an idle round's cost; the difference of two runs, with and without, gives it
# exactly: the same messages, more rounds). "(wait per progress round)": tmx_request_wait's
# instructions over the calls of tmx_verbs_cq_poll (one per round or quiet poll).
# Exit 77 with the reason where the guest or valgrind cannot run.
set -uo pipefail
{
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
B=$(cd "${1:-${TMX_BUILDDIR:-$(pwd)}}" && pwd)
size=${SIZE:-8}
iters=${ITERS:-500}

if [ "${RXE_VM:-0}" = 1 ]; then
    # in the guest: $CG_DIR is shared read-write
    cd "$CG_DIR" || exit 99
    # shellcheck disable=SC2016,SC2086 # the inner script expands in the rank's shell
    env TMX_PROVIDERS=verbs TMX_WAIT=spin CG_SLOW_PEER="${SLOW_PEER:-0}" CG_RANK="${CG_RANK:-0}" \
        "$B/tools/tmxrun" -n 2 --timeout 1200 sh -c '
        if [ "$TMX_RANK" = "$CG_RANK" ]; then
            exec valgrind --tool=callgrind --trace-children=yes \
                --callgrind-out-file="$CG_DIR/cg.%p" "$0" "$@" 2>"$CG_DIR/valgrind.err"
        fi
        if [ "$CG_SLOW_PEER" = 1 ]; then
            exec valgrind --tool=callgrind --trace-children=yes \
                --callgrind-out-file="$CG_DIR/peer.%p" "$0" "$@" 2>"$CG_DIR/valgrind1.err"
        fi
        exec "$0" "$@"' "$B/examples/tmx_pingpong" -t lat -m "$size:$size" -n "$iters" \
        ${PP_ARGS:-}
    exit $?
fi

if ! command -v valgrind >/dev/null 2>&1 || ! command -v callgrind_annotate >/dev/null 2>&1; then
    echo "cg_verbs.sh: valgrind (callgrind) is not installed" >&2
    exit 77
fi
vm="$here/../scripts/rxe-vm.sh"
keep=${CG_OUT:-}
if [ -n "$keep" ]; then
    mkdir -p "$keep" && dir=$(cd "$keep" && pwd)
else
    dir=$(mktemp -d "$B/.cg_verbs.XXXXXX") || exit 1
    trap 'rm -rf "$dir"' EXIT
fi
echo "# host load average before: $(cut -d' ' -f1-3 /proc/loadavg) (instruction counts do not" \
     "depend on it)"
bash "$vm" --timeout 1500 --rw "$dir" -- env CG_DIR="$dir" SIZE="$size" ITERS="$iters" \
    PP_ARGS="${PP_ARGS:-}" SLOW_PEER="${SLOW_PEER:-0}" CG_RANK="${CG_RANK:-0}" \
    bash "$here/cg_verbs.sh" "$B"
rc=$?
[ "$rc" = 0 ] || { echo "cg_verbs.sh: the guest run failed ($rc)" >&2; exit "$rc"; }
# the tmx_pingpong process's file (the libtool wrapper and the shells have their own)
f=$(grep -l '^cmd:.*tmx_pingpong' "$dir"/cg.* 2>/dev/null | xargs -r ls -S | head -n 1)
if [ -z "$f" ]; then
    echo "cg_verbs.sh: no callgrind output of tmx_pingpong in $dir" >&2
    exit 99
fi
echo "# $(sed -n 's/^cmd: *//p' "$f" | sed 's|.*/||'), rank ${CG_RANK:-0}, $(grep -m1 '^totals:' "$f")"
printf "%-28s %12s %8s %10s\n" function Ir calls "Ir/call"
# from /: callgrind_annotate shortens paths under its working directory, and then drops some
# callers (their calls would be lost)
(cd / && callgrind_annotate --inclusive=yes --tree=caller --threshold=100 "$f" 2>/dev/null) |
    awk '/^ *[0-9,]+ \([ 0-9.]+%\)  < / {c = $0; sub(/.*\(/, "", c); sub(/x\).*/, "", c)
                                         gsub(",", "", c); calls += c; next}
         /^ *[0-9,]+ \([ 0-9.]+%\)  \* / {v = $1; gsub(",", "", v); fn = $(NF - 1)
                                          if ($NF !~ /^\[/) fn = $NF
                                          sub(/.*:/, "", fn)
                                          if (fn ~ /^(tmx_tag_send|tmx_proto_rx|tmx_verbs_convert|tmx_iface_repost_rx|tmx_verbs_srq_post_recv|tmx_worker_progress_locked|tmx_request_wait|tmx_verbs_post_send|tmx_verbs_send_inline|tmx_verbs_cq_poll)$/ && !(fn in seen)) {
                                              seen[fn] = 1
                                              printf "%-28s %12d %8d %10.1f\n", fn, v, calls, calls ? v / calls : 0
                                              if (fn == "tmx_request_wait") wait_ir = v
                                              if (fn == "tmx_verbs_cq_poll") rounds = calls
                                          }
                                          calls = 0; next}
         /^$/ {calls = 0}
         END {if (rounds) printf "%-28s %12d %8d %10.1f\n", "(wait per progress round)",
                                 wait_ir, rounds, wait_ir / rounds}'
[ -n "$keep" ] && echo "# callgrind files in $dir ($(basename "$f"): tmx_pingpong)"
exit 0
}
