"""Probe what the installed frameworks and Horovod can do; print one JSON object.

    python -m hvdbench.frameworks.probe

Run in a subprocess by `hvdbench env`, so that importing torch and TensorFlow (seconds, and
libraries that do not always coexist) never happens inside the CLI process itself.
"""

import importlib
import json
import sys


def _torch():
    try:
        import torch
    except Exception as e:  # noqa: BLE001 - report any import failure as data
        return {"installed": False, "error": str(e).splitlines()[0]}
    info = {"installed": True, "version": torch.__version__, "cuda": torch.version.cuda,
            "cuda_available": torch.cuda.is_available(), "nccl": None, "gpus": []}
    if torch.cuda.is_available():
        info["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
        for i in range(torch.cuda.device_count()):
            p = torch.cuda.get_device_properties(i)
            info["gpus"].append({"name": p.name, "memory_gib": round(p.total_memory / 2**30, 1)})
    return info


def _tensorflow():
    try:
        import tensorflow as tf
    except Exception as e:  # noqa: BLE001
        return {"installed": False, "error": str(e).splitlines()[0]}
    return {"installed": True, "version": tf.__version__,
            "keras": importlib.import_module("keras").__version__,
            "gpus": [d.name for d in tf.config.list_physical_devices("GPU")]}


def _horovod():
    try:
        import horovod
    except Exception as e:  # noqa: BLE001
        return {"installed": False, "error": str(e).splitlines()[0]}
    info = {"installed": True, "version": horovod.__version__, "frameworks": {}}
    for fw, module in (("pytorch", "horovod.torch"), ("tensorflow", "horovod.tensorflow")):
        try:
            hvd = importlib.import_module(module)
        except Exception as e:  # noqa: BLE001 - a framework Horovod was built without
            info["frameworks"][fw] = {"built": False, "error": str(e).splitlines()[0]}
            continue
        info["frameworks"][fw] = {
            "built": True,
            "controllers": [name for name, built in (("mpi", hvd.mpi_built()), ("gloo", hvd.gloo_built()))
                            if built],
            "tensor_operations": [name for name, built in (
                ("nccl", hvd.nccl_built()), ("ddl", hvd.ddl_built()), ("ccl", hvd.ccl_built()),
                ("mpi", hvd.mpi_built()), ("gloo", hvd.gloo_built())) if built],
            "cuda": bool(hvd.cuda_built()),
        }
    return info


def _mpi4py():
    try:
        import mpi4py
        mpi4py.rc.initialize = False  # load libmpi to name it, but start no MPI runtime
        from mpi4py import MPI
    except Exception as e:  # noqa: BLE001
        return {"installed": False, "error": str(e).splitlines()[0]}
    name, version = MPI.get_vendor()
    return {"installed": True, "version": mpi4py.__version__,
            "mpi_vendor": f"{name} {'.'.join(map(str, version))}"}


def main():
    # torch before tensorflow: the order users' workers import them in.
    json.dump({"torch": _torch(), "tensorflow": _tensorflow(), "horovod": _horovod(),
               "mpi4py": _mpi4py()}, sys.stdout)


if __name__ == "__main__":
    main()
