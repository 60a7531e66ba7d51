#!/usr/bin/env bash
# Builds specd and runs the main job on the embedded demo model:
# speculative decoding with its EAGLE-3 head, printing text and a stats line.
# Only the specd binary is built (not the tests and benchmarks).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake --preset release >/dev/null
cmake --build --preset release --target specd
exec build/release/specd generate --baseline "$@"
