#!/usr/bin/env bash
# specd against llama.cpp on the DeepSeek-V2/V3 family: the moonlight-bench
# preset (Moonlight-16B-A3B's layer shapes: MLA with a plain q_proj, 64 routed
# experts of which 6 are used, 2 shared, the 163840-token head; 3 of its 27
# layers) as llama.cpp's `deepseek2` GGUF at Q4_0 and Q8_0, 1 and 2 threads,
# prefill and decode, ratios per interleaved round of the same run. The
# methodology, the llama.cpp build (b11312 from the llama-cpp-python sdist,
# cached) and the table are bench/llama_cpp_compare.sh's; this script picks
# the rows and first checks that llama.cpp loads and runs each file, which is
# the real test that specd's deepseek2 writer matches llama.cpp's layout.
#
# llama.cpp runs with --repack 0 (no CPU extra buffer types): on a CPU with
# AMX, b11312 places the 3-D attn_k_b in its AMX buffer (the load-time check
# multiplies it by a contiguous dummy) but the MLA graph multiplies it by the
# permuted q_nope, which the AMX kernel refuses and the plain CPU kernel may
# not take from an AMX buffer: ggml_backend_sched_split_graph aborts with
# GGML_ASSERT(*cur_backend_id != -1) before the first token, for specd's files
# and for convert_hf_to_gguf.py's own alike. Without AMX, LLAMA_BENCH_ARGS=""
# restores llama-bench's default (repacking on).
#
#   bench/deepseek_llama_cpp.sh [BUILD_DIR]        (default: build/release)
#
# Environment (besides llama_cpp_compare.sh's THREADS, REPEATS, MODELS_DIR,
# LLAMA_CPP_DIR, PYTHON):
#   DTYPES       "q4_0 q8_0" (default)
#   N_GEN        generated tokens (default 32)
#   LLAMA_BENCH_ARGS  extra llama-bench options (default "--repack 0", above)
#   LOAD_CHECK_ONLY=1  make the GGUFs, run llama-bench once on each (pp16,
#                tg4, 1 thread), print its result lines, stop: no specd
#                forward pass is needed
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build/release}
SPECD=$BUILD/specd
DTYPES=${DTYPES:-"q4_0 q8_0"}
MODELS_DIR=${MODELS_DIR:-/tmp/specd-models-vocab}
LLAMA_BENCH_ARGS=${LLAMA_BENCH_ARGS---repack 0}
export MODELS_DIR LLAMA_BENCH_ARGS

# Builds llama-bench if it is not cached yet and prints where it is.
LLAMA_CPP_BUILD_ONLY=1 "$ROOT/bench/llama_cpp_compare.sh" "$BUILD" >&2
LLAMA_CPP_DIR=${LLAMA_CPP_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/specd/llama.cpp-0.3.36}
LLAMA_BENCH=$LLAMA_CPP_DIR/bin/llama-bench
[ -x "$SPECD" ] || { echo "deepseek_llama_cpp: $SPECD not built" >&2; exit 2; }

mkdir -p "$MODELS_DIR"
rows=""
for dtype in $DTYPES; do
  model=$MODELS_DIR/moonlight-bench-$dtype.gguf
  if [ ! -f "$model" ]; then
    echo "deepseek_llama_cpp: making $model" >&2
    "$SPECD" --log-level warn make-model --preset moonlight-bench --format gguf \
        --dtype "$dtype" --vocab synthetic --out "$model" >&2
  fi
  # llama.cpp refuses a file whose tensors or metadata it does not expect;
  # a failure here is a writer bug, whatever specd's own numbers are.
  # shellcheck disable=SC2086  # LLAMA_BENCH_ARGS is a list of options
  if ! out=$("$LLAMA_BENCH" -m "$model" -t 1 -p 16 -n 4 -r 1 -lm none -ngl 0 $LLAMA_BENCH_ARGS 2>&1); then
    echo "$out" | tail -20 >&2
    echo "deepseek_llama_cpp: llama.cpp did not load or run $model" >&2
    exit 1
  fi
  echo "$out" | grep -E "^\| (model|deepseek2)" >&2
  rows+="moonlight-bench:$dtype "
done
if [ "${LOAD_CHECK_ONLY:-0}" = 1 ]; then
  echo "deepseek_llama_cpp: llama.cpp loaded and ran every file" >&2
  exit 0
fi
ROWS=$rows N_GEN=${N_GEN:-32} exec "$ROOT/bench/llama_cpp_compare.sh" "$BUILD"
