"""BERT-tiny (2 layers, hidden 128, 2 heads, intermediate 512; google/bert_uncased_L-2_H-128_A-2's
shape) as a two-class sequence classifier, batch 1, sequence length `seq_len` (default 128).

Inputs int64 `input_ids` [1, S] and `attention_mask` [1, S] (1 = token, 0 = padding); output
`logits` [1, 2]. The graph is what exporters write for a HuggingFace BERT: Gather of word,
position and token-type embeddings, LayerNormalization, MatMul + Add projections, Reshape and
Transpose into heads, MatMul scores, Div by sqrt(64), the mask as (1 - mask) * -10000 added,
Softmax, Gelu (the operator since opset 20, the Erf form before), a tanh pooler on the first token
and a Gemm classifier. The vocabulary is BERT's full 30522 word pieces: the embedding is a Gather
(no arithmetic), and at 15.6 MB it keeps the file the size a real BERT-tiny export has.
"""

from __future__ import annotations

import numpy as np
import onnx

from codesign.zoo import layers, ops
from codesign.zoo.errors import ZooError
from codesign.zoo.writer import GraphWriter, Value

MIN_OPSET = 17  # LayerNormalization
LAYERS, HIDDEN, HEADS, INTERMEDIATE = 2, 128, 2, 512
HEAD_DIM = HIDDEN // HEADS
VOCAB, MAX_POSITIONS, TOKEN_TYPES, CLASSES = 30522, 512, 2, 2
PARAMETERS = 4_386_178  # embeddings 3,972,864 + 2 layers x 198,272 + pooler 16,512 + classifier 258
DEFAULT_SEQ_LEN = 128
CALIBRATION_SEQUENCES = 32
CLS_ID, SEP_ID, FIRST_WORD_ID = 101, 102, 1000  # ids below 1000 are special and unused word pieces
MASK_FILL = -10000.0  # added to the scores of padding positions, as the original BERT does
LN_EPS = 1e-12
# Standard deviation of the attention scores: trained heads attend to a few tokens, not evenly.
SCORE_STD = 2.0


def build(*, seed: int, opset: int, seq_len: int = DEFAULT_SEQ_LEN) -> onnx.ModelProto:
    check_seq_len(seq_len)
    rng = np.random.default_rng(seed)
    g = GraphWriter("bert-tiny", opset)
    ids, mask = token_batch(CALIBRATION_SEQUENCES, seed, seq_len, stream=1)
    hidden = _embeddings(g, rng, g.input("input_ids", ids), seq_len)
    mask_bias = _mask_bias(g, g.input("attention_mask", mask))
    for layer in range(LAYERS):
        hidden = _encoder_layer(g, rng, hidden, mask_bias, f"encoder.layer.{layer}", seq_len)
    first = ops.gather(g, hidden, g.constant(np.int64(0), "index"), name="pooler.first", axis=1)
    pooled = ops.tanh(g, _dense(g, rng, first, "pooler.dense", HIDDEN, gemm=True), name="pooler.activation")
    g.output(layers.classifier(g, rng, pooled, pooled.data, name="classifier", classes=CLASSES), "logits")
    metadata = {"zoo.name": "bert-tiny", "zoo.seed": str(seed), "zoo.seq_len": str(seq_len)}
    return g.to_model(doc=f"BERT-tiny classifier, seeded weights (seed {seed}), sequence length {seq_len}",
                      metadata=metadata)


def check_seq_len(seq_len: int) -> None:
    if not 2 <= seq_len <= MAX_POSITIONS:
        raise ZooError(f"bert-tiny sequence length must be in 2..{MAX_POSITIONS}, not {seq_len}")


def _dense(g: GraphWriter, rng: np.random.Generator, x: Value, name: str, units: int, *, gain: float = 1.0,
           gemm: bool = False) -> Value:
    """MatMul + Add (Gemm when `gemm`); weights normal with variance gain / fan_in, so the output
    keeps the input's scale times `gain`; biases small."""
    fan_in = x.data.shape[-1]
    weight = (rng.standard_normal((fan_in, units)) * np.sqrt(gain / fan_in)).astype(np.float32)
    bias = g.param(f"{name}.bias", (rng.standard_normal(units) * 0.02).astype(np.float32))
    if gemm:
        return ops.gemm(g, x, g.param(f"{name}.weight", np.ascontiguousarray(weight.T)), bias, name=name)
    return ops.linear(g, x, g.param(f"{name}.weight", weight), bias, name=name)


def _layer_norm(g: GraphWriter, rng: np.random.Generator, x: Value, name: str) -> Value:
    gamma = rng.uniform(*layers.GAMMA_RANGE, HIDDEN).astype(np.float32)
    beta = (rng.standard_normal(HIDDEN) * layers.BETA_STD).astype(np.float32)
    return ops.layer_norm(g, x, g.param(f"{name}.weight", gamma), g.param(f"{name}.bias", beta), name=name,
                          eps=LN_EPS)


def _embeddings(g: GraphWriter, rng: np.random.Generator, ids: Value, seq_len: int) -> Value:
    """LayerNorm(word[ids] + position[0..S-1] + token_type[0]), torch-style names."""
    words = g.param("embeddings.word_embeddings.weight", _table(rng, VOCAB, 0.05))
    positions = g.param("embeddings.position_embeddings.weight", _table(rng, MAX_POSITIONS, 0.02))
    types = g.param("embeddings.token_type_embeddings.weight", _table(rng, TOKEN_TYPES, 0.02))
    position_ids = g.constant(np.arange(seq_len, dtype=np.int64)[None], "position_ids")
    type_ids = g.constant(np.zeros((1, seq_len), np.int64), "token_type_ids")
    x = ops.gather(g, words, ids, name="embeddings.word")
    token_type = ops.gather(g, types, type_ids, name="embeddings.token_type")
    position = ops.gather(g, positions, position_ids, name="embeddings.position")
    x = ops.add(g, x, token_type, name="embeddings.add_type")
    x = ops.add(g, x, position, name="embeddings.add_position")
    return _layer_norm(g, rng, x, "embeddings.LayerNorm")


def _table(rng: np.random.Generator, rows: int, std: float) -> np.ndarray:
    return (rng.standard_normal((rows, HIDDEN)) * std).astype(np.float32)


def _mask_bias(g: GraphWriter, mask: Value) -> Value:
    """[1, 1, 1, S] float: 0 where mask is 1, MASK_FILL where it is 0."""
    m = ops.cast_float(g, ops.unsqueeze(g, mask, [1, 2], name="mask.unsqueeze"), name="mask.cast")
    inverted = ops.sub(g, g.constant(np.float32(1.0), "one"), m, name="mask.invert")
    return ops.mul(g, inverted, g.constant(np.float32(MASK_FILL), "mask_fill"), name="mask.fill")


def _encoder_layer(g: GraphWriter, rng: np.random.Generator, x: Value, mask_bias: Value, name: str,
                   seq_len: int) -> Value:
    attended = _self_attention(g, rng, x, mask_bias, f"{name}.attention", seq_len)
    inter = _dense(g, rng, attended, f"{name}.intermediate.dense", INTERMEDIATE)
    inter = ops.gelu(g, inter, name=f"{name}.intermediate.gelu")
    out = _dense(g, rng, inter, f"{name}.output.dense", HIDDEN)
    residual = ops.add(g, out, attended, name=f"{name}.output.add")
    return _layer_norm(g, rng, residual, f"{name}.output.LayerNorm")


def _self_attention(g: GraphWriter, rng: np.random.Generator, x: Value, mask_bias: Value, name: str,
                    seq_len: int) -> Value:
    # With unit-variance inputs, q and k elements have variance `gain`, so q.k / sqrt(HEAD_DIM) has
    # standard deviation `gain`.
    qk_gain = SCORE_STD
    heads = []
    for part, gain, perm in (("query", qk_gain, (0, 2, 1, 3)), ("key", qk_gain, (0, 2, 3, 1)),
                             ("value", 1.0, (0, 2, 1, 3))):
        proj = _dense(g, rng, x, f"{name}.self.{part}", HIDDEN, gain=gain)
        split = ops.reshape(g, proj, [1, seq_len, HEADS, HEAD_DIM], name=f"{name}.self.{part}.split")
        heads.append(ops.transpose(g, split, perm, name=f"{name}.self.{part}.heads"))
    q, k_t, v = heads
    scores = ops.matmul(g, q, k_t, name=f"{name}.self.scores")
    scores = ops.div(g, scores, g.constant(np.float32(np.sqrt(HEAD_DIM)), "sqrt_head_dim"),
                     name=f"{name}.self.scale")
    scores = ops.add(g, scores, mask_bias, name=f"{name}.self.mask")
    probs = ops.softmax(g, scores, name=f"{name}.self.softmax")
    context = ops.matmul(g, probs, v, name=f"{name}.self.context")
    context = ops.transpose(g, context, (0, 2, 1, 3), name=f"{name}.self.merge")
    context = ops.reshape(g, context, [1, seq_len, HIDDEN], name=f"{name}.self.merge.reshape")
    out = _dense(g, rng, context, f"{name}.output.dense", HIDDEN)
    return _layer_norm(g, rng, ops.add(g, out, x, name=f"{name}.output.add"), f"{name}.output.LayerNorm")


def token_batch(count: int, seed: int, seq_len: int, *, stream: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Input ids and attention masks [count, seq_len] int64: [CLS] words [SEP], then padding.

    Sequence i has a random length from seq_len // 4 to seq_len and depends only on
    (stream, seed, i, seq_len).
    """
    ids = np.zeros((count, seq_len), np.int64)
    mask = np.zeros((count, seq_len), np.int64)
    for i in range(count):
        rng = np.random.default_rng([stream, seed, i, seq_len])
        length = int(rng.integers(max(2, seq_len // 4), seq_len + 1))
        ids[i, :length] = rng.integers(FIRST_WORD_ID, VOCAB, length)
        ids[i, 0], ids[i, length - 1] = CLS_ID, SEP_ID
        mask[i, :length] = 1
    return ids, mask


def sample_inputs(count: int, seed: int, seq_len: int = DEFAULT_SEQ_LEN) -> list[dict[str, np.ndarray]]:
    check_seq_len(seq_len)
    ids, mask = token_batch(count, seed, seq_len)
    return [{"input_ids": ids[i : i + 1], "attention_mask": mask[i : i + 1]} for i in range(count)]
