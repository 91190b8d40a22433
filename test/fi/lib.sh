# Sourced by the test/fi scripts: the environment that makes libfabric load the provider from
# the build tree (src/fi/.libs/libtmx-fi.so, which needs libtmx.so from .libs).
set -u
B=${TMX_BUILDDIR:-$(pwd)}
FI_PROVIDER_PATH="$B/src/fi/.libs"
LD_LIBRARY_PATH="$B/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export FI_PROVIDER_PATH LD_LIBRARY_PATH
if [ ! -e "$FI_PROVIDER_PATH/libtmx-fi.so" ]; then
    echo "SKIP: libtmx-fi.so was not built (configure --enable-fi-provider)"
    exit 77
fi
# A sanitized provider loaded into an unsanitized program needs the runtime first.
tmx_fi_preload() {
    local lib
    for lib in asan ubsan; do
        if grep -q -- "-fsanitize=address" "$B/Makefile" 2>/dev/null && [ $lib = asan ]; then
            printf '%s ' "$(${CC:-gcc} -print-file-name=libasan.so)"
        fi
    done
}
