#!/usr/bin/env bash
# Decode tok/s of `specd generate --json` at --threads 1, --threads 2 and the
# default thread count, on an idle machine and with one CPU kept busy by
# another process (`yes` pinned to the last allowed CPU with taskset), for one
# or more specd binaries. Runs are interleaved (round-robin over binary x
# threads) so drift hits every configuration alike.
#
# Usage: bench/busy_core.sh [-r REPEATS] BINARY... -- GENERATE_FLAGS...
#   bench/busy_core.sh -r 5 /tmp/specd-base build/release/specd -- \
#       --speculative-algorithm NONE --max-tokens 128 --ignore-eos
# Prints one line per (mode, binary, threads): median [min, max] decode tok/s.
set -euo pipefail

source "$(dirname "$0")/binaries_args.sh"
threads=("--threads 1" "--threads 2" "")
busy_cpu=$(taskset -pc $$ | sed 's/.*: //' | tr ',' '\n' | tail -1 | sed 's/.*-//')

tmp=$(mktemp -d)
hog=""
cleanup() {
  [[ -n "$hog" ]] && kill "$hog" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT

for mode in idle busy; do
  if [[ "$mode" == busy ]]; then
    taskset -c "$busy_cpu" yes >/dev/null &
    hog=$!
    sleep 0.5
  fi
  for ((r = 0; r < repeats; r++)); do
    for b in "${!bins[@]}"; do
      for t in "${!threads[@]}"; do
        # shellcheck disable=SC2086
        tok_s=$("${bins[$b]}" generate "$@" ${threads[$t]} --json 2>/dev/null |
                  sed -n 's/.*"decode_tok_s":\([0-9.e+-]*\).*/\1/p')
        echo "${tok_s:-0}" >>"$tmp/$mode.$b.$t"
      done
    done
  done
  if [[ -n "$hog" ]]; then
    kill "$hog"
    wait "$hog" 2>/dev/null || true
    hog=""
  fi
done

printf "%-5s %-36s %-12s %s\n" "mode" "binary" "threads" "decode tok/s median [min, max]"
for mode in idle busy; do
  for b in "${!bins[@]}"; do
    for t in "${!threads[@]}"; do
      label="${threads[$t]:-default}"
      sort -g "$tmp/$mode.$b.$t" |
        awk -v m="$mode" -v bin="${bins[$b]}" -v l="$label" '{v[NR] = $1} END {
          med = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2;
          printf "%-5s %-36s %-12s %.1f [%.1f, %.1f]\n", m, bin, l, med, v[1], v[NR]}'
    done
  done
done
