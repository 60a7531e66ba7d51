#!/usr/bin/env bash
# Throughput and peak memory of `specd diagnose` on a large multi-rank log.
#
#   bench/diagnose_bench.sh [SIZE_MB] [SPECD]      (defaults: 1024, build/release/specd)
#
# Generates SIZE_MB of interleaved 8-rank server output (stamped INFO/WARNING
# lines, raw unstamped lines, a few benign ERROR lines), then the KeyError: 12
# crash of the story in tests/diagnose/corpus near the end, followed by
# consequences. Runs the diagnosis once on SIZE_MB and once on a 1/16 slice
# to show that peak RSS does not grow with the input. Needs /usr/bin/time
# (Debian package `time`, listed in scripts/setup.sh).
# The log goes to $BENCH_DIR (default /tmp) and is removed afterwards.
#
# Measured (2-core AMD EPYC VM under load average ~5, page cache warm):
#   1023 MiB: 3.06 s wall (334 MiB/s), 1.99 s CPU (514 MiB/s), peak RSS 11.2 MiB
#     63 MiB: 0.17 s wall,                                     peak RSS 11.3 MiB
set -euo pipefail

SIZE_MB=${1:-1024}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SPECD=${2:-$ROOT/build/release/specd}
DIR=${BENCH_DIR:-/tmp}
[ -x "$SPECD" ] || { echo "diagnose_bench: $SPECD not built" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "diagnose_bench: /usr/bin/time missing (apt-get install time)" >&2; exit 2; }

gen() {  # gen SIZE_MB FILE
  python3 - "$1" "$2" <<'PY'
import sys
size_mb, path = int(sys.argv[1]), sys.argv[2]
block = []
for i in range(6000):
    r = i % 8
    s = i % 60
    if i % 50 == 7:
        block.append(f"[TP{r}] Decode batch. #running-req: {i % 97}, #token: {i * 13 % 9000}, gen throughput (token/s): {i % 700}.5")
    elif i % 300 == 11:
        block.append(f"[TP{r}] 2026-12-02 10:{s:02d}:{s:02d},{i % 1000:03d} WARNING scheduler.py:512 KV cache 91% full; evicting prefix cache")
    elif i % 1000 == 13:
        block.append(f"[TP{r}] 2026-12-02 10:{s:02d}:{s:02d},{i % 1000:03d} ERROR http_server.py:88 client disconnected before the response finished")
    else:
        block.append(f"[TP{r}] 2026-12-02 10:{s:02d}:{s:02d},{i % 1000:03d} INFO scheduler.py:1203 Prefill batch. #new-seq: {i % 5}, #new-token: {i * 7 % 4096}, #cached-token: {i % 1024}, token usage: 0.{i % 100:02d}, #running-req: {i % 61}, #queue-req: {i % 3}")
data = ("\n".join(block) + "\n").encode()
crash = []
for r in range(8):
    p = f"[TP{r}] "
    crash += [p + f"2026-12-02 11:00:00,{100 + r:03d} ERROR scheduler.py:2312 Scheduler hit an exception:",
              p + "Traceback (most recent call last):",
              p + '  File "/sgl-workspace/sglang/python/sglang/srt/layers/moe/fused_moe_triton/fused_moe.py", line 912, in get_default_config',
              p + "    config = _SM_TUNED_CONFIGS[device_capability[0]][dtype]",
              p + "KeyError: 12"]
crash.append("[2026-12-02 11:00:01] Received sigquit from a child process. It usually means the child failed.")
tail = ("\n".join(crash) + "\n").encode()
target = size_mb << 20
with open(path, "wb") as f:
    written = 0
    while written + len(data) <= target - len(tail) - len(data):
        f.write(data)
        written += len(data)
    f.write(tail)
    f.write(data)  # normal output continues after the crash
PY
}

run() {  # run FILE LABEL
  local file=$1 label=$2 out
  out=$( { /usr/bin/time -v "$SPECD" diagnose --json "$file" >"$DIR/diagnose_bench.json"; } 2>&1 ) || true
  local wall rss bytes cpu
  wall=$(echo "$out" | awk -F': ' '/Elapsed \(wall clock\)/ {print $2}')
  cpu=$(echo "$out" | awk -F': ' '/User time|System time/ {s += $2} END {print s}')
  rss=$(echo "$out" | awk -F': ' '/Maximum resident set size/ {print $2}')
  bytes=$(stat -c %s "$file")
  python3 - "$label" "$bytes" "$wall" "$rss" "$DIR/diagnose_bench.json" "$cpu" <<'PY'
import json, sys
label, nbytes, wall, rss_kb, js = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), sys.argv[5]
cpu = float(sys.argv[6])
parts = [float(p) for p in wall.split(":")]
secs = parts[-1] + (parts[-2] * 60 if len(parts) > 1 else 0) + (parts[-3] * 3600 if len(parts) > 2 else 0)
d = json.load(open(js))
c = d.get("cause") or {}
mib = nbytes / 2**20
print(f"{label}: {mib:.0f} MiB in {secs:.2f} s wall = {mib / max(secs, 1e-9):.0f} MiB/s "
      f"({cpu:.2f} s CPU = {mib / max(cpu, 1e-9):.0f} MiB/s per core), "
      f"peak RSS {rss_kb / 1024:.1f} MiB; cause: {c.get('type')}: {c.get('message')} "
      f"({c.get('process')}, {d.get('ranks_failed_same_way')} same way, signature {d.get('signature')})")
PY
}

LOG="$DIR/diagnose_bench_${SIZE_MB}m.log"
SMALL="$DIR/diagnose_bench_small.log"
trap 'rm -f "$LOG" "$SMALL" "$DIR/diagnose_bench.json"' EXIT
SMALL_MB=$(( SIZE_MB / 16 > 0 ? SIZE_MB / 16 : 1 ))
gen "$SIZE_MB" "$LOG"
gen "$SMALL_MB" "$SMALL"
echo "machine: $(nproc) cpus, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
cat "$LOG" >/dev/null  # warm the page cache so the figure is parse speed, not disk speed
run "$SMALL" "small"
run "$LOG" "large"
