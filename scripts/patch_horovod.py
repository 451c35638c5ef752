"""Patch Horovod 0.28.1's unpacked sdist so it builds against today's frameworks and toolchains.

    python scripts/patch_horovod.py /tmp/horovod-0.28.1

Used by scripts/build_horovod.sh (and so by `make setup`). Nothing of Horovod is kept in this
repository: the released sdist is downloaded and edited in place. Every replacement must match
exactly once, so a changed sdist fails loudly instead of building something else.
"""

import importlib.util
import pathlib
import sys


def torch_cxx_standard() -> str:
    """The C++ standard of Horovod's torch extension: the one the torch of the Python running this
    script asks for in its ATen.h (without importing torch). torch 2.11 to 2.13 ask for C++17;
    2.14 and 2.15 for C++20, their headers stop the build below it (`#error C++20 or later compatible
    compiler is required to use ATen`). 17 where torch is not installed (no torch extension is built)."""
    spec = importlib.util.find_spec("torch")
    aten = pathlib.Path(spec.origin).parent / "include" / "ATen" / "ATen.h" if spec and spec.origin else None
    return "20" if aten and aten.is_file() and "C++20 or later" in aten.read_text() else "17"


# Inserted into horovod/common/util.py before the function that checks the build in a forked process
# (renamed _check_extension_lambda_in_a_process), under that function's old name.
BUILD_CHECKS_KEPT = """\
_HOROVOD_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_BUILD_CHECKS = os.path.join(_HOROVOD_DIR, '.hvdbench-build-checks.json')
_FRAMEWORK_PACKAGES = {'torch': ('torch',), 'tensorflow': ('tensorflow', 'tensorflow-cpu'),
                       'mxnet': ('mxnet',)}


def _build_check_key(ext_base_name, fn_desc):
    import glob
    from importlib import metadata
    libs = sorted(glob.glob(os.path.join(_HOROVOD_DIR, ext_base_name, 'mpi_lib*' + get_ext_suffix())))
    if not libs:
        return None
    versions = []
    for name in _FRAMEWORK_PACKAGES.get(ext_base_name, ()):
        try:
            versions.append(name + '==' + metadata.version(name))
        except metadata.PackageNotFoundError:
            pass
    stats = ['%s:%d:%d' % (os.path.basename(lib), st.st_mtime_ns, st.st_size)
             for lib, st in zip(libs, map(os.stat, libs))]
    return '|'.join([ext_base_name, fn_desc] + stats + versions)


def _read_build_checks():
    try:
        with open(_BUILD_CHECKS) as f:
            kept = json.load(f)
        return kept if isinstance(kept, dict) else {}
    except (OSError, ValueError):
        return {}


def _keep_build_check(key, result):
    import tempfile
    kept = _read_build_checks()
    kept[key] = result
    try:
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(_BUILD_CHECKS), prefix='.build-checks-')
    except OSError:
        return
    try:
        with os.fdopen(fd, 'w') as f:
            json.dump(kept, f)
        os.replace(tmp, _BUILD_CHECKS)
    except OSError:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _check_extension_lambda(ext_base_name, fn, fn_desc, verbose):
    if verbose or not fn_desc.startswith('built'):
        return _check_extension_lambda_in_a_process(ext_base_name, fn, fn_desc, verbose)
    key = _build_check_key(ext_base_name, fn_desc)
    kept = _read_build_checks() if key else {}
    if key in kept:
        return kept[key]
    result = _check_extension_lambda_in_a_process(ext_base_name, fn, fn_desc, verbose)
    if key and isinstance(result, bool):
        _keep_build_check(key, result)
    return result


"""


# horovod/torch/handle_manager.cc and mpi_ops_v2.cc as 0.28.1 has them, and as patched (EDITS says why).
HANDLE_DONE = """void HandleManager::MarkDone(int handle, const Status& status) {
  std::lock_guard<std::mutex> guard(mutex_);
  results_[handle] = std::make_shared<Status>(status);
}
"""
HANDLE_DONE_SIGNALLED = """void HandleManager::MarkDone(int handle, const Status& status) {
  {
    std::lock_guard<std::mutex> guard(mutex_);
    results_[handle] = std::make_shared<Status>(status);
  }
  done_.notify_all();
}

void HandleManager::WaitForHandle(int handle) {
  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, [&] {
    auto found = results_.find(handle);
    if (found == results_.end()) {
      throw std::invalid_argument("Handle " + std::to_string(handle) +
                                  " was not created or has been cleared.");
    }
    return found->second != nullptr;
  });
}
"""
HANDLE_RESET = """  results_.clear();
  last_handle_ = 0;
}
"""
HANDLE_RESET_SIGNALLED = """  results_.clear();
  last_handle_ = 0;
  done_.notify_all();
}
"""
WAIT_SPINNING = """  while (true) {
    if (handle_manager.PollHandle(handle)) break;
    {
      py::gil_scoped_release release_python_gil;
      std::this_thread::yield();
    }
  }
"""
WAIT_BLOCKING = """  {
    py::gil_scoped_release release_python_gil;
    handle_manager.WaitForHandle(handle);
  }
"""


EDITS = [
    # PyTorch (>= 2.1) and TensorFlow headers need C++17, PyTorch's from 2.14 C++20; 0.28.1 asks for
    # C++14 in two places.
    ("CMakeLists.txt", "set(CMAKE_CXX_STANDARD 14)", "set(CMAKE_CXX_STANDARD 17)"),
    ("horovod/torch/CMakeLists.txt", "set(CMAKE_CXX_STANDARD 14)", f"set(CMAKE_CXX_STANDARD {torch_cxx_standard()})"),
    # Optional XLA ops (used only with HOROVOD_ENABLE_XLA_OPS) include XLA headers that moved in
    # TensorFlow 2.21: leave them out of the build.
    ("horovod/tensorflow/CMakeLists.txt",
     'list(APPEND TF_SOURCES "${PROJECT_SOURCE_DIR}/horovod/tensorflow/xla_mpi_ops.cc")',
     "# hvdbench: xla_mpi_ops.cc left out (XLA headers moved in TensorFlow 2.21)"),
    # The CUDA kernels (GPU builds only) are compiled as C++11, which CUDA 13's headers no longer
    # accept; C++17 is supported by every CUDA since 11.
    ("horovod/common/ops/cuda/CMakeLists.txt", "set(CMAKE_CUDA_STANDARD 11)", "set(CMAKE_CUDA_STANDARD 17)"),
    # Headers that use std::string and std::logic_error without including them: GCC 13's standard
    # library no longer brings them in through <mutex>, <queue> or <memory> (seen with GCC 13.3 on
    # a CUDA 13 machine; GCC 12 still does).
    ("horovod/common/group_table.h", "#include <queue>\n", "#include <queue>\n#include <string>\n"),
    ("horovod/common/common.h", "#include <memory>\n", "#include <memory>\n#include <stdexcept>\n"),
    # horovodrun asks each framework's extension, in this order, whether Horovod was built with MPI
    # or Gloo, importing the framework to do so; TensorFlow's import prints absl/oneDNN start-up
    # lines that no environment variable silences, on every launch, PyTorch runs included. Asking
    # PyTorch first gives the same answer (the extensions are built from one tree) in silence.
    ("horovod/common/util.py", "EXTENSIONS = ['tensorflow', 'torch', 'mxnet']",
     "EXTENSIONS = ['torch', 'tensorflow', 'mxnet']"),
    # Each horovodrun asks whether Horovod was built with Gloo or MPI by importing a framework's
    # extension in a forked process: 3 to 4 CPU-seconds and 5 s of wall time before any rank starts,
    # on every launch (measured on 2 cores; benchmarks/bench_demo_launch.py). The answer is fixed
    # by the build, so it is kept beside the package, keyed by the extension library's size and
    # modification time and the framework's version (a rebuild or a framework upgrade asks again).
    # Only the build flags are kept, never "running with GPU", and nothing is kept when a check is
    # verbose or its import failed; a package folder that cannot be written is simply not used.
    ("horovod/common/util.py",
     "def _check_extension_lambda(ext_base_name, fn, fn_desc, verbose):\n",
     BUILD_CHECKS_KEPT + "def _check_extension_lambda_in_a_process(ext_base_name, fn, fn_desc, verbose):\n"),
    # horovodrun's rendezvous server counts the ranks done with each scope (global, local_<host>,
    # cross_<local rank>) and, when one scope is complete, clears its addresses, and then every
    # scope's count. A one-rank cross scope completing while a local scope is half done drops that
    # half: the local scope's old addresses are never cleared, and the next hvd.init() of the same
    # job (`bench allreduce --tune` starts Horovod once per setting) reads a peer's old address and
    # Gloo ends on "Connection refused". Only the completed scope's count is reset.
    ("horovod/runner/http/http_server.py",
     "                        self.server.finished_list.clear()\n",
     "                        del self.server.finished_list[scope]\n"),
    # hvd.synchronize() (PyTorch: every allreduce the optimizer waits for) spins until the background
    # thread marks the handle done: a loop of poll, release the GIL, std::this_thread::yield(), take it
    # back, at 100 % of a core. Where ranks share cores (a CPU run; more ranks than cores), the spin
    # takes the core from the threads doing the allreduce and from the other jobs on the machine: two
    # two-rank jobs side by side on 2 cores took 0.84x (GNMT under Gloo) and 0.57x (ResNet-50 under MPI)
    # their time with the spin (docs/building.md, ABBA). The waiter now sleeps on a condition variable
    # that MarkDone (and Reset) signal; the handle's checks and errors are the poll's.
    ("horovod/torch/handle_manager.h", "#include <mutex>\n", "#include <condition_variable>\n#include <mutex>\n"),
    ("horovod/torch/handle_manager.h", "  bool PollHandle(int handle);\n",
     "  bool PollHandle(int handle);\n  void WaitForHandle(int handle);\n"),
    ("horovod/torch/handle_manager.h", "  std::mutex mutex_;\n", "  std::mutex mutex_;\n  std::condition_variable done_;\n"),
    ("horovod/torch/handle_manager.cc", HANDLE_DONE, HANDLE_DONE_SIGNALLED),
    ("horovod/torch/handle_manager.cc", HANDLE_RESET, HANDLE_RESET_SIGNALLED),
    ("horovod/torch/mpi_ops_v2.cc", WAIT_SPINNING, WAIT_BLOCKING),
]


def patch(src: pathlib.Path) -> None:
    for rel, old, new in EDITS:
        path = src / rel
        text = path.read_text()
        if text.count(old) != 1:
            sys.exit(f"patch_horovod: expected exactly one {old!r} in {path}, found {text.count(old)}")
        path.write_text(text.replace(old, new))
        print(f"patched {rel}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python scripts/patch_horovod.py UNPACKED_SDIST_DIR")
    patch(pathlib.Path(sys.argv[1]))
