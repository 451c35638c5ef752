#!/usr/bin/env bash
# One unattended install of everything hvdbench needs, on a fresh Debian machine, as root:
#   system packages -> virtual environment -> Python packages -> Horovod 0.28.1 built from its
#   PyPI sdist (PyTorch + TensorFlow, MPI + Gloo, NCCL where CUDA is present) -> horovodrun --check-build.
#
#   make setup            (or: bash scripts/setup.sh)
#
# Idempotent: every step checks whether its result is already there. A built Horovod wheel is cached
# under $HVDBENCH_CACHE keyed by the framework versions, so a fresh clone on the same machine reuses it.
# A failed step prints its name and the tail of its log and exits non-zero.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${VENV:-$ROOT/.venv}"
# The interpreter: Debian's own (/usr/bin/python3), its libpython linked into the executable. A
# source build with pyenv's defaults (a shared libpython, no --enable-optimizations) ran the same
# unit tests in 11 % more CPU-seconds and a rank's start in 16 % more (docs/building.md).
# PYTHON=... picks another.
if [ -z "${PYTHON:-}" ]; then
  if [ -x /usr/bin/python3 ]; then PYTHON=/usr/bin/python3; else PYTHON=python3; fi
fi
CACHE="${HVDBENCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hvdbench}"
LOGS="$ROOT/.setup-logs"
HOROVOD_VERSION=0.28.1
TORCH_VERSION=2.13.0
TF_VERSION=2.21.0
mkdir -p "$LOGS" "$CACHE"

# CUDA is used only where a GPU and the CUDA compiler are both present.
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 && command -v nvcc >/dev/null 2>&1; then
  CUDA=1
else
  CUDA=0
fi

# step NAME CMD...: run CMD with its output in $LOGS/NAME.log; on failure say which step and show the tail.
step() {
  local name="$1"; shift
  local log="$LOGS/$name.log" t0=$SECONDS
  printf '[setup] %-22s ... ' "$name"
  if "$@" >"$log" 2>&1; then
    printf 'ok (%ds)\n' $((SECONDS - t0))
  else
    local rc=$?
    printf 'FAILED (exit %d)\n' "$rc"
    echo "[setup] step '$name' failed; last lines of $log:" >&2
    tail -n 40 "$log" >&2
    exit 1
  fi
}

SYSTEM_PACKAGES=(openmpi-bin libopenmpi-dev openssh-client openssh-server iproute2 build-essential cmake git procps)
# Debian's Python with venv and the headers Horovod's and mpi4py's builds compile against.
SYSTEM_PACKAGES+=(python3 python3-venv python3-dev)
# A real Slurm for the emulated cluster (`hvdbench cluster up --slurm`). Installing them starts no
# daemon where there is no systemd; the cluster runs its own from its state folder.
SYSTEM_PACKAGES+=(slurmctld slurmd slurm-client munge)
# A headless browser for the tests that open report.html and compare.html (selenium drives Debian's
# chromium through its chromium-driver: nothing is downloaded by the tests).
SYSTEM_PACKAGES+=(chromium chromium-driver)
# Packages whose German message catalogs (/usr/share/locale/de/LC_MESSAGES/*.mo) make the built-in
# English->German corpus of `hvdbench prepare translation --src builtin:gettext-de` (a fixed list, so
# the corpus is the same on every machine set up by this script; its manifest records the versions).
GETTEXT_PACKAGES=(git coreutils gnupg-l10n libc-l10n findutils grep diffutils sed tar gettext wget make
                  binutils-common libglib2.0-data dpkg apt bash procps psmisc xz-utils m4)
SYSTEM_PACKAGES+=("${GETTEXT_PACKAGES[@]}")

system_packages() {
  local missing=()
  for p in "${SYSTEM_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -eq 0 ]; then echo "all present"; return 0; fi
  if [ "$(id -u)" != 0 ]; then
    echo "missing system packages: ${missing[*]}; run as root or: sudo apt-get install ${missing[*]}"; return 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
  # Horovod's bundled gloo does not configure with CMake 4; Debian 12 ships 3.25.
  cmake --version | head -1
}

make_venv() {
  if [ -x "$VENV/bin/python" ]; then
    local have want
    have="$(readlink -f "$VENV/bin/python")"; want="$(readlink -f "$(command -v "$PYTHON")")"
    echo "exists: $VENV ($have)"
    # An older venv on another interpreter keeps working; say how to move it onto this one.
    [ "$have" = "$want" ] || echo "note: $VENV runs $have, not $want; remove it and rerun to rebuild it on $want"
    return 0
  fi
  "$PYTHON" -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade "pip>=24" "setuptools>=69,<81" wheel
}

# The Python packages, one step per group so that none is silent for minutes (pip's output is in
# each step's log). A stamp over everything that decides the package set makes a second run one line.
PACKAGES_STAMP="$VENV/.hvdbench-packages"
packages_wanted() { echo "$(cat "$ROOT/setup.cfg" "$0" | sha256sum | cut -d' ' -f1)-cuda$CUDA"; }
packages_current() { [ -f "$PACKAGES_STAMP" ] && [ "$(cat "$PACKAGES_STAMP")" = "$(packages_wanted)" ]; }

# torch==2.13.0 resolves to the CPU wheel on this machine's local wheel directory; on a GPU machine
# the registry's default build carries CUDA and the nvidia-nccl wheel Horovod's NCCL build uses.
python_torch() { "$VENV/bin/pip" install "torch==$TORCH_VERSION"; }

# torch is named again so that nothing TensorFlow asks for moves it off the pinned build.
python_tensorflow() {
  local tf="tensorflow-cpu==$TF_VERSION"
  [ "$CUDA" = 1 ] && tf="tensorflow[and-cuda]==$TF_VERSION"
  "$VENV/bin/pip" install "$tf" "torch==$TORCH_VERSION"
}

# mpi4py is built against the system Open MPI so Horovod and mpi4py share one MPI library.
python_mpi4py() { "$VENV/bin/pip" install --no-binary mpi4py "mpi4py>=3.1"; }

# torch is named again so no extra's dependency can move it off the pinned build. The detection
# extra's torchvision==0.28.0 requires torch==2.13.0 and nothing else from PyPI's CUDA stack, so
# it pulls no nvidia-* wheel beside the CPU torch (its CUDA ops are stood in for at import, see
# hvdbench/frameworks/torch/vision.py); on a CUDA machine it pairs with the CUDA torch natively.
python_hvdbench() { "$VENV/bin/pip" install -e "$ROOT[dev,genai,detection]" "torch==$TORCH_VERSION"; }

# recbole's wheel ships MovieLens-100K (the built-in data of `prepare movielens`); only that file
# is read, and recbole's own dependencies pin old packages, so it is installed without them.
python_recbole() {
  "$VENV/bin/pip" install --no-deps "recbole==1.2.1"
  packages_wanted >"$PACKAGES_STAMP"
}

python_packages() {
  if packages_current; then
    step python-packages echo "up to date"
    return 0
  fi
  step python-torch python_torch
  step python-tensorflow python_tensorflow
  step python-mpi4py python_mpi4py
  step python-hvdbench python_hvdbench
  step python-recbole python_recbole
}

# The versions a Horovod build is bound to, and the build recipe (the two scripts that patch and
# build it); a cached wheel is reused only when they all match. Read from package metadata (no
# framework import), so checking it takes a fraction of a second.
build_key() {
  local recipe
  recipe="$(cat "$ROOT/scripts/build_horovod.sh" "$ROOT/scripts/patch_horovod.py" | sha256sum | cut -c1-8)"
  "$VENV/bin/python" - "$CUDA" "$recipe" <<'PY'
import platform, subprocess, sys
from importlib.metadata import version, PackageNotFoundError
def v(*names):
    for name in names:
        try:
            return version(name)
        except PackageNotFoundError:
            pass
    return "none"
mpi = subprocess.run(["mpirun", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
key = (f"py{platform.python_version()}-torch{v('torch')}-tf{v('tensorflow-cpu', 'tensorflow')}"
       f"-{mpi}-cuda{sys.argv[1]}-recipe{sys.argv[2]}")
print(key.replace(" ", "_").replace("(", "").replace(")", ""))
PY
}

# A stamp written after a verified build: Horovod's version plus the build key. A second run that
# finds the same stamp skips the build and the (slow, framework-importing) check.
HOROVOD_STAMP="$VENV/.hvdbench-horovod"
horovod_stamp() {
  echo "horovod$("$VENV/bin/python" -c "from importlib.metadata import version; print(version('horovod'))" 2>/dev/null)-$(build_key)"
}
horovod_ok() {
  [ -f "$HOROVOD_STAMP" ] && [ "$(cat "$HOROVOD_STAMP")" = "$(horovod_stamp)" ] \
    && [ "$(horovod_stamp)" = "horovod$HOROVOD_VERSION-$(build_key)" ]
}

check_build() {
  local out
  out="$("$VENV/bin/horovodrun" --check-build 2>&1)"
  echo "$out"
  for want in "\[X\] TensorFlow" "\[X\] PyTorch" "\[X\] MPI" "\[X\] Gloo"; do
    echo "$out" | grep -q "$want" || { echo "horovodrun --check-build lacks: ${want#\\[X\\] }"; return 1; }
  done
  if [ "$CUDA" = 1 ]; then echo "$out" | grep -q "\[X\] NCCL" || { echo "lacks NCCL"; return 1; }; fi
}

build_horovod() {
  if horovod_ok; then echo "Horovod $HOROVOD_VERSION already built with the needed frameworks"; return 0; fi
  local key wheeldir
  key="$(build_key)"
  wheeldir="$CACHE/horovod-$HOROVOD_VERSION-$key"
  if ! ls "$wheeldir"/horovod-*.whl >/dev/null 2>&1; then
    local work; work="$(mktemp -d)"
    "$VENV/bin/pip" download --no-deps --no-binary :all: -d "$work" "horovod==$HOROVOD_VERSION"
    # Patches the sdist (scripts/patch_horovod.py) and picks frameworks, controllers and NCCL.
    bash "$ROOT/scripts/build_horovod.sh" "$work/horovod-$HOROVOD_VERSION.tar.gz" "$work/dist" "$VENV/bin/python"
    mkdir -p "$wheeldir"
    cp "$work"/dist/horovod-*.whl "$wheeldir/"
    rm -rf "$work"
  else
    echo "reusing cached wheel in $wheeldir"
  fi
  "$VENV/bin/pip" install --force-reinstall --no-deps "$wheeldir"/horovod-*.whl
}

T0=$SECONDS
step system-packages system_packages
step venv make_venv
python_packages
verify_horovod() {
  if horovod_ok; then echo "verified before for $(cat "$HOROVOD_STAMP")"; return 0; fi
  check_build
  horovod_stamp >"$HOROVOD_STAMP"
}

step horovod-build build_horovod
step horovod-check-build verify_horovod
echo "[setup] done in $((SECONDS - T0))s; venv: $VENV"
