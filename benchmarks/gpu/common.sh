# What benchmarks/gpu/run.sh and levers.sh set up alike, sourced by them:
#   . "$(dirname "$0")/common.sh" DEFAULT_OUT_DIR "$@"
# cd to the checkout; OUT: the first argument, else $OUT, else DEFAULT_OUT_DIR (made, with logs/ and
# runs/); PY: $PYTHON or python3, whose bin/ goes first on PATH; wheels carried in .gpu/deps install
# to /tmp/hvdbench-site (run.sh), which is on PYTHONPATH before this checkout.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
OUT="$(realpath -m "${2:-${OUT:-$1}}")"
mkdir -p "$OUT/logs" "$OUT/runs"
PY="${PYTHON:-python3}"
export PYTHONUNBUFFERED=1 PYTHONPATH="/tmp/hvdbench-site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
export PATH="$(dirname "$("$PY" -c 'import sys; print(sys.executable)')"):$PATH"
