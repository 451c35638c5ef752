"""The time-to-train predictor against real clusters: published MLPerf Training results, fitted on the
two smallest node counts of each system and benchmark, predicting the rest.

    .venv/bin/python benchmarks/bench_predict_published.py TREE [TREE ...]
    .venv/bin/python benchmarks/bench_predict_published.py ~/training_results_v4.0 ~/training_results_v4.1 \
        ~/training_results_v5.0 ~/training_results_v5.1            # 1-3 minutes on 2 cores

TREE: a checkout of mlcommons' training_results_vX.Y repository (the submitters' results/ folders and
systems/ JSONs are what is read; nothing is downloaded). A set is one system's submissions of one
benchmark (the report's group: hvdbench.results.mllog) at 3 or more GPU counts; its layouts at the two
smallest GPU counts are fitted on (hvdbench.results.predict.time_to_train.fit_group, as `hvdbench predict
--mllog DIR --fit-on ...` fits them), every other measured layout of it is predicted at its published
global batch and compared with its MLPerf score (time_to_train.csv's ttt_min). Printed: each
prediction's |predicted / measured - 1| with what went wrong (samples, training rate, evaluation and
the rest), the layouts the predictor refused and why, the median error and the share within +-15 %
(goal: median <= 7.5 %, 80 % within +-15 %), also apart for the predictions inside 4x the fitted range;
and each prediction's interval (predict.fitting.COVERAGE, 80 %): the share of measured times to train
inside their interval (goal: the stated share, within 10 points) and the interval's median width
(high / low - 1). A set is one study (mllog.groups: one hardware, over several systems files); two
results at one layout are each predicted. No assertion: a benchmark prints figures.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from hvdbench.results.predict.fitting import COVERAGE

GOAL_MEDIAN, GOAL_WITHIN, BAND, COVERAGE_SLACK = 0.075, 0.80, 0.15, 0.10


def sets_of(tree: Path) -> list[tuple]:
    """(tree name, fit, rows) per set of one tree: a TttFit on the two smallest GPU counts and its rows."""
    from hvdbench.results import report
    from hvdbench.results.analyses.ttt import group_values
    from hvdbench.results.predict.time_to_train import fit_group, group_rows

    loaded = report.load(mllogs=[tree])  # as `hvdbench predict --mllog TREE` reads it
    parts = report.layout_parts(loaded)
    rulesets = {group_values(r): r.ruleset for r in loaded.runs}
    groups: dict[tuple, list] = {}
    for p in parts:
        if p.gpus and p.global_batch:  # a layout the logs place
            groups.setdefault(p.key, []).append(p)
    out = []
    for key, ps in sorted(groups.items(), key=lambda kv: tuple(map(str, kv[0]))):
        counts = sorted({p.gpus for p in ps})
        if len(counts) < 3:
            continue
        fit_on = {p.layout for p in ps if p.gpus in counts[:2]}
        tf = fit_group(ps, fit_on, rulesets.get(key), published=True)
        out.append((tree.name, tf, [r for r in group_rows(tf, []) if r["layout"] not in fit_on]))
    return out


def _pct(x) -> str:
    return "     –" if x is None else f"{100 * x:+6.1f}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trees", nargs="+", type=Path, help="training_results_vX.Y checkouts")
    args = parser.parse_args(argv)
    start = time.monotonic()
    predicted, refused = [], []
    for tree in args.trees:
        for name, tf, rows in sets_of(tree):
            fitted = ", ".join(f"{p.layout} (B {p.global_batch}" + (f", {p.result})" if p.result else ")")
                               for p in tf.fitted)
            print(f"\n{name} · {tf.group['model']} · {tf.group['system']} — fitted on {fitted}")
            for r in rows:
                where = f"{name} {tf.group['model']} {r['layout']}"
                if r.get("predicted_ttt_min") is None:
                    refused.append((where, r["flags"]))
                    print(f"  {r['layout']:>7} B {r['global_batch']:>6}  not predicted ({r['flags']}): {r['note']}")
                    continue
                error = r["ttt_predicted_vs_measured"] - 1
                s_err = r["predicted_trained"] / r["measured_trained"] - 1
                t_err = r["training_rate"] / r["measured_training_rate"] - 1
                low, high = r["predicted_ttt_low_min"], r["predicted_ttt_high_min"]
                predicted.append({"where": where, "error": error, "flags": r["flags"], "s": s_err, "t": t_err,
                                  "group": tf.group, "inside": low <= r["measured_ttt_min"] <= high,
                                  "width": high / low - 1})
                print(f"  {r['layout']:>7} B {r['global_batch']:>6}  predicted {r['predicted_ttt_min']:8.2f} min "
                      f"[{low:.2f}-{high:.2f}]  measured {r['measured_ttt_min']:8.2f} min "
                      f"{'in ' if predicted[-1]['inside'] else 'OUT'}  |err| {100 * abs(error):5.1f} %  "
                      f"(samples {_pct(s_err)} %, rate {_pct(t_err)} %; samples from {r['samples_from']})  "
                      f"{r['flags']}" + (f"  [{r['result']}]" if r.get("result") else ""))
    if not predicted:
        print("\nno prediction: no set of 3 or more GPU counts with parts in these trees")
        return 0
    print(f"\n{len(predicted)} predictions, {len(refused)} layouts not predicted "
          f"({', '.join(sorted({f for _, fl in refused for f in fl.split(';') if f}))}), "
          f"{time.monotonic() - start:.0f} s")
    for label, sel in (("all", predicted),
                       ("inside 4x the fitted range", [p for p in predicted if "extrapolated" not in p["flags"]]),
                       ("extrapolated", [p for p in predicted if "extrapolated" in p["flags"]])):
        if not sel:
            continue
        errors = sorted(abs(p["error"]) for p in sel)
        median, within = statistics.median(errors), sum(e <= BAND for e in errors) / len(errors)
        coverage = sum(p["inside"] for p in sel) / len(sel)
        print(f"{label:>28}: {len(sel):3d} predictions, median |predicted/measured - 1| {100 * median:5.1f} % "
              f"(goal <= {100 * GOAL_MEDIAN:.1f} %: {'met' if median <= GOAL_MEDIAN else 'not met'}), "
              f"{100 * within:4.0f} % within ±{100 * BAND:.0f} % "
              f"(goal {100 * GOAL_WITHIN:.0f} %: {'met' if within >= GOAL_WITHIN else 'not met'}); "
              f"{100 * coverage:3.0f} % inside their {100 * COVERAGE:.0f} % interval "
              f"({'met' if abs(coverage - COVERAGE) <= COVERAGE_SLACK else 'not met'}), median width "
              f"{100 * statistics.median(p['width'] for p in sel):.0f} %")
    misses = [p for p in predicted if abs(p["error"]) > BAND]
    if misses:
        print("\nmisses (|error| > 15 %), with the part that went wrong:")
        for p in sorted(misses, key=lambda p: -abs(p["error"])):
            worse = "samples to target" if abs(p["s"]) > abs(p["t"]) else "training rate"
            print(f"  {p['where']:<44} {100 * p['error']:+6.1f} %  samples {_pct(p['s'])} %, rate "
                  f"{_pct(p['t'])} %: mostly the {worse}" + (f"  [{p['flags']}]" if p["flags"] else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
