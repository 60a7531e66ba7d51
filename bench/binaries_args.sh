# Sourced by bench scripts that compare specd binaries:
#   SCRIPT [-r REPEATS] BINARY... -- GENERATE_FLAGS...
# Sets `repeats` (default 3) and `bins`, and leaves the generate flags in "$@".
repeats=3
if [[ "${1:-}" == "-r" ]]; then
  repeats="$2"
  shift 2
fi
bins=()
while [[ $# -gt 0 && "$1" != "--" ]]; do
  bins+=("$1")
  shift
done
[[ "${1:-}" == "--" ]] && shift
if [[ ${#bins[@]} -eq 0 ]]; then
  echo "usage: $0 [-r REPEATS] BINARY... -- GENERATE_FLAGS..." >&2
  exit 2
fi
