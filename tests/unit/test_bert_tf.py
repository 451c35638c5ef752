"""BERT in TensorFlow / Keras 3 (`hvdbench/models/bert/tf.py`): the same network as the PyTorch one
(parameter counts per flavor; with the PyTorch weights copied in, the same losses, accuracy counts
and hidden states on unpacked and packed batches), dense embedding gradients (what Horovod
averages), and the optimizers it trains with.

    .venv/bin/python -m pytest tests/unit/test_bert_tf.py
"""

import keras
import numpy as np
import pytest
import tensorflow as tf
import torch

from hvdbench.contracts import get_spec  # noqa: E402
from hvdbench.errors import ConfigError  # noqa: E402
from hvdbench.models.bert import tf as bert_tf  # noqa: E402
from hvdbench.models.bert import torch as bert_torch  # noqa: E402
from hvdbench.models.bert.data import BERT  # noqa: E402
from hvdbench.models.bert.packing import pack_arrays  # noqa: E402
from hvdbench.train import config as config_mod  # noqa: E402

SPEC = get_spec("bert")
DEBUG = SPEC.flavor("debug")
VOCAB = 500


def trainable(model) -> int:
    return sum(int(np.prod(v.shape)) for v in model.trainable_variables)


def torch_count(cfg, **info) -> int:
    with torch.device("meta"):
        return sum(p.numel() for p in bert_torch.build(cfg, **info).parameters())


@pytest.mark.parametrize("flavor", ["debug", "base", "large"])
def test_parameter_count_equals_pytorch(flavor, monkeypatch):
    # A count does not read the values, and zeros are made much faster than random numbers (base's
    # 440 MB and large's 1.3 GB: half the build's CPU time).
    monkeypatch.setattr(keras.initializers, "RandomNormal", lambda stddev: keras.initializers.Zeros())
    model = bert_tf.build(SPEC.flavor(flavor))
    assert trainable(model) == torch_count(SPEC.flavor(flavor))
    if flavor == "large":
        assert trainable(model) == SPEC.parameters["large"] == 336_226_108
    del model


def test_vocab_and_length_come_from_the_dataset():
    model = bert_tf.build(DEBUG, vocab_size=VOCAB, max_seq_len=DEBUG.max_positions * 2)
    assert trainable(model) == torch_count(DEBUG, vocab_size=VOCAB, max_seq_len=DEBUG.max_positions * 2)
    assert model.position_embeddings.embeddings.shape == (DEBUG.max_positions * 2, DEBUG.hidden)
    assert model.non_trainable_variables == [] or all("seed" in v.path for v in model.non_trainable_variables)


def copy_torch_weights(tm, km) -> None:
    """The PyTorch model's weights into the Keras one: the fused qkv projection split into Keras'
    per-head query/key/value kernels, Linear weights transposed into Dense kernels."""
    h, heads = tm.cfg.hidden, tm.cfg.heads
    n = lambda t: t.detach().numpy()  # noqa: E731

    def norm(k, t):
        k.gamma.assign(n(t.weight))
        k.beta.assign(n(t.bias))

    def dense(k, t):
        k.kernel.assign(n(t.weight).T)
        k.bias.assign(n(t.bias))

    for name in ("word_embeddings", "position_embeddings", "segment_embeddings"):
        getattr(km, name).embeddings.assign(n(getattr(tm, name).weight))
    norm(km.embedding_norm, tm.embedding_norm)
    for kl, tl in zip(km.encoder, tm.layers, strict=True):
        w, b = n(tl.attention.qkv.weight), n(tl.attention.qkv.bias)
        mha = kl.attention
        for i, d in enumerate([mha._query_dense, mha._key_dense, mha._value_dense]):
            d.kernel.assign(w[i * h:(i + 1) * h].T.reshape(h, heads, h // heads))
            d.bias.assign(b[i * h:(i + 1) * h].reshape(heads, h // heads))
        mha._output_dense.kernel.assign(n(tl.attention.out.weight).T.reshape(heads, h // heads, h))
        mha._output_dense.bias.assign(n(tl.attention.out.bias))
        norm(kl.attention_norm, tl.attention_norm)
        dense(kl.ffn_in, tl.ffn_in)
        dense(kl.ffn_out, tl.ffn_out)
        norm(kl.ffn_norm, tl.ffn_norm)
    for name in ("pooler", "nsp", "mlm_transform"):
        dense(getattr(km, name), getattr(tm, name))
    norm(km.mlm_norm, tm.mlm_norm)
    km.mlm_bias.assign(n(tm.mlm_bias))


GROUPS = np.array([[0, 1, 2, -1], [3, 4, -1, -1]])  # two packs: three sequences, then two


@pytest.fixture(scope="module")
def twins():
    """The PyTorch debug model with weights far from uniform attention (a leak across packed
    sequences would show), the Keras model with the same weights, an unpacked batch and the same
    sequences packed by `hvdbench prepare pack`'s packer."""
    torch.manual_seed(0)
    tm = bert_torch.build(DEBUG, vocab_size=VOCAB).eval()
    with torch.no_grad():
        for p in tm.parameters():
            p.normal_(0, 0.15 if p.dim() > 1 else 0.1)
    km = bert_tf.build(DEBUG, vocab_size=VOCAB)
    copy_torch_weights(tm, km)
    info = {"vocab_size": VOCAB, "max_seq_len": 48, "max_predictions": DEBUG.max_predictions}
    # Lengths long enough that a leak across a pack's sequences shows (and three fit 128 tokens).
    plain = BERT.instances(np.array([40, 30, 44, 48, 36]), info, np.random.default_rng(3))
    # The packer fills rows as long as its source's: widen the 48-token rows (padding) to 128 first.
    wide = {k: np.pad(v, ((0, 0), (0, 128 - 48))) if k in ("input_ids", "input_mask", "segment_ids") else v
            for k, v in plain.items()}
    packed = pack_arrays(wide, GROUPS, max_len=128, max_pred=DEBUG.max_predictions)
    assert (packed["packed_input_len"] > 0).sum() == 5 and packed["input_mask"].max() == 3
    return tm, km, plain, packed


def both(tm, km, batch):
    with torch.no_grad():
        tl, ts = bert_torch.loss_and_stats(tm, {k: torch.from_numpy(v) for k, v in batch.items()})
    kl, ks = bert_tf.loss_and_stats(km, {k: tf.constant(v) for k, v in batch.items()}, training=False)
    return (float(tl), float(ts["correct"]), float(ts["total"])), (float(kl), float(ks["correct"]), float(ks["total"]))


@pytest.mark.parametrize("layout", ["plain", "packed"])
def test_same_losses_and_counts_as_pytorch(twins, layout):
    tm, km, plain, packed = twins
    batch = plain if layout == "plain" else packed
    (tl, tc, tt), (kl, kc, kt) = both(tm, km, batch)
    assert kl == pytest.approx(tl, rel=1e-5) and (kc, kt) == (tc, tt)
    assert tt == int((plain["masked_lm_positions"] > 0).sum())
    with torch.no_grad():
        th = tm({k: torch.from_numpy(v) for k, v in batch.items()})["hidden"].numpy()
    kh = km({k: tf.constant(v) for k, v in batch.items()})["hidden"].numpy()
    np.testing.assert_allclose(kh, th, atol=2e-5)


def test_packed_scores_like_unpacked(twins):
    _, _, plain, packed = twins
    _, (pl, pc, pt) = both(*twins[:2], plain)
    _, (kl, kc, kt) = both(*twins[:2], packed)
    assert (pc, pt) == (kc, kt) and kl == pytest.approx(pl, rel=1e-5)
    # The block-diagonal mask matters: a plain padding mask lets packed sequences see each other.
    leaky = {**packed, "input_mask": (packed["input_mask"] > 0).astype(np.int32)}
    _, (ll, _, _) = both(*twins[:2], leaky)
    assert abs(ll - pl) > 1e-3


def test_gradients_are_dense_and_reach_every_variable(twins):
    _, km, _, packed = twins
    with tf.GradientTape() as tape:
        loss, _ = bert_tf.loss_and_stats(km, {k: tf.constant(v) for k, v in packed.items()}, training=True)
    grads = tape.gradient(loss, km.trainable_variables)
    assert all(isinstance(g, tf.Tensor) for g in grads)  # no IndexedSlices for Horovod to allgather
    assert all(float(tf.reduce_sum(tf.abs(g))) > 0 for g in grads)


def cfg_for(**overrides):
    return config_mod.resolve({"model": "bert", "flavor": "debug", "synthetic": True, "out": "x", **overrides})


def test_debug_batch_learns_with_lamb():
    keras.utils.set_random_seed(0)
    model = bert_tf.build(DEBUG, vocab_size=VOCAB)
    info = {"vocab_size": VOCAB, "max_seq_len": 48, "max_predictions": DEBUG.max_predictions}
    batch = {k: tf.constant(v) for k, v in BERT.synthetic(8, info, np.random.default_rng(1)).items()}
    cfg = cfg_for()
    assert cfg.optimizer == "lamb"
    opt = bert_tf.make_optimizer(cfg)
    opt.build(model.trainable_variables)  # its slots made before the step is traced

    @tf.function  # as the trainer runs its step (frameworks/tf/train.py): the same losses, 1/5 of eager's CPU
    def step():
        with tf.GradientTape() as tape:
            loss, stats = bert_tf.loss_and_stats(model, batch, training=True)
        opt.apply(tape.gradient(loss, model.trainable_variables), model.trainable_variables)
        return loss, stats["correct"] / stats["total"]

    losses, accs = [], []
    for _ in range(40):
        loss, acc = step()
        losses.append(float(loss))
        accs.append(float(acc))
    assert losses[-1] < 0.5 * losses[0]
    assert accs[-1] > 0.5 > accs[0]


def test_make_optimizer():
    lamb = bert_tf.make_optimizer(cfg_for())
    assert isinstance(lamb, bert_tf.Lamb) and lamb.global_clipnorm == 1.0
    assert (lamb.beta_1, lamb.beta_2, lamb.epsilon, lamb.weight_decay_rate) == (0.9, 0.999, 1e-6, 0.01)
    adamw = bert_tf.make_optimizer(cfg_for(optimizer="adamw", lr=1e-3))
    assert isinstance(adamw, keras.optimizers.AdamW) and adamw.weight_decay == 0.01
    with pytest.raises(ConfigError, match="lamb .* or adamw"):
        bert_tf.make_optimizer(cfg_for(optimizer="sgd"))
