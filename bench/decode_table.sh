#!/usr/bin/env bash
# Prefill and decode tok/s of specd against llama.cpp's published figures and
# against the memory-bandwidth roofline measured in the same run, for every
# row of the performance targets (random-weight GGUF models at the ~170M and
# Llama-3.2-1B shapes, Q4_0 / Q8_0 / F16, 1 and 2 threads), plus the cost of
# verification-sized forwards (4, 8, 16 tokens) against a 1-token step.
#
#   bench/decode_table.sh [BUILD_DIR]        (default: build/release)
#
# Environment:
#   MODELS_DIR    where the GGUF models are made / found (default /tmp/specd-models)
#   ROWS          space-separated subset, e.g. "small-170m:q4_0 llama-3.2-1b:q4_0"
#   REPEATS       interleaved rounds per row (default 2)
#   TOKENS_1B     tokens generated on the 1B rows (default 64)
#   EXTRA         extra specd generate flags for every run (e.g. "--no-mmap")
#
# Models that fit the last-level cache (the ~170M Q4_0/Q8_0 ones in a 260 MB
# L3) can beat a DRAM roofline.
#
# Each row is one `specd bench` run comparing "--threads 1" and "--threads 2"
# (prompt 64 random token ids, 64 generated tokens, greedy). The roofline is
# read bandwidth (kernels_bench BM_ReadBandwidth at the same thread count,
# measured at the start of the run) divided by the weight bytes one decode
# step reads. llama.cpp: build 4748, llama-bench -p 64 -n 64 on the same
# machine type (the issue's table), hard-coded below.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build/release}
SPECD=$BUILD/specd
KB=$BUILD/bench/kernels_bench
MODELS_DIR=${MODELS_DIR:-/tmp/specd-models}
REPEATS=${REPEATS:-2}
TOKENS_1B=${TOKENS_1B:-64}
EXTRA=${EXTRA:-}
ROWS=${ROWS:-"small-170m:q4_0 small-170m:q8_0 small-170m:f16 llama-3.2-1b:q4_0 llama-3.2-1b:q8_0 llama-3.2-1b:f16"}
[ -x "$SPECD" ] || { echo "decode_table: $SPECD not built" >&2; exit 2; }
[ -x "$KB" ] || { echo "decode_table: $KB not built (ninja kernels_bench)" >&2; exit 2; }
mkdir -p "$MODELS_DIR"
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

echo "decode_table: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for row in $ROWS; do
  preset=${row%%:*}
  dtype=${row##*:}
  model=$MODELS_DIR/$preset-$dtype.gguf
  if [ ! -f "$model" ]; then
    echo "decode_table: making $model" >&2
    "$SPECD" make-model --preset "$preset" --format gguf --dtype "$dtype" --out "$model" >&2
  fi
  tokens=64
  [ "$preset" = llama-3.2-1b ] && tokens=$TOKENS_1B
  echo "decode_table: $preset $dtype ($tokens tokens)" >&2
  # The bandwidth probe runs right before each row: on a shared machine the
  # attainable bandwidth moves with the other jobs.
  "$KB" --benchmark_filter='BM_ReadBandwidth' --benchmark_format=json \
    >"$OUT/bw-$preset-$dtype.json" 2>/dev/null
  "$SPECD" bench --model "$model" --compare "--threads 1 $EXTRA" "--threads 2 $EXTRA" \
    --repeats "$REPEATS" --prompts 1 --prompt-len 64 --max-tokens "$tokens" \
    --verify-cost 1,4,8,16 --json >"$OUT/$preset-$dtype.json"
done
echo "decode_table: load average at the end $(cut -d' ' -f1-3 /proc/loadavg)" >&2

python3 - "$OUT" $ROWS <<'PY'
import json, sys
out, rows = sys.argv[1], sys.argv[2:]
# llama.cpp build 4748, llama-bench -p 64 -n 64: (prefill, decode) per thread count.
ref = {
  ("llama-3.2-1b", "q4_0"): {1: (94, 21.5), 2: (150, 36.3)},
  ("llama-3.2-1b", "q8_0"): {1: (55, 13.3), 2: (96, 22.4)},
  ("llama-3.2-1b", "f16"):  {1: (76, 10.4), 2: (128, 14.3)},
  ("small-170m", "q4_0"):   {1: (1056, 152), 2: (1904, 162)},
  ("small-170m", "q8_0"):   {1: (648, 117), 2: (1190, 128)},
  ("small-170m", "f16"):    {1: (676, 73), 2: (None, 107)},
}
def bandwidth(path):
  bw = {}
  for b in json.load(open(path))["benchmarks"]:
    if b.get("run_type", "iteration") != "iteration": continue
    t = int(b["name"].split("threads:")[1].split("/")[0])
    bw[t] = max(bw.get(t, 0), b["GBps"])  # the faster of prefetch:0 / prefetch:1
  return bw
print("| model | format | thr | prefill tok/s | vs llama.cpp | decode tok/s [min, max] | vs llama.cpp "
      "| read GB/s | roofline tok/s | vs roofline | weights MB/step |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
cost_lines = []
for row in rows:
  preset, dtype = row.split(":")
  r = json.load(open(f"{out}/{preset}-{dtype}.json"))
  bw = bandwidth(f"{out}/bw-{preset}-{dtype}.json")
  for c in r["configs"]:
    thr = c["runs"][0]["threads"]
    wb = c["runs"][0]["weight_bytes"]
    pf = c["prefill_tok_s"]["median"]
    d = c["decode_tok_s"]
    roof = bw.get(thr, 0) * 1e9 / wb if wb else 0
    rp, rd = ref[(preset, dtype)][thr]
    fmt = lambda a, b: f"{a / b:.2f}x" if b else "-"
    print(f"| {preset} | {dtype.upper()} | {thr} | {pf:.0f} | {fmt(pf, rp)} | "
          f"{d['median']:.1f} [{d['min']:.1f}, {d['max']:.1f}] | {fmt(d['median'], rd)} | "
          f"{bw.get(thr, 0):.1f} | {roof:.1f} | {100 * d['median'] / roof:.0f}% | {wb / 1e6:.0f} |")
    fc = c.get("forward_cost", [])
    if fc:
      one = fc[0]["ms"]
      cost_lines.append(f"| {preset} | {dtype.upper()} | {thr} | " +
                        " | ".join(f"{e['ms']:.1f} ({e['ms'] / one:.2f}x)" for e in fc) + " |")
  la = r["load_avg"]
print()
print("verify cost: one forward over n tokens after a 64-token prompt, all logits (median ms, x n=1)")
print()
print("| model | format | thr | n=1 | n=4 | n=8 | n=16 |")
print("|---|---|---|---|---|---|---|")
print("\n".join(cost_lines))
PY
