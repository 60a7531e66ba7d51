#!/usr/bin/env bash
# Creates .venv-golden (git-ignored): torch (CPU), transformers and friends,
# pinned in tests/python/requirements-golden.txt, for regenerating the goldens
# that need a reference model forward (tests/python/deepseek/make_goldens.py).
# CI does not run this: the goldens are committed JSON.
# Safe to re-run: does nothing when .venv-golden already holds that file's pins.
set -euo pipefail
cd "$(dirname "$0")/.."
req=tests/python/requirements-golden.txt
venv=.venv-golden
stamp=$venv/.requirements.sha256
want=$(sha256sum "$req" | cut -d' ' -f1)
if [ -x "$venv/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  exit 0
fi
# An existing environment that already has every pin (any local build tag,
# such as torch's +cpu or +cu132) is kept as it is.
if [ -x "$venv/bin/python" ] && "$venv/bin/python" - "$req" 2>/dev/null <<'PY'
import importlib.metadata as md, re, sys
for line in open(sys.argv[1]):
    m = re.match(r"\s*([A-Za-z0-9_.-]+)==([^\s#]+)", line)
    if m and md.version(m[1]).split("+")[0] != m[2]:
        sys.exit(1)
PY
then
  echo "$want" > "$stamp"
  exit 0
fi
PY=${PYTHON:-python3}
if ! "$PY" -m venv --help >/dev/null 2>&1; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends python3-venv
  PY=python3
fi
echo "setup-golden-venv: creating $venv from $req"
rm -rf "$venv"
"$PY" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
# Everything from PyPI (its torch wheel brings CUDA libraries, a few GB, and
# runs on the CPU). TORCH_INDEX_URL may name a CPU-only torch index instead.
extra=()
[ -n "${TORCH_INDEX_URL:-}" ] && extra=(--extra-index-url "$TORCH_INDEX_URL")
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "${extra[@]}" -r "$req"
echo "$want" > "$stamp"
