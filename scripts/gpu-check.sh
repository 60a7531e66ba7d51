#!/usr/bin/env bash
# The checks that need an NVIDIA GPU, in one run of at most ~8 minutes:
#   1. configure a release build for the GPU's own architecture (CUDAARCHS
#      from nvidia-smi's compute capability, else "native");
#   2. build specd_cuda_tests and bench/cuda_kernels_bench with every core;
#   3. run specd_cuda_tests (every kernel against its CPU reference);
#   4. run cuda_kernels_bench (GB/s and fraction of peak DRAM bandwidth);
#   5. build specd and run `specd doctor --json`, in the time left.
# Everything lands in $OUT (default ./gpu-check-out): gpu-check.log (the whole
# run), summary.json (status, tests passed/failed/skipped, per-kernel GB/s),
# cuda_tests.json (GoogleTest), bench.json, doctor.json.
#
# Missing packages: the full project needs hwy, nlohmann-json, CLI11,
# cpp-httplib, spdlog, utf8proc, pcre2, libevent, Open MPI and Google
# Benchmark (scripts/setup.sh); the cuda module needs only fmt, GoogleTest and
# the CUDA toolkit. The script names what is missing and, when the full
# configure fails, builds the cuda module alone (-DSPECD_CUDA_ONLY=ON): tests
# and benchmark still run, only `specd doctor` is skipped.
#
# Exit status: 0 when every check that ran passed, and also when there is no
# GPU (nothing to check: the reason is printed and in summary.json, status
# "no_device"); 1 when a test or benchmark failed; 2 when nothing could be
# built (summary.json says why).
#
# Environment: OUT (output folder), SPECD_GPU_CHECK_BUDGET_S (default 470 s,
# the whole run's budget), CUDAARCHS (overrides the detected architecture),
# SPECD_GPU_CHECK_JOBS (build jobs, default nproc), SPECD_GPU_CHECK_CUDA_ONLY=1
# (skip the full build: kernel tests and benchmark only, the fastest run).
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${OUT:-$ROOT/gpu-check-out}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
LOG="$OUT/gpu-check.log"
: >"$LOG"
exec > >(tee -a "$LOG") 2>&1
TEE_PID=$!

START=$(date +%s)
BUDGET="${SPECD_GPU_CHECK_BUDGET_S:-470}"
left() { echo $((BUDGET - ($(date +%s) - START))); }
say() { echo "gpu-check [$(($(date +%s) - START))s]: $*"; }

STATUS=ok REASON="" GPU="" ARCHS="" MODE="" MISSING_FULL="" MISSING_CUDA=""
TESTS_RC="" BENCH_RC="" DOCTOR_RC="" SPECD_BUILD=""

# summary.json from the pieces above and the JSON files the steps wrote.
write_summary() {
  if ! command -v python3 >/dev/null; then
    printf '{"status": "%s", "reason": "%s", "note": "python3 missing: no test or benchmark details"}\n' \
      "$STATUS" "${REASON//\"/\'}" >"$OUT/summary.json"
    return
  fi
  STATUS="$STATUS" REASON="$REASON" GPU="$GPU" ARCHS="$ARCHS" MODE="$MODE" \
  MISSING_FULL="$MISSING_FULL" MISSING_CUDA="$MISSING_CUDA" TESTS_RC="$TESTS_RC" \
  BENCH_RC="$BENCH_RC" DOCTOR_RC="$DOCTOR_RC" SPECD_BUILD="$SPECD_BUILD" \
  ELAPSED="$(($(date +%s) - START))" OUT="$OUT" python3 - <<'PY'
import json, os
env = os.environ
out = env["OUT"]
def load(name):
    try:
        with open(os.path.join(out, name)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None
s = {
    "status": env["STATUS"],
    "reason": env["REASON"] or None,
    "gpu": env["GPU"] or None,
    "cuda_architectures": env["ARCHS"] or None,
    "build": env["MODE"] or None,
    "missing_packages_full_build": env["MISSING_FULL"].split(),
    "missing_packages_cuda_build": env["MISSING_CUDA"].split(),
    "specd_build": env["SPECD_BUILD"] or None,
    "elapsed_s": int(env["ELAPSED"]),
}
t = load("cuda_tests.json")
if t is not None:
    passed, failed, skipped = [], [], []
    for suite in t.get("testsuites", []):
        for case in suite.get("testsuite", []):
            name = f'{case["classname"]}.{case["name"]}'
            if case.get("failures"):
                failed.append(name)
            elif case.get("result") == "SKIPPED":
                skipped.append(name)
            else:
                passed.append(name)
    s["tests"] = {"passed": len(passed), "failed": len(failed), "skipped": len(skipped),
                  "failed_names": failed, "skipped_names": skipped,
                  "exit_status": int(env["TESTS_RC"]) if env["TESTS_RC"] else None}
elif env["TESTS_RC"]:
    s["tests"] = {"exit_status": int(env["TESTS_RC"]), "note": "no GoogleTest JSON written"}
b = load("bench.json")
if b is not None:
    s["bench"] = {"peak_bandwidth_gbps": b.get("peak_bandwidth_gbps"),
                  "skipped": b.get("skipped"),
                  "kernels": [{k: r.get(k) for k in ("kernel", "shape", "us", "gbps",
                                                      "fraction_of_peak", "error")
                               if r.get(k) is not None} for r in b.get("results", [])]}
elif env["BENCH_RC"]:
    s["bench"] = {"exit_status": int(env["BENCH_RC"]), "note": "no bench.json written"}
if env["DOCTOR_RC"]:
    s["doctor"] = {"exit_status": int(env["DOCTOR_RC"]),
                   "file": "doctor.json" if load("doctor.json") is not None else None}
with open(os.path.join(out, "summary.json"), "w") as f:
    json.dump(s, f, indent=1)
    f.write("\n")
PY
}

finish() {  # finish STATUS EXIT_CODE [REASON]
  STATUS="$1"
  [ $# -ge 3 ] && REASON="$3"
  write_summary
  say "status $STATUS${REASON:+: $REASON}; summary in $OUT/summary.json, log in $LOG"
  exec >&- 2>&-
  wait "$TEE_PID" 2>/dev/null  # the log is complete when the script ends
  exit "$2"
}

# --- 0. Is there a GPU? -----------------------------------------------------
if ! command -v nvidia-smi >/dev/null; then
  finish no_device 0 "nvidia-smi not found (no NVIDIA driver): nothing to check"
fi
if ! smi_list="$(timeout 30 nvidia-smi -L 2>&1)" || ! grep -q '^GPU ' <<<"$smi_list"; then
  finish no_device 0 "nvidia-smi reports no GPU: $(head -c 300 <<<"$smi_list" | tr '\n' ' ')"
fi
GPU="$(grep '^GPU ' <<<"$smi_list" | head -1)"
say "$GPU"
timeout 30 nvidia-smi --query-gpu=name,compute_cap,memory.total,driver_version --format=csv || true

if [ -n "${CUDAARCHS:-}" ]; then
  ARCHS="$CUDAARCHS"
else
  cc="$(timeout 30 nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')"
  if [[ "$cc" =~ ^[0-9]+$ ]]; then ARCHS="$cc"; else ARCHS=native; fi
fi
export CUDAARCHS="$ARCHS"
say "building for CUDA architectures $ARCHS"

# --- 1. Tools and packages ---------------------------------------------------
if ! command -v nvcc >/dev/null; then
  for d in /usr/local/cuda/bin /usr/local/cuda-*/bin; do
    if [ -x "$d/nvcc" ]; then export PATH="$d:$PATH"; break; fi
  done
fi
missing_tools=()
for t in cmake nvcc g++; do command -v "$t" >/dev/null || missing_tools+=("$t"); done
if [ ${#missing_tools[@]} -gt 0 ]; then
  finish build_failed 2 "missing tools: ${missing_tools[*]} (CUDA toolkit: nvcc; Debian: cmake g++)"
fi
GENERATOR=Ninja
command -v ninja >/dev/null || GENERATOR="Unix Makefiles"
nvcc --version | tail -2

# Debian package names from scripts/setup.sh; without dpkg the configure step
# below is the check.
CUDA_PKGS=(libfmt-dev libgtest-dev libgmock-dev)
FULL_PKGS=(pkg-config libhwy-dev nlohmann-json3-dev libcli11-dev libcpp-httplib-dev libspdlog-dev
           libutf8proc-dev libpcre2-dev libevent-dev libopenmpi-dev libbenchmark-dev)
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
if command -v dpkg-query >/dev/null; then
  for p in "${CUDA_PKGS[@]}"; do installed "$p" || MISSING_CUDA+="$p "; done
  for p in "${CUDA_PKGS[@]}" "${FULL_PKGS[@]}"; do installed "$p" || MISSING_FULL+="$p "; done
  if [ -n "$MISSING_FULL" ]; then
    say "missing for the full build: $MISSING_FULL(apt-get install $MISSING_FULL, or scripts/setup.sh)"
  fi
  [ -n "$MISSING_CUDA" ] && say "missing for the cuda module: $MISSING_CUDA"
fi

# --- 2. Configure: the whole project, else the cuda module alone -------------
NPROC="${SPECD_GPU_CHECK_JOBS:-$(nproc)}"
configure() {  # configure BUILD_DIR EXTRA_ARGS...
  local dir="$1"
  shift
  timeout 120 cmake -S "$ROOT" -B "$dir" -G "$GENERATOR" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DSPECD_CUDA=ON "$@" >"$OUT/configure-$(basename "$dir").log" 2>&1
}
B="$ROOT/build/gpu-check"
if [ "${SPECD_GPU_CHECK_CUDA_ONLY:-0}" = 1 ]; then
  say "SPECD_GPU_CHECK_CUDA_ONLY=1: skipping the full build"
fi
if [ "${SPECD_GPU_CHECK_CUDA_ONLY:-0}" != 1 ] && configure "$B"; then
  MODE=full
else
  [ -f "$OUT/configure-gpu-check.log" ] && {
    say "full configure failed; CMake said:"
    grep -E "Could NOT find|not found|Error" "$OUT/configure-gpu-check.log" | head -10
  }
  B="$ROOT/build/gpu-check-cuda-only"
  if configure "$B" -DSPECD_CUDA_ONLY=ON; then
    MODE=cuda-only
    say "building the cuda module alone (SPECD_CUDA_ONLY=ON): specd doctor will be skipped"
  else
    tail -20 "$OUT/configure-gpu-check-cuda-only.log"
    finish build_failed 2 "cmake could not configure even the cuda module (needs fmt, GoogleTest, CUDA): missing ${MISSING_CUDA:-see configure-gpu-check-cuda-only.log}"
  fi
fi

# --- 3. Build and run the kernel tests and the benchmark ----------------------
say "building specd_cuda_tests cuda_kernels_bench with $NPROC jobs ($MODE)"
t=$(($(left) - 150))
[ "$t" -lt 60 ] && t=60
if ! timeout "$t" cmake --build "$B" -j "$NPROC" --target specd_cuda_tests cuda_kernels_bench; then
  finish build_failed 2 "building specd_cuda_tests / cuda_kernels_bench failed or ran out of time (see the log)"
fi

say "running specd_cuda_tests"
timeout 150 "$B/src/cuda/specd_cuda_tests" --gtest_output="json:$OUT/cuda_tests.json"
TESTS_RC=$?
say "specd_cuda_tests exit status $TESTS_RC"
# nvidia-smi sees a GPU, so a skipped kernel test means the binary could not
# use it (driver older than the runtime, no kernel image for it): a failure.
SKIPPED=0
if command -v python3 >/dev/null && [ -f "$OUT/cuda_tests.json" ]; then
  SKIPPED="$(python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
print(sum(c.get("result") == "SKIPPED" for s in d["testsuites"] for c in s["testsuite"]))' \
    "$OUT/cuda_tests.json" 2>/dev/null || echo 0)"
fi
if [ "$TESTS_RC" -eq 0 ] && [ "$SKIPPED" -gt 0 ]; then
  say "a GPU is present but $SKIPPED tests skipped (the skip messages above say why): counted as a failure"
  TESTS_RC=3
fi

bench_args=(--json "$OUT/bench.json")
[ "$(left)" -lt 200 ] && bench_args+=(--quick)
say "running cuda_kernels_bench ${bench_args[*]}"
timeout 90 "$B/bench/cuda_kernels_bench" "${bench_args[@]}"
BENCH_RC=$?
say "cuda_kernels_bench exit status $BENCH_RC"

# --- 4. specd and its doctor, in the time left -------------------------------
if [ "$MODE" = full ]; then
  t=$(($(left) - 20))
  if [ "$t" -lt 30 ]; then
    SPECD_BUILD="skipped: ${t}s left"
  else
    say "building specd (${t}s left for it)"
    if timeout "$t" cmake --build "$B" -j "$NPROC" --target specd; then
      SPECD_BUILD=built
      timeout 30 "$B/specd" doctor --json >"$OUT/doctor.json"
      DOCTOR_RC=$?
      timeout 30 "$B/specd" doctor || true
    else
      SPECD_BUILD="failed or out of time (${t}s)"
    fi
  fi
else
  if [ "${SPECD_GPU_CHECK_CUDA_ONLY:-0}" = 1 ]; then
    SPECD_BUILD="skipped: SPECD_GPU_CHECK_CUDA_ONLY=1"
  else
    SPECD_BUILD="skipped: the full configure failed (missing: ${MISSING_FULL:-see configure-gpu-check.log})"
  fi
fi
say "specd: $SPECD_BUILD"

if [ "$TESTS_RC" -ne 0 ] || [ "$BENCH_RC" -ne 0 ] || { [ -n "$DOCTOR_RC" ] && [ "$DOCTOR_RC" -ne 0 ]; }; then
  finish failed 1 "specd_cuda_tests $TESTS_RC, cuda_kernels_bench $BENCH_RC, doctor ${DOCTOR_RC:-not run}"
fi
finish ok 0
