#!/usr/bin/env bash
# cg_small.sh: instructions per small message and per idle poll, tmx API and libfabric plugin,
# counted by callgrind (load-independent: use it where timing is disturbed). Builds
# bench/cg_small.c against BUILDDIR's libtmx (and libfabric when the plugin is built), runs each
# mode under valgrind --tool=callgrind with only the measured loop collected, and prints
# instructions per operation. See bench/README.md.
#
#   bench/cg_small.sh [-n N] [-s SIZES] [-k] BUILDDIR
#     -n N      iterations of each loop (default 2000; a round trip is 2 messages; the
#               window modes run N/16 windows of CG_WINDOW (64) messages each)
#     -s SIZES  comma list of message sizes (default 8,64,1024)
#     -k        keep the callgrind.out files (their directory is printed)
set -u
n=2000
sizes="8 64 1024"
keep=0
while getopts "n:s:kh" opt; do
    case $opt in
        n) n=$OPTARG ;;
        s) sizes=$(echo "$OPTARG" | tr ',' ' ') ;;
        k) keep=1 ;;
        *) sed -n '2,13s/^# \{0,1\}//p' "$0"; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
B=$(cd "${1:?usage: cg_small.sh [-n N] [-s SIZES] [-k] BUILDDIR}" && pwd) || exit 2
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/.." && pwd)
command -v valgrind >/dev/null || { echo "cg_small.sh: valgrind not installed" >&2; exit 77; }
out=$(mktemp -d "${TMPDIR:-/tmp}/cg_small.XXXXXX")
flags=(-O2 -g -I"$src/include" -I"$B/include")
libs=(-L"$B/.libs" -ltmx "-Wl,-rpath,$B/.libs")
[ -e /usr/include/valgrind/callgrind.h ] && flags+=(-DCG_HAVE_CALLGRIND)
modes="tmx-idle tmx-msg tmx-win"
if [ -e "$B/src/fi/.libs/libtmx-fi.so" ] && [ -e /usr/include/rdma/fabric.h ]; then
    flags+=(-DCG_HAVE_FI)
    libs+=(-lfabric)
    modes="$modes fi-idle fi-msg fi-win"
    export FI_PROVIDER_PATH="$B/src/fi/.libs" FI_PROVIDER=tmx
fi
cc "${flags[@]}" -o "$out/cg_small" "$here/cg_small.c" "${libs[@]}" || exit 1
export LD_LIBRARY_PATH="$B/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
echo "# cg_small.sh $(date -u +%FT%TZ) $B, n=$n, $(git -C "$src" rev-parse --short HEAD 2>/dev/null)"
printf "%-9s %6s %8s %12s %14s %12s\n" mode size polls Ir "Ir/op" "Ir/poll"
for m in $modes; do
    for z in $sizes; do
        case $m in *idle) [ "$z" = "${sizes%% *}" ] || continue ;; esac
        f="$out/callgrind.out.$m.$z"
        iters=$n
        case $m in *win) iters=$(( (n + 15) / 16 )) ;; esac  # windows of CG_WINDOW messages
        CG_SIZE=$z valgrind --tool=callgrind --collect-atstart=no --callgrind-out-file="$f" \
            "$out/cg_small" "$m" "$iters" > "$out/$m.$z.txt" 2> "$out/$m.$z.err" ||
            { echo "$m $z failed, see $out/$m.$z.err" >&2; continue; }
        ir=$(awk '/^summary:/ { print $2 }' "$f")
        polls=$(awk '{ for (i = 1; i < NF; i++) if ($i == "polls") print $(i + 1) }' \
            "$out/$m.$z.txt")
        case $m in
            *win) printf "%-9s %6s %8s %12s %14.1f %12s\n" "$m" "$z" "$polls" "$ir" \
                      "$(echo "$ir / ($iters * ${CG_WINDOW:-64})" | bc -l)" "(per msg)" ;;
            *idle) printf "%-9s %6s %8s %12s %14.1f %12.1f\n" "$m" - "$polls" "$ir" \
                       "$(echo "$ir / $n" | bc -l)" "$(echo "$ir / $polls" | bc -l)" ;;
            *) printf "%-9s %6s %8s %12s %14.1f %12s\n" "$m" "$z" "$polls" "$ir" \
                   "$(echo "$ir / (2 * $n)" | bc -l)" "(per msg)" ;;
        esac
    done
done
if [ $keep = 1 ]; then echo "# callgrind outputs in $out"; else rm -rf "$out"; fi
