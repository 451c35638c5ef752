"""The published corpus as the time-to-train fit's prior (issue 59 item 3, hvdbench.results.predict.prior):
other submitters' systems of the same accelerator and benchmark say how the per-GPU rate falls past the
fitted layouts; never the submitter's own, never another accelerator's. On generated published logs of
two submitters, each held out of its own prior: test_predict_time_to_train.py."""

import math

from hvdbench.results.analyses.ttt import LayoutParts
from hvdbench.results.predict import prior as PR
from hvdbench.results.records.rows import TttGroup

B200, H200 = "NVIDIA B200-SXM-180GB", "NVIDIA H200-SXM5-141GB"
# Each GPU's rate at 1, 2, 4, 8 nodes of 8 against one node's: linear to 16 GPUs, then falling (what two
# fitted layouts cannot see).
FALL = {1: 1.0, 2: 1.0, 4: 0.8, 8: 0.6}


def parts(submitter, nodes, per_gpu_rate, batch, accelerator=B200, system="", ruleset="5.1.0", model="llama31_8b"):
    n = nodes * 8
    trained = 1e6
    return LayoutParts(group=TttGroup(system=system or f"{submitter} / box", model=model), layout=f"{nodes}x8",
                       nodes=nodes, gpus_per_node=8, gpus=n, global_batch=batch, runs_used=1, unit="samples",
                       trained=trained, train_s=trained / (n * per_gpu_rate), eval_s=0.0, other_s=0.0,
                       ttt_s=trained / (n * per_gpu_rate), accelerator=accelerator, submitter=submitter,
                       ruleset=ruleset)


def system_of(submitter, accelerator=B200):
    return [parts(submitter, nodes, 10 * f, 16 * nodes, accelerator) for nodes, f in FALL.items()]


def test_a_systems_consecutive_gpu_counts_are_its_pairs_and_a_republished_one_counts_once():
    pairs = PR.scaling_pairs(system_of("Other") + system_of("Other")[1:2])
    assert [p.gpus for p in pairs] == [(8, 16), (16, 32), (32, 64)]
    assert math.isclose(pairs[1].slope, math.log(0.8) / math.log(2)) and math.isclose(pairs[1].batch_growth, 1.0)
    again = [parts("Other", nodes, 10 * f, 16 * nodes, ruleset="5.0.0") for nodes, f in FALL.items()]
    assert len(PR.scaling_pairs(system_of("Other") + again)) == 3  # the same results in a later round


def test_the_corpus_is_other_submitters_of_the_same_accelerator_and_benchmark_and_round_held_out():
    others = system_of("Other") + system_of("Third", H200)
    others += [parts("Fourth", nodes, 10 * f, 16 * nodes, ruleset="5.0.0") for nodes, f in FALL.items()]
    others += [parts("Fifth", nodes, 10 * f, 16 * nodes, model="bert") for nodes, f in FALL.items()]
    pairs = PR.scaling_pairs(system_of("Acme") + others)
    mine = system_of("Acme")[:2]
    assert {p.submitter for p in PR.corpus_for(pairs, mine)} == {"Other", "Fourth"}  # B200, llama31_8b, not Acme
    assert {p.submitter for p in PR.corpus_for(pairs, mine, exclude_rulesets={"5.0.0"})} == {"Other"}
    assert {p.submitter for p in PR.corpus_for(pairs, mine, exclude_submitters={"Other"})} == {"Fourth"}
    # One accelerator however its systems JSON spells it; none for a group without one (a sweep's).
    spelled = [parts("Sixth", nodes, 10, 16 * nodes, accelerator="NVIDIA Blackwell GPU (B200-SXM-180GB)")
               for nodes in (1, 2)]
    assert "Sixth" in {p.submitter for p in PR.corpus_for(PR.scaling_pairs(spelled + others), mine)}
    assert PR.corpus_for(pairs, [parts("Acme", 1, 10, 16, accelerator="")]) == ()


def test_the_prior_is_the_overlapping_pairs_slope_at_a_like_batch_growth():
    pairs = PR.scaling_pairs(system_of("Other"))
    prior = PR.prior_at(pairs, 16, 64, 32, 128)  # weak scaling, like the pairs
    # (16, 32) and (32, 64) overlap the way one doubling each; (8, 16) not at all.
    assert [p.gpus for p in prior.pairs] == [(16, 32), (32, 64)]
    assert math.isclose(prior.slope, math.log(0.6) / math.log(4))
    assert "x GPUs^-0.37 from 2 pairs of GPU counts of 1 other system" in prior.said
    assert "Other / box (5.1.0)" in prior.said
    assert PR.prior_at(pairs, 16, 64, 32, 32) is None  # strong scaling: weak-scaling pairs do not say
    assert PR.prior_at(pairs, 64, 256, 128, 512) is None  # past every pair
    # Shaped: PRIOR_WEIGHT of the way, in logs, from the fit's rate to the prior's (64 GPUs at 6.0 each).
    fitted, anchor, w = 64 * 10.0, 10.0, PR.PRIOR_WEIGHT
    assert prior.weight == w
    assert math.isclose(PR.shaped(fitted, anchor, 16, 64, prior), fitted ** (1 - w) * (64 * 6.0) ** w)
    for weight, rate in ((0.0, fitted), (0.5, math.sqrt(fitted * 64 * 6.0)), (1.0, 64 * 6.0)):
        other = PR.prior_at(pairs, 16, 64, 32, 128, weight=weight)
        assert other.weight == weight and math.isclose(PR.shaped(fitted, anchor, 16, 64, other), rate)
