# Sourced (bash): TMX_MPIRUN_ARGS, the mpirun arguments that run Open MPI 4.1 over
# libtmx-fi.so with FI_PROVIDER_PATH and LD_LIBRARY_PATH as lib.sh set them: exactly
# `--mca pml cm --mca mtl ofi -x FI_PROVIDER=tmx -x FI_PROVIDER_PATH=...` (README, tmx_fi(7)).
# Open MPI's default tag mode ("auto") finds the provider's remote CQ data and
# FI_DIRECTED_RECV and picks ofi_tag_full: the source rank travels as CQ data. Add
# TMX_MPIRUN_TAG1 for the other mode (the source rank in the tag). --mca mtl_base_verbose 100
# makes every rank print the provider it uses.
TMX_MPIRUN_ARGS=(--oversubscribe --bind-to none
    --mca pml cm --mca mtl ofi
    --mca mtl_base_verbose 100 --mca pml_base_verbose 100
    -x FI_PROVIDER=tmx
    -x FI_PROVIDER_PATH="$FI_PROVIDER_PATH" -x LD_LIBRARY_PATH="$LD_LIBRARY_PATH")
TMX_MPIRUN_TAG1=(--mca mtl_ofi_tag_mode ofi_tag_1)
if [ -n "${TMX_FI_PRELOAD:-}" ]; then
    TMX_MPIRUN_ARGS+=(-x LD_PRELOAD="$TMX_FI_PRELOAD" -x ASAN_OPTIONS)
fi
if [ "$(id -u)" = 0 ]; then
    TMX_MPIRUN_ARGS+=(--allow-run-as-root)
fi
