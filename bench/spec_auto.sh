#!/usr/bin/env bash
# Auto-shaped speculation against plain decoding and against every fixed
# draft shape, in one interleaved `specd bench` run per row:
#   auto / plain      goal >= 0.95 (never slower than plain)
#   auto / best fixed goal >= 0.90 (within 10 % of the best shape of a sweep)
# auto/plain is the ratio of the median rounds; "paired" is bench's geometric
# mean of the per-round ratios with its 95 % interval (REPEATS >= 2).
#
#   bench/spec_auto.sh [BUILD_DIR]        (default: build/release)
#
# Rows (ROWS, space-separated):
#   demo:T               the embedded demo model with its trained EAGLE-3 head, T threads
#   PRESET:DTYPE:T       a random-weight model (specd make-model: a GGUF for q8_0/q4_0, a
#                        safetensors folder for bf16/f16/f32) with n-gram drafting on
#                        bench's random-id prompts (non-repetitive), T threads
#   PRESET:DTYPE:T:eagle3  the same model with a random EAGLE-3 head (make-model --preset
#                        eagle3-head): real shapes, drafts almost never accepted
# Environment: MODELS_DIR (default /tmp/specd-models), REPEATS (default 3),
# TOKENS (default 64).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build/release}
SPECD=$BUILD/specd
MODELS_DIR=${MODELS_DIR:-/tmp/specd-models}
REPEATS=${REPEATS:-3}
TOKENS=${TOKENS:-64}
ROWS=${ROWS:-"demo:1 demo:2 small-170m:q4_0:1 small-170m:q8_0:1 small-170m:q4_0:2"}
[ -x "$SPECD" ] || { echo "spec_auto: $SPECD not built" >&2; exit 2; }
mkdir -p "$MODELS_DIR"
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

printf '%-24s %10s %10s %12s %-20s %-28s %10s %s\n' row plain_tok_s auto_tok_s auto/plain \
  "paired [95% CI]" "best fixed shape" auto/best "auto depths"
for row in $ROWS; do
  IFS=: read -r a b c d <<<"$row"
  if [ "$a" = demo ]; then
    threads=$b
    model=$ROOT/models/demo
    algo="--speculative-algorithm EAGLE3 --draft-model $ROOT/models/demo/eagle3"
  else
    threads=$c
    case $b in
      q8_0|q4_0)
        model=$MODELS_DIR/$a-$b.gguf
        [ -f "$model" ] || "$SPECD" make-model --preset "$a" --format gguf --dtype "$b" \
          --out "$model" >/dev/null 2>&1 ;;
      *)
        model=$MODELS_DIR/$a-$b
        [ -d "$model" ] || "$SPECD" make-model --preset "$a" --dtype "$b" \
          --out "$model" >/dev/null 2>&1 ;;
    esac
    algo="--speculative-algorithm NGRAM"
    if [ "${d:-}" = eagle3 ]; then
      head=$MODELS_DIR/$a-eagle3-head  # the same shapes for every dtype of the preset
      [ -d "$head" ] || "$SPECD" make-model --preset eagle3-head --target "$model" \
        --dtype bf16 --out "$head" >/dev/null 2>&1
      algo="--speculative-algorithm EAGLE3 --draft-model $head"
    fi
  fi
  fixed=()
  for k in 1 2 4; do
    fixed+=("$algo --speculative-num-steps $k --speculative-eagle-topk 1 --speculative-num-draft-tokens $((k + 1))")
  done
  fixed+=("$algo --speculative-num-steps 5")  # the default tree (SGLang's shape)
  "$SPECD" bench --model "$model" --common "--threads $threads" --repeats "$REPEATS" \
    --max-tokens "$TOKENS" --json --compare " --speculative-algorithm NONE" "$algo" \
    "${fixed[@]}" >"$OUT/$row.json" 2>"$OUT/$row.log" || {
      echo "$row: bench failed (log below)"; tail -5 "$OUT/$row.log"; continue; }
  python3 - "$OUT/$row.json" "$row" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
c = j["configs"]
med = lambda x: x["decode_tok_s"]["median"]
plain, auto, fixed = c[0], c[1], c[2:]
best = max(fixed, key=med)
shape = best["config"].split("--speculative-num-steps", 1)[1].strip()
depths = ""
for r in auto["runs"]:
    if "draft_depth_hist" in r:
        depths = r["draft_depth_hist"]
r = auto["ratio"]
ci = f"{r['ratio']:.2f} [{r['ci_low']:.2f}, {r['ci_high']:.2f}]" if r["ci_low"] is not None \
    else f"{r['ratio']:.2f}"
print(f"{sys.argv[2]:<24} {med(plain):10.1f} {med(auto):10.1f} {med(auto)/med(plain):12.2f} {ci:<20} "
      f"{shape[:28]:<28} {med(auto)/med(best):10.2f} {depths}")
PY
done
