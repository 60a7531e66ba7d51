#!/usr/bin/env bash
# specd against llama.cpp on this machine, in the same run: prefill and
# decode tok/s for random-weight GGUF models (the performance targets' rows),
# runs interleaved (specd, llama.cpp, specd, llama.cpp, ...) so drift on a
# shared machine hits both alike.
#
# llama.cpp is a native build of its own `llama-bench`, made once from source
# into a cache outside the checkout (LLAMA_CPP_DIR). The source is the PyPI
# source distribution of llama-cpp-python (pinned below), which vendors
# llama.cpp under vendor/llama.cpp; it is fetched with `pip download`, built
# Release with GGML_NATIVE=ON (the instruction sets of this CPU), CPU only,
# static, and only the llama-bench target is compiled. The vendored tree has
# no .git, so the llama.cpp build number and commit (the tag the pinned
# llama-cpp-python release names in its CHANGELOG) are passed to CMake and
# come out in llama-bench's JSON (build_number, build_commit).
#
# Methodology, the same for both engines: 64 prompt tokens, then N generated
# tokens, one sequence, same GGUF file, same thread count, weights read
# without mmap. specd: `specd generate --prompt-ids ... --json` on 64 prompt
# ids (1000 + 37 i), greedy, EOS ignored; its stats give prefill and decode
# tok/s. llama.cpp: `llama-bench -p 64 -n N -r 1 -lm none -ngl 0 -o json` (this
# llama.cpp's `-lm none` is the `--mmap 0` of older ones), which times pp64 (a
# 64-token prompt of random ids: the same count) and tgN (N tokens decoded one
# at a time) as two separate tests, each after its own warm-up; its avg_ts of
# each is the prefill and decode tok/s. Everything else is llama-bench's
# default (batch 2048, flash attention auto, CPU weight repacking on).
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
#   LLAMA_CPP_DIR  the llama.cpp build cache (default
#               ${XDG_CACHE_HOME:-$HOME/.cache}/specd/llama.cpp-<llama-cpp-python version>)
#   PYTHON      the Python whose pip fetches the source (default python3)
#   LLAMA_BENCH_ARGS  extra llama-bench options for every row (default none;
#               bench/deepseek_llama_cpp.sh passes "--repack 0")
#   LLAMA_CPP_BUILD_ONLY=1  build llama.cpp (if not cached), print its BUILD_INFO, stop
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
PYTHON=${PYTHON:-python3}

# The pinned llama.cpp: llama-cpp-python 0.3.36 vendors llama.cpp b11312
# (ggml-org/llama.cpp@0c1e57098, "update llama.cpp to" in its CHANGELOG).
LLAMA_CPP_PY_VERSION=0.3.36
LLAMA_CPP_BUILD_NUMBER=11312
LLAMA_CPP_BUILD_COMMIT=0c1e57098
LLAMA_CPP_DIR=${LLAMA_CPP_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/specd/llama.cpp-$LLAMA_CPP_PY_VERSION}
LLAMA_BENCH=$LLAMA_CPP_DIR/bin/llama-bench

build_llama_cpp() {
  command -v cmake >/dev/null || { echo "llama_cpp_compare: cmake is needed" >&2; exit 2; }
  mkdir -p "$(dirname "$LLAMA_CPP_DIR")"
  local work
  work=$(mktemp -d "$LLAMA_CPP_DIR.work.XXXXXX")
  echo "llama_cpp_compare: building llama.cpp b$LLAMA_CPP_BUILD_NUMBER (llama-cpp-python" \
       "$LLAMA_CPP_PY_VERSION) into $LLAMA_CPP_DIR (once; log in $work/build.log)" >&2
  local t0=$SECONDS
  "$PYTHON" -m pip download --quiet --no-deps --no-binary :all: \
      "llama-cpp-python==$LLAMA_CPP_PY_VERSION" -d "$work" >&2
  tar -xzf "$work/llama_cpp_python-$LLAMA_CPP_PY_VERSION.tar.gz" -C "$work"
  local src=$work/llama_cpp_python-$LLAMA_CPP_PY_VERSION/vendor/llama.cpp
  grep -q "llama.cpp@$LLAMA_CPP_BUILD_COMMIT" \
      "$work/llama_cpp_python-$LLAMA_CPP_PY_VERSION/CHANGELOG.md" ||
    { echo "llama_cpp_compare: the sdist does not name llama.cpp@$LLAMA_CPP_BUILD_COMMIT" >&2; exit 2; }
  local gen=()
  command -v ninja >/dev/null && gen=(-G Ninja)
  cmake -S "$src" -B "$work/build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
      -DGGML_NATIVE=ON -DBUILD_SHARED_LIBS=OFF \
      -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=ON \
      -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_OPENSSL=OFF \
      -DLLAMA_BUILD_NUMBER="$LLAMA_CPP_BUILD_NUMBER" \
      -DLLAMA_BUILD_COMMIT="$LLAMA_CPP_BUILD_COMMIT" >"$work/build.log" 2>&1 ||
    { tail -30 "$work/build.log" >&2; exit 2; }
  cmake --build "$work/build" --target llama-bench -j"$(nproc)" >>"$work/build.log" 2>&1 ||
    { tail -30 "$work/build.log" >&2; exit 2; }
  mkdir -p "$LLAMA_CPP_DIR/bin"
  cp "$work/build/bin/llama-bench" "$LLAMA_BENCH.tmp"
  cp "$work/build.log" "$LLAMA_CPP_DIR/build.log"
  {
    echo "llama-cpp-python $LLAMA_CPP_PY_VERSION"
    echo "llama.cpp b$LLAMA_CPP_BUILD_NUMBER $LLAMA_CPP_BUILD_COMMIT"
    echo "built $(date -u +%FT%TZ) in $((SECONDS - t0)) s, $(nproc) jobs, $(c++ --version | head -1)"
    grep -E "^-- (Adding CPU backend variant|x86 detected|ARM detected|Including CPU backend)" \
        "$work/build.log" || true
  } >"$LLAMA_CPP_DIR/BUILD_INFO"
  mv "$LLAMA_BENCH.tmp" "$LLAMA_BENCH"
  rm -rf "$work"
  echo "llama_cpp_compare: llama.cpp built in $((SECONDS - t0)) s" >&2
}
[ -x "$LLAMA_BENCH" ] || build_llama_cpp

if [ "${LLAMA_CPP_BUILD_ONLY:-0}" = 1 ]; then cat "$LLAMA_CPP_DIR/BUILD_INFO"; exit 0; fi
[ -x "$SPECD" ] || { echo "llama_cpp_compare: $SPECD not built" >&2; exit 2; }

mkdir -p "$MODELS_DIR"
ids=$(python3 -c "print(','.join(str(1000 + 37 * i) for i in range(64)))")
OUT=$(mktemp)
LJSON=$(mktemp)
trap 'rm -f "$OUT" "$LJSON"' EXIT
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
      # shellcheck disable=SC2086  # LLAMA_BENCH_ARGS is a list of options
      "$LLAMA_BENCH" -m "$model" -t "$t" -p 64 -n "$n" -r 1 -lm none -ngl 0 ${LLAMA_BENCH_ARGS:-} \
          -o json >"$LJSON" 2>/dev/null
      l=$(python3 - "$LJSON" <<'PY'
import json, sys
tests = json.load(open(sys.argv[1]))
pp = next(x for x in tests if x["n_prompt"] > 0 and x["n_gen"] == 0)
tg = next(x for x in tests if x["n_gen"] > 0 and x["n_prompt"] == 0)
print(pp["avg_ts"], tg["avg_ts"], pp["build_number"], pp["build_commit"])
PY
)
      echo "$preset $dtype $t $s $l" | tee -a "$OUT" >&2
    done
  done
done
python3 - "$OUT" "$LLAMA_CPP_PY_VERSION" <<'PY'
import statistics, sys
rows, builds = {}, set()
for line in open(sys.argv[1]):
    p, d, t, sp, sd, lp, ld, bn, bc = line.split()
    rows.setdefault((p, d, int(t)), []).append(tuple(map(float, (sp, sd, lp, ld))))
    builds.add(f"b{bn} ({bc})")
print(f"llama.cpp: native llama-bench, build {', '.join(sorted(builds))}, "
      f"from llama-cpp-python {sys.argv[2]}")
print()
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
