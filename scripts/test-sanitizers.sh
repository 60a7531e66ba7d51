#!/usr/bin/env bash
# The fast sanitizer subset scripts/test.sh runs after the release tests:
#   asan (AddressSanitizer + UBSan, Debug): the unit tests of the modules
#        below, not the end-to-end tests in tests/ (those start servers and
#        rank processes and would not fit the CI budget under ASan);
#   tsan (ThreadSanitizer): the unit tests of the modules with locking code.
#   scripts/test-sanitizers.sh [asan|tsan]...   default: both
# SPECD_ASAN_MODULES / SPECD_TSAN_MODULES override the module lists;
# SPECD_ASAN_EXCLUDE / SPECD_TSAN_EXCLUDE are ctest -E regexes of tests to
# leave out. By default both leave out the resident-memory check
# (...MemoryReturns: sanitizer allocators and shadow memory keep pages) and
# the mpirun tests (Mpi*: TSan reports lock-order inversions inside Open MPI's
# uninstrumented TCP transport, not in specd), and the asan run leaves out the
# matmul comparisons (FloatMatMulTest, QuantMatMulTest): pure arithmetic over
# large shapes, 14 minutes unoptimized under ASan, longer than the rest together.
# Build dirs are the presets' (build/asan, build/tsan).
set -euo pipefail
cd "$(dirname "$0")/.."

asan_modules="${SPECD_ASAN_MODULES:-base tensor kernels model loader modelgen tokenizer jinja sampling spec runtime http server}"
tsan_modules="${SPECD_TSAN_MODULES:-runtime comm server}"
asan_exclude="${SPECD_ASAN_EXCLUDE-MatMulTest|MemoryReturns|^Mpi}"
tsan_exclude="${SPECD_TSAN_EXCLUDE-MemoryReturns|^Mpi}"

run() {  # run PRESET EXCLUDE_REGEX MODULE...
  local preset="$1" exclude="$2"
  shift 2
  local targets=() labels=()
  for m in "$@"; do
    # Modules without unit tests (or not in this checkout) have no target.
    compgen -G "src/$m/*_test.cc" >/dev/null || continue
    targets+=("specd_${m}_tests")
    labels+=("$m")
  done
  local label_re
  label_re="^($(IFS='|'; echo "${labels[*]}"))\$"
  local start=$SECONDS
  echo "== $preset: building ${targets[*]}"
  # Called as `run ... || status=$?`, where set -e does not apply: each step
  # returns its failure itself.
  cmake --preset "$preset" >/dev/null || return $?
  cmake --build --preset "$preset" --target "${targets[@]}" || return $?
  local built=$SECONDS
  echo "== $preset: running tests labelled $label_re${exclude:+, except $exclude}"
  local rc=0
  ctest --preset "$preset" -L "$label_re" ${exclude:+-E "$exclude"} -j "$(nproc)" || rc=$?
  echo "== $preset: build $((built - start)) s, tests $((SECONDS - built)) s"
  return "$rc"
}

# Each preset runs even when an earlier one failed; the exit status is the
# last failure's.
presets=("$@")
[ ${#presets[@]} -eq 0 ] && presets=(asan tsan)
status=0
for p in "${presets[@]}"; do
  case "$p" in
    asan) run asan "$asan_exclude" $asan_modules || status=$? ;;
    tsan) run tsan "$tsan_exclude" $tsan_modules || status=$? ;;
    *) echo "test-sanitizers: unknown preset '$p' (asan or tsan)" >&2; exit 2 ;;
  esac
done
exit "$status"
