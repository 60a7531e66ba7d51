#!/usr/bin/env bash
# Creates the Python virtual environment of the test references (.venv in the
# checkout, git-ignored) from tests/python/requirements.txt (pinned).
# Safe to re-run: does nothing when .venv already holds that requirements file.
# Tests find the interpreter at .venv/bin/python (or $SPECD_PYTHON).
set -euo pipefail
cd "$(dirname "$0")/.."
req=tests/python/requirements.txt
venv=.venv
stamp=$venv/.requirements.sha256
want=$(sha256sum "$req" | cut -d' ' -f1)
if [ -x "$venv/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
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
echo "setup-python: creating $venv from $req"
rm -rf "$venv"
"$PY" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$req"
echo "$want" > "$stamp"
