"""The host-memory estimate behind `hvdbench train`'s refusal of runs that cannot fit on a CPU
machine: the formula, the batch it suggests, and the one-line refusal. (Estimate against measured
peak RSS: benchmarks/bench_memory.py.)"""

from types import SimpleNamespace

import pytest

from hvdbench.contracts import get_spec
from hvdbench.errors import ConfigError
from hvdbench.train import memory

SPEC = get_spec("resnet50")


def test_the_formula():
    est = memory.estimate(SPEC, cfg(framework="torch", optimizer=None))
    params = 25_557_032
    fixed = memory.RUNTIME_BYTES["torch"] + params * (4 + 4 + 4) + memory.FUSION_BUFFER  # SGD: one state
    assert (est.fixed, est.per_sample, est.batch) == (int(fixed), 98_000_000, 256)
    assert est.total == int(fixed) + 256 * 98_000_000
    tf = memory.estimate(SPEC, cfg(optimizer=None))
    assert tf.fixed > est.fixed  # TensorFlow holds a second copy of its variables
    adam = memory.estimate(SPEC, cfg(framework="torch", optimizer="adam"))
    assert adam.fixed - est.fixed == params * 4  # a second moment per parameter


def test_the_batch_that_fits():
    est = memory.Estimate(fixed=1_000, per_sample=100, batch=256)
    assert est.batch_within(1_000 + 100 * 40) == 32  # the largest power of two within the limit
    assert est.batch_within(1_050) == 0  # not even one sample


def cfg(**kw):
    base = dict(flavor="full", framework="tensorflow", batch_per_gpu=256, precision="fp32", optimizer="sgd", engine="horovod")
    return SimpleNamespace(**{**base, **kw})


def test_a_run_that_cannot_fit_is_refused_in_one_line_naming_what_fits():
    with pytest.raises(ConfigError) as e:
        memory.check_fits(SPEC, cfg(), local_ranks=1, available=24 * 10**9)
    message = str(e.value)
    assert "\n" not in message
    assert "resnet50/full (tensorflow, horovod) needs ~25.6 GB for batch 256 per rank" in message
    assert "24.0 GB available per rank" in message and "try --flavor debug or --batch-per-gpu 128" in message


def test_a_run_that_fits_passes_and_ranks_share_the_machine():
    memory.check_fits(SPEC, cfg(batch_per_gpu=16), local_ranks=1, available=24 * 10**9)
    with pytest.raises(ConfigError, match="12.0 GB available per rank .2 on this host"):
        memory.check_fits(SPEC, cfg(batch_per_gpu=128), local_ranks=2, available=24 * 10**9)


def test_a_flavor_without_a_measurement_is_not_checked():
    memory.check_fits(get_spec("bert"), cfg(flavor="base", framework="torch"), local_ranks=1, available=1)


def test_a_flavor_without_a_measurement_is_checked_on_its_weights_when_their_count_is_known():
    """gnmt/full's activations are not measured, but its 160.7M weights, gradients and Adam state are
    known from the spec: a machine that cannot hold them refuses it, naming the flavor that fits."""
    gnmt = get_spec("gnmt")
    with pytest.raises(ConfigError) as e:
        memory.check_fits(gnmt, cfg(flavor="full", framework="torch", optimizer="adam"), local_ranks=1,
                          available=2 * 10**9)
    message = str(e.value)
    assert "\n" not in message
    assert "gnmt/full (torch, horovod) needs ~3.1 GB for its weights alone in fp32 (activations not measured)" in message
    assert message.endswith("try --flavor debug")
    memory.check_fits(gnmt, cfg(flavor="full", framework="torch", optimizer="adam"), local_ranks=1,
                      available=4 * 10**9)
    # The built model's counts (the worker's, for a flavor without exact ones): frozen weights count
    # their bytes alone, trained ones with gradients and optimizer state.
    bert = get_spec("bert")
    base = cfg(flavor="base", framework="torch", optimizer="adam", precision="bf16")
    with pytest.raises(ConfigError, match="bert/base .torch, horovod. needs ~2.3 GB for its weights alone in bf16"):
        memory.check_fits(bert, base, local_ranks=1, parameters=10**8, frozen=10**8, available=2 * 10**9)
    est = memory.estimate(bert, memory.run_of(base, batch_per_gpu=1), (10**8, 10**8))
    assert est.fixed == int(memory.RUNTIME_BYTES["torch"] + 10**8 * 16 + 10**8 * 2 + memory.FUSION_BUFFER)
