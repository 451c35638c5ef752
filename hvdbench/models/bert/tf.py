"""BERT for pre-training (masked LM + next sentence) in TensorFlow 2 with Keras 3 layers:
single-device code, layer for layer the network of `torch.py` beside this file.

    from hvdbench.contracts import get_spec
    from hvdbench.models.bert import tf as bert
    model = bert.build(get_spec("bert").flavor("debug"), vocab_size=4000, max_seq_len=64)
    loss, stats = bert.loss_and_stats(model, batch, training=True)   # stats: {"correct", "total"}

The same architecture and parameter count as the PyTorch model for every flavor (BERT-large:
336,226,108): post-LayerNorm encoder layers (Keras' MultiHeadAttention, whose query/key/value/output
projections are torch.py's fused qkv and out), exact (erf) GELU, a tanh pooler for next-sentence
prediction, and the masked-LM decoder tied to the word embeddings with a bias of its own. Weights
are initialised as in torch.py (normal, std 0.02; zero biases). Packed and unpacked batches are
handled as there: attention is block-diagonal (token i attends token j iff input_mask[i] ==
input_mask[j]), positions restart in each packed sequence, and next-sentence prediction reads each
sequence's own [CLS]. The losses are torch.py's: masked-LM cross-entropy averaged over the batch's
real masked tokens plus next-sentence cross-entropy averaged over its sequences.

Embedding lookups have dense gradients (`_gather_dense`): tf.gather's gradient is sparse
(IndexedSlices), which Horovod's DistributedGradientTape would allgather instead of averaging.

`Lamb` is the reference's LAMB (the same update as torch.py's `Lamb`); `make_optimizer` gives it
or AdamW.
"""

from __future__ import annotations

from dataclasses import replace

import keras
import tensorflow as tf
from keras import layers, ops

from hvdbench.errors import ConfigError
from hvdbench.models.bert import ADAMW_BETAS, ADAMW_EPSILON, LAMB_BETAS, LAMB_EPSILON, LAMB_MAX_GRAD_NORM

# Variable names that get neither weight decay nor LAMB's trust ratio: LayerNorms' gamma and beta,
# every bias (the reference's "LayerNorm", "layer_norm", "bias").
NO_DECAY = ("gamma", "beta", "bias")


@tf.custom_gradient
def _gather_dense(table, ids):
    """table[ids], with a dense gradient for the table (summed per row)."""
    def grad(dy):
        return tf.math.unsorted_segment_sum(dy, ids, tf.shape(table)[0]), None
    return tf.gather(table, ids), grad


class Embedding(layers.Layer):
    """A (rows, hidden) lookup table read with a dense gradient."""

    def __init__(self, rows: int, hidden: int, initializer, **kwargs):
        super().__init__(**kwargs)
        self.embeddings = self.add_weight(shape=(rows, hidden), initializer=initializer, name="embeddings")

    def call(self, ids):
        return _gather_dense(tf.convert_to_tensor(self.embeddings), ids)


def _gelu(x):
    return keras.activations.gelu(x, approximate=False)  # torch's F.gelu


class EncoderLayer(layers.Layer):
    """One post-LN encoder layer: x = LN(x + attn(x)); x = LN(x + FFN(x))."""

    def __init__(self, cfg, **kwargs):
        super().__init__(**kwargs)
        init = keras.initializers.RandomNormal(stddev=cfg.init_std)
        self.attention = layers.MultiHeadAttention(cfg.heads, cfg.hidden // cfg.heads,
                                                   dropout=cfg.attention_dropout, kernel_initializer=init,
                                                   name="attention")
        self.attention_norm = layers.LayerNormalization(epsilon=cfg.layer_norm_eps, name="attention_norm")
        self.ffn_in = layers.Dense(cfg.intermediate, kernel_initializer=init, name="ffn_in")
        self.ffn_out = layers.Dense(cfg.hidden, kernel_initializer=init, name="ffn_out")
        self.ffn_norm = layers.LayerNormalization(epsilon=cfg.layer_norm_eps, name="ffn_norm")
        self.dropout = layers.Dropout(cfg.dropout)

    def call(self, x, allowed, training=False):
        attended = self.attention(x, x, attention_mask=allowed, training=training)
        x = self.attention_norm(x + self.dropout(attended, training=training))
        h = self.ffn_out(_gelu(self.ffn_in(x)))
        return self.ffn_norm(x + self.dropout(h, training=training))


class BertForPreTraining(keras.Model):
    def __init__(self, cfg, **kwargs):
        super().__init__(name="bert", **kwargs)
        self.cfg = cfg
        init = keras.initializers.RandomNormal(stddev=cfg.init_std)
        self.word_embeddings = Embedding(cfg.vocab_size, cfg.hidden, init, name="word_embeddings")
        self.position_embeddings = Embedding(cfg.max_positions, cfg.hidden, init, name="position_embeddings")
        self.segment_embeddings = Embedding(cfg.type_vocab_size, cfg.hidden, init, name="segment_embeddings")
        self.embedding_norm = layers.LayerNormalization(epsilon=cfg.layer_norm_eps, name="embedding_norm")
        self.dropout = layers.Dropout(cfg.dropout)
        self.encoder = [EncoderLayer(cfg, name=f"layer_{i}") for i in range(cfg.num_layers)]
        self.pooler = layers.Dense(cfg.hidden, activation="tanh", kernel_initializer=init, name="pooler")
        self.nsp = layers.Dense(2, kernel_initializer=init, name="nsp")
        self.mlm_transform = layers.Dense(cfg.hidden, kernel_initializer=init, name="mlm_transform")
        self.mlm_norm = layers.LayerNormalization(epsilon=cfg.layer_norm_eps, name="mlm_norm")
        # The decoder's weight is word_embeddings' table (tied); only its bias is its own.
        self.mlm_bias = self.add_weight(shape=(cfg.vocab_size,), initializer="zeros", name="mlm_bias")

    def encode(self, ids, segment_ids, positions, input_mask, training=False):
        """Final hidden states (B, L, H); attention never crosses input_mask groups."""
        x = self.word_embeddings(ids) + self.position_embeddings(positions) + self.segment_embeddings(segment_ids)
        x = self.dropout(self.embedding_norm(x), training=training)
        allowed = tf.equal(input_mask[:, :, None], input_mask[:, None, :])  # (B, L, L)
        for layer in self.encoder:
            x = layer(x, allowed, training=training)
        return x

    def mlm_logits(self, hidden):
        """Vocabulary logits (float32) for hidden states (..., H) through the tied decoder."""
        h = self.mlm_norm(_gelu(self.mlm_transform(hidden)))
        table = tf.cast(self.word_embeddings.embeddings, h.dtype)
        logits = tf.matmul(h, table, transpose_b=True) + tf.cast(self.mlm_bias, h.dtype)
        return tf.cast(logits, tf.float32)

    def call(self, batch, training=False):
        """torch.py's forward: mlm_logits (B,P,V), mlm_labels/mlm_seq (B,P) with mlm_seq = the
        sequence slot of each prediction (-1: padding); nsp_logits (B,S,2), nsp_labels/nsp_valid
        (B,S) (S = 1 unpacked)."""
        ids = tf.cast(batch["input_ids"], tf.int32)
        mask = tf.cast(batch["input_mask"], tf.int32)
        mlm_positions = tf.cast(batch["masked_lm_positions"], tf.int32)
        length = tf.shape(ids)[1]
        if "packed_input_len" in batch:
            positions = tf.cast(batch["positions"], tf.int32)
            lengths = tf.cast(batch["packed_input_len"], tf.int32)  # (B,S), 0 = empty slot
            # Sequence k starts where sequences 0..k-1 end (empty slots of a full pack: clamped).
            cls_at = tf.minimum(tf.cumsum(lengths, axis=1, exclusive=True), length - 1)
            nsp_labels = tf.cast(batch["next_sentence_labels"], tf.int32)
            nsp_valid = lengths > 0
            mlm_seq = tf.cast(batch["masked_lm_weights"], tf.int32) - 1  # 1-based sequence, 0 padding
        else:
            positions = tf.broadcast_to(tf.range(length)[None, :], tf.shape(ids))
            cls_at = tf.zeros_like(ids[:, :1])
            nsp_labels = tf.reshape(tf.cast(batch["next_sentence_labels"], tf.int32), [-1, 1])
            nsp_valid = tf.ones_like(nsp_labels, dtype=tf.bool)
            mlm_seq = tf.where(mlm_positions > 0, 0, -1)  # position 0 is [CLS], never masked
        hidden = self.encode(ids, tf.cast(batch["segment_ids"], tf.int32), positions, mask, training)
        cls = tf.gather(hidden, cls_at, batch_dims=1)
        nsp_logits = tf.cast(self.nsp(self.pooler(cls)), tf.float32)
        picked = tf.gather(hidden, mlm_positions, batch_dims=1)
        return {
            "hidden": hidden,
            "mlm_logits": self.mlm_logits(picked),
            "mlm_labels": tf.cast(batch["masked_lm_ids"], tf.int32),
            "mlm_seq": mlm_seq,
            "nsp_logits": nsp_logits,
            "nsp_labels": tf.where(nsp_valid, nsp_labels, 0),
            "nsp_valid": nsp_valid,
        }


def build(cfg, vocab_size: int | None = None, max_seq_len: int | None = None, **_) -> keras.Model:
    """The network for a flavor, its variables created; vocab_size/max_seq_len from the dataset
    manifest override the flavor's (as in torch.py)."""
    if vocab_size is not None:
        cfg = replace(cfg, vocab_size=int(vocab_size))
    if max_seq_len is not None and int(max_seq_len) > cfg.max_positions:
        cfg = replace(cfg, max_positions=int(max_seq_len))
    if cfg.hidden % cfg.heads:
        raise ConfigError(f"bert: hidden {cfg.hidden} is not a multiple of heads {cfg.heads}")
    model = BertForPreTraining(cfg)
    one = tf.ones((1, 2), tf.int32)
    model({"input_ids": one, "input_mask": one, "segment_ids": 0 * one, "masked_lm_positions": one[:, :1],
           "masked_lm_ids": one[:, :1], "next_sentence_labels": one[:, 0]})  # creates every variable
    return model


def loss_and_stats(model, batch: dict, training: bool):
    """Training loss = masked-LM token mean + next-sentence mean over sequences; stats count the
    masked-LM predictions (metric masked_lm_accuracy = correct / total)."""
    out = model(batch, training=training)
    logits, labels = out["mlm_logits"], out["mlm_labels"]
    valid = out["mlm_seq"] >= 0
    ce = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
    total = tf.reduce_sum(tf.cast(valid, tf.float32))
    mlm = tf.reduce_sum(tf.where(valid, ce, 0.0)) / tf.maximum(total, 1.0)
    nsp_ce = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=out["nsp_labels"], logits=out["nsp_logits"])
    sequences = tf.reduce_sum(tf.cast(out["nsp_valid"], tf.float32))
    nsp = tf.reduce_sum(tf.where(out["nsp_valid"], nsp_ce, 0.0)) / tf.maximum(sequences, 1.0)
    hit = valid & tf.equal(tf.argmax(logits, axis=-1, output_type=tf.int32), labels)
    return mlm + nsp, {"correct": tf.reduce_sum(tf.cast(hit, tf.float32)), "total": total}


# --- the optimizer -----------------------------------------------------------------------------

class Lamb(keras.optimizers.Lamb):
    """Keras' LAMB with the reference's weight decay, i.e. the update of torch.py's `Lamb`:

        r = m_hat / (sqrt(v_hat) + eps) + weight_decay_rate x;   x = x - lr (||x|| / ||r||) r

    Keras' own Lamb applies its weight decay apart from the update (x -= lr wd x) and the trust
    ratio to every variable; here the variables named in `exclude` (LayerNorms, biases) get
    neither, as in the reference. `global_clipnorm` (Keras') clips the gradients, which
    DistributedGradientTape has already averaged over ranks.
    """

    def __init__(self, learning_rate=1e-3, weight_decay_rate: float = 0.0, exclude=NO_DECAY, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.weight_decay_rate = weight_decay_rate
        self.exclude = tuple(exclude)

    def _adapted(self, variable) -> bool:
        return not any(name in variable.name for name in self.exclude)

    def update_step(self, gradient, variable, learning_rate):
        lr = ops.cast(learning_rate, variable.dtype)
        gradient = ops.cast(gradient, variable.dtype)
        step = ops.cast(self.iterations + 1, variable.dtype)
        m = self._momentums[self._get_variable_index(variable)]
        v = self._velocities[self._get_variable_index(variable)]
        self.assign_add(m, ops.multiply(ops.subtract(gradient, m), 1 - self.beta_1))
        self.assign_add(v, ops.multiply(ops.subtract(ops.square(gradient), v), 1 - self.beta_2))
        m_hat = ops.divide(m, 1.0 - ops.power(ops.cast(self.beta_1, variable.dtype), step))
        v_hat = ops.divide(v, 1.0 - ops.power(ops.cast(self.beta_2, variable.dtype), step))
        update = ops.divide(m_hat, ops.add(ops.sqrt(v_hat), self.epsilon))
        if self._adapted(variable):
            if self.weight_decay_rate:
                update = ops.add(update, ops.multiply(ops.cast(self.weight_decay_rate, variable.dtype), variable))
            w_norm = ops.sqrt(ops.sum(ops.square(variable)))
            u_norm = ops.sqrt(ops.sum(ops.square(update)))
            ratio = ops.where(ops.logical_and(ops.greater(w_norm, 0), ops.greater(u_norm, 0)),
                              w_norm / u_norm, ops.ones_like(w_norm))
            update = ops.multiply(update, ratio)
        self.assign_sub(variable, ops.multiply(lr, update))

    def get_config(self):
        return {**super().get_config(), "weight_decay_rate": self.weight_decay_rate, "exclude": list(self.exclude)}


def make_optimizer(cfg):
    """LAMB (MLPerf's reference, the default) or AdamW, as torch.py's make_optimizer."""
    if cfg.optimizer == "lamb":
        return Lamb(cfg.lr, weight_decay_rate=cfg.weight_decay, beta_1=LAMB_BETAS[0], beta_2=LAMB_BETAS[1],
                    epsilon=LAMB_EPSILON, global_clipnorm=LAMB_MAX_GRAD_NORM)
    if cfg.optimizer == "adamw":
        opt = keras.optimizers.AdamW(learning_rate=cfg.lr, weight_decay=cfg.weight_decay, beta_1=ADAMW_BETAS[0],
                                     beta_2=ADAMW_BETAS[1], epsilon=ADAMW_EPSILON)
        opt.exclude_from_weight_decay(var_names=list(NO_DECAY))
        return opt
    raise ConfigError(f"optimizer {cfg.optimizer!r}: bert trains with lamb (MLPerf's reference) or adamw")
