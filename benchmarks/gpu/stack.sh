#!/usr/bin/env bash
# hvdbench inside the stack a GPU machine already has (its own PyTorch, no Horovod): install it there,
# train ResNet-50 under ddp and fsdp with torchrun, and capture the hardware record and the raw
# nvidia-smi text that tests/unit/test_hardware.py's parsers are tested on.
#
#   bash benchmarks/gpu/stack.sh OUT_DIR
#
# OUT_DIR gets: topo.txt (`nvidia-smi topo -m`), query-gpu.txt (the --query-gpu csv hardware.py asks
# for), env.json (`hvdbench env --json`), env.txt, one folder per engine with result.json and its
# log, and stack.log with each step's exit code and seconds. Needs no registry: hvdbench installs with
# --no-deps --no-build-isolation (its own dependencies must be there; PYTHONPATH is the fallback).
set -uo pipefail
cd "$(dirname "$0")/../.."
[ $# -eq 1 ] || { echo "usage: $0 OUT_DIR" >&2; exit 2; }
OUT="$(realpath -m "$1")"
mkdir -p "$OUT"
PY="${PYTHON:-python3}"
export PYTHONUNBUFFERED=1 PATH="$(dirname "$("$PY" -c 'import sys; print(sys.executable)')"):$PATH"

# step NAME CMD...: CMD's output in OUT/NAME.log, its exit code and seconds in OUT/stack.log; go on.
step() {
  local name="$1" t=$SECONDS rc=0; shift
  "$@" >"$OUT/$name.log" 2>&1 || rc=$?
  printf '%-14s rc=%d %4ds\n' "$name" "$rc" $((SECONDS - t)) | tee -a "$OUT/stack.log"
}

step install "$PY" -m pip install --no-deps --no-build-isolation -e .
"$PY" -c 'import hvdbench' 2>/dev/null || export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
nvidia-smi topo -m >"$OUT/topo.txt" 2>&1
nvidia-smi --query-gpu=index,name,memory.total,driver_version,pci.bus_id --format=csv,noheader,nounits \
  >"$OUT/query-gpu.txt" 2>&1
"$PY" -m hvdbench env --json >"$OUT/env.json" 2>"$OUT/env.err"
"$PY" -m hvdbench env >"$OUT/env.txt" 2>&1
for engine in ddp fsdp; do
  step "$engine" torchrun --standalone --nproc-per-node 1 -m hvdbench train resnet50 --flavor debug --synthetic \
    --engine "$engine" --steps 30 --warmup-steps 5 --out "$OUT/$engine"
done
# Refused in one line where Horovod is not installed (rc != 0 is the expected outcome there).
step horovod "$PY" -m hvdbench train resnet50 --flavor debug --synthetic --engine horovod --steps 5 --out "$OUT/horovod"
"$PY" - "$OUT" <<'PY'
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
for engine in ("ddp", "fsdp"):
    path = out / engine / "result.json"
    row = json.loads(path.read_text()) if path.exists() else {}
    print(f"{engine}: status={row.get('status')} throughput={row.get('throughput')} devices={row.get('devices')} "
          f"versions={row.get('versions')}")
hw = out / "ddp" / "hardware.json"
for host, rec in (json.loads(hw.read_text()) if hw.exists() else {}).items():
    print(f"{host}: {len(rec['gpus'])} GPU(s), driver {rec['driver']}, intra {rec['intra_node_link']!r}, "
          f"inter {rec['inter_node_link']!r}, versions {rec['versions']}")
PY
