#!/bin/sh
# The whole suite: unit tests, integration and escape tests (as root and as
# an ordinary user when run as root), the fuzzers for a bounded time (skipped
# with the reason when clang's fuzzer runtime is missing), then the same
# tests under ASan+UBSan.
#
# The pytest passes run in parallel (pytest-xdist), AIRLOCK_TEST_WORKERS
# processes (default 4: most of a test's time is spent waiting on sandboxes,
# so twice the 2 cores of the CI machine keeps them busy), a test file to a
# worker so that a module's fixtures (a test network, a daemon) are made
# once, and the files that share something of the machine's in one group
# (tests/conftest.py: XDIST_SHARED_GROUPS). AIRLOCK_TEST_WORKERS=1 runs them
# one at a time.
set -eu
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
ASAN_BUILD=${ASAN_BUILD:-build-asan}
PYTEST="/usr/bin/python3 -m pytest -q -p no:cacheprovider"
WORKERS=${AIRLOCK_TEST_WORKERS:-4}
if [ "$WORKERS" -gt 1 ]; then
        if ! /usr/bin/python3 -c "import xdist" 2>/dev/null; then
                echo "run-all: pytest-xdist is missing (make deps, or apt-get install python3-pytest-xdist);" \
                        "or AIRLOCK_TEST_WORKERS=1 to run the tests one at a time" >&2
                exit 1
        fi
        PYTEST="$PYTEST -n $WORKERS --dist loadgroup --durations=15"
fi

echo "== unit tests"
meson test -C "$BUILD" --suite unit --print-errorlogs

echo "== integration, escape, daemon and fault tests ($WORKERS at a time)"
$PYTEST tests/integration tests/escape tests/daemon tests/faults

echo "== fuzzers, ${FUZZ_SECONDS:-5} s each over their corpus (clang, -Dfuzz=true)"
FUZZ_SECONDS=${FUZZ_SECONDS:-5} tests/fuzz/run.sh

if [ "${AIRLOCK_SKIP_ASAN:-0}" != 1 ]; then
        echo "== ASan+UBSan build"
        [ -f "$ASAN_BUILD/build.ninja" ] ||
                meson setup "$ASAN_BUILD" -Db_sanitize=address,undefined -Db_lundef=false >/dev/null
        ninja -C "$ASAN_BUILD"
        LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp:print_suppressions=0"
        export LSAN_OPTIONS
        echo "== unit tests under ASan+UBSan"
        ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
                meson test -C "$ASAN_BUILD" --suite unit --print-errorlogs
        # The microvm tier's boots are emulated here (seconds each) and run
        # QEMU and a guest, not Airlock's code: they run in the plain pass
        # only; the host side of their link is in the unit tests above.
        echo "== integration and escape tests under ASan+UBSan, $WORKERS at a time (microvm boots: plain pass only)"
        ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
                AIRLOCK_BUILD="$ASAN_BUILD" $PYTEST -k "not microvm" \
                tests/integration tests/escape tests/daemon tests/faults
fi
