"""The core never imports a framework: every module outside hvdbench.frameworks and the model
folders' and families' torch.py / tf.py imports with torch, tensorflow and horovod blocked, so
`hvdbench --help`, sweep and report work on a login node (model specs and dataset kinds included)."""

import subprocess
import sys

BLOCKED = ("torch", "tensorflow", "keras", "horovod")

CODE = f"""
import importlib, pkgutil, sys
for name in {BLOCKED!r}:
    sys.modules[name] = None   # any `import name` now raises ImportError
import hvdbench
names = [m.name for m in pkgutil.walk_packages(hvdbench.__path__, "hvdbench.")
         if not m.name.startswith("hvdbench.frameworks") and not m.name.endswith("__main__")
         and not (m.name.startswith(("hvdbench.models.", "hvdbench.families."))
                  and m.name.rsplit(".", 1)[1] in ("torch", "tf"))]
for name in names:
    importlib.import_module(name)
print(len(names))
for core in ("hvdbench.cli.main", "hvdbench.results.records.schema", "hvdbench.results.records.store",
             "hvdbench.contracts", "hvdbench.models", "hvdbench.models.resnet50", "hvdbench.models.bert.data",
             "hvdbench.errors", "hvdbench.families.detection.data"):
    assert core in names, core
"""


def test_core_modules_import_without_frameworks():
    proc = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert int(proc.stdout.strip()) >= 5
