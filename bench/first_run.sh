#!/usr/bin/env bash
# Wall time and peak RSS (VmHWM, from /usr/bin/time -v) of a short
# `specd generate` from process start to exit, for one or more specd binaries,
# run interleaved (A B A B ...) so machine drift hits every binary alike.
#
# Usage: bench/first_run.sh [-r REPEATS] BINARY... -- GENERATE_FLAGS...
#   bench/first_run.sh -r 5 /tmp/specd-base build/release/specd -- \
#       --baseline --max-tokens 16
#   bench/first_run.sh /tmp/specd-base build/release/specd -- \
#       --model /tmp/specd-models/llama-3.2-1b-q4_0.gguf --prompt-ids 1,2,3,4 --max-tokens 16
# Prints, per binary: median [min, max] wall seconds and peak RSS in MiB.
set -euo pipefail

source "$(dirname "$0")/binaries_args.sh"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for ((r = 0; r < repeats; r++)); do
  for i in "${!bins[@]}"; do
    /usr/bin/time -v "${bins[$i]}" generate "$@" >/dev/null 2>"$tmp/err" || {
      echo "${bins[$i]} failed:" >&2
      tail -5 "$tmp/err" >&2
      exit 1
    }
    wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {n = split($2, t, ":"); s = 0;
                for (k = 1; k <= n; k++) s = s * 60 + t[k]; print s}' "$tmp/err")
    rss=$(awk -F': ' '/Maximum resident set size/ {printf "%.1f", $2 / 1024}' "$tmp/err")
    echo "$wall $rss" >>"$tmp/run.$i"
  done
done

summary() {  # column of $tmp/run.$1 -> "median [min, max]"
  cut -d' ' -f"$2" "$tmp/run.$1" | sort -g |
    awk '{v[NR] = $1} END {m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2;
         printf "%.2f [%.2f, %.2f]", m, v[1], v[NR]}'
}
printf "%-40s %-24s %s\n" "binary" "wall s" "peak RSS MiB"
for i in "${!bins[@]}"; do
  printf "%-40s %-24s %s\n" "${bins[$i]}" "$(summary "$i" 1)" "$(summary "$i" 2)"
done
