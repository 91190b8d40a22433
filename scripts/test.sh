#!/usr/bin/env bash
# Quick start 2, and what CI runs (.ci/run): every test, in up to three builds, and the
# threaded tests in a fourth.
#
#   build/        gcc, --enable-werror                                     make check, then
#                 make install into build/inst and make installcheck (one test)
#   build-san/    gcc, --enable-asan --enable-ubsan --enable-debug, -Werror make check
#   build-clang/  clang, --enable-werror (only when clang is installed)    make check, but not
#                 the verbs lane (test/verbs, soft-RoCE in qemu), which runs in the first two
#   build-tsan/   gcc, --enable-tsan --enable-debug, -Werror               the threaded tests
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
# test-suite.log of every build (a build that does not compile counts as one failure, a
# ThreadSanitizer that cannot start on this machine as one skip); the exit status is non-zero
# when anything failed.
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
        -h|--help) sed -n '2,22s/^# \{0,1\}//p' "$0"; exit 0 ;;
        *)         echo "test: unknown option '$1' (try --help)" >&2; exit 2 ;;
    esac
    shift
done

# Sanitizer reports must fail the test that triggered them, never scroll by: ASan exits
# non-zero on the first error (halt_on_error), LSan reports leaks at exit, UBSan is built with
# -fno-sanitize-recover and also halts here, ThreadSanitizer exits 66 at its first report. The
# settings only matter to sanitized builds.
export TSAN_OPTIONS="halt_on_error=1:exitcode=66:${TSAN_OPTIONS:-}"
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

# build_dir DIR configure-options...: configure and build one build directory; on failure
# counts it and returns non-zero.
build_dir()
{
    local name=$1 dir="$TMX_ROOT/$1"
    shift
    # shellcheck disable=SC2086 # CONFIGURE_FLAGS is a list of words
    if ! tmx_configure "$name" "$@" ${CONFIGURE_FLAGS:-}; then
        failed_builds+=("$name (configure)")
        total_fail=$((total_fail + 1))
        return 1
    fi
    # Results of an earlier run must not be counted as this run's.
    find "$dir" \( -name '*.trs' -o -name 'test-suite.log' \) -delete 2>/dev/null
    tmx_say "make -j$jobs in $name"
    if ! make -C "$dir" -j"$jobs" </dev/null; then
        failed_builds+=("$name (build)")
        total_fail=$((total_fail + 1))
        return 1
    fi
}

# run_build DIR configure-options...: configure, build and check one build directory.
run_build()
{
    build_dir "$@" && check_dir "$1"
}

# check_dir DIR [make-arguments...]: make check in a built directory (with the arguments, e.g.
# TESTS=... to run some tests only), under the command prefix of the array check_prefix, and
# counts the results.
check_dir()
{
    local name=$1 dir="$TMX_ROOT/$1" rc=0
    shift
    tmx_say "${check_prefix[*]+${check_prefix[*]} }make -j$jobs check${*:+ $*} in $name"
    timeout --kill-after=30 "${TMX_CHECK_TIMEOUT:-900}" ${check_prefix[@]+"${check_prefix[@]}"} \
        make -C "$dir" -j"$jobs" check "$@" </dev/null || rc=$?
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
check_prefix=()

# The threaded tests (several threads on one TMX_THREAD_MODE_MULTI worker; and, when the
# libfabric provider is built, test/fi/fi_bad's threads on one FI_THREAD_SAFE domain), and what
# they need built: all the ThreadSanitizer build runs. The other tests are single-threaded, and the
# Criterion unit tests cannot run under TSan (Criterion's inheritable arena clashes with its
# memory layout).
tsan_tests="test/integration/threads_multi.sh"
tsan_programs="test/integration/threads_multi"

# run_tsan_build: build-tsan/, the threaded tests only. ThreadSanitizer runtimes older than
# LLVM 18 (gcc 12's, clang 14's) abort with "FATAL: ThreadSanitizer: unexpected memory mapping"
# when the kernel randomizes mmap over more bits than their layout allows (vm.mmap_rnd_bits >
# 28 on x86-64, the default of some newer distributions); there the tests run with address
# space randomization off (setarch -R), which every process they start inherits. A tsan
# program of the build (tmx_info) is tried first: if it cannot start either way, the build is
# counted as skipped, loudly, rather than failing on the machine.
run_tsan_build()
{
    local name=build-tsan dir="$TMX_ROOT/build-tsan" bits arch probe
    local -a check_prefix=() # seen by check_dir
    build_dir "$name" --enable-tsan --enable-debug --enable-werror || return
    arch=$(uname -m)
    bits=$(cat /proc/sys/vm/mmap_rnd_bits 2>/dev/null || echo 0)
    if [ "$bits" -gt 28 ] && setarch "$arch" -R true 2>/dev/null; then
        check_prefix=(setarch "$arch" -R)
    fi
    probe="$dir/tools/tmx_info"
    if ! ${check_prefix[@]+"${check_prefix[@]}"} "$probe" >/dev/null 2>"$dir/tsan-probe.err" \
       </dev/null; then
        if [ ${#check_prefix[@]} -eq 0 ] && setarch "$arch" -R true 2>/dev/null &&
           setarch "$arch" -R "$probe" >/dev/null 2>"$dir/tsan-probe.err" </dev/null; then
            check_prefix=(setarch "$arch" -R)
        elif grep -q "ThreadSanitizer" "$dir/tsan-probe.err"; then
            cat "$dir/tsan-probe.err"
            echo "$name: ThreadSanitizer programs cannot start here (vm.mmap_rnd_bits=$bits," \
                 "setarch -R did not help): the threaded tests are SKIPPED"
            total_skip=$((total_skip + 1))
            return
        fi
        # any other failure: the tests will show it
    fi
    if [ -e "$dir/src/fi/.libs/libtmx-fi.so" ]; then
        check_dir "$name" TESTS="$tsan_tests test/fi/fi_bad.sh" \
            check_PROGRAMS="$tsan_programs test/fi/fi_bad"
    else
        check_dir "$name" TESTS="$tsan_tests" check_PROGRAMS="$tsan_programs"
    fi
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

# install_check DIR: make install into DIR's own prefix (DIR/inst, given at configure) and make
# installcheck (test/check_install.sh: the README's first program against the installed tmx,
# the man pages installed), counted as one test.
install_check()
{
    local name=$1 dir="$TMX_ROOT/$1"
    tmx_say "make install installcheck in $name (prefix $dir/inst)"
    rm -rf "$dir/inst"
    if make -C "$dir" install >"$dir/install.log" 2>&1 &&
       make -C "$dir" installcheck </dev/null; then
        total_pass=$((total_pass + 1))
        echo "$name: make installcheck passed"
    else
        tail -n 20 "$dir/install.log"
        failed_builds+=("$name (installcheck)")
        total_fail=$((total_fail + 1))
    fi
}

start=$(date +%s)
run_build build --enable-werror --prefix="$TMX_ROOT/build/inst" && install_check build
if [ "$quick" = no ]; then
    # The two-guest test (test/verbs/two_guests.sh, about 90 s) runs in build/ only.
    check_prefix=(env RXE_VM2_LANE=no)
    run_build build-san --enable-asan --enable-ubsan --enable-debug --enable-werror
    check_prefix=()
    if command -v clang >/dev/null 2>&1; then
        # The verbs lane (test/verbs: a qemu guest per test) runs in build/ and build-san/;
        # the clang build has the same code, and skips it to keep CI short.
        check_prefix=(env RXE_VM_LANE=no)
        run_build build-clang CC=clang --enable-werror
        check_prefix=()
    else
        echo "clang not installed: build-clang skipped"
    fi
    run_tsan_build
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
