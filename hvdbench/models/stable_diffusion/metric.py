"""Stable Diffusion's evaluation metric: FID (lower is better) over every rank's images, with a
second condition, the mean image-prompt score (CLIP score; the debug flavor's label agreement).

    metric = FidMetric(score_floors={"label_agreement": 0.85, "clip_score": 0.15})
    state = metric.start(); state = metric.update(state, stats)      # per validation batch
    reduced = metric.reduce(metric.local(state), dist)              # one allgather
    fid = metric.value(reduced); metric.reached(fid, 90.0)          # FID <= 90 and the score's floor

MLPerf's target is two numbers, FID <= 90 and CLIP >= 0.15, and a run reaches it only when both
hold. `Metric.reached(value, target)` sees one value, so the value is the FID (the `--target`) and
the score is checked against its floor here, from the evaluation `value()` has just computed.

The FID is computed once, from the features of every rank's images: each rank sums its batches'
features into FID's sufficient statistics (count, sum, sum of outer products, in float64: what
torchmetrics' FrechetInceptionDistance keeps as its state and sums across processes itself), the
ranks' sums are gathered and added, and torchmetrics computes the distance from the totals. That is
the FID of all the images together, not a mean of per-rank FIDs (which differs: the covariance of a
union is not the mean of the parts' covariances). `torch.py` makes the per-batch stats:

    {"real": (B, D) features of real images, "fake": (B, D) of generated ones,
     "score": sum of the batch's per-image scores, "count": B, "score_name": "clip_score" | ...}
"""

from __future__ import annotations

import math

import numpy as np

from hvdbench.contracts import GatheredMetric
from hvdbench.output import line


def moments(features: np.ndarray) -> dict:
    """FID's sufficient statistics of (n, D) features: n, their sum and sum of outer products."""
    x = np.asarray(features, dtype=np.float64).reshape(len(features), -1)
    return {"n": len(x), "sum": x.sum(axis=0), "outer": x.T @ x}


def add_moments(a: dict | None, b: dict) -> dict:
    if a is None:
        return {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in b.items()}
    return {"n": a["n"] + b["n"], "sum": a["sum"] + b["sum"], "outer": a["outer"] + b["outer"]}


class FidMetric(GatheredMetric):
    def __init__(self, score_floors: dict[str, float], name: str = "fid"):
        super().__init__(name, self._compute, higher_is_better=False, bounds=(0.0, math.inf))
        self.score_floors = dict(score_floors)
        self.last: dict | None = None  # the evaluation value() computed last: fid, score, its name
        self._speaker = True  # rank 0 says the score (reduce() learns the rank)

    def local(self, state: list) -> dict | None:
        """This rank's batches as one summand: the features' moments per side and the score sum.
        None when the rank had no validation batch (a tiny split over many ranks)."""
        total = None
        for stats in state:
            part = {"real": moments(stats["real"]), "fake": moments(stats["fake"]),
                    "score": float(stats["score"]), "count": int(stats["count"]),
                    "score_name": str(stats["score_name"])}
            if total is None:
                total = part
            else:
                total = {"real": add_moments(total["real"], part["real"]),
                         "fake": add_moments(total["fake"], part["fake"]),
                         "score": total["score"] + part["score"], "count": total["count"] + part["count"],
                         "score_name": part["score_name"]}
        return total

    def reduce(self, local, dist) -> list:
        # One summand per rank, in rank order: every rank then adds the same numbers in the same
        # order and computes the same FID.
        self._speaker = dist.rank == 0
        return [part for part in dist.allgather_object(local) if part is not None]

    @staticmethod
    def totals(reduced: list) -> dict:
        """The ranks' summands added: the moments of all real and all generated features."""
        if not reduced:
            raise ValueError("no validation batch on any rank: the val split is empty")
        real = fake = None
        score, count = 0.0, 0
        for part in reduced:
            real, fake = add_moments(real, part["real"]), add_moments(fake, part["fake"])
            score, count = score + part["score"], count + part["count"]
        return {"real": real, "fake": fake, "score": score, "count": count,
                "score_name": reduced[0]["score_name"]}

    def _compute(self, reduced: list) -> float:
        from hvdbench.models.stable_diffusion.torch import frechet_distance

        t = self.totals(reduced)
        fid = frechet_distance(t["real"], t["fake"])
        score = t["score"] / max(t["count"], 1)
        self.last = {"fid": fid, "score": score, "score_name": t["score_name"], "count": t["count"]}
        if self._speaker:
            floor = self.score_floors.get(t["score_name"])
            line(f"[hvdbench] {self.name} {fid:.2f} and {t['score_name']} {score:.4f}"
                 f"{f' (needs >= {floor:g})' if floor is not None else ''} over {t['count']} generated images")
        return fid

    def samples(self, reduced: list) -> int:
        return int(sum(part["count"] for part in reduced))

    def reached(self, value: float, target: float) -> bool:
        """FID at or below the target, and the score of that same evaluation at or above its floor."""
        if not super().reached(value, target) or self.last is None or self.last["fid"] != value:
            return False
        floor = self.score_floors.get(self.last["score_name"], -math.inf)
        return self.last["score"] >= floor
