#!/usr/bin/env bash
# Installs the npm-based test tooling under tests/node (reference tokenizers
# and their tokenizer.json files, the chat-template reference renderer).
# Tests that need them skip with a message when they are absent.
# Safe to re-run: does nothing when node_modules matches the lock file.
set -euo pipefail
cd "$(dirname "$0")/../tests/node"

if ! command -v npm >/dev/null 2>&1; then
  echo "fetch-test-assets: npm not found (scripts/setup.sh installs it); npm-based tests will skip" >&2
  exit 0
fi
# npm writes node_modules/.package-lock.json after a successful install.
if [ -f node_modules/.package-lock.json ] && [ package-lock.json -ot node_modules/.package-lock.json ] \
   && [ package.json -ot node_modules/.package-lock.json ]; then
  exit 0
fi
if [ -f package-lock.json ]; then
  npm ci --no-audit --no-fund --loglevel=error || npm install --no-audit --no-fund --loglevel=error
else
  npm install --no-audit --no-fund --loglevel=error
fi
