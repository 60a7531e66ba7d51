#!/usr/bin/env bash
# Installs every Debian package specd needs to build, test and benchmark.
# Safe to re-run; skips apt when everything is already installed. The Python
# test references (tokenizers, jinja2, openai, tiktoken) are pinned PyPI
# packages installed into .venv by scripts/setup-python.sh.
set -euo pipefail

PACKAGES=(
  build-essential g++ clang cmake ninja-build pkg-config git
  libhwy-dev nlohmann-json3-dev libcli11-dev libcpp-httplib-dev libfmt-dev libspdlog-dev
  libutf8proc-dev libpcre2-dev libevent-dev
  libopenmpi-dev openmpi-bin
  googletest libgtest-dev libgmock-dev libbenchmark-dev
  time gnuplot-nox
  python3 python3-venv
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
