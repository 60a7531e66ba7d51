#!/usr/bin/env bash
# Tensor-parallel decode on this host: TP=1 with 2 threads versus TP=2 with
# 1 thread per rank, and the share of decode time rank 0 spends inside
# collectives (the communicator's per-collective timer: generate --json
# stats.comm_s over stats.decode_s; serve exports the same timer as
# specd_allreduce_seconds_total).
#
#   bench/tp_bench.sh [PAIRS] [SPECD]    (defaults: 3, build/release/specd)
#
# Env: PRESETS (default "small-170m"; add llama-3.2-1b for the 1B preset),
#      DTYPES (default "q4_0 f16"), MAX_TOKENS (default 64), PROMPT_TOKENS
#      (default 16), MODEL_DIR (default /tmp/specd-tp-bench: the random-weight
#      GGUF files, made once with `specd make-model`), EXTRA (more generate
#      flags for both configurations, e.g. "--cpu-bind cores").
#
# Runs are interleaved A B A B ... (PAIRS pairs) so drift on a shared machine
# hits both configurations alike; the ratio is the median of the per-pair
# ratios B/A, measured in the same run. Greedy decoding with --ignore-eos, so
# every run decodes exactly MAX_TOKENS tokens.
#
# Measured on the shared 2-core development VM (load average 1.8-2.3), default wait (spin
# 50 us, then yield). Decode tok/s medians, prompt 16 tokens, greedy; ratio = TP2x1 / TP1x2;
# comm share = rank 0's time inside collectives (waits for the other rank included) over
# decode time at TP=2:
#
#   model              tokens pairs |  tp1x2  tp2x1  ratio  comm
#   small-170m q4_0        64     4 |   44.8   87.7   1.93   6.6%
#   small-170m f16         64     4 |   25.0   37.2   1.50   5.0%
#   small-170m q4_0        32     3 |   51.5   96.4   1.85   6.7%
#   llama-3.2-1b q4_0      32     3 |    9.1   14.8   1.40   7.4%
#
# TP=2 beats TP=1 x 2 threads here: each rank's single thread needs no fork/join per matmul
# and its shard's weights are half as many bytes. With the earlier 2 ms spin, the same
# machine under heavier load (3-7) gave ratios of 0.43-0.82 and comm shares of 46-65%: a
# spinning rank took the core its preempted partner needed (docs/shm-protocol.md).
set -euo pipefail

PAIRS=${1:-3}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SPECD=${2:-$ROOT/build/release/specd}
PRESETS=${PRESETS:-small-170m}
DTYPES=${DTYPES:-q4_0 f16}
MAX_TOKENS=${MAX_TOKENS:-64}
PROMPT_TOKENS=${PROMPT_TOKENS:-16}
MODEL_DIR=${MODEL_DIR:-/tmp/specd-tp-bench}
EXTRA=${EXTRA:-}
[ -x "$SPECD" ] || { echo "tp_bench: $SPECD not built" >&2; exit 2; }
command -v python3 >/dev/null || { echo "tp_bench: python3 needed" >&2; exit 2; }
mkdir -p "$MODEL_DIR"

ids=$(python3 -c "print(','.join(str(1000 + 37 * i) for i in range($PROMPT_TOKENS)))")

run() {  # run MODEL FLAGS... -> one JSON line (stats only)
  local model=$1
  shift
  "$SPECD" --log-level warn generate --model "$model" --prompt-ids "$ids" \
    --max-tokens "$MAX_TOKENS" --ignore-eos --json "$@" $EXTRA 2>/dev/null |
    python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin)["stats"]))'
}

echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-12s %-5s %9s %9s %7s %12s %12s\n' preset dtype "tp1x2 t/s" "tp2x1 t/s" ratio "comm share" "(tp1 comm)"
for preset in $PRESETS; do
  for dtype in $DTYPES; do
    model=$MODEL_DIR/$preset-$dtype.gguf
    if [ ! -f "$model" ]; then
      "$SPECD" --log-level warn make-model --preset "$preset" --format gguf --dtype "$dtype" \
        --out "$model" >/dev/null
    fi
    run "$model" --tp 1 --threads 2 >/dev/null  # warm the page cache
    a_json=() b_json=()
    for ((i = 0; i < PAIRS; i++)); do
      a_json+=("$(run "$model" --tp 1 --threads 2)")
      b_json+=("$(run "$model" --tp 2 --threads 1)")
    done
    python3 - "$preset" "$dtype" "${#a_json[@]}" "${a_json[@]}" "${b_json[@]}" <<'PY'
import json, statistics, sys
preset, dtype, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
a = [json.loads(s) for s in sys.argv[4:4 + n]]
b = [json.loads(s) for s in sys.argv[4 + n:4 + 2 * n]]
ta = [x["decode_tok_s"] for x in a]
tb = [x["decode_tok_s"] for x in b]
ratio = statistics.median(y / x for x, y in zip(ta, tb))
share = statistics.median(x["comm_s"] / x["decode_s"] for x in b)
share1 = statistics.median(x["comm_s"] / x["decode_s"] for x in a)
print(f"{preset:<12} {dtype:<5} {statistics.median(ta):9.1f} {statistics.median(tb):9.1f} "
      f"{ratio:7.3f} {100 * share:11.1f}% {100 * share1:11.1f}%")
print(f"  runs tp1x2: {' '.join(f'{v:.1f}' for v in ta)} | tp2x1: {' '.join(f'{v:.1f}' for v in tb)}",
      file=sys.stderr)
PY
  done
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
