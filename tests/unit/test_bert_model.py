"""BERT network: size, synthetic batches, padding, training, and packed == unpacked per sequence.

    .venv/bin/python -m pytest tests/unit/test_bert_model.py
"""

import functools

import numpy as np  # noqa: E402
import pytest
import torch

from hvdbench.contracts import get_spec  # noqa: E402
from hvdbench.errors import ConfigError  # noqa: E402
from hvdbench.models.bert import torch as bert  # noqa: E402
from hvdbench.models.bert.data import BERT  # noqa: E402

SPEC = get_spec("bert")
DEBUG = SPEC.flavor("debug")
VOCAB = 500


def expected_parameters(cfg, vocab):
    """BERT for pre-training, counted from the architecture: embeddings (+LN), per layer
    Q/K/V/O + LN + FFN + LN, pooler, next-sentence classifier, MLM transform + LN + decoder bias
    (the decoder weight is the word embedding, counted once)."""
    h, i = cfg.hidden, cfg.intermediate
    embeddings = h * (vocab + cfg.max_positions + cfg.type_vocab_size) + 2 * h
    layer = 4 * (h * h + h) + 2 * h + (h * i + i) + (i * h + h) + 2 * h
    return embeddings + cfg.num_layers * layer + (h * h + h) + (2 * h + 2) + (h * h + 3 * h + vocab)


@functools.lru_cache(maxsize=None)
def count(cfg, **data_info):
    with torch.device("meta"):  # no memory: BERT-large would be 1.3 GB of fp32
        model = bert.build(cfg, **data_info)
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("flavor", ["large", "base", "debug"])
def test_parameter_count_matches_architecture(flavor):
    cfg = SPEC.flavor(flavor)
    assert count(cfg) == expected_parameters(cfg, 30522)


def test_published_sizes():
    # bert-base-uncased with its pre-training heads has 110,106,428 parameters; BERT-large
    # (MLPerf's) 336,226,108 (the "340M" of the paper).
    assert count(SPEC.flavor("base")) == 110_106_428
    assert count(SPEC.flavor("large")) == 336_226_108 == SPEC.parameters["large"]
    large = SPEC.flavor("large")
    assert (large.num_layers, large.hidden, large.heads, large.intermediate) == (24, 1024, 16, 4096)


def test_vocab_and_length_come_from_the_dataset():
    assert count(DEBUG, vocab_size=VOCAB, max_seq_len=64) == expected_parameters(DEBUG, VOCAB)
    model = bert.build(DEBUG, vocab_size=VOCAB, max_seq_len=DEBUG.max_positions * 2)
    assert model.position_embeddings.num_embeddings == DEBUG.max_positions * 2


def test_decoder_is_tied_to_word_embeddings():
    torch.manual_seed(0)
    model = bert.build(DEBUG, vocab_size=VOCAB).eval()
    hidden = torch.randn(3, DEBUG.hidden)
    before = model.mlm_logits(hidden)
    with torch.no_grad():  # (not a constant shift: the transform's LayerNorm output sums to ~0)
        model.word_embeddings.weight[7] += torch.randn(DEBUG.hidden)
    after = model.mlm_logits(hidden)
    changed = (after - before).abs().amax(0) > 1e-6
    assert changed[7] and changed.sum() == 1


def test_spec_registry_and_errors():
    assert SPEC.metric.name == "masked_lm_accuracy" and SPEC.metric.higher_is_better
    assert SPEC.target("large") == pytest.approx(0.720)
    assert 0 < SPEC.target("debug") < 0.720
    assert set(SPEC.data_kinds) == {"bert", "bert_packed"}
    assert SPEC.frameworks == ("torch", "tensorflow") and SPEC.defaults["optimizer"] == "lamb"
    with pytest.raises(ConfigError, match=r"no flavor 'huge'.*large, base, debug"):
        SPEC.flavor("huge")
    with pytest.raises(ConfigError, match="unknown model 'bret'.*bert"):
        get_spec("bret")


def synthetic(batch_size, max_seq_len=48, seed=0, max_predictions=None):
    """The `bert` kind's random instances (what --synthetic trains on), as torch tensors."""
    info = {"vocab_size": VOCAB, "max_seq_len": max_seq_len,
            "max_predictions": max_predictions or DEBUG.max_predictions}
    arrays = BERT.synthetic(batch_size, info, np.random.default_rng(seed))
    return {k: torch.from_numpy(v) for k, v in arrays.items()}


def test_synthetic_batch_is_plausible():
    b = synthetic(6, max_seq_len=64, max_predictions=10)
    shapes = {k: tuple(v.shape) for k, v in b.items()}
    assert shapes == {"input_ids": (6, 64), "input_mask": (6, 64), "segment_ids": (6, 64),
                      "masked_lm_positions": (6, 10), "masked_lm_ids": (6, 10),
                      "next_sentence_labels": (6,)}
    assert all(v.dtype == torch.int32 for v in b.values())
    assert int(b["input_ids"].max()) < VOCAB and int(b["masked_lm_ids"].max()) < VOCAB
    for r in range(6):
        n = int(b["input_mask"][r].sum())
        assert b["input_mask"][r, :n].eq(1).all() and b["input_mask"][r, n:].eq(0).all()
        pos = b["masked_lm_positions"][r]
        real = pos[pos > 0]
        assert len(real) >= 1 and (real.diff() > 0).all() and int(real.max()) < n
        assert pos[len(real):].eq(0).all()  # padding only after the real predictions
        assert b["masked_lm_ids"][r, :len(real)].gt(0).all()


def test_default_synthetic_is_mlperf_shaped():
    b = BERT.synthetic(2, SPEC.synthetic_info(SPEC.flavor("large")), np.random.default_rng(0))
    assert b["input_ids"].shape == (2, 512) and b["masked_lm_positions"].shape == (2, 76)


def test_padding_is_ignored():
    model = bert.build(DEBUG, vocab_size=VOCAB).eval()
    b = synthetic(4)
    noisy = {k: v.clone() for k, v in b.items()}
    pad = b["input_mask"] == 0
    noisy["input_ids"][pad] = torch.randint(5, VOCAB, (int(pad.sum()),), dtype=torch.int32)
    noisy["segment_ids"][pad] = 1
    no_pred = b["masked_lm_positions"] == 0
    noisy["masked_lm_ids"][no_pred] = 42  # labels of padding predictions must not count
    assert no_pred.any() and pad.any()
    with torch.no_grad():
        loss, stats = bert.loss_and_stats(model, b)
        loss2, stats2 = bert.loss_and_stats(model, noisy)
        h, h2 = model(b)["hidden"], model(noisy)["hidden"]
    assert torch.allclose(loss, loss2, atol=1e-6)
    assert stats["total"] == stats2["total"] == int((b["masked_lm_positions"] > 0).sum())
    assert torch.allclose(h[~pad], h2[~pad], atol=1e-5)


def pack(b, groups, length, slots):
    """Pack rows of an unpacked batch by hand, as `hvdbench prepare pack` does: one output row per
    group of row indices, sequences concatenated, positions restarting, input_mask = 1-based
    sequence index, masked positions shifted by each sequence's offset."""
    p = b["masked_lm_positions"].shape[1]
    out = {k: torch.zeros(len(groups), n, dtype=torch.int32)
           for k, n in [("input_ids", length), ("input_mask", length), ("segment_ids", length),
                        ("positions", length), ("masked_lm_positions", p * slots),
                        ("masked_lm_ids", p * slots), ("masked_lm_weights", p * slots),
                        ("next_sentence_labels", slots), ("packed_input_len", slots),
                        ("packed_masked_lm_len", slots)]}
    for row, group in enumerate(groups):
        at = pred = 0
        for k, r in enumerate(group):
            n = int(b["input_mask"][r].sum())
            m = int((b["masked_lm_positions"][r] > 0).sum())
            for name in ("input_ids", "segment_ids"):
                out[name][row, at:at + n] = b[name][r, :n]
            out["input_mask"][row, at:at + n] = k + 1
            out["positions"][row, at:at + n] = torch.arange(n)
            out["masked_lm_positions"][row, pred:pred + m] = b["masked_lm_positions"][r, :m] + at
            out["masked_lm_ids"][row, pred:pred + m] = b["masked_lm_ids"][r, :m]
            out["masked_lm_weights"][row, pred:pred + m] = k + 1
            out["next_sentence_labels"][row, k] = b["next_sentence_labels"][r]
            out["packed_input_len"][row, k] = n
            out["packed_masked_lm_len"][row, k] = m
            at, pred = at + n, pred + m
        assert at <= length
    return out


GROUPS = [[0, 1, 2], [3, 4]]  # two packs: three sequences, then two (one empty slot)


@pytest.fixture(scope="module")
def packed_case():
    torch.manual_seed(0)
    model = bert.build(DEBUG, vocab_size=VOCAB)
    # Larger weights than BERT's 0.02 init so that attention is far from uniform: a leak across
    # sequences then shows clearly in the negative controls.
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() > 1:
                p.normal_(0, 0.15)
    b = synthetic(5, max_seq_len=48, seed=3)
    return model.eval(), b, pack(b, GROUPS, length=128, slots=4)


def per_sequence(model, batch):
    """The sequences' losses in pack order (slots without a sequence dropped)."""
    with torch.no_grad():
        per = bert.sequence_losses(model, batch)
    valid = per.pop("valid")
    return {k: v[valid] for k, v in per.items()}


def test_packed_equals_unpacked_per_sequence(packed_case):
    model, b, packed = packed_case
    order = [r for g in GROUPS for r in g]
    alone = {k: v[order] for k, v in per_sequence(model, b).items()}
    together = per_sequence(model, packed)
    assert together["mlm_count"].tolist() == alone["mlm_count"].tolist()
    assert together["mlm_count"].min() >= 1
    for key in ("mlm_loss_sum", "nsp_loss", "mlm_correct"):
        torch.testing.assert_close(together[key], alone[key], atol=1e-5, rtol=1e-5)
    # The batch losses and the accuracy counts agree too.
    with torch.no_grad():
        (l1, s1), (l2, s2) = bert.loss_and_stats(model, b), bert.loss_and_stats(model, packed)
    torch.testing.assert_close(l1, l2, atol=1e-5, rtol=1e-5)
    assert s1["total"] == s2["total"] and s1["correct"] == s2["correct"]


def test_packed_token_logits_equal_unpacked(packed_case):
    model, b, packed = packed_case
    with torch.no_grad():
        h_alone, h_packed = model(b)["hidden"], model(packed)["hidden"]
        for row, group in enumerate(GROUPS):
            at = 0
            for r in group:
                n = int(b["input_mask"][r].sum())
                torch.testing.assert_close(model.mlm_logits(h_packed[row, at:at + n]),
                                           model.mlm_logits(h_alone[r, :n]), atol=1e-5, rtol=1e-5)
                at += n


@pytest.mark.parametrize("broken", ["no_block_diagonal_mask", "positions_not_restarted"])
def test_negative_controls_differ(packed_case, broken):
    """Without the block-diagonal mask (or with positions running on across sequences) the
    sequences after the first of each pack get different losses: the test above can fail."""
    model, b, packed = packed_case
    bad = dict(packed)
    if broken == "no_block_diagonal_mask":
        bad["input_mask"] = (packed["input_mask"] > 0).int()  # plain padding mask
    else:
        bad["positions"] = torch.arange(128, dtype=torch.int32).expand(len(GROUPS), 128)
    good, wrong = per_sequence(model, packed), per_sequence(model, bad)
    later = torch.tensor([k > 0 for g in GROUPS for k in range(len(g))])
    diff = (good["mlm_loss_sum"] - wrong["mlm_loss_sum"]).abs()
    assert (diff[later] > 1e-2).all(), diff
    if broken == "no_block_diagonal_mask":
        assert (diff[~later] > 1e-2).all(), diff  # the first sequence now sees the others too


def test_loss_decreases_on_a_fixed_batch():
    torch.manual_seed(0)
    model = bert.build(DEBUG, vocab_size=VOCAB)
    b = synthetic(8, max_seq_len=48, seed=1)
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3)
    losses, accs = [], []
    for _ in range(25):
        loss, stats = bert.loss_and_stats(model, b)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        accs.append(float(stats["correct"] / stats["total"]))
    assert losses[-1] < 0.5 * losses[0]
    assert accs[-1] > 0.5 > accs[0]


def test_packed_batch_trains_under_bf16_autocast(packed_case):
    _, b, packed = packed_case
    model = bert.build(DEBUG, vocab_size=VOCAB).train()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss, stats = bert.loss_and_stats(model, packed)
    loss.backward()
    assert torch.isfinite(loss) and stats["total"] == int((b["masked_lm_positions"] > 0).sum())
    assert model.word_embeddings.weight.grad is not None


def test_mllog_hyperparameters_are_the_references():
    """What MLPerf's closed division requires of BERT (training_4.0.0/closed_bert.yaml) beside the
    common keys and the loop's opt_learning_rate_warmup_steps/_training_steps; LAMB's keys only
    when the run trains with LAMB."""
    from hvdbench.contracts import RunFacts
    from hvdbench.train import config as config_mod

    facts = RunFacts(global_batch=256, peak_lr=3.5e-4, steps_per_epoch=1000, max_steps=900, warmup_steps=12)
    cfg = config_mod.resolve({"model": "bert", "flavor": "large", "synthetic": True, "out": "x"})
    values = SPEC.mllog_values(cfg, facts)
    assert {k: values[k] for k in ("opt_lamb_beta_1", "opt_lamb_beta_2", "opt_lamb_epsilon",
                                   "opt_lamb_weight_decay_rate", "num_warmup_steps", "start_warmup_step")} == \
        {"opt_lamb_beta_1": 0.9, "opt_lamb_beta_2": 0.999, "opt_lamb_epsilon": 1e-6,
         "opt_lamb_weight_decay_rate": 0.01, "num_warmup_steps": 12, "start_warmup_step": 0}
    adamw = config_mod.resolve({"model": "bert", "flavor": "large", "synthetic": True, "out": "x",
                                "optimizer": "adamw", "lr": 1e-4})
    assert not [k for k in SPEC.mllog_values(adamw, facts) if "lamb" in k]
