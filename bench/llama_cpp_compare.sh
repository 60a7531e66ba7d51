#!/usr/bin/env bash
# specd against llama.cpp on this machine, in the same run: prefill and
# decode tok/s for random-weight GGUF models (the performance targets' rows),
# runs interleaved (specd, llama.cpp, specd, llama.cpp, ...) so drift on a
# shared machine hits both alike. llama.cpp is node-llama-cpp's prebuilt CPU
# build (pinned in bench/llama_cpp/package.json, installed with npm on first
# use, ~0.7 GB), weights read without mmap as in the targets' llama-bench runs.
#
#   bench/llama_cpp_compare.sh [BUILD_DIR]      (default: build/release)
#
# Environment:
#   ROWS        "preset:dtype ..." (default: all six rows of the targets)
#   THREADS     thread counts (default "1 2")
#   REPEATS     interleaved rounds (default 3)
#   N_GEN       generated tokens (default 64; the 1B rows use N_GEN_1B, default 32)
#   MODELS_DIR  where the models (with a synthetic vocabulary, which llama.cpp
#               requires) are made / found (default /tmp/specd-models-vocab)
# Workload: 64 prompt token ids (1000 + 37 i), then greedy decoding.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build/release}
SPECD=$BUILD/specd
ROWS=${ROWS:-"small-170m:q4_0 small-170m:q8_0 small-170m:f16 llama-3.2-1b:q4_0 llama-3.2-1b:q8_0 llama-3.2-1b:f16"}
THREADS=${THREADS:-"1 2"}
REPEATS=${REPEATS:-3}
N_GEN=${N_GEN:-64}
N_GEN_1B=${N_GEN_1B:-32}
MODELS_DIR=${MODELS_DIR:-/tmp/specd-models-vocab}
NODE_DIR=$ROOT/bench/llama_cpp
[ -x "$SPECD" ] || { echo "llama_cpp_compare: $SPECD not built" >&2; exit 2; }
command -v node >/dev/null || { echo "llama_cpp_compare: node is needed" >&2; exit 2; }
if [ ! -d "$NODE_DIR/node_modules/node-llama-cpp" ]; then
  (cd "$NODE_DIR" && npm ci --no-audit --no-fund --ignore-scripts >&2)
fi
mkdir -p "$MODELS_DIR"
ids=$(python3 -c "print(','.join(str(1000 + 37 * i) for i in range(64)))")
OUT=$(mktemp)
trap 'rm -f "$OUT"' EXIT
echo "llama_cpp_compare: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for row in $ROWS; do
  preset=${row%%:*} dtype=${row##*:}
  model=$MODELS_DIR/$preset-$dtype.gguf
  [ -f "$model" ] || "$SPECD" --log-level warn make-model --preset "$preset" --format gguf \
      --dtype "$dtype" --vocab synthetic --out "$model" >&2
  n=$N_GEN
  [[ $preset == llama-3.2-1b ]] && n=$N_GEN_1B
  for t in $THREADS; do
    for ((r = 0; r < REPEATS; r++)); do
      s=$("$SPECD" --log-level warn generate --model "$model" --prompt-ids "$ids" -n "$n" \
          --ignore-eos --threads "$t" --kv-cache-tokens 1024 --json 2>/dev/null |
          python3 -c 'import json,sys; s=json.load(sys.stdin)["stats"]; print(s["prefill_tok_s"], s["decode_tok_s"])')
      l=$(cd "$NODE_DIR" && node llama_bench.mjs "$model" "$t" "$n" no-mmap 2>/dev/null |
          python3 -c 'import json,sys; j=json.loads(sys.stdin.read().strip().splitlines()[-1]); print(j["prefill_tok_s"], j["decode_tok_s"])')
      echo "$preset $dtype $t $s $l" | tee -a "$OUT" >&2
    done
  done
done
python3 - "$OUT" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    p, d, t, sp, sd, lp, ld = line.split()
    rows.setdefault((p, d, int(t)), []).append(tuple(map(float, (sp, sd, lp, ld))))
print("| model | format | threads | specd prefill | llama.cpp prefill | ratio | specd decode | llama.cpp decode | ratio |")
print("|---|---|---|---|---|---|---|---|---|")
for (p, d, t), v in rows.items():
    med = [statistics.median(x[i] for x in v) for i in range(4)]
    # Ratios per round (interleaved pairs), then their median.
    rp = statistics.median(x[0] / x[2] for x in v)
    rd = statistics.median(x[1] / x[3] for x in v)
    print(f"| {p} | {d} | {t} | {med[0]:.1f} | {med[2]:.1f} | {rp:.2f}x | {med[1]:.1f} | {med[3]:.1f} | {rd:.2f}x |")
PY
echo "llama_cpp_compare: load average at end $(cut -d' ' -f1-3 /proc/loadavg)" >&2
