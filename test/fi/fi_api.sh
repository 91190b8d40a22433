#!/bin/sh
# The libfabric API over libtmx-fi.so, two processes (test/fi/fi_api.c).
. "${TMX_SRCDIR:-$(dirname "$0")/../..}/test/fi/lib.sh"
timeout -s KILL 120 "$B/test/fi/fi_api"
