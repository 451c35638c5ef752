"""`hvdbench bench allreduce --tune`: which Horovod settings bring its allreduce closest to raw MPI.

    horovodrun -np 2 -H node1:1,node2:1 --mpi hvdbench bench allreduce --tune --min-bytes 1M \\
        --max-bytes 256M --dtype fp32 --out results/tune
    ->  best: HOROVOD_CYCLE_TIME=0.1 ...   then:   hvdbench sweep ... --env HOROVOD_CYCLE_TIME=0.1

Where Horovod's time goes for one tensor that a step needs back (what the bench times): the tensor
waits for the next background cycle (HOROVOD_CYCLE_TIME, 1 ms by default: the flat ~1.07 ms per
allreduce from 256 B to 4 MiB on loopback), the ranks negotiate that it is ready (the controller,
skipped by the response cache for a tensor seen before: HOROVOD_CACHE_CAPACITY), it is copied into
the fusion buffer and out, and the collective runs on the CPU (MPI's allreduce under horovodrun --mpi,
Gloo's under --gloo). The search changes one setting at a time,
keeping the best value found so far for the others (coordinate descent over SEARCH), all in one
launch: Horovod is shut down and started again for each setting (settings that MPI reads at its own
start, like Open MPI's mpi_yield_when_idle, cannot change inside a launch: compare them with
`sweep --env` instead). The score of a setting is the geometric mean over the sizes of Horovod's
bus bandwidth (MPI's time at a size is the same for every setting, so this ranks the settings as
Horovod/MPI does); MPI's reference is measured once, after the search, with Horovod stopped.
"""

from __future__ import annotations

import math

# setting -> values tried, the first being Horovod 0.28's default.
# HOROVOD_CPU_OPERATIONS (MPI's or Gloo's reduction on the CPU) is not among them: switched to gloo
# inside an MPI launch, Horovod 0.28.1 restarted with it crashes in its first Gloo allgather (its Gloo
# context is made from MPI's world only at the first start). Compare the two with two launches,
# `horovodrun --mpi` and `horovodrun --gloo`.
SEARCH: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("HOROVOD_CYCLE_TIME", ("1", "0.1", "0.5", "5")),  # ms between background cycles
    ("HOROVOD_CACHE_CAPACITY", ("1024", "0")),  # response cache entries (0: negotiate every time)
)



def score(rows, reference: dict[tuple[str, int], float] | None) -> float:
    """Geometric mean over the rows (one setting's Horovod rows) of MPI time / Horovod time at the
    same dtype and size, or of Horovod's busbw without a reference. Higher is better."""
    values = []
    for r in rows:
        if not r.time_mean_s:
            continue
        if reference:
            ref = reference.get((r.dtype, r.bytes))
            if ref:
                values.append(ref / r.time_mean_s)
        elif r.busbw_gb_s:
            values.append(r.busbw_gb_s)
    return math.exp(sum(map(math.log, values)) / len(values)) if values else 0.0


def coordinate_descent(space, measure) -> tuple[dict[str, str], list[tuple[dict[str, str], float]]]:
    """The best settings and every (settings, score) measured: `measure(settings) -> score` is called
    once per distinct settings, first with each setting's first (default) value."""
    best = {name: values[0] for name, values in space}
    tried: dict[tuple, float] = {}

    def value(settings: dict[str, str]) -> float:
        key = tuple(sorted(settings.items()))
        if key not in tried:
            tried[key] = measure(dict(settings))
        return tried[key]

    best_score = value(best)
    for name, values in space:
        for v in values[1:] if best[name] == values[0] else values:
            candidate = {**best, name: v}
            s = value(candidate)
            if s > best_score:
                best, best_score = candidate, s
    return best, [(dict(k), s) for k, s in tried.items()]


def env_flags(settings: dict[str, str], space) -> str:
    """`--env K=V` for each setting that differs from Horovod's default, for `hvdbench sweep`."""
    defaults = {name: values[0] for name, values in space}
    changed = [f"--env {k}={v}" for k, v in settings.items() if defaults.get(k) != v]
    return " ".join(changed) or "(Horovod's defaults are best: nothing to set)"


def describe(settings: dict[str, str]) -> str:
    """'K=V K=V' in name order: one text per setting, whatever order its dict was built in."""
    return " ".join(f"{k}={v}" for k, v in sorted(settings.items()))
