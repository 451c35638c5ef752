"""torchrun: PyTorch's own launcher, for `--engine ddp|fsdp` (it starts torch.distributed ranks, not
Horovod's).

    one node:  torchrun --standalone --nnodes 1 --nproc-per-node 2 --log-dir RUN/logs --no-python WORKER...
    several:   mpirun -np 2 -H node1:1,node2:1 --map-by ppr:1:node --bind-to none -x ... \\
                   torchrun --nnodes 2 --nproc-per-node 4 --rdzv-backend c10d \\
                   --rdzv-endpoint node1:29400 --rdzv-id RUN_ID --log-dir RUN/logs --no-python WORKER...

torchrun starts the ranks of one node; a job of several nodes needs one torchrun per node, all
meeting at a rendezvous endpoint (rank 0's host here). mpirun starts those agents, one per node,
with the same forwarding of the environment as hvdbench's mpirun launches (hvdbench.launchers.mpirun).
`--no-python` runs the worker's console script itself (the absolute `<venv>/bin/hvdbench`).
"""

from __future__ import annotations

import re
from typing import Mapping

from hvdbench.launchers import Job, forwarded_names, resolve_binary
from hvdbench.launchers.registry import Launcher

BINARY = "torchrun"
RDZV_PORT = 29400  # torchrun's own default for the c10d rendezvous


def build(job: Job, env: Mapping[str, str], binary: str = BINARY) -> tuple[list[str], dict[str, str]]:
    layout = job.layout
    per_node = ["--nproc-per-node", str(layout.gpus_per_node), "--log-dir", str(job.log_dir)]
    if layout.nodes == 1:
        argv = [binary, "--standalone", "--nnodes", "1", *per_node]
    elif not layout.hosts:
        raise ValueError(f"torchrun over {layout.nodes} nodes needs their host names (the rendezvous is on the first)")
    else:
        agents = [resolve_binary("mpirun"), "-np", str(layout.nodes),
                  "-H", ",".join(f"{h}:1" for h in layout.hosts), "--map-by", "ppr:1:node", "--bind-to", "none"]
        for name in forwarded_names(env, job.forward):
            agents += ["-x", name]
        argv = [*agents, binary, "--nnodes", str(layout.nodes), *per_node, "--rdzv-backend", "c10d",
                "--rdzv-endpoint", f"{layout.hosts[0]}:{RDZV_PORT}", "--rdzv-id", job.run_dir.name]
    argv += [*job.launcher_args, "--no-python", *job.worker]
    return argv, dict(env)


def rendezvous(env: Mapping[str, str]) -> tuple[str | None, int | None]:
    """torchrun tells every rank where rank 0's store listens (MASTER_ADDR, MASTER_PORT)."""
    port = env.get("MASTER_PORT", "")
    return env.get("MASTER_ADDR") or None, int(port) if re.fullmatch(r"[0-9]+", port) and int(port) else None


LAUNCHER = Launcher(
    "torchrun", BINARY, build, detect=lambda env: "TORCHELASTIC_RUN_ID" in env,  # its elastic agent's run id
    place=("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"), rendezvous=rendezvous,
    starts_horovod=False, ranks="torch.distributed ranks")
