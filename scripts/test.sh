#!/usr/bin/env bash
# Builds specd and runs the whole test suite (the README's test command).
#   scripts/test.sh            release build + all tests
#   scripts/test.sh asan       the same under AddressSanitizer + UBSan
# Reference tests (Python packages in .venv, ../shared/data, mpirun) skip with
# a message when their reference is missing; with CI=true they fail instead.
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${1:-release}"
scripts/setup.sh
scripts/setup-python.sh
cmake --preset "$preset"
cmake --build --preset "$preset"
ctest --preset "$preset" -j "$(nproc)"
