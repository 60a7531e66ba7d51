#!/usr/bin/env bash
# Builds specd and runs the whole test suite (the README's test command).
#   scripts/test.sh            release build + all tests
#   scripts/test.sh asan       the same under AddressSanitizer + UBSan
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${1:-release}"
scripts/setup.sh
[ -x scripts/fetch-test-assets.sh ] && scripts/fetch-test-assets.sh || true
cmake --preset "$preset"
cmake --build --preset "$preset"
ctest --preset "$preset" -j "$(nproc)"
