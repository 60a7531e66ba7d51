#!/usr/bin/env bash
# The speculation machinery apart from draft quality: the benchmark-only
# ORACLE drafter proposes the target's own greedy continuation, corrupted so
# that a step yields tau tokens on average, and each run reports its speedup
# over plain decoding (measured in the same process, same request) against
# the ideal tau * t(1) / (t_draft + t_verify(depth + 1)).
#   bench/spec_oracle.sh [BUILD_DIR]        (default: build/release)
# Environment: MODELS (space-separated PRESET:DTYPE, default "llama-3.2-1b:q4_0
# llama-3.2-1b:q8_0"), TAUS (default "1.5 2 3 4"), DEPTH (chain depth, default 5),
# THREADS (default 2), TOKENS (default 48), MODELS_DIR (default /tmp/specd-models),
# EXTRA (more generate flags, e.g. --deterministic: on random-weight models the
# top logits are so close that a verify pass's multi-token kernels often pick
# another argmax than decoding did, which caps tau unless the kernels are
# batch-invariant).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build/release}
SPECD=$BUILD/specd
MODELS=${MODELS:-"llama-3.2-1b:q4_0 llama-3.2-1b:q8_0"}
TAUS=${TAUS:-"1.5 2 3 4"}
DEPTH=${DEPTH:-5}
THREADS=${THREADS:-2}
TOKENS=${TOKENS:-48}
EXTRA=${EXTRA:-}
MODELS_DIR=${MODELS_DIR:-/tmp/specd-models}
[ -x "$SPECD" ] || { echo "spec_oracle: $SPECD not built" >&2; exit 2; }
mkdir -p "$MODELS_DIR"

printf '%-22s %5s %6s %8s %9s %8s %8s %10s\n' model tau tau_got t1_ms tverify_ms ideal speedup efficiency
for m in $MODELS; do
  IFS=: read -r preset dtype <<<"$m"
  model=$MODELS_DIR/$preset-$dtype.gguf
  [ -f "$model" ] || "$SPECD" make-model --preset "$preset" --format gguf --dtype "$dtype" \
    --out "$model" >/dev/null 2>&1
  for tau in $TAUS; do
    "$SPECD" generate --model "$model" --threads "$THREADS" --prompt-ids 1,2,3,4,5,6,7,8 \
      --max-tokens "$TOKENS" --ignore-eos --json --speculative-algorithm ORACLE \
      --oracle-tau "$tau" --speculative-num-steps "$DEPTH" $EXTRA 2>/dev/null |
      python3 -c '
import json, sys
o = json.load(sys.stdin)["oracle"]
cols = (o["tau_target"], o["tau"], o["t1_ms"], o["t_verify_ms"], o["ideal_speedup"],
        o["speedup"], o["efficiency"])
print("%-22s %5.1f %6.2f %8.2f %9.2f %8.2f %8.2f %10.2f" % ((sys.argv[1],) + cols))' "$preset-$dtype"
  done
done
