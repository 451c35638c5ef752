"""The PyTorch versions a report's runs used, from each run record's `versions` ('python=3.11.7;
torch=2.13.0;horovod=0.28.1'): the report's header names them and warns for each table whose runs used
more than one, since their throughputs are not comparable (a release changes kernels, the compiler
and the collectives' code under the same model).

    torch_header(runs)   # the lines `hvdbench report` puts under its title
"""

from __future__ import annotations

from hvdbench.results.records.rows import ScalingGroup
from hvdbench.results.records.schema import RunResult
from hvdbench.results.stats.aggregate import group_title, scaling_key


def torch_header(runs: list[RunResult]) -> list[str]:
    """'PyTorch of these runs: 2.13.0.' and, per scaling table (its group) whose runs recorded more than
    one torch, a warning naming the table and the versions; [] when no run recorded torch (published
    MLPerf logs, TensorFlow runs)."""
    tables: dict[tuple, set[str]] = {}
    for run in runs:
        version = dict(p.split("=", 1) for p in run.versions.split(";") if "=" in p).get("torch")
        if version:
            tables.setdefault(scaling_key(run), set()).add(version)
    used = sorted(set().union(*tables.values()))
    if not used:
        return []
    lines = [f"PyTorch of these runs: {', '.join(used)}."]
    for key, versions in tables.items():
        if len(versions) > 1:
            table = group_title(ScalingGroup(*key))  # as its heading reads
            lines.append(f"**Warning:** the runs of one table ({table}) used PyTorch {', '.join(sorted(versions))}: "
                         f"their throughputs are not comparable; rerun its layouts on one release.")
    return lines

