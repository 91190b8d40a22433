#!/usr/bin/env bash
# Quick start 1: from a fresh Debian checkout to a ping-pong table in one command.
# Installs what is missing, builds out of tree in build/ and runs two ranks of tmx_pingpong on
# this machine over the soft device. Afterwards `. build/tmx-env.sh` sets up a shell to build
# programs against build/ (README.md, "A first program").
#
#   scripts/pingpong.sh [tmx_pingpong options]     e.g. scripts/pingpong.sh -t lat -m 1:4096
#
# Environment: CONFIGURE_FLAGS (extra configure options), TMX_* (read by the library, see
# doc/man/tmx_config.7.md), SKIP_DEPS=1 (do not run scripts/install-deps.sh).
set -euo pipefail

# shellcheck source=scripts/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$TMX_ROOT"

if [ "${SKIP_DEPS:-0}" != 1 ]; then
    bash scripts/install-deps.sh --no-lane # the ping-pong needs no qemu guest
fi
tmx_bootstrap
# shellcheck disable=SC2086 # CONFIGURE_FLAGS is a list of words
TMX_REUSE_BUILD=$([ -z "${CONFIGURE_FLAGS:-}" ] && echo 1 || echo 0) \
    tmx_configure build ${CONFIGURE_FLAGS:-}
tmx_say "make -j$(tmx_jobs) in build"
make -C build -s -j"$(tmx_jobs)" </dev/null

for prog in build/tools/tmxrun build/examples/tmx_pingpong; do
    if [ ! -x "$prog" ]; then
        echo "pingpong: $prog was not built" >&2
        exit 1
    fi
done
if [ ! -f build/tmx-env.sh ]; then
    echo "pingpong: build/tmx-env.sh was not written by configure" >&2
    exit 1
fi

tmx_say "build/tools/tmxrun -n 2 build/examples/tmx_pingpong $*"
status=0
build/tools/tmxrun -n 2 build/examples/tmx_pingpong "$@" || status=$?
if [ "$status" -eq 0 ]; then
    # configure wrote it; README.md, "A first program", shows it in use.
    tmx_say "to build your own programs with this build: . build/tmx-env.sh (see README.md)"
fi
exit "$status"
