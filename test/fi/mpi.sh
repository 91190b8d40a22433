#!/bin/bash
# Open MPI, unmodified, over libtmx-fi.so: test/fi/mpi_p2p.c built with mpicc and run with 2 and
# 4 ranks under exactly `--mca pml cm --mca mtl ofi` with FI_PROVIDER=tmx (Open MPI's default
# tag mode, which takes the provider's remote CQ data: ofi_tag_full), and with 2 ranks in
# ofi_tag_1 too. Open MPI's own verbose
# output must say that every rank selected pml cm, mtl ofi and provider tmx, so a silent fall
# back to another transport fails. Skipped (77) without mpicc/mpirun.
. "${TMX_SRCDIR:-$(dirname "$0")/../..}/test/fi/lib.sh"
if ! command -v mpicc >/dev/null || ! command -v mpirun >/dev/null; then
    echo "SKIP: Open MPI (mpicc, mpirun: Debian's openmpi-bin, libopenmpi-dev) is not installed"
    exit 77
fi
if ! mpirun --version 2>/dev/null | grep -q "Open MPI"; then
    echo "SKIP: mpirun is not Open MPI's"
    exit 77
fi
if ! timeout -s KILL 60 mpicc -O1 -o "$T/mpi_p2p" "$S/test/fi/mpi_p2p.c" 2>"$T/cc.err"; then
    cat "$T/cc.err"
    echo "FAIL: mpicc could not build mpi_p2p.c"
    exit 1
fi
# shellcheck source=/dev/null
. "$S/test/fi/mpi_env.sh"
# np, then the tag mode: full (Open MPI's default, which takes the provider's remote CQ data:
# ofi_tag_full) or tag1 (--mca mtl_ofi_tag_mode ofi_tag_1). With FI_LOG_LEVEL=info the
# provider says once per endpoint that a send carried remote CQ data: every rank in full
# mode, none in tag1. tm: full with tmx's tag-matching offload on the soft device (receives
# from 64 bytes offered), where every message with CQ data goes by tmx's rendezvous.
for run in "2 full" "4 full" "2 tag1" "4 tm"; do
    set -- $run
    np=$1
    mode=$2
    extra=(-x FI_LOG_LEVEL=info -x FI_LOG_PROV=tmx)
    want=$np
    if [ "$mode" = tag1 ]; then
        extra+=("${TMX_MPIRUN_TAG1[@]}")
        want=0
    elif [ "$mode" = tm ]; then
        extra+=(-x TMX_SOFT_TM=yes -x TMX_TM_THRESH=64)
    elif [ "$np" = 4 ]; then
        # tmx's info line: how many processes share the rank's CPUs, which Open MPI's
        # OMPI_COMM_WORLD_LOCAL_SIZE told it (TMX_LOCAL_SIZE unset; unbound ranks)
        extra+=(-x TMX_LOG_LEVEL=info)
    fi
    timeout -s KILL 120 mpirun "${TMX_MPIRUN_ARGS[@]}" "${extra[@]}" -np "$np" "$T/mpi_p2p" \
        >"$T/out" 2>&1
    rc=$?
    n_prov=$(grep -c "mtl:ofi:provider: tmx" "$T/out")
    n_cm=$(grep -c "select: component cm selected" "$T/out")
    if [ "$n_prov" -ne "$np" ] || [ "$n_cm" -ne "$np" ]; then
        fail "np $np $mode: $n_prov of $np ranks say provider tmx, $n_cm pml cm (a fallback?)"
    fi
    grep -E "^(ok|FAIL|PASS)" "$T/out"
    if [ "$np" = 4 ] && [ "$mode" = full ] &&
        [ "$(nproc)" -lt "$(getconf _NPROCESSORS_ONLN)" ]; then
        # tmx takes the launcher's count only for a process that may run on every online CPU
        echo "ok: np 4: local size not checked (this process may run on $(nproc) of" \
            "$(getconf _NPROCESSORS_ONLN) online CPUs)"
    elif [ "$np" = 4 ] && [ "$mode" = full ]; then
        n_local=$(grep -c "wait policy .*: 4 processes share our [0-9]* cpus" "$T/out")
        if [ "$n_local" -ne 4 ]; then
            fail "np 4: $n_local of 4 ranks say 4 processes share their cpus" \
                "(OMPI_COMM_WORLD_LOCAL_SIZE not taken for TMX_LOCAL_SIZE?)"
            grep "wait policy" "$T/out"
        else
            ok "np 4: every rank took Open MPI's local size (4) for TMX_LOCAL_SIZE"
        fi
    fi
    n_data=$(grep -c "first send with remote CQ data" "$T/out")
    if [ "$n_data" -ne "$want" ]; then
        fail "np $np $mode: $n_data ranks sent remote CQ data, expected $want"
    fi
    if [ $rc -ne 0 ] || ! grep -q "^PASS: $np ranks" "$T/out"; then
        fail "np $np $mode: exit $rc"
        grep -v "mca\|select" "$T/out" | tail -40
    else
        ok "np $np, tag mode $mode"
    fi
done
# MPI_THREAD_MULTIPLE: Open MPI asks for FI_THREAD_SAFE
if ! timeout -s KILL 60 mpicc -O1 -pthread -o "$T/mpi_threads" "$S/test/fi/mpi_threads.c" \
        2>"$T/cc.err"; then
    cat "$T/cc.err"
    fail "mpicc could not build mpi_threads.c"
else
    timeout -s KILL 120 mpirun "${TMX_MPIRUN_ARGS[@]}" -np 2 "$T/mpi_threads" >"$T/out" 2>&1
    rc=$?
    n_prov=$(grep -c "mtl:ofi:provider: tmx" "$T/out")
    grep -E "^(PASS|FAIL)" "$T/out"
    if [ $rc -ne 0 ] || [ "$n_prov" -ne 2 ] || ! grep -q "^PASS: 2 ranks" "$T/out"; then
        fail "MPI_THREAD_MULTIPLE: exit $rc, $n_prov of 2 ranks on provider tmx"
        grep -v "mca\|select" "$T/out" | tail -40
    else
        ok "MPI_THREAD_MULTIPLE, 2 ranks"
    fi
fi
[ $fails -eq 0 ]
