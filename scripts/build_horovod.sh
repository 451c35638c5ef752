#!/usr/bin/env bash
# Build a Horovod 0.28.1 wheel from its PyPI sdist for the frameworks installed in PYTHON's environment.
#
#   bash scripts/build_horovod.sh SDIST.tar.gz WHEEL_DIR PYTHON
#
# `make setup` (scripts/setup.sh) calls this with the sdist it downloads; on a machine without a
# package registry (a lent GPU machine) benchmarks/gpu/run.sh calls it with a carried sdist.
#   - frameworks: PyTorch and TensorFlow where installed (each one missing is built without);
#   - controllers: Gloo always, MPI where `mpicc` is on PATH;
#   - GPUs: NCCL where a GPU and nvcc are present, taking NCCL's headers and library from the
#     nvidia-nccl wheel PyTorch depends on, and compiling Horovod's CUDA kernels only for the
#     compute capability of the GPUs here (HOROVOD_BUILD_CUDA_CC_LIST overrides, e.g. 80,90).
set -euo pipefail
[ $# -eq 3 ] || { echo "usage: $0 SDIST.tar.gz WHEEL_DIR PYTHON" >&2; exit 2; }
SDIST="$(realpath "$1")"; WHEELS="$2"; PY="$3"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

tar -xzf "$SDIST" -C "$WORK"
SRC="$(find "$WORK" -mindepth 1 -maxdepth 1 -type d -name 'horovod-*' | head -1)"
"$PY" "$HERE/patch_horovod.py" "$SRC"

installed() { "$PY" -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('$1') is None)"; }
export HOROVOD_WITHOUT_MXNET=1 HOROVOD_WITH_GLOO=1
if installed torch; then export HOROVOD_WITH_PYTORCH=1; else export HOROVOD_WITHOUT_PYTORCH=1; fi
if installed tensorflow; then export HOROVOD_WITH_TENSORFLOW=1; else export HOROVOD_WITHOUT_TENSORFLOW=1; fi
if command -v mpicc >/dev/null 2>&1; then export HOROVOD_WITH_MPI=1; else export HOROVOD_WITHOUT_MPI=1; fi
# Horovod's bundled gloo does not configure with CMake 4 without this (CMake 3.x ignores it).
# make -k: a failing build reports every file that fails, not just the first.
export CMAKE_POLICY_VERSION_MINIMUM=3.5 MAKEFLAGS="-j$(nproc) -k"

if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 && command -v nvcc >/dev/null 2>&1; then
  # The nvidia-nccl wheel ships nccl.h and libnccl.so.2 but not the unversioned libnccl.so that
  # CMake's find_library looks for: link a private copy of the name in the build folder.
  read -r NCCL_INC NCCL_SO < <("$PY" - <<'PY'
import glob, importlib.util, os, sys
roots = [p for p in (importlib.util.find_spec("nvidia").submodule_search_locations or [])]
heads = [h for r in roots for h in glob.glob(os.path.join(r, "**", "nccl.h"), recursive=True)]
libs = [l for r in roots for l in glob.glob(os.path.join(r, "**", "libnccl.so*"), recursive=True)]
if not heads or not libs:
    sys.exit("no nccl.h / libnccl.so* in the nvidia wheels next to PyTorch")
print(os.path.dirname(heads[0]), libs[0])
PY
)
  mkdir -p "$WORK/nccl-lib"
  ln -s "$NCCL_SO" "$WORK/nccl-lib/libnccl.so"
  export HOROVOD_GPU_OPERATIONS=NCCL HOROVOD_NCCL_LINK=SHARED \
         HOROVOD_NCCL_INCLUDE="$NCCL_INC" HOROVOD_NCCL_LIB="$WORK/nccl-lib"
  if [ -z "${HOROVOD_BUILD_CUDA_CC_LIST:-}" ]; then
    HOROVOD_BUILD_CUDA_CC_LIST="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | tr -d . | sort -u | paste -sd,)"
    export HOROVOD_BUILD_CUDA_CC_LIST
  fi
  echo "NCCL: $NCCL_INC, $NCCL_SO; CUDA kernels for compute capability $HOROVOD_BUILD_CUDA_CC_LIST"
fi
env | grep -E '^(HOROVOD|CMAKE_POLICY)' | sort

"$PY" -m pip wheel -v --no-deps --no-build-isolation -w "$WHEELS" "$SRC"
