#!/usr/bin/env bash
# Quick start 2, and what CI runs (.ci/run): every test, in up to three builds.
#
#   build/        gcc, --enable-werror                                     make check
#   build-san/    gcc, --enable-asan --enable-ubsan --enable-debug, -Werror make check
#   build-clang/  clang, --enable-werror (only when clang is installed)    make check
#
#   scripts/test.sh [--quick] [--no-deps] [-j N]
#
#   --quick    the first build only
#   --no-deps  do not run scripts/install-deps.sh
#   -j N       parallel make jobs (default 2, what CI machines have)
#
# Environment: CONFIGURE_FLAGS (added to every configure), TMX_CHECK_TIMEOUT (seconds one
# `make check` may take, default 900).
# The last line of output is always "N passed, N failed, N skipped", counted from the automake
# test-suite.log of every build (a build that does not compile counts as one failure); the
# exit status is non-zero when anything failed.
set -uo pipefail

# shellcheck source=scripts/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$TMX_ROOT" || exit 1

quick=no
deps=yes
jobs=2
while [ $# -gt 0 ]; do
    case "$1" in
        --quick)   quick=yes ;;
        --no-deps) deps=no ;;
        -j)        jobs=${2:?-j needs a number}; shift ;;
        -j*)       jobs=${1#-j} ;;
        -h|--help) sed -n '2,18s/^# \{0,1\}//p' "$0"; exit 0 ;;
        *)         echo "test: unknown option '$1' (try --help)" >&2; exit 2 ;;
    esac
    shift
done

# Sanitizer reports must fail the test that triggered them, never scroll by: ASan exits
# non-zero on the first error (halt_on_error), LSan reports leaks at exit, UBSan is built with
# -fno-sanitize-recover and also halts here. The settings only matter to sanitized builds.
export ASAN_OPTIONS="detect_leaks=1:halt_on_error=1:abort_on_error=0:exitcode=1:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:exitcode=1:${UBSAN_OPTIONS:-}"
export LSAN_OPTIONS="exitcode=1:suppressions=$TMX_ROOT/scripts/lsan.supp:${LSAN_OPTIONS:-}"
# Criterion workers normally _exit() right after a test, which skips LeakSanitizer's check at
# exit; this makes them exit normally so leaks in a unit test are reported.
export CRITERION_NO_EARLY_EXIT=1
export TERM=${TERM:-dumb}

total_pass=0
total_fail=0
total_skip=0
failed_builds=()

# count_results DIR: adds DIR's test results to the totals. test-suite.log holds the counts of
# exactly the tests of this run (the harness writes it at the end); when it is missing (make
# check stopped early), the .trs files written during this run are summed instead.
count_results()
{
    local dir=$1 pass=0 fail=0 skip=0 log="$1/test-suite.log"
    if [ -f "$log" ]; then
        read -r pass fail skip < <(awk '
            /^# PASS:/  { p += $3 } /^# XFAIL:/ { p += $3 }
            /^# FAIL:/  { f += $3 } /^# XPASS:/ { f += $3 } /^# ERROR:/ { f += $3 }
            /^# SKIP:/  { s += $3 }
            END { printf "%d %d %d\n", p, f, s }' "$log")
    else
        read -r pass fail skip < <(find "$dir" -name '*.trs' -exec cat {} + 2>/dev/null | awk '
            /^:test-result: (PASS|XFAIL)/       { p++ }
            /^:test-result: (FAIL|XPASS|ERROR)/ { f++ }
            /^:test-result: SKIP/               { s++ }
            END { printf "%d %d %d\n", p, f, s }')
    fi
    total_pass=$((total_pass + pass))
    total_fail=$((total_fail + fail))
    total_skip=$((total_skip + skip))
    echo "$dir: $pass passed, $fail failed, $skip skipped"
}

# run_build DIR configure-options...: configure, build and check one build directory.
run_build()
{
    local name=$1 dir="$TMX_ROOT/$1" rc=0
    shift
    # shellcheck disable=SC2086 # CONFIGURE_FLAGS is a list of words
    if ! tmx_configure "$name" "$@" ${CONFIGURE_FLAGS:-}; then
        failed_builds+=("$name (configure)")
        total_fail=$((total_fail + 1))
        return
    fi
    # Results of an earlier run must not be counted as this run's.
    find "$dir" \( -name '*.trs' -o -name 'test-suite.log' \) -delete 2>/dev/null
    tmx_say "make -j$jobs in $name"
    if ! make -C "$dir" -j"$jobs" </dev/null; then
        failed_builds+=("$name (build)")
        total_fail=$((total_fail + 1))
        return
    fi
    tmx_say "make -j$jobs check in $name"
    timeout --kill-after=30 "${TMX_CHECK_TIMEOUT:-900}" \
        make -C "$dir" -j"$jobs" check </dev/null || rc=$?
    if [ "$rc" -ne 0 ]; then
        if [ -f "$dir/test-suite.log" ]; then
            tmx_say "$name/test-suite.log"
            cat "$dir/test-suite.log"
        fi
        if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
            echo "$name: make check timed out after ${TMX_CHECK_TIMEOUT:-900} s"
            failed_builds+=("$name (timeout)")
            total_fail=$((total_fail + 1))
        elif [ ! -f "$dir/test-suite.log" ]; then
            # make check failed before the harness ran: check programs did not compile.
            failed_builds+=("$name (check programs)")
            total_fail=$((total_fail + 1))
        fi
    fi
    count_results "$dir"
}

if [ "$deps" = yes ]; then
    if ! bash scripts/install-deps.sh; then
        failed_builds+=("install-deps")
        total_fail=$((total_fail + 1))
    fi
fi
if ! tmx_bootstrap; then
    echo "bootstrap (autoreconf) failed"
    echo "0 passed, 1 failed, 0 skipped"
    exit 1
fi

start=$(date +%s)
run_build build --enable-werror
if [ "$quick" = no ]; then
    run_build build-san --enable-asan --enable-ubsan --enable-debug --enable-werror
    if command -v clang >/dev/null 2>&1; then
        run_build build-clang CC=clang --enable-werror
    else
        echo "clang not installed: build-clang skipped"
    fi
fi

echo "total time: $(($(date +%s) - start)) s"
if [ "${#failed_builds[@]}" -gt 0 ]; then
    echo "failed steps: ${failed_builds[*]}"
fi
echo "$total_pass passed, $total_fail failed, $total_skip skipped"
if [ "$total_fail" -gt 0 ] || [ "${#failed_builds[@]}" -gt 0 ]; then
    exit 1
fi
exit 0
