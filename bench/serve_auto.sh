#!/usr/bin/env bash
# Auto-shaped speculation in `specd serve` against plain decoding and fixed
# draft shapes: for each configuration a server is started,
# bench/serve_bench.py runs 1 and 8 concurrent streams (random-id prompts),
# and the server is stopped; configurations alternate for REPEATS rounds.
#   auto / plain: goal >= 0.95; auto / best fixed: goal >= 0.90
#
#   bench/serve_auto.sh [BUILD_DIR]        (default: build/release)
#
# Ratios are the geometric mean of the per-round ratios (each round runs every
# configuration once, in turn), with their range: the server processes of one
# configuration differ by a few percent between starts, which pairing by round
# does not remove but shows.
# Environment: THREADS (default 2), REPEATS (default 2), TOKENS (default 48),
# REQUESTS (requests per stream at each level, default 2), PORT (default 8731);
# MODEL (default: the embedded demo model) and ALGO (the drafter's flags;
# default: EAGLE3 with the demo's head), e.g.
#   MODEL=/tmp/specd-models/small-170m-q4_0.gguf ALGO="--speculative-algorithm NGRAM"
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build/release}
SPECD=$BUILD/specd
THREADS=${THREADS:-2}
REPEATS=${REPEATS:-2}
TOKENS=${TOKENS:-48}
REQUESTS=${REQUESTS:-2}
PORT=${PORT:-8731}
[ -x "$SPECD" ] || { echo "serve_auto: $SPECD not built" >&2; exit 2; }
MODEL=${MODEL:-$ROOT/models/demo}
ALGO=${ALGO:-"--speculative-algorithm EAGLE3 --draft-model $ROOT/models/demo/eagle3"}
CONFIGS=(
  "--speculative-algorithm NONE"
  "$ALGO"
  "$ALGO --speculative-num-steps 1 --speculative-eagle-topk 1 --speculative-num-draft-tokens 2"
  "$ALGO --speculative-num-steps 4 --speculative-eagle-topk 1 --speculative-num-draft-tokens 5"
  "$ALGO --speculative-num-steps 5"
)
LABELS=(plain auto chain1 chain4 tree5)
OUT=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$OUT"' EXIT

for round in $(seq "$REPEATS"); do
  for i in "${!CONFIGS[@]}"; do
    # shellcheck disable=SC2086
    "$SPECD" serve --model "$MODEL" --threads "$THREADS" --max-batch 16 --port "$PORT" \
      ${CONFIGS[$i]} >"$OUT/serve.log" 2>&1 &
    pid=$!
    for _ in $(seq 300); do
      curl -sf "http://127.0.0.1:$PORT/health" >/dev/null 2>&1 && break
      sleep 0.1
    done
    python3 "$ROOT/bench/serve_bench.py" --url "http://127.0.0.1:$PORT" --concurrency 1,8 \
      --prompt-tokens 32 --max-tokens "$TOKENS" --requests-per-stream "$REQUESTS" --vocab 2048 --json \
      | tail -1 >"$OUT/${LABELS[$i]}.$round.json"
    kill "$pid"
    wait "$pid" 2>/dev/null || true
    pid=
  done
done

python3 - "$OUT" "$REPEATS" "${LABELS[@]}" <<'PY'
import json, math, statistics, sys
out, repeats, labels = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
tok = {}  # (label, concurrency) -> [output tok/s per round]
for l in labels:
    for r in range(1, repeats + 1):
        for row in json.load(open(f"{out}/{l}.{r}.json")):
            tok.setdefault((l, row["concurrency"]), []).append(row["output_tok_s"])
med = {k: statistics.median(v) for k, v in tok.items()}
def paired(a, b, c):
    """Geometric mean, min and max of a's per-round ratio to b at concurrency c."""
    r = [x / y for x, y in zip(tok[(a, c)], tok[(b, c)])]
    return math.exp(statistics.fmean(math.log(x) for x in r)), min(r), max(r)
print(f"{'config':8} {'1 stream':>10} {'8 streams':>10}   (output tok/s, median of {repeats})")
for l in labels:
    print(f"{l:8} {med[(l, 1)]:10.1f} {med[(l, 8)]:10.1f}")
for c in (1, 8):
    best = max((l for l in labels[2:]), key=lambda l: med[(l, c)])
    p, pb = paired("auto", "plain", c), paired("auto", best, c)
    print(f"{c} stream(s): auto / plain {p[0]:.2f} [{p[1]:.2f}, {p[2]:.2f}], "
          f"auto / best fixed ({best}) {pb[0]:.2f} [{pb[1]:.2f}, {pb[2]:.2f}]")
PY
