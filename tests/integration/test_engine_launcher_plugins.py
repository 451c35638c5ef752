"""An engine and a launcher registered from this file alone (issue 54): a temporary site folder on
PYTHONPATH holds two small packages and a dist-info whose entry_points.txt registers them, as another
package's pyproject.toml would (docs/adding-an-engine.md, docs/adding-a-launcher.md). No file of
hvdbench is edited.

- toyddp (hvdbench.engines): DDP's torch class under another name, whose ranks leave a note that its
  own class trained them.
- toyrun (hvdbench.launchers): starts the ranks itself on this machine (`python -m toy_launcher.run N
  WORKER...`), announcing each rank's place in TOYRUN_* variables and rank 0's rendezvous port, and
  hiding the sweep's HVDBENCH_LAUNCHER from them, so the worker knows its launcher, rank and world only
  from the toy's own detection rule and place variables. Its ranks cannot start Horovod.

One sweep (1x2, ResNet-50 debug on --synthetic data, a few steps) runs the toy engine under the toy
launcher; its rows and the report name both. The same rules a built-in meets are met: the engine
under a launcher whose ranks Horovod cannot join is refused in one line before anything runs.

    pytest tests/integration/test_engine_launcher_plugins.py
"""

import csv
import json
import subprocess
import sys
import textwrap

import pytest
from conftest import launch_env, run

from hvdbench.results.records.store import read_runs

pytestmark = pytest.mark.integration

TOY_ENGINE = '''
from hvdbench.contracts.engines import Engine

ENGINE = Engine("toyddp", "torch DDP under another name", torch="toy_engine.torch:ToyEngine")
'''

TOY_ENGINE_TORCH = '''
from pathlib import Path

from hvdbench.frameworks.torch.engines import DdpEngine


class ToyEngine(DdpEngine):
    """DDP; each rank notes in the run's folder that this class trained it."""

    def __init__(self, dist, cfg, descriptor):
        super().__init__(dist, cfg, descriptor)
        Path(cfg.out).mkdir(parents=True, exist_ok=True)
        (Path(cfg.out) / f"toyddp-rank{dist.rank}").write_text(descriptor.name)
'''

TOY_LAUNCHER = '''
from hvdbench.errors import HvdbenchError
from hvdbench.launchers.registry import Launcher


def build(job, env, binary):
    if job.layout.nodes != 1:
        raise HvdbenchError(f"toyrun starts ranks on this machine only, not {job.layout.name}")
    return [binary, "-m", "toy_launcher.run", str(job.layout.world_size), *job.worker], dict(env)


LAUNCHER = Launcher(
    "toyrun", "python", build, detect=lambda env: "TOYRUN_RANK" in env,
    place=("TOYRUN_RANK", "TOYRUN_SIZE", "TOYRUN_LOCAL_RANK", "TOYRUN_LOCAL_SIZE"),
    rendezvous=lambda env: ("127.0.0.1", int(env["TOYRUN_PORT"])), starts_horovod=False, ranks="toy ranks")
'''

TOY_RUN = '''
import os
import socket
import subprocess
import sys

size, worker = int(sys.argv[1]), sys.argv[2:]
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
env = {k: v for k, v in os.environ.items() if k != "HVDBENCH_LAUNCHER"}
ranks = [subprocess.Popen(worker, env={**env, "TOYRUN_RANK": str(r), "TOYRUN_SIZE": str(size),
                                       "TOYRUN_LOCAL_RANK": str(r), "TOYRUN_LOCAL_SIZE": str(size),
                                       "TOYRUN_PORT": str(port)})
         for r in range(size)]
codes = [p.wait() for p in ranks]
sys.exit(max(codes))
'''


@pytest.fixture(scope="module")
def plugins_env(tmp_path_factory):
    """An environment in which toyddp and toyrun are registered: their packages on PYTHONPATH beside
    a dist-info whose entry_points.txt holds one line each."""
    site = tmp_path_factory.mktemp("site")
    for path, text in {"toy_engine/__init__.py": TOY_ENGINE, "toy_engine/torch.py": TOY_ENGINE_TORCH,
                       "toy_launcher/__init__.py": TOY_LAUNCHER, "toy_launcher/run.py": TOY_RUN}.items():
        (site / path).parent.mkdir(exist_ok=True)
        (site / path).write_text(textwrap.dedent(text).lstrip())
    info = site / "toy_plugins-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-plugins\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[hvdbench.engines]\ntoyddp = toy_engine:ENGINE\n\n"
                                           "[hvdbench.launchers]\ntoyrun = toy_launcher\n")
    return launch_env(PYTHONPATH=str(site))


def test_the_toy_launcher_is_recognised_and_places_its_ranks(plugins_env):
    code = ("import dataclasses, json; from hvdbench.launchers.launch_info import detect_launcher, launcher_rank, place;"
            "print(json.dumps([detect_launcher(), launcher_rank(), dataclasses.astuple(place())]))")
    env = {k: v for k, v in plugins_env.items() if k != "HVDBENCH_LAUNCHER"}
    env.update(TOYRUN_RANK="1", TOYRUN_SIZE="4", TOYRUN_LOCAL_RANK="1", TOYRUN_LOCAL_SIZE="2", TOYRUN_PORT="4321")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert json.loads(proc.stdout) == ["toyrun", 1, [1, 4, 1, 2, "127.0.0.1", 4321]]


@pytest.mark.timeout(400)
def test_a_sweep_runs_the_toy_engine_under_the_toy_launcher_and_reports_it(plugins_env, tmp_path, hvdbench_bin):
    out = tmp_path / "sweep"
    train = ["--flavor", "debug", "--synthetic", "--steps", "3", "--warmup-steps", "1", "--batch-per-gpu", "8"]
    # The one engine-under-launcher rule holds for both: Horovod cannot join the toy launcher's ranks.
    refused = run([hvdbench_bin, "sweep", "resnet50", "--hosts", "localhost:2", "--layouts", "1x2",
                   "--launcher", "toyrun", "--engines", "horovod,toyddp", "--out", out, "--", *train],
                  env=plugins_env, check=False)
    assert refused.returncode == 1 and not out.exists()
    assert refused.stderr.strip() == (
        "Error: sweep of resnet50: --launcher toyrun starts toy ranks, which Horovod cannot join: use --engine "
        "ddp or fsdp or toyddp, or launch --engine horovod with horovodrun, mpirun or srun")

    run([hvdbench_bin, "sweep", "resnet50", "--hosts", "localhost:2", "--layouts", "1x2", "--launcher", "toyrun",
         "--engines", "toyddp", "--out", out, "--", *train], env=plugins_env, timeout=400)
    [row] = read_runs(out / "runs.csv")
    assert (row.status, row.engine, row.launcher, row.world_size, row.layout) == ("success", "toyddp", "toyrun",
                                                                                   2, "1x2")
    rdir = out / row.run_id
    assert {p.name: p.read_text() for p in rdir.glob("toyddp-rank*")} == {"toyddp-rank0": "toyddp",
                                                                          "toyddp-rank1": "toyddp"}
    assert "toy_launcher.run" in (rdir / "command.txt").read_text()

    run([hvdbench_bin, "report", out, "--out", tmp_path / "report", "--format", "csv"], env=plugins_env)
    with open(tmp_path / "report" / "scaling.csv", newline="") as f:
        [scaling] = list(csv.DictReader(f))
    assert (scaling["engine"], scaling["layout"], int(scaling["runs"])) == ("toyddp", "1x2", 1)
