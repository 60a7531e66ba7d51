#!/usr/bin/env bash
# Installs every Debian package specd needs to build, test and benchmark.
# Safe to re-run; skips apt when everything is already installed.
set -euo pipefail

PACKAGES=(
  build-essential g++ cmake ninja-build pkg-config git
  libhwy-dev nlohmann-json3-dev libcli11-dev libcpp-httplib-dev libfmt-dev libspdlog-dev
  libutf8proc-dev libpcre2-dev
  libopenmpi-dev openmpi-bin
  googletest libgtest-dev libgmock-dev libbenchmark-dev
  time gnuplot-nox
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Node.js + npm run the reference tests (tokenizers, chat templates, the openai
# client). A machine may already have them from another source (e.g. NodeSource,
# whose nodejs conflicts with Debian's npm package): install only when absent.
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  missing+=(nodejs npm)
fi
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
