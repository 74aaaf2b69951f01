#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Build the libFuzzer targets with clang (meson setup -Dfuzz=true) and run
# each one over its checked-in corpus for FUZZ_SECONDS (default 60). New
# inputs go to a scratch directory, crashes to $build/crash-<target>-*.
# Exits non-zero if a target crashed or did not build; exits 0 with
# "skipped: ..." when clang or its fuzzer runtime (libclang-rt-14-dev) is
# missing, so that a machine without them still runs the rest of the suite.
set -eu

cd "$(dirname "$0")/../.."
seconds=${FUZZ_SECONDS:-60}
build=${FUZZ_BUILD_DIR:-build-fuzz}
targets=${FUZZ_TARGETS:-"http socks5 policy api-head control ws tar toolproto dns sni image-layer hwproto agent-stream gitconfig base64"}

probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
printf 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n);\nint LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { return 0; }\n' >"$probe/p.c"
if ! command -v clang >/dev/null 2>&1; then
        echo "fuzz: skipped: clang is not installed (apt-get install clang libclang-rt-14-dev)"
        exit 0
fi
if ! clang -fsanitize=fuzzer,address,undefined -o "$probe/p" "$probe/p.c" >"$probe/log" 2>&1; then
        echo "fuzz: skipped: clang cannot link -fsanitize=fuzzer (apt-get install libclang-rt-14-dev):"
        sed 's/^/  /' "$probe/log" | head -5
        exit 0
fi

if [ ! -f "$build/build.ninja" ]; then
        CC=clang meson setup "$build" -Dfuzz=true -Dtests=disabled >/dev/null
fi
for t in $targets; do
        ninja -C "$build" "tests/fuzz/fuzz-$t" >/dev/null
done

status=0
for t in $targets; do
        scratch=$(mktemp -d "$probe/corpus-$t.XXXXXX")
        echo "fuzz-$t: ${seconds}s over tests/fuzz/corpus/$t"
        if ! "$build/tests/fuzz/fuzz-$t" \
                -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
                -print_final_stats=1 -artifact_prefix="$build/crash-$t-" \
                "$scratch" "tests/fuzz/corpus/$t" >"$probe/$t.log" 2>&1; then
                tail -40 "$probe/$t.log" >&2
                echo "fuzz-$t: FAILED (see $build/crash-$t-*)" >&2
                status=1
        else
                grep -E '^stat::number_of_executed_units|^stat::peak_rss_mb' "$probe/$t.log" |
                        sed "s/^/  fuzz-$t /" || true
        fi
done
exit $status
