#!/usr/bin/env bash
# CI's torch tiers: hvdbench installed with `pip install` into a Python that already has the oldest
# (or the newest) PyTorch hvdbench supports and no Horovod, then the engine unit tests, one ddp and
# one fsdp launch under torchrun with its report, `bench compute` and `bench flops` (tests/tiers/);
# the newest tier also runs the levers' tests that need no Horovod (compile, fused optimizers,
# attention paths: the APIs each release moves). What a cluster's own environment (a vendor
# container, a module system) looks like to hvdbench.
#
#   make test-oldest            (or: bash scripts/test_torch_tier.sh oldest)
#   make test-newest            (or: bash scripts/test_torch_tier.sh newest)
#
# PyPI's Linux x86_64 torch wheels are CUDA builds: torch needs its nvidia-* and cuda-toolkit wheels
# to load at all (libtorch links libcudnn, libcublas, libnccl...), even on a machine with no GPU, so
# the venv takes them (measured here for 2.11.0: 2.6 GB downloaded in 24 s, installed in 43 s, 4.6 GB
# on disk). Each tier's venv with torch is cached under $HVDBENCH_CACHE keyed by tier, Python, torch
# and the recipe, so a second run on the same machine only reinstalls hvdbench (seconds); the tier's
# older keys are removed.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python3}"
CACHE="${HVDBENCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hvdbench}"
# The tested range, both ends: setup.cfg's torch extra says `torch>=` the oldest's minor and `<` the
# minor after the newest's, and hvdbench/releases.py TESTED_TORCH names both
# (tests/unit/test_hardware.py holds them together).
OLDEST_TORCH=2.11.0
NEWEST_TORCH=2.15.0
TIER="${1:-}"
case "$TIER" in
  oldest) TORCH="$OLDEST_TORCH" ;;
  newest) TORCH="$NEWEST_TORCH" ;;
  *) echo "usage: $0 oldest|newest" >&2; exit 2 ;;
esac
T0=$SECONDS
say() { echo "[test-$TIER] $*"; }

# A machine may cap pip below the newest release (a pip.conf naming a constraints file with
# `torch<=...`: this project's CI machines have one). The tier's venv asks for its own exact torch,
# so each pip call into it reads an empty constraints file instead; nothing outside the venv changes.
tier_pip() { PIP_CONSTRAINT=/dev/null "$VENV/bin/pip" "$@"; }

py="$("$PYTHON" -c 'import platform; print(platform.python_version())')"
# Bump when the venv's making below changes: the key then names a new venv.
RECIPE=1
VENV="$CACHE/$TIER-py$py-torch$TORCH-r$RECIPE"
if [ ! -f "$VENV/.ok" ]; then
  for old in "$CACHE/$TIER"-*; do [ -e "$old" ] && [ "$old" != "$VENV" ] && rm -rf "$old"; done
  rm -rf "$VENV"
  mkdir -p "$CACHE"
  "$PYTHON" -m venv "$VENV"
  tier_pip install -q --upgrade "pip>=24" "setuptools>=69,<81" wheel
  tier_pip install -q "torch==$TORCH"
  touch "$VENV/.ok"
  say "venv with torch $TORCH made in $((SECONDS - T0))s: $VENV"
else
  say "reusing $VENV"
fi

# The documented path: the project and its extras into a Python that has torch, keeping that torch.
# The newest also takes genai (transformers, ...): the LLM levers' tests build Llama 3.1 from it.
extras=torch,dev
[ "$TIER" = newest ] && extras=torch,dev,genai
t=$SECONDS
tier_pip install -q "$ROOT[$extras]"
have="$("$VENV/bin/python" -c 'import torch; print(torch.__version__.split("+")[0])')"
[ "$have" = "$TORCH" ] || { echo "[test-$TIER] pip install moved torch $TORCH to $have" >&2; exit 1; }
say "pip install of hvdbench in $((SECONDS - t))s; torch still $have"

# Installed hvdbench, not the checkout's, is what the tests import (run from outside the checkout).
# The one engine unit test left out plans --engines horovod,ddp, which a Python without Horovod
# refuses in one line (tests/tiers checks that refusal); the levers' tests leave out their horovod
# cases the same way. The levers run on the newest tier only: their compiles take minutes on a CPU,
# and the oldest's APIs do not move any more.
tests=("$ROOT/tests/unit/test_engines.py" "$ROOT/tests/tiers")
[ "$TIER" = newest ] && tests+=("$ROOT/tests/unit/test_levers.py")
cd "$VENV"
t=$SECONDS
HVDBENCH_TIER_TORCH="$TORCH" OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
  "$VENV/bin/python" -m pytest -p no:cacheprovider --rootdir "$ROOT" -c "$ROOT/pyproject.toml" "${tests[@]}" \
  -k "not test_sweep_engines_run_each_layout_under_each_engine and not [horovod]"
say "tests in $((SECONDS - t))s; wall time $((SECONDS - T0))s"
