#!/usr/bin/env bash
# Clang's thread-safety analysis over every translation unit that (directly
# or through a project header) includes base/thread_annotations.h, with the
# flags of a configured build's compile_commands.json.
#   scripts/check-thread-safety.sh [build-dir]     default: build/release
# The build is g++-oriented: the compiler, -Werror, output and dependency
# flags are replaced, and warnings clang does not know are ignored, so only
# -Werror=thread-safety findings fail the check. CLANGXX overrides clang++.
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build/release}"
clangxx="${CLANGXX:-clang++}"
if ! command -v "$clangxx" >/dev/null; then
  echo "check-thread-safety: $clangxx not found (scripts/setup.sh installs clang)" >&2
  exit 1
fi
[ -f "$build/compile_commands.json" ] || {
  echo "check-thread-safety: no $build/compile_commands.json (configure the build first)" >&2
  exit 1
}
python3 - "$build/compile_commands.json" "$clangxx" "$(nproc)" <<'PY'
import json, os, re, shlex, subprocess, sys
from concurrent.futures import ThreadPoolExecutor

db_path, clangxx, jobs = sys.argv[1], sys.argv[2], int(sys.argv[3])
root = os.getcwd()
src = os.path.join(root, "src")

# Files under src/ that include the annotations, directly or through another
# project header (to a fixed point).
include_re = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
includes = {}
for d, _, names in os.walk(src):
    for n in names:
        if n.endswith((".h", ".cc", ".inc")):
            p = os.path.join(d, n)
            with open(p, errors="replace") as f:
                includes[p] = {os.path.join(src, i) for i in include_re.findall(f.read())}
annotated = {os.path.join(src, "base/thread_annotations.h")}
while True:
    more = {p for p, inc in includes.items() if p not in annotated and inc & annotated}
    if not more:
        break
    annotated |= more

drop_with_arg = {"-o", "-MF", "-MT", "-MQ"}
drop = {"-c", "-MD", "-MMD", "-Werror"}
units = []
for e in json.load(open(db_path)):
    path = os.path.normpath(os.path.join(e["directory"], e["file"]))
    if path not in annotated or not path.endswith(".cc"):
        continue
    args = e["arguments"] if "arguments" in e else shlex.split(e["command"])
    # Drop the launcher (ccache) and the compiler itself.
    while args and os.path.basename(args[0]) in ("ccache", "sccache"):
        args = args[1:]
    args = args[1:]
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
            continue
        if a in drop_with_arg:
            skip = True
            continue
        if a in drop or a.startswith("-Werror=") or a == path or a == e["file"]:
            continue
        out.append(a)
    cmd = [clangxx, "-fsyntax-only", "-Wno-unknown-warning-option", "-Wthread-safety",
           "-Werror=thread-safety", *out, path]
    units.append((e["directory"], path, cmd))
if not units:
    sys.exit("check-thread-safety: no annotated translation unit in " + db_path)

def run(u):
    d, path, cmd = u
    r = subprocess.run(cmd, cwd=d, capture_output=True, text=True)
    return path, r.returncode, r.stderr

failed = 0
with ThreadPoolExecutor(jobs) as ex:
    for path, rc, err in ex.map(run, units):
        rel = os.path.relpath(path, root)
        if rc != 0:
            failed += 1
            print(f"FAIL {rel}\n{err}", flush=True)
        elif "-Wthread-safety" in err:
            print(f"warn {rel}\n{err}", flush=True)
names = " ".join(sorted(os.path.relpath(p, root) for _, p, _ in units))
print(f"check-thread-safety: {len(units)} translation units ({names}), {failed} failed")
sys.exit(1 if failed else 0)
PY
