"""The time-to-train predictor against real clusters: published MLPerf Training results, fitted on the
two smallest GPU counts of each system and benchmark (the three smallest where it has four or more),
predicting the rest.

    .venv/bin/python benchmarks/bench_predict_published.py TREE [TREE ...]
    .venv/bin/python benchmarks/bench_predict_published.py ~/training_results_v4.0 ~/training_results_v4.1 \
        ~/training_results_v5.0 ~/training_results_v5.1            # 5-10 minutes on 2 shared cores
    .venv/bin/python benchmarks/bench_predict_published.py --prior on TREE ...   # the prior switched on

TREE: a checkout of mlcommons' training_results_vX.Y repository (the submitters' results/ folders and
systems/ JSONs are what is read; nothing is downloaded). A set is one system's submissions of one
benchmark (the report's group: hvdbench.results.mllog) at 3 or more GPU counts; its layouts at the two
smallest GPU counts (three smallest where it has THREE_FROM or more) are fitted on
(hvdbench.results.predict.time_to_train.fit_group, as `hvdbench predict --mllog DIR --fit-on ...` fits
them), every other measured layout of it is predicted twice and compared
with its MLPerf score (time_to_train.csv's ttt_min): at its published global batch, and at the batch
hvdbench chooses for a layout not run (time_to_train.choose_batch: what a buyer gets). A log
republished in a later round (the same model, layout, batch and score) is counted once.

Printed: each prediction's |predicted / measured - 1|, its interval (predict.fitting.COVERAGE, 80 %)
and grade (the library's: fitting.GRADES, with why a prediction is weak), the minutes each part (samples,
rate, evaluation, the rest) puts between predicted and measured; the layouts refused and why; per
batch (published, chosen) the median error and the share within +-15 % (goals: published median
<= 6 %, 80 % within; chosen median <= 8 %, 75 % within), the share inside the interval and its median
width (high / low - 1; goals: the stated share within 10 points, width <= 50 %), in sample (the
interval's constants, fitting.TTT_QUANTILES, fitted on all rounds) and held out (refitted on every
round but one, scored on that one; and on every submitter but one); the constants that all rounds
give; the grades' errors; how often each grade kept its promise (fitting.PROMISES: tight within
+-7 %, usable +-15 %, indicative +-50 %), with the library's rules in sample and with rules refitted
without the round (submitter) scored (`grade_rules`: the widths and weak-fit conditions that grade the
most above indicative while each grade keeps its promise in CHOSEN_AT of the predictions they are
fitted on; a grade whose held-out record falls below 80 % is dropped and all graded again); the rules
all rounds give; and a table of the goals, met or not, with what each goal missed would take: its
figure had each part (samples, rate, evaluation, the rest) been exact, and for the width the narrowest
single interval that holds 80 % of the errors. Last, the held-out figures without the prior of other
submitters' results (hvdbench.results.predict.prior) and with it, on the same targets (`--prior` says
which the rest is printed with: by default the library's USE_PRIOR; `--no-compare` skips the other), and
every prediction it shaped. The prior never reads the set's own submitter, held out by submitter not the
one scored either, by round not the round scored (every set is predicted again without it, those it is
calibrated on too).

Measured on v4.0, v4.1, v5.0 and v5.1 (a copy lacking 50 of their result files: Juniper's BERT and
DLRM of v4.0, Clemson's and Dell's Llama 2 70B LoRA of v4.1 and v5.1), 156-258 s to predict and about
a minute to calibrate, on 2 shared cores under load:

    batch       n   median  within   in sample        held out (round)   held out (submitter)
                                     inside  width    inside  width      inside  width
    published   52  9.5 %   69 %     79 %    49 %     81 %    61 %       85 %    62 %
    chosen      58  10.7 %  67 %     74 %    48 %     74 %    61 %       79 %    62 %

Fitted on the two smallest GPU counts everywhere (before THREE_FROM, the same copy) the same sets gave
65 and 75 predictions, the third-smallest counts' easy ones among them (8.2 % and 71 %, 11.5 % and
63 %). On the 106 targets both protocols score, held out by round: published 10.7 % -> 10.3 %, 65 % ->
67 % within +-15 %, 84 % -> 82 % inside at a width of 76 % -> 62 %; chosen 12.6 % -> 10.9 %, 58 % -> 67 %,
77 % -> 74 % inside at 60 % -> 61 %; held out by submitter the widths 104 % -> 73 % and 70 % -> 65 %.
Three fitted layouts read as a fixed step cost plus communication, c + (d + e comm) / b, are the rate
only where c, d and e all come out positive (3 of the 18 sets; time_to_train._full_rate_model): no
point moves by more than 2 % (Llama 2 70B LoRA on HiPerGator 16x8, chosen batch: -18.8 % -> -17.2 %,
on Tyche 128x4 +11.7 % -> +12.7 %), and held out by submitter the interval is narrower (published 83 %
inside at 64 % -> 85 % at 62 %, chosen 78 % at 63 % -> 79 % at 62 %); held out by round it is the same,
and the same medians and shares. Taken
everywhere (least squares with c, d, e >= 0) it scored no better (published 10.4 %, 67 %;
chosen 11.0 %, 64 %, 72 % inside held out by round; the 106 common targets' published figures the same,
chosen 11.1 %, 63 %, 72 % inside; narrower only held out by submitter, published 66 % wide against
73 %): the third layout almost always zeroed d or e, and where it chose communication the points moved
both ways (Llama 3.1 8B on HiPerGator +7 % -> +18 %, Stable Diffusion on TPU v5p -8 % -> -3 %); not kept.
Issue 59 (at its head; the same trees, loaded once -- 920, 589, 337 and 635 s under nice on 2 loaded
cores -- and scored in seconds): fitted layouts of different least model-parallel degrees (GPUs x
accumulation / global batch) are refused, which refuses 15 more targets, 13 of them predicted within
3-13 % before and 2 (Dell's Llama 2 70B LoRA 8x8, v4.1) 29 % off; 29 refused in all. Left:

    batch       n   median  within   in sample        held out (round)   held out (submitter)
                                     inside  width    inside  width      inside  width
    published   44  10.3 %  66 %     80 %    49 %     77 %    61 %       84 %    69 %
    chosen      49  11.1 %  63 %     73 %    49 %     69 %    61 %       80 %    54 %

Predicted at most indicative instead of refused, those fits gave 50 at 9.5 %, 70 % and 55 at 10.9 %,
67 % (not kept: the issue asks for the refusal). Grades: with rules chosen at 80 % on the other rounds,
"usable" kept +-15 % in only 68 % held out by round (85 %: 78 %; 90 %: 88 %; 100 %: 81 %), so
CHOSEN_AT is 90 %; "tight" then kept +-7 % in 1 of 1 held out by round and 1 of 2 by submitter, and is
not given. Held out, "usable" kept its promise in 88 % / 89 % of 17 / 18 predictions by round
(published / chosen) and 93 % / 88 % of 15 / 17 by submitter; "indicative" +-50 % in 90-93 %. In
sample (fitting.GRADES, the library's interval) 3 "usable" predictions are more than 25 % off (Dell's
BERT 8x4 -34 %, RetinaNet 8x4 -29 % at both batches), held out by round 4 (and HPE's DLRM 4x8 at the
chosen batch +45 %).
The prior from other submitters' results (issue 59 item 3, hvdbench.results.predict.prior): each layout
past its set's fitted ones has its rate moved halfway, in logs, from the fit's to the one the slope of
log per-GPU rate against log GPUs gives that other submitters' systems of its accelerator (the systems
JSON's, as the peaks table matches it) and benchmark show over the same GPUs at a like growth of the
global batch (182 pairs of consecutive GPU counts in the four trees). It shaped 26 of the 93 predictions
in sample and held out by submitter, 11 held out by round (the round's own systems left out). Without ->
with it, on the same targets (the same loaded trees, scored in 70 s):

    batch      held out     median          within +-15 %   inside      width       usable kept +-15 %
    published  by round     10.3 -> 9.1 %   66 -> 66 %      77 -> 75 %  61 -> 58 %  17: 88 % -> 17: 88 %
    published  by submitter 10.3 -> 8.7 %   66 -> 66 %      84 -> 84 %  69 -> 53 %  15: 93 % -> 19: 79 %
    chosen     by round     11.1 -> 10.5 %  63 -> 63 %      69 -> 69 %  61 -> 58 %  18: 89 % -> 18: 89 %
    chosen     by submitter 11.1 -> 10.5 %  63 -> 63 %      80 -> 82 %  54 -> 49 %  17: 88 % -> 21: 76 %

It brought the University of Florida's RetinaNet on B200 (v5.1) from +29.7 % to +7.5 % at 8x8 and from
+101 % to +33 % at 16x8 (Oracle's B200s' 8 -> 16 GPUs) and Nebius's Llama 3.1 8B 4x8 from -10.5 % to
-1.0 %, and took Oracle's Llama 2 70B LoRA 18x4 at the chosen batch from +51 % to +91 % (Dell's GB200s'
36 -> 64 GPUs) and NVIDIA's on Tyche at 128x4 (v5.0) from +12.7 % to +15.4 %: two predictions came
inside +-15 % and two went out, the shares unchanged. Held out by submitter the interval constants and
grade rules refitted on the other submitters' (now closer) predictions graded more of the rest usable
(NVIDIA's DLRM 16x8 at +18 % and +21 %, Dell's RetinaNet 9x4 at -25 % and -26 %), and "usable" kept
its promise in 79 % and 76 %: below the 80 % a grade must keep. The prior is left off
(predict.prior.USE_PRIOR), an option of time_to_train.predictions; its weight (0.5) and batch-growth
window (0.5) were set before the measurement, not tuned on it. (The goals at this head, the prior off,
are those of issue 59's table above.)
Measured again 2026-11-29 evening at d006e08 (the trees checked out again: v4.0 lacking 30 result
files, v4.1 1, v5.1 10; loaded and scored in about 3 minutes on the quiet machine): the same figures as
above (published 44, 10.3 %, 66 %; chosen 49, 11.1 %, 63 %; held out by round 77 % / 69 % inside at
61 % wide; usable kept +-15 % in 88 % / 89 %; 4 of 35 above indicative more than 25 % off held out).
Tried: asking the grade rules, where they are chosen, also to leave no prediction above indicative
more than 25 % off (the issue's last goal as a constraint of `grade_rules`, not only a figure): no rule
of the grid meets it on all rounds (Dell's GB200 BERT 8x4 at its published batch, -34 %, is usable as
its chosen batch is, 7 % off; its RetinaNet 8x4, -29 %, is one doubling past the fitted 16 GPUs, as
usable predictions within 10 % are), so every prediction would be indicative: the goal met by
grading nothing. Not kept.
A global batch far from the fitted ones (2026-11-30, the same trees; loaded and scored in about 6
minutes on the quiet machine): Dell's GB200 BERT 8x4, fitted at global batches 576-768, published at
6144 and flagged `extrapolated`, was graded usable and missed by 34 %. Its global batch more than 4x
past (or under) the fitted layouts' (fitting.GradeRules.most_batch_doublings = 2, the flag's distance)
now makes a prediction weak. Searched by `grade_rules` with the other conditions (1, 2, 3 doublings
or none), it was worse held out: the search graded more predictions usable, which then kept their
promise in only 80 % / 79 % (chosen batch, by round / submitter), and 6 of 37 above indicative were
more than 25 % off. Fixed at 2, with the rest refitted without the round (submitter) scored:
"usable" kept +-15 % in 94 % / 93 % of 16 / 15 published-batch predictions held out by round /
submitter (88 % / 93 % before) and 89 % / 88 % of 18 / 17 at the chosen batch (the same as before);
every grade 91 % (89 %); 3 of 34 above indicative more than 25 % off held out (4 of 35): Dell's
RetinaNet 8x4 at both batches (-29 %) and HPE's DLRM 4x8 at the chosen batch (+45 %). All rounds then
give least_efficiency 0.5 (0.6 before), so GRADES has it: in sample HPE's DLRM 4x8 (its fitted
layouts at 55 % of linear) is usable at its chosen batch, where it was indicative. Medians, shares
within +-15 % and intervals are unchanged (a grade does not move a point): the goals stay as above.
A batch per GPU half the fitted layouts' smallest or less (2026-11-30, the same trees, scored in 59 s):
the three left were all strong scaling past the fitted GPUs, Dell's RetinaNet 8x4 at 8 a GPU against
the fitted 16 and HPE's DLRM 4x8 at its chosen batch at 2,048 against 4,096. Such a batch now makes a
prediction weak (fitting.GradeRules.least_per_gpu_share = 0.5, fixed, not calibrated). In sample
"usable" went from 16 / 18 predictions (published / chosen batch) keeping +-15 % in 94 % / 89 % to
11 / 12 keeping it in 100 % / 100 %; held out by round 13 / 12 at 92 % / 92 %, by submitter 11 / 13
at 91 % / 92 %; every grade 93 % in sample, 92 % held out; above indicative more than 25 % off: 0 of
23 in sample, 0 of 25 held out by round (3 of 34 before). The accurate usable predictions it demoted
(six layouts: HPE's RetinaNet 4x8 0.1 %, Dell's Stable Diffusion 16x4 4.7 %, NVIDIA's Stable
Diffusion 128x8 7.0 %, Nebius's Llama 3.1 8B 4x8 10.5 %, and at the chosen batch Dell's and HPE's BERT
7.3 % and 12.7 %) are strong scaling too: at half the batch per GPU a fit can be right, but it has not
been tested there. With it every round chosen on gives looser rules (usable at 40 % wide, no efficiency
or GPU distance); GRADES keeps its own (see fitting.py). Medians, shares and intervals are unchanged.
The prior on, with that reason (the same trees, `--prior on`, scored in 64 s): "usable" now keeps its
promise held out by submitter too, 13: 85 % published and 13: 92 % chosen (79 % and 76 % before the
reason), by round 13: 92 % and 12: 92 %; above indicative more than 25 % off 0 of 23 in sample, 0 of 25
held out. The medians fall as before (published 10.3 -> 9.1 % by round, 8.7 % by submitter and in
sample; chosen 11.1 -> 10.5 %), the interval narrows (by round 61 -> 58 % wide at 75 % / 69 % inside;
by submitter 69 -> 53 % and 54 -> 49 % at 84 % / 82 %), the shares within +-15 % are unchanged (66 %,
63 %). So predict.prior.USE_PRIOR is on (the prior's paragraph above describes it while it was off).
The prior's weight (2026-11-30, the same trees; `--prior-weights 0,0.25,0.5,0.75,1`, 73 s): set at
0.5 before any measurement, it is now the weight of that grid whose predictions have the least median
|log error| on all four rounds, 0.75 (0.089; 0.5 and 0.6: 0.096, 0.9: 0.090, 1: 0.097, 0: 0.110).
At 0.75, held out by round: published 8.7 % (9.1 % at 0.5), 70 % within +-15 % (66 %), 73 % inside
(75 %) at 57 % wide (58 %); chosen 10.1 % (10.5 %), 67 % (63 %), 67 % inside (69 %) at 56 % (58 %); by
submitter published 8.5 %, 70 %, 86 % at 51 %, chosen 10.1 %, 67 %, 84 % at 49 %; "usable" kept +-15 % in
13: 100 % / 12: 100 % by round and 13: 85 % / 13: 92 % by submitter, every grade 96 % held out; above
indicative more than 25 % off 0 of 23 in sample and 0 of 25 held out. Since the weight was picked on these
rounds, `--prior-weights` also chooses it out of sample: for each round (submitter) scored, the weight
the other rounds (submitters) give, with the interval and grades refitted there. The weights it chose:
0.75 for v4.0 and v4.1, 0.25 for v5.0, 1 for v5.1; 0.75 for six of nine submitters (0.5 for NVIDIA, 1
for Oracle and the University of Florida). Held out by round that whole procedure scores published
10.0 %, 73 % within +-15 %, 77 % inside at 45 % wide, chosen 10.9 %, 69 %, 73 % inside at 53 %; by
submitter published 8.9 %, 73 %, 86 % at 50 %, chosen 10.5 %, 69 %, 82 % at 49 %: the shares within
+-15 % and the widths are better than at 0.5 either way, the medians within a point.
One evaluation's cost (2026-12-01, the same trees loaded once and pickled, scored in 69 s): the
fitted layouts' per-evaluation seconds against their GPUs read as A x GPUs^-g alone were 15 % under
the measured cost at the median of the 46 layouts predicted past their fitted ones (RetinaNet on 512
GB200s, fitted on 8 and 72: 2.9 s against 6.4; SSD on 2,528 H100s: 1.3 s against 3.7), read as
a + b / GPUs 6 % over (Llama 2 70B LoRA on 512 GB300s: 1.1 s against 0.4). Their midpoint in logs
(time_to_train.TttFit.eval_one) is 6 % under, with the least mean |log error|: 0.27 against 0.35 and
0.35. Taken (the weight one half, not tuned; 0.3 and 0.7 scored alike), held out by round: published
8.7 % (8.7 %), 70 % within +-15 % (70 %), 77 % inside (73 %) at 51 % wide (57 %); chosen 10.1 %
(10.1 %), 67 % (67 %), 71 % (67 %) at 51 % (56 %); by submitter published 8.4 % (8.5 %), 73 % (70 %),
82 % (86 %) at 47 % (51 %), chosen 9.4 % (10.1 %), 69 % (67 %), 82 % (84 %) at 46 % (49 %); in sample
published 8.4 %, 73 %; chosen 9.4 %, 69 %. "usable" kept +-15 % in 93 % / 100 % held out by round and
by submitter (14 / 13 and 14 / 14 predictions), every grade 95 % held out, none above indicative more
than 25 % off (0 of 27 held out by round). It moved RetinaNet on Tyche 128x4 from -19.3 % to -8.0 %,
Dell's GB200 RetinaNet 16x4 from -12.9 % to -5.9 %, NVIDIA's GNN 64x8 (v4.0) from -11.5 % to -5.9 %;
and SSD on 316x8 H100s from -8.2 % to +23.1 % (its rate, predicted at 0.57x the measured, had been
offset by its evaluation, predicted 60 % too short), Llama 2 70B LoRA 128x4 on GB200 and GB300 from +16.8 % and +16.0 % to
+25.0 % and +29.6 % (indicative). The prior's weight chosen out of sample is 0.75 for three of four
rounds (0.25 for v5.0) and seven of nine submitters (0.5 for Dell and NVIDIA); that whole procedure
scores published 8.7 %, 70 %, 80 % inside at 52 % by round. Tried beside it, not kept: the rate's point
the midpoint of its two readings where the layout crosses no slower link than the fitted ones
(published 8.3 %, 75 % in sample, but chosen 11.0 %, held out by round 11.3 %); other accelerators'
pairs of the same benchmark as the prior where the layout's own has none (chosen 8.3 % in sample, but
published within +-15 % 70 %, mean |log error| 0.139 against 0.132); no scale of the fitted layouts'
samples against the RCP table's mean (published mean |log error| 1.49); the chosen batch's growth past
the fitted layouts taken from other submitters' pairs, half or all the way (chosen 10.0 % and 10.4 % in
sample against 9.4 %, and 7 targets refused as model-parallel); the prior's batch-growth window 0.25 or
wider than 0.5 (0.25: the same 8.4 %, 73 %; 0.75-any: 8.8-9.3 %, 66-68 %).
Before issue 59:
Goals not met: the medians (6 %, 8 %), the shares within +-15 % (80 %, 75 %) and the width (50 %);
coverage within 10 points of 80 % everywhere. Had the rate been exact, the published batch would meet
both its goals (6.1 %, 81 %); a single width holding 80 % of the published errors is 54 %, of the
chosen 64 %. Held out by round, "tight" (4 and 7 predictions) was within +-15 % 100 % and 86 % of the
time, "usable" (20, 19) 80 % and 84 %, "indicative" (28, 32) 57 % and 53 %.
12 layouts refused (model parallelism changed, or the RCP table's largest batch too small for the
GPUs). No assertion: a benchmark prints figures.
"""

from __future__ import annotations

import argparse
import itertools
import math
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from hvdbench.results.predict.fitting import (
    COVERAGE,
    GRADES,
    PROMISE_KEPT,
    PROMISES,
    GradeRules,
    TTT_PER_DOUBLING,
    TTT_QUANTILES,
    TTT_SIGMA_FLOOR,
    grade,
    quantiles_of,
)
from hvdbench.results.predict.prior import PRIOR_WEIGHT, USE_PRIOR, corpus_for, scaling_pairs

# A set of this many GPU counts or more is fitted on its three smallest (the rate model tells a fixed step
# cost from communication with three: time_to_train._full_rate_model), else on its two smallest.
THREE_FROM = 4
GOALS = {"published": (0.06, 0.80), "chosen": (0.08, 0.75)}  # median |error|, share within BAND
BAND, COVERAGE_SLACK, GOAL_WIDTH = 0.15, 0.10, 0.50


def load(tree: Path) -> tuple[str, list, dict, dict]:
    """(tree name, every layout's parts, each group's ruleset, each group's links): the slow part, as
    `hvdbench predict --mllog TREE` reads it."""
    from hvdbench.results import report
    from hvdbench.results.analyses.ttt import group_values
    from hvdbench.results.predict.time_to_train import group_links

    loaded = report.load(mllogs=[tree])
    parts = [p for p in report.layout_parts(loaded) if p.gpus and p.global_batch]  # a layout the logs place
    return tree.name, parts, {group_values(r): r.ruleset for r in loaded.runs}, group_links(loaded.runs)


def groups_of(loaded: tuple[str, list, dict, dict]) -> list[tuple]:
    """(tree name, group key, its layouts' parts, ruleset, its links' rates) per set of 3 or more GPU
    counts of a `load`ed tree."""
    from hvdbench.results.predict.time_to_train import Links

    name, parts, rulesets, links = loaded
    groups: dict[tuple, list] = {}
    for p in parts:
        groups.setdefault(p.key, []).append(p)
    return [(name, key, ps, rulesets.get(key), links.get(key, Links()))
            for key, ps in sorted(groups.items(), key=lambda kv: tuple(map(str, kv[0])))
            if len({p.gpus for p in ps}) >= 3]


def attribute(tf, row, measured) -> dict:
    """Minutes each part puts between predicted and measured: samples (S_p - S_m) / T_p, rate
    S_m (1 / T_p - 1 / T_m), evaluation E_p - E_m, the rest O_p - O_m; they add up to the difference."""
    s_p, t_p = row.fit.predicted_trained, row.fit.training_rate
    e_p, o_p = tf.eval_s(row.gpus, s_p, row.global_batch), tf.other_s(row.gpus)
    return {"samples": (s_p - measured.trained) / t_p / 60,
            "rate": measured.trained * (1 / t_p - 1 / measured.throughput) / 60,
            "evaluation": (e_p - measured.eval_s) / 60, "rest": (o_p - measured.other_s) / 60}


def predictions_of(groups: list[tuple], pairs=(), exclude_rulesets=(), exclude_submitters=(),
                   quiet: bool = False, weight: float = PRIOR_WEIGHT) -> tuple[list[dict], list[tuple]]:
    """Every set's targets predicted at the published and at the chosen batch (dicts: where, round,
    batch kind, error, log-error, sigma, attribution, ...), and the refusals. `pairs`: the corpus the
    prior comes from (predict.prior.scaling_pairs; none: no prior), never the set's own submitter's,
    nor those of `exclude_rulesets` and `exclude_submitters` (a round or submitter held out), moving the
    rate `weight` of the way to it (predict.prior.shaped)."""
    from hvdbench.results.predict.time_to_train import evidence, fit_group, predict_layout, spread_terms

    def say(*args):
        if not quiet:
            print(*args)
    out, refused, seen = [], [], set()
    for name, _, ps, ruleset, links in groups:
        counts = sorted({p.gpus for p in ps})
        fit_on = {p.place for p in ps if p.gpus in counts[:3 if len(counts) >= THREE_FROM else 2]}
        tf = fit_group(ps, fit_on, ruleset, published=True, links=links,
                       prior_pairs=corpus_for(list(pairs), ps, exclude_rulesets, exclude_submitters),
                       prior_weight=weight)
        fitted = ", ".join(f"{p.layout} (B {p.global_batch})" for p in tf.fitted)
        say(f"\n{name} · {tf.group.model} · {tf.group.system} — fitted on {fitted}")
        for p in sorted(ps, key=lambda p: (p.gpus, p.nodes, p.global_batch, p.result)):
            if p.place in fit_on:
                continue
            twin = (tf.group.model, p.layout, p.global_batch, round(p.ttt_s, 3))
            if twin in seen:
                say(f"  {p.layout:>7} B {p.global_batch:>6}  republished from an earlier round: counted once")
                continue
            seen.add(twin)
            for kind, row in (("published", predict_layout(tf, p.nodes, p.gpus_per_node, p.global_batch,
                                                           "published", measured=p)),
                              ("chosen", predict_layout(tf, p.nodes, p.gpus_per_node, None, measured=p))):
                where = f"{name} {tf.group.model} {p.layout}"
                if row.predicted_ttt_min is None:
                    refused.append((where, kind, row.flags))
                    say(f"  {p.layout:>7} B {row.global_batch or '–':>6} {kind:>9}  not predicted "
                        f"({row.flags}): {row.note}")
                    continue
                error = row.ttt_predicted_vs_measured - 1
                parts = attribute(tf, row, p)
                out.append({"where": where, "round": name, "ruleset": ruleset, "submitter": p.submitter,
                            "kind": kind, "error": error,
                            "log_error": math.log(row.measured_ttt_min / row.predicted_ttt_min),
                            "terms": spread_terms(tf, p.nodes, p.gpus_per_node, row.global_batch,
                                                  row.fit.samples_from.startswith("the RCP")),
                            "sigma": math.log(row.predicted_ttt_high_min / row.predicted_ttt_low_min)
                            / (TTT_QUANTILES[1] - TTT_QUANTILES[0]), "predicted": row.predicted_ttt_min,
                            "measured": row.measured_ttt_min, "flags": row.flags, "parts": parts,
                            "batch": row.global_batch, "published_batch": p.global_batch,
                            "evidence": evidence(tf, p.nodes, p.gpus_per_node, row.global_batch, p),
                            "shipped_grade": row.grade, "prior": row.fit.rate_prior})
                worst = max(parts, key=lambda k: abs(parts[k]))
                say(f"  {p.layout:>7} B {row.global_batch:>6} {kind:>9}  predicted "
                    f"{row.predicted_ttt_min:8.2f} min, measured {row.measured_ttt_min:8.2f}  "
                    f"|err| {100 * abs(error):5.1f} %  "
                    + ", ".join(f"{k} {v:+.2f}" for k, v in parts.items()) + f" min (mostly {worst})  "
                    + (f"{row.flags}  " if row.flags else "") + (f"[{p.result}]  " if p.result else "")
                    + f"{row.grade}" + (f" ({row.weak_fit})" if row.weak_fit else "")
                    + (f"  [prior: {row.fit.rate_prior}]" if row.fit.rate_prior else ""))
    return out, refused


FAR = tuple(TTT_PER_DOUBLING)  # the doublings' kinds, in the order of a calibration's spreads
STEPS = (0.0, 0.02, 0.04, 0.06, 0.08, 0.12, 0.16, 0.24)  # per doubling, each kind
# x the half log-gap between the rate's two readings the fitted layouts cannot tell apart
UNIDENTIFIED_STEPS = (0.0, 0.5, 1.0, 1.5, 2.0)
FLOORS = (0.02, 0.03, 0.04, 0.06, 0.08, 0.10)


def sigmas(preds: list[dict], spreads, floor) -> np.ndarray:
    """time_to_train.ttt_sigma of each prediction (rows) for each of `spreads` (columns x FAR)."""
    terms = np.array([[p["terms"][k] for k in FAR] for p in preds])
    own = np.array([p["terms"]["samples_residual"] ** 2 + p["terms"]["rate_residual"] ** 2
                    + p["terms"]["repeats"] ** 2 for p in preds])
    far = np.atleast_2d(spreads) @ terms.T  # (spreads, predictions)
    return np.sqrt(np.asarray(floor)[:, None] ** 2 + own[None, :] + far ** 2)


def calibrate(preds: list[dict]) -> tuple[dict, float, tuple[float, float]]:
    """(per-doubling spreads, floor, quantiles): of every combination of STEPS per kind and FLOORS,
    the one whose interval, with the quantiles of these errors per sigma (COVERAGE of them inside),
    has the best mean interval score."""
    steps = [UNIDENTIFIED_STEPS if k == "rate_unidentified" else STEPS for k in FAR]
    grid = np.array(np.meshgrid(*steps, FLOORS, indexing="ij")).reshape(len(FAR) + 1, -1).T
    sig = sigmas(preds, grid[:, :-1], grid[:, -1])
    z = np.array([p["log_error"] for p in preds])[None, :] / sig
    tail = (1 - COVERAGE) / 2
    lo, hi = np.quantile(z, tail, axis=1), np.quantile(z, 1 - tail, axis=1)
    # The interval score (Gneiting and Raftery 2007), in logs: width, plus 2 / (1 - COVERAGE) x how far
    # each error falls outside; the narrowest median width alone overfits the rounds it is fitted on.
    e = np.array([p["log_error"] for p in preds])[None, :]
    low, high = lo[:, None] * sig, hi[:, None] * sig
    score = np.mean(high - low + 2 / (1 - COVERAGE) * (np.maximum(low - e, 0) + np.maximum(e - high, 0)), axis=1)
    best = int(np.argmin(score))
    return dict(zip(FAR, grid[best, :-1].tolist())), float(grid[best, -1]), (float(lo[best]), float(hi[best]))


TIGHT_WIDTHS = (0.10, 0.15, 0.20, 0.25, 0.30, 0.40)
USABLE_WIDTHS = (0.20, 0.30, 0.40, 0.50, 0.60, 0.80)
LEAST_EFFICIENCIES = (0.0, 0.5, 0.6, 0.7, 0.8, 0.9)
MOST_DOUBLINGS = (math.inf, 1.0, 2.0, 3.0, 4.0)
FEWEST_GRADED = 3  # a grade given to fewer of the predictions a rule is chosen on says nothing of its promise
# The share a grade must keep its promise in among the predictions its rules are chosen on: a margin over
# PROMISE_KEPT, which rules chosen at 80 % kept in only 68 % of the predictions held out by round (usable;
# at 85 %: 78 %, at 90 %: 88 %, at 100 %: 81 %, on v4.0-v5.1).
CHOSEN_AT = 0.90


def graded(p: dict, width: float, rules: GradeRules) -> str:
    from hvdbench.results.predict.time_to_train import weak_reasons

    return grade(width, bool(weak_reasons(p["evidence"], rules)), rules)


def kept(sel: list[dict]) -> dict[str, tuple[int, float]]:
    """Per grade: (predictions given it, share within its promise: fitting.PROMISES)."""
    out = {}
    for name, within in PROMISES.items():
        mine = [p for p in sel if p["grade"] == name]
        if mine:
            out[name] = (len(mine), sum(abs(p["error"]) <= within + 1e-12 for p in mine) / len(mine))
    return out


def grade_rules(preds: list[dict], widths: list[float], given=("tight", "usable")) -> GradeRules:
    """The GradeRules (of TIGHT_WIDTHS x USABLE_WIDTHS x LEAST_EFFICIENCIES x MOST_DOUBLINGS x the RCP cap)
    that grade the most of these predictions above indicative (tight counting twice) while every grade
    given keeps its promise in CHOSEN_AT of them; a grade given to fewer than FEWEST_GRADED, or not
    in `given`, is not given (its width 0). `widths`: each prediction's interval width under the
    constants it is scored with."""
    from hvdbench.results.predict.time_to_train import weak_reasons

    width = np.array(widths)
    error = np.array([abs(p["error"]) for p in preds])
    best, best_score = GradeRules(0.0, 0.0, 0.0, 0.0), -1
    for least, most, cap in itertools.product(LEAST_EFFICIENCIES, MOST_DOUBLINGS, (False, True)):
        weak = np.array([bool(weak_reasons(p["evidence"], GradeRules(0, 0, least, most, cap))) for p in preds])
        for tight, usable in itertools.product(TIGHT_WIDTHS if "tight" in given else (0.0,),
                                               USABLE_WIDTHS if "usable" in given else (0.0,)):
            if usable < tight:
                continue
            is_tight = ~weak & (width <= tight)
            is_usable = ~weak & ~is_tight & (width <= usable)
            ok = True
            for sel, within in ((is_tight, PROMISES["tight"]), (is_usable, PROMISES["usable"])):
                n = int(sel.sum())
                if n and (n < FEWEST_GRADED or np.mean(error[sel] <= within + 1e-12) < CHOSEN_AT):
                    ok = False
            score = 2 * int(is_tight.sum()) + int(is_usable.sum())
            # Ties keep the first: no cap before a cap, the narrower widths before the wider.
            if ok and score > best_score:
                best, best_score = GradeRules(tight, usable, least, most, cap), score
    return best


def scored(preds: list[dict], calibration=None, rules: GradeRules | None = None) -> list[dict]:
    """Each prediction's interval (the library's constants, or a `calibrate` result's): inside, width,
    grade (the library's GradeRules, or `rules`)."""
    out = []
    for p in preds:
        if calibration is None:
            sigma, quantiles = p["sigma"], TTT_QUANTILES
        else:
            spreads, floor, quantiles = calibration
            sigma = float(sigmas([p], [[spreads[k] for k in FAR]], [floor])[0, 0])
        low, high = p["predicted"] * math.exp(quantiles[0] * sigma), p["predicted"] * math.exp(quantiles[1] * sigma)
        out.append({**p, "inside": low <= p["measured"] <= high, "width": high / low - 1,
                    "grade": graded(p, high / low - 1, rules or GRADES)})
    return out


def held_out(preds: dict[str, list[dict]], by: str, given=("tight", "usable")) -> list[dict]:
    """Every prediction scored with the interval constants and grade rules (of the `given` grades)
    calibrated on the others: those of every other round, or every other submitter (`by`), so no
    prediction's interval or grade was tuned on itself. `preds`: per round (submitter) left out, the
    predictions whose prior never read it (`without`)."""
    out = []
    for left, mine in sorted(preds.items()):
        rest = [p for p in mine if p[by] != left]
        calibration = calibrate(rest) if rest else None
        rules = grade_rules(rest, [p["width"] for p in scored(rest, calibration)], given) if rest else None
        out += scored([p for p in mine if p[by] == left], calibration, rules)
    return out


def without(groups: list[tuple], pairs, preds: list[dict], by: str,
            weight: float = PRIOR_WEIGHT) -> dict[str, list[dict]]:
    """Per round (submitter, `by`) of `preds`: every set predicted again with a prior that never reads
    it (predictions_of's exclusions) at `weight`, or `preds` themselves where there is no prior."""
    out = {}
    for left in sorted({p[by] for p in preds}):
        if not pairs:
            out[left] = preds
        elif by == "round":
            ruleset = next(p["ruleset"] for p in preds if p["round"] == left)
            out[left] = predictions_of(groups, pairs, exclude_rulesets={ruleset}, quiet=True, weight=weight)[0]
        else:
            out[left] = predictions_of(groups, pairs, exclude_submitters={left}, quiet=True, weight=weight)[0]
    return out


def figures(sel: list[dict]) -> dict:
    """The goals' figures of scored predictions: median |error|, share within +-BAND, share inside
    the interval, median width."""
    errors = [abs(p["error"]) for p in sel]
    return {"median": statistics.median(errors), "within": sum(e <= BAND for e in errors) / len(errors),
            "inside": sum(p["inside"] for p in sel) / len(sel), "width": statistics.median(p["width"] for p in sel)}


def summary(label: str, sel: list[dict]) -> None:
    f = figures(sel)
    print(f"{label:>34}: {len(sel):3d}, median |err| {100 * f['median']:5.1f} %, {100 * f['within']:3.0f} % within "
          f"±{100 * BAND:.0f} %; {100 * f['inside']:3.0f} % inside the {100 * COVERAGE:.0f} % interval, "
          f"median width {100 * f['width']:.0f} %")


PARTS = ("samples", "rate", "evaluation", "rest")


def had_exact(sel: list[dict], part: str) -> list[dict]:
    """The predictions had `part` been exact: its minutes (attribute) taken off each predicted time."""
    return [{**p, "error": (p["predicted"] - p["parts"][part]) / p["measured"] - 1} for p in sel]


def promises_table(inside: list[dict], held: list[dict], by_submitter: list[dict]) -> None:
    """How often each grade kept its promise (fitting.PROMISES): the library's constants and rules in
    sample, and refitted on every round (submitter) but the one scored."""
    print(f"\ngrades and their promises: predictions given the grade, and the share within its promise "
          f"(kept at {100 * PROMISE_KEPT:.0f} %):")
    print(f"  {'':<44}" + "".join(f"{name + ' (±' + format(100 * w, '.0f') + ' %)':>22}" for name, w in PROMISES.items()))
    for kind in ("published", "chosen"):
        for label, sel in (("the library's, in sample", inside), ("refitted, held out by round", held),
                           ("refitted, held out by submitter", by_submitter)):
            record = kept([p for p in sel if p["kind"] == kind])
            print(f"  {kind + ' batch, ' + label:<44}" + "".join(
                f"{(f'{record[g][0]}: {100 * record[g][1]:.0f} %' if g in record else '–'):>22}" for g in PROMISES))


def far_off_above_indicative(sel: list[dict]) -> tuple[list[dict], list[dict]]:
    """(the predictions graded above indicative, those of them more than 25 % off): the issue's last goal."""
    above = [p for p in sel if p["grade"] in ("tight", "usable")]
    return above, [p for p in above if abs(p["error"]) > 0.25]


def goals_table(inside: list[dict], held: list[dict]) -> None:
    """Each goal against its figure, met or not; per goal not met, what it would take: the figure had
    each part (samples, rate, evaluation, the rest) been exact, and for the width, the narrowest
    interval that holds COVERAGE of these errors (one width for all: past it, only a better point helps)."""
    rows = []
    for kind, (median_goal, within_goal) in GOALS.items():
        mine = [p for p in inside if p["kind"] == kind]
        f, out = figures(mine), [p for p in held if p["kind"] == kind]
        g = figures(out)
        exact = {part: figures(had_exact(mine, part)) for part in PARTS}
        rows.append((f"{kind} batch: median |error| <= {100 * median_goal:.0f} %", f"{100 * f['median']:.1f} %",
                     f["median"] <= median_goal,
                     ", ".join(f"{part} exact {100 * exact[part]['median']:.1f} %" for part in PARTS)))
        rows.append((f"{kind} batch: >= {100 * within_goal:.0f} % within ±{100 * BAND:.0f} %",
                     f"{100 * f['within']:.0f} %", f["within"] >= within_goal,
                     ", ".join(f"{part} exact {100 * exact[part]['within']:.0f} %" for part in PARTS)))
        logs = sorted(p["log_error"] for p in out)
        tail = (1 - COVERAGE) / 2
        narrowest = math.exp(float(np.quantile(logs, 1 - tail) - np.quantile(logs, tail))) - 1
        rows.append((f"{kind} batch, held out: {100 * COVERAGE:.0f} % interval holds "
                     f"{100 * (COVERAGE - COVERAGE_SLACK):.0f}-{100 * (COVERAGE + COVERAGE_SLACK):.0f} %",
                     f"{100 * g['inside']:.0f} %", abs(g["inside"] - COVERAGE) <= COVERAGE_SLACK + 1e-9,
                     "wider intervals" if g["inside"] < COVERAGE else "narrower intervals"))
        rows.append((f"{kind} batch, held out: median width <= {100 * GOAL_WIDTH:.0f} %", f"{100 * g['width']:.0f} %",
                     g["width"] <= GOAL_WIDTH,
                     f"one width for all holding {100 * COVERAGE:.0f} % of these errors: {100 * narrowest:.0f} %; "
                     + ("a width that follows the error more closely" if narrowest <= GOAL_WIDTH
                        else "more accurate points first")))
    for label, sel in (("in sample", inside), ("held out", held)):
        record = kept(sel)
        worst = min(record.values(), key=lambda r: r[1])
        rows.append((f"{label}: every grade keeps its promise in >= {100 * PROMISE_KEPT:.0f} %",
                     f"{100 * worst[1]:.0f} %", worst[1] >= PROMISE_KEPT,
                     "the grade that falls short: " + ", ".join(f"{g} {100 * r[1]:.0f} % of {r[0]}"
                                                                 for g, r in record.items() if r[1] < PROMISE_KEPT)))
        above, off = far_off_above_indicative(sel)
        rows.append((f"{label}: none above indicative more than 25 % off", f"{len(off)} of {len(above)}", not off,
                     "; ".join(f"{p['where']} {p['kind']} {100 * p['error']:+.0f} % ({p['grade']})" for p in off)))
    print(f"\ngoals (in sample: the library's interval constants; held out: one round left out):")
    print(f"  {'goal':<54} {'measured':>9}  {'':<7}  what it would take")
    for goal, value, met, take in rows:
        print(f"  {goal:<54} {value:>9}  {'met' if met else 'not met':<7}  {'' if met else take}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trees", nargs="+", type=Path, help="training_results_vX.Y checkouts")
    parser.add_argument("--prior", choices=("on", "off"), default="on" if USE_PRIOR else "off",
                        help="shape the rate past the fitted layouts by other submitters' results "
                             "(predict.prior; default: the library's USE_PRIOR)")
    parser.add_argument("--prior-weights", default="",
                        help="comma-separated weights of the prior to choose among out of sample "
                             "(weight_out_of_sample), e.g. 0,0.25,0.5,0.75,1; printed last")
    parser.add_argument("--no-compare", action="store_true",
                        help="skip the held-out figures with the prior the other way (predict.prior)")
    args = parser.parse_args(argv)
    start = time.monotonic()
    loaded = [load(tree) for tree in args.trees]
    weights = [float(w) for w in args.prior_weights.split(",")] if args.prior_weights else []
    return score(loaded, start, args.prior == "on", compare_too=not args.no_compare, weights=weights)


def evaluate(groups: list[tuple], pairs, quiet: bool = False) -> dict:
    """predictions_of's predictions, scored in sample (the library's constants) and held out by round
    and by submitter (refitted without it, the prior never reading it), a grade whose held-out record
    falls below PROMISE_KEPT dropped and all graded again."""
    preds, refused = predictions_of(groups, pairs, quiet=quiet)
    if not preds:
        return {"preds": preds, "refused": refused}
    rounds, submitters = without(groups, pairs, preds, "round"), without(groups, pairs, preds, "submitter")
    inside = scored(preds)
    held, by_submitter = held_out(rounds, "round"), held_out(submitters, "submitter")
    dropped = sorted({g for sel in (held, by_submitter) for g, (_, share) in kept(sel).items()
                      if g != "indicative" and share < PROMISE_KEPT})
    given = tuple(g for g in ("tight", "usable") if g not in dropped)
    out = {"preds": preds, "refused": refused, "inside": inside, "dropped": dropped, "given": given,
           "all_held": held, "all_by_submitter": by_submitter}
    if dropped:
        held, by_submitter = held_out(rounds, "round", given), held_out(submitters, "submitter", given)
    return {**out, "held": held, "by_submitter": by_submitter}


def weight_out_of_sample(groups: list[tuple], pairs, preds: list[dict], weights: list[float]) -> None:
    """The prior's weight (predict.prior.PRIOR_WEIGHT) chosen out of sample: per round (submitter) left
    out, every set predicted at each weight with a prior that never reads it; the weight whose
    predictions of the other rounds (submitters) have the least median |log error| (both batches)
    is the one the round left out is scored at, with interval constants and grade rules refitted on
    the others at that weight (held_out). Printed: the weight each left-out round (submitter) got,
    and the figures, per batch. `preds`: score's predictions, which name the rounds and submitters."""
    print(f"\nthe prior's weight chosen out of sample among {', '.join(f'{w:g}' for w in weights)} "
          f"(the library's: {PRIOR_WEIGHT:g}):")
    for by in ("round", "submitter"):
        per_weight = {w: without(groups, pairs, preds, by, w) for w in weights}
        scored_out, chosen = [], {}
        for left in sorted(per_weight[weights[0]]):
            def loss(w, left=left):
                return statistics.median(abs(p["log_error"]) for p in per_weight[w][left] if p[by] != left)
            chosen[left] = min(weights, key=loss)
            scored_out += held_out({left: per_weight[chosen[left]][left]}, by)
        print(f"  held out by {by}, the weight each got: "
              + ", ".join(f"{left} {w:g}" for left, w in chosen.items()))
        for kind in ("published", "chosen"):
            sel = [p for p in scored_out if p["kind"] == kind]
            if sel:
                summary(f"{kind}, held out by {by}", sel)
                k, (above, off) = kept(sel), far_off_above_indicative(sel)
                print(f"{'':>36}grades kept: " + ", ".join(f"{g} {k[g][0]}: {100 * k[g][1]:.0f} %" for g in k)
                      + f"; above indicative and more than 25 % off: {len(off)} of {len(above)}")


def compare(off: dict, on: dict) -> None:
    """The held-out figures without the prior and with it, on the same targets."""
    print("\nthe prior (predict.prior), held out: without it -> with it (the prior never reads the submitter "
          "scored, nor the round where held out by round):")
    for kind in ("published", "chosen"):
        for label, key in (("by round", "held"), ("by submitter", "by_submitter"), ("in sample", "inside")):
            a, b = ([p for p in r[key] if p["kind"] == kind] for r in (off, on))
            fa, fb = figures(a), figures(b)
            ka, kb = kept(a), kept(b)
            print(f"  {kind:>9} {label:<13} n {len(a):3d}: median |err| {100 * fa['median']:5.1f} -> "
                  f"{100 * fb['median']:5.1f} %, within ±{100 * BAND:.0f} % {100 * fa['within']:3.0f} -> "
                  f"{100 * fb['within']:3.0f} %, inside {100 * fa['inside']:3.0f} -> {100 * fb['inside']:3.0f} %, "
                  f"width {100 * fa['width']:3.0f} -> {100 * fb['width']:3.0f} %; kept "
                  + ", ".join(f"{g} {(f'{ka[g][0]}: {100 * ka[g][1]:.0f} %' if g in ka else '–')} -> "
                              f"{(f'{kb[g][0]}: {100 * kb[g][1]:.0f} %' if g in kb else '–')}" for g in PROMISES))
    shaped = [(p, q) for p, q in zip(off["preds"], on["preds"]) if q["prior"]]
    print(f"  {len(shaped)} of {len(on['preds'])} predictions shaped by a prior (in sample):")
    for p, q in shaped:
        print(f"    {q['where']:<42} {q['kind']:>9} {100 * p['error']:+6.1f} % -> {100 * q['error']:+6.1f} %  "
              f"[{q['prior']}]")


def score(loaded: list[tuple], start: float, prior: bool = USE_PRIOR, compare_too: bool = True,
          weights: tuple[float, ...] | list[float] = ()) -> int:
    """Predict, calibrate and print (the module docstring) for `load`ed trees' sets (groups_of), the
    rate shaped by other submitters' results where `prior`; with the prior the other way too where
    `compare_too`; the prior's weight chosen out of sample among `weights` where given."""
    groups = [g for tree in loaded for g in groups_of(tree)]
    pairs = scaling_pairs([p for _, parts, _, _ in loaded for p in parts])
    result = evaluate(groups, pairs if prior else ())
    preds, refused = result["preds"], result["refused"]
    if not preds:
        print("\nno prediction: no set of 3 or more GPU counts with parts in these trees")
        return 0
    print(f"\n{len(preds)} predictions ({sum(p['kind'] == 'published' for p in preds)} at the published batch), "
          f"{len(refused)} refused ({', '.join(sorted({f for *_, fl in refused for f in fl.split(';') if f}))}), "
          f"{time.monotonic() - start:.0f} s; the prior {'on' if prior else 'off'} "
          f"({len(pairs)} pairs of GPU counts in these trees)")
    # In sample: the library's constants (fitted on every round); held out: refitted without the round scored.
    spreads, floor, q = calibrate(preds)
    print(f"interval constants these rounds give: TTT_PER_DOUBLING = {spreads}, TTT_SIGMA_FLOOR = {floor:g}, "
          f"TTT_QUANTILES = ({q[0]:.2f}, {q[1]:.2f}); the library's: {TTT_PER_DOUBLING}, {TTT_SIGMA_FLOOR:g}, "
          f"{TTT_QUANTILES}; the library's sigmas' own quantiles: "
          + ", ".join(f"{v:.2f}" for v in quantiles_of([(p["log_error"], p["sigma"]) for p in preds])))
    inside, held, by_submitter = result["inside"], result["held"], result["by_submitter"]
    dropped, given = result["dropped"], result["given"]
    if dropped:
        print("\nheld out with every grade, before", " and ".join(dropped), "is dropped:")
        promises_table(inside, result["all_held"], result["all_by_submitter"])
    for kind in ("published", "chosen"):
        print(f"\n{kind} batch:")
        summary("in sample", [p for p in inside if p["kind"] == kind])
        summary("held out (one round left out)", [p for p in held if p["kind"] == kind])
        summary("held out (one submitter left out)", [p for p in by_submitter if p["kind"] == kind])
        for g in ("tight", "usable", "indicative"):
            sel = [p for p in held if p["kind"] == kind and p["grade"] == g]
            if sel:
                summary(f"held out, graded {g}", sel)
    promises_table(inside, held, by_submitter)
    rules = grade_rules(preds, [p["width"] for p in inside], given)
    print(f"grade rules these rounds give (with the library's interval constants; "
          f"{', '.join(dropped) or 'no grade'} not given): {rules}; the library's: {GRADES}")
    misses = [p for p in inside if abs(p["error"]) > BAND]
    if misses:
        print(f"\nmisses (|error| > {100 * BAND:.0f} %), minutes each part puts between predicted and measured:")
        for p in sorted(misses, key=lambda p: -abs(p["error"])):
            worst = max(p["parts"], key=lambda k: abs(p["parts"][k]))
            print(f"  {p['where']:<40} {p['kind']:>9} B {p['batch']:>6} {100 * p['error']:+6.1f} %  "
                  + ", ".join(f"{k} {v:+.2f}" for k, v in p["parts"].items()) + f": mostly {worst}"
                  + (f"  [{p['flags']}]" if p["flags"] else "") + f"  {p['shipped_grade']}")
    goals_table(inside, held)
    if compare_too:
        other = evaluate(groups, () if prior else pairs, quiet=True)
        compare(*((other, result) if prior else (result, other)))
    if weights:
        weight_out_of_sample(groups, pairs, preds, weights)
    return 0


if __name__ == "__main__":
    sys.exit(main())
