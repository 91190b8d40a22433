# Sourced (bash): TMX_MPIRUN_ARGS, the mpirun arguments that run Open MPI 4.1 over
# libtmx-fi.so with FI_PROVIDER_PATH and LD_LIBRARY_PATH as lib.sh set them. Open MPI 4.1's
# mtl ofi asks for FI_DIRECTED_RECV, which the provider honours; ofi_tag_1 must be chosen
# because the provider has no remote CQ data and Open MPI's auto mode gives up at its first
# query (tmx_fi(7)). --mca mtl_base_verbose 100 makes every rank print the provider it uses.
TMX_MPIRUN_ARGS=(--oversubscribe --bind-to none
    --mca pml cm --mca mtl ofi --mca mtl_ofi_tag_mode ofi_tag_1
    --mca mtl_base_verbose 100 --mca pml_base_verbose 100
    -x FI_PROVIDER=tmx
    -x FI_PROVIDER_PATH="$FI_PROVIDER_PATH" -x LD_LIBRARY_PATH="$LD_LIBRARY_PATH")
if [ -n "${TMX_FI_PRELOAD:-}" ]; then
    TMX_MPIRUN_ARGS+=(-x LD_PRELOAD="$TMX_FI_PRELOAD" -x ASAN_OPTIONS)
fi
if [ "$(id -u)" = 0 ]; then
    TMX_MPIRUN_ARGS+=(--allow-run-as-root)
fi
