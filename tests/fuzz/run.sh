#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Build the libFuzzer targets with clang and run each one over its checked-in
# corpus for FUZZ_SECONDS (default 60). New inputs go to a scratch directory,
# crashes to build-fuzz/crash-<target>-*. Exits non-zero if a target crashed or
# did not build.
set -eu

cd "$(dirname "$0")/../.."
seconds=${FUZZ_SECONDS:-60}
build=${FUZZ_BUILD_DIR:-build-fuzz}
targets="http socks5 policy api-head"

if [ ! -f "$build/build.ninja" ]; then
        CC=clang meson setup "$build" -Dfuzz=true -Dtests=disabled
fi
for t in $targets; do
        ninja -C "$build" "tests/fuzz/fuzz-$t"
done

status=0
for t in $targets; do
        scratch=$(mktemp -d)
        echo "fuzz-$t: ${seconds}s over tests/fuzz/corpus/$t"
        if ! "$build/tests/fuzz/fuzz-$t" \
                -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
                -print_final_stats=1 -artifact_prefix="$build/crash-$t-" \
                "$scratch" "tests/fuzz/corpus/$t"; then
                echo "fuzz-$t: FAILED (see $build/crash-$t-*)" >&2
                status=1
        fi
        rm -rf "$scratch"
done
exit $status
