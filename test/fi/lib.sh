# Sourced by the test/fi scripts: the environment that makes libfabric load the provider from
# the build tree (src/fi/.libs/libtmx-fi.so, which needs libtmx.so from .libs). Every command
# that may block runs under a hard timeout.
set -u
B=${TMX_BUILDDIR:-$(pwd)}
S=${TMX_SRCDIR:-$B/..}
FI_PROVIDER_PATH="$B/src/fi/.libs"
LD_LIBRARY_PATH="$B/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export FI_PROVIDER_PATH LD_LIBRARY_PATH
if [ ! -e "$FI_PROVIDER_PATH/libtmx-fi.so" ]; then
    echo "SKIP: libtmx-fi.so was not built (configure --enable-fi-provider)"
    exit 77
fi
T=$(mktemp -d "${TMPDIR:-/tmp}/tmx-fi.XXXXXX")
trap 'rm -rf "$T"' EXIT

# A provider built with AddressSanitizer, loaded into programs that are not (fi_pingpong, Open
# MPI's ranks), needs the runtime loaded first: TMX_FI_PRELOAD names it, or is empty.
TMX_FI_PRELOAD=
if grep -q '^TMX_CFLAGS = .*-fsanitize=address' "$B/Makefile" 2>/dev/null; then
    cc=$(sed -n 's/^CC = //p' "$B/Makefile")
    TMX_FI_PRELOAD=$(${cc:-cc} -print-file-name=libasan.so 2>/dev/null)
    [ -e "$TMX_FI_PRELOAD" ] || TMX_FI_PRELOAD=
    # the programs' own leaks (Open MPI's) are not ours to report; the last setting wins, so
    # it goes after what scripts/test.sh set
    ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
    export ASAN_OPTIONS
fi

fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { echo "ok: $*"; }
