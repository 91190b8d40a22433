#!/usr/bin/env bash
# cg_mpi.sh: instructions per MPI call, layer by layer, of Open MPI over tmx (pml cm + mtl ofi +
# libtmx-fi.so) against pml ob1 + vader and pml ucx, counted by callgrind under mpirun
# (load-independent). For each entry point, both ranks of osu_pingpong_mpi run under valgrind
# with collection on only inside that function (--toggle-collect), once with N1 and once with
# N2 iterations; the difference divided by the calls the extra iterations made is the cost of
# one call with everything it calls, start-up and connection left out. See bench/README.md.
#
#   bench/cg_mpi.sh [-s STACKS] [-z SIZE] [-f] BUILDDIR
#     -s STACKS  comma list of tmx, vader, ucx (default: all that Open MPI has)
#     -z SIZE    message size in bytes (default 8)
#     -f         tmx in Open MPI's default tag mode (ofi_tag_full: fi_tsenddata,
#                fi_tinjectdata, directed fi_trecv) instead of mpi_fi.sh's ofi_tag_1
#
# Rows: stack, test (lat: MPI_Send/MPI_Recv ping-pong, 2000 more iterations; bw: windows of 64
# MPI_Isend / MPI_Irecv, 200 more windows = 12800 calls), function, instructions per call on
# rank 0 and rank 1. Functions that wait (MPI_Recv, MPI_Waitall) are left out: their count is
# mostly idle polls, which depend on timing. Never run under chrt (pml ucx).
set -u
stacks=""
size=8
tagmode=ofi_tag_1
while getopts "s:z:fh" opt; do
    case $opt in
        s) stacks=$(echo "$OPTARG" | tr ',' ' ') ;;
        z) size=$OPTARG ;;
        f) tagmode=auto ;;
        *) sed -n '2,20s/^# \{0,1\}//p' "$0"; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
B=$(cd "${1:?usage: cg_mpi.sh [-s STACKS] [-z SIZE] BUILDDIR}" && pwd) || exit 2
here=$(cd "$(dirname "$0")" && pwd)
command -v valgrind >/dev/null || { echo "cg_mpi.sh: valgrind not installed" >&2; exit 77; }
command -v mpicc >/dev/null || { echo "cg_mpi.sh: Open MPI (mpicc) not installed" >&2; exit 77; }
[ -e "$B/src/fi/.libs/libtmx-fi.so" ] || { echo "no libtmx-fi.so in $B" >&2; exit 2; }
[ -n "$stacks" ] || { stacks="tmx vader"; ompi_info 2>/dev/null | grep -q "MCA pml: ucx" && stacks="$stacks ucx"; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export FI_PROVIDER_PATH="$B/src/fi/.libs" LD_LIBRARY_PATH="$B/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
out=$(mktemp -d "${TMPDIR:-/tmp}/cg_mpi.XXXXXX")
mpicc -O2 -g -o "$out/osu" "$here/osu_pingpong_mpi.c" || exit 1
echo "# cg_mpi.sh $(date -u +%FT%TZ) $B, $size B, tmx tag mode $tagmode, $(git -C "$here/.." rev-parse --short HEAD 2>/dev/null)"
printf "%-6s %-4s %-18s %10s %10s\n" stack test function "rank 0" "rank 1"
run() { # args test iters function -> "ir0 ir1"
    local o="$out/cg"
    # shellcheck disable=SC2086
    timeout 600 mpirun -np 2 --bind-to core $1 valgrind --tool=callgrind --collect-atstart=no \
        --toggle-collect="$4" --callgrind-out-file="$o.%q{OMPI_COMM_WORLD_RANK}" \
        "$out/osu" -t "$2" -m "$size:$size" -n "$3" -w 2 -f csv > /dev/null 2> "$out/err" ||
        { echo "cg_mpi.sh: mpirun failed, see $out/err" >&2; echo "0 0"; return; }
    echo "$(awk '/^summary:/ { print $2 }' "$o.0") $(awk '/^summary:/ { print $2 }' "$o.1")"
    rm -f "$o.0" "$o.1"
}
for s in $stacks; do
    case $s in
        tmx) args="--mca pml cm --mca mtl ofi --mca mtl_ofi_tag_mode $tagmode -x FI_PROVIDER=tmx
                   -x FI_PROVIDER_PATH -x LD_LIBRARY_PATH"
             fns="PMPI_Send PMPI_Isend PMPI_Irecv tmx_fi_tinject tmx_fi_tsend tmx_fi_trecv
                  tmx_tag_send_nb tmx_tag_recv_nb tmx_fi_recv_cb"
             [ $tagmode = auto ] && fns=${fns/tmx_fi_tinject tmx_fi_tsend/tmx_fi_tinjectdata tmx_fi_tsenddata} ;;
        vader) args="--mca pml ob1 --mca btl self,vader"; fns="PMPI_Send PMPI_Isend PMPI_Irecv" ;;
        ucx) args="--mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any -x UCX_TLS=sm,self"
             fns="PMPI_Send PMPI_Isend PMPI_Irecv" ;;
        *) echo "cg_mpi.sh: unknown stack $s" >&2; exit 2 ;;
    esac
    for f in $fns; do
        case $f in
            PMPI_Send|tmx_fi_tinject*) tests=lat ;;
            PMPI_Isend|PMPI_Irecv|tmx_fi_tsend*) tests=bw ;;
            *) tests="lat bw" ;;
        esac
        for t in $tests; do
            case $t in lat) n1=1000 n2=3000 calls=2000 ;; bw) n1=100 n2=300 calls=12800 ;; esac
            read -r a0 a1 < <(run "$args" $t $n1 $f)
            read -r b0 b1 < <(run "$args" $t $n2 $f)
            printf "%-6s %-4s %-18s %10.1f %10.1f\n" "$s" $t $f \
                "$(echo "($b0 - $a0) / $calls" | bc -l)" "$(echo "($b1 - $a1) / $calls" | bc -l)"
        done
    done
done
rm -rf "$out"
