"""LAMB, BERT's MLPerf reference optimizer (`Lamb` in hvdbench/models/bert/torch.py and tf.py),
against the LAMB paper's update (You et al. 2019, "Large Batch Optimization for Deep Learning:
Training BERT in 76 minutes", Algorithm 2, with phi the identity as in MLPerf's reference):

    m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;  m_hat = m / (1 - b1^t);  v_hat = v / (1 - b2^t)
    r = m_hat / (sqrt(v_hat) + eps) + wd x;  x = x - lr ||x|| / ||r|| r

first on a step computed by hand, then over several steps against a numpy transcription; plus
what the reference adds (no decay or trust ratio on biases and LayerNorms, the global gradient
norm clipped to 1.0) and what Horovod needs (options kept in the parameter groups, moments
created with the optimizer).

    .venv/bin/python -m pytest tests/unit/test_lamb.py
"""

import math

import numpy as np
import pytest
import torch

from hvdbench.contracts import get_spec  # noqa: E402
from hvdbench.models.bert import torch as bert_torch  # noqa: E402
from hvdbench.models.bert.torch import Lamb, make_optimizer, param_groups  # noqa: E402
from hvdbench.train import config as config_mod  # noqa: E402

# A step by hand: x = (3, 4) so ||x|| = 5; g = (0.1, -0.2). At t = 1 the bias corrections give
# m_hat = g and v_hat = g^2, so with eps = 0, r = g / |g| = (1, -1), plus wd x = 0.1 (3, 4):
# r = (1.3, -0.6), ||r|| = sqrt(2.05), and x - 0.01 * 5 / sqrt(2.05) * r =
HAND = {"x": [3.0, 4.0], "g": [0.1, -0.2], "lr": 0.01, "wd": 0.1,
        "expected": [3.0 - 0.01 * 5 / math.sqrt(2.05) * 1.3, 4.0 + 0.01 * 5 / math.sqrt(2.05) * 0.6]}
assert np.allclose(HAND["expected"], [2.954602031, 4.020952909])


def paper_lamb(x, grads, lr, wd, betas=(0.9, 0.999), eps=1e-6, adapt=True):
    """Algorithm 2 of the paper, transcribed in float64, for one tensor over len(grads) steps."""
    x = np.array(x, np.float64)
    m, v = np.zeros_like(x), np.zeros_like(x)
    b1, b2 = betas
    for t, g in enumerate(grads, start=1):
        g = np.asarray(g, np.float64)
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        r = (m / (1 - b1**t)) / (np.sqrt(v / (1 - b2**t)) + eps) + wd * x
        ratio = np.linalg.norm(x) / np.linalg.norm(r) if adapt and np.linalg.norm(x) > 0 else 1.0
        x = x - lr * ratio * r
    return x


def torch_steps(x, grads, **options):
    p = torch.nn.Parameter(torch.tensor(x, dtype=torch.float32))
    opt = Lamb([p], **options)
    for g in grads:
        p.grad = torch.tensor(g, dtype=torch.float32)
        opt.step()
    return p.detach().numpy()


def test_torch_hand_computed_step():
    out = torch_steps(HAND["x"], [HAND["g"]], lr=HAND["lr"], weight_decay=HAND["wd"], eps=0.0)
    np.testing.assert_allclose(out, HAND["expected"], rtol=1e-6)
    assert np.allclose(paper_lamb(HAND["x"], [HAND["g"]], HAND["lr"], HAND["wd"], eps=0.0), HAND["expected"])


@pytest.mark.parametrize("adapt, wd", [(True, 0.01), (True, 0.0), (False, 0.0)])
def test_torch_matches_the_paper_over_steps(adapt, wd):
    rng = np.random.default_rng(0)
    x = rng.normal(0, 0.5, (4, 3))
    grads = [rng.normal(0, 0.1, (4, 3)) for _ in range(5)]
    out = torch_steps(x, grads, lr=0.05, weight_decay=wd, adapt=adapt, betas=(0.9, 0.999), eps=1e-6)
    np.testing.assert_allclose(out, paper_lamb(x, grads, 0.05, wd, adapt=adapt), rtol=2e-5, atol=1e-6)


def test_trust_ratio_is_per_tensor_and_one_for_zero_weights():
    zero = torch.nn.Parameter(torch.zeros(3))  # ||x|| = 0: ratio 1, a plain Adam step of lr
    big = torch.nn.Parameter(torch.full((2,), 10.0))
    opt = Lamb([zero, big], lr=0.1, eps=0.0)
    zero.grad, big.grad = torch.tensor([1.0, -2.0, 0.5]), torch.tensor([1.0, 1.0])
    opt.step()
    np.testing.assert_allclose(zero.detach().numpy(), [-0.1, 0.1, -0.1], rtol=1e-6)
    # big: r = (1, 1), ratio ||x|| / ||r|| = 10: each weight moves by lr * ratio = 1.
    np.testing.assert_allclose(big.detach().numpy(), [9.0, 9.0], rtol=1e-6)


def test_global_gradient_norm_is_clipped_first():
    """max_grad_norm 1: a step whose gradients (over all groups together) have norm N > 1 takes
    them divided by N; a step under 1 takes them as they are."""
    rng = np.random.default_rng(1)
    x = [rng.normal(0, 1, 5), rng.normal(0, 1, (2, 3))]
    steps = [[rng.normal(0, 3, 5), rng.normal(0, 3, (2, 3))],  # norm ~10: clipped
             [rng.normal(0, 0.1, 5), rng.normal(0, 0.1, (2, 3))]]  # norm ~0.3: not
    norms = [math.sqrt(sum(float((g**2).sum()) for g in grads)) for grads in steps]
    assert norms[0] > 1 > norms[1]

    def run(steps, clip):
        ps = [torch.nn.Parameter(torch.tensor(xi, dtype=torch.float32)) for xi in x]
        opt = Lamb([{"params": ps[:1], "adapt": False}, {"params": ps[1:]}], lr=0.1, weight_decay=0.01,
                   max_grad_norm=clip)
        for grads in steps:
            for p, g in zip(ps, grads):
                p.grad = torch.tensor(g, dtype=torch.float32)
            opt.step()
        return [p.detach().numpy() for p in ps]

    clipped = run(steps, 1.0)
    by_hand = run([[g / (norms[0] + 1e-6) for g in steps[0]], steps[1]], 0.0)
    for a, b in zip(clipped, by_hand):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)
    assert not np.allclose(run(steps, 0.0)[0], clipped[0], rtol=1e-4)


def test_rebuilt_from_its_groups_as_horovod_does():
    """Horovod's DistributedOptimizer re-creates the optimizer class from `param_groups` with no
    other argument: every option must travel in the groups. The moments exist from the start, so
    Horovod's broadcast of the optimizer state takes no zero-gradient step (which LAMB's weight
    decay would turn into a real update)."""
    p = torch.nn.Parameter(torch.tensor(HAND["x"]))
    first = Lamb([{"params": [p], "adapt": False, "max_grad_norm": 1.0}], lr=0.3, weight_decay=0.2, eps=0.0)
    rebuilt = Lamb(first.param_groups)
    group = rebuilt.param_groups[0]
    assert (group["lr"], group["weight_decay"], group["eps"], group["adapt"], group["max_grad_norm"]) == \
        (0.3, 0.2, 0.0, False, 1.0)
    assert set(rebuilt.state_dict()["state"][0]) == {"step", "exp_avg", "exp_avg_sq"}


def test_bert_param_groups_follow_the_reference():
    cfg = config_mod.resolve({"model": "bert", "flavor": "debug", "synthetic": True, "out": "x"})
    assert (cfg.optimizer, cfg.weight_decay) == ("lamb", 0.01)
    model = bert_torch.build(get_spec("bert").flavor("debug"), vocab_size=300)
    decayed, plain = param_groups(model, cfg)
    names = {id(p): n for n, p in model.named_parameters()}
    assert (decayed["weight_decay"], decayed["adapt"], plain["weight_decay"], plain["adapt"]) == (0.01, True, 0.0, False)
    assert decayed["max_grad_norm"] == plain["max_grad_norm"] == 1.0
    assert all(n.endswith("bias") or "norm" in n for n in (names[id(p)] for p in plain["params"]))
    assert "word_embeddings.weight" in {names[id(p)] for p in decayed["params"]}
    opt = make_optimizer([decayed, plain], cfg)
    assert isinstance(opt, Lamb) and opt.param_groups[0]["betas"] == (0.9, 0.999)
    assert opt.param_groups[0]["eps"] == 1e-6
    other = config_mod.resolve({"model": "bert", "flavor": "debug", "synthetic": True, "out": "x",
                                "optimizer": "adamw"})
    groups = param_groups(model, other)
    assert isinstance(make_optimizer(groups, other), torch.optim.AdamW)
    assert groups[0]["max_grad_norm"] == 0.0  # AdamW stays as it was: no clipping


# --- Keras ---------------------------------------------------------------------------------------

def keras_steps(x, grads, name="kernel", **options):
    import keras

    from hvdbench.models.bert.tf import Lamb as KerasLamb

    var = keras.Variable(np.asarray(x, np.float32), name=name)
    opt = KerasLamb(**options)
    for g in grads:
        opt.apply([np.asarray(g, np.float32)], [var])
    return np.asarray(var.numpy())


def test_keras_hand_computed_step():
    out = keras_steps(HAND["x"], [HAND["g"]], learning_rate=HAND["lr"], weight_decay_rate=HAND["wd"], epsilon=0.0)
    np.testing.assert_allclose(out, HAND["expected"], rtol=1e-6)


@pytest.mark.parametrize("name, adapt", [("kernel", True), ("bias", False), ("gamma", False)])
def test_keras_matches_the_paper_over_steps(name, adapt):
    rng = np.random.default_rng(0)
    x = rng.normal(0, 0.5, (4, 3))
    grads = [rng.normal(0, 0.1, (4, 3)) for _ in range(5)]
    out = keras_steps(x, grads, name=name, learning_rate=0.05, weight_decay_rate=0.01, epsilon=1e-6)
    # Biases and LayerNorms (excluded by name) get neither weight decay nor the trust ratio.
    expected = paper_lamb(x, grads, 0.05, 0.01 if adapt else 0.0, adapt=adapt)
    np.testing.assert_allclose(out, expected, rtol=2e-5, atol=1e-6)
    np.testing.assert_allclose(out, torch_steps(x, grads, lr=0.05, weight_decay=0.01 if adapt else 0.0,
                                                adapt=adapt), rtol=2e-5, atol=1e-6)
