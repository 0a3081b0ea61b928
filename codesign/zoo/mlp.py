"""`mlp`: 64 -> 256 -> 128 -> 10 with ReLU, on flattened 8x8 digit images (input [1, 64] float32).

The three layers use the three forms exporters write for nn.Linear: fc1 Gemm (transB=1), fc2
MatMul + Add, fc3 Gemm. Weights are seeded (He), not trained; each hidden bias centres its
unit on the digits' training images, as a trained layer's units sit around their input's mean,
so about half of them fire; fc3 is a discriminative classifier (see layers.classifier).
"""

from __future__ import annotations

import numpy as np
import onnx

from codesign.zoo import digits, layers, numeric, ops
from codesign.zoo.writer import GraphWriter, Value

MIN_OPSET = 9
FEATURES = 64
HIDDEN = (256, 128)
CLASSES = 10
PARAMETERS = 50_826  # 64*256 + 256 + 256*128 + 128 + 128*10 + 10


def build(*, seed: int, opset: int) -> onnx.ModelProto:
    rng = np.random.default_rng(seed)
    g = GraphWriter("mlp", opset)
    x = g.input("input", digits.digits_split().train_images.reshape(-1, FEATURES))
    x = ops.relu(g, _hidden(g, rng, x, "fc1", HIDDEN[0], as_gemm=True), name="relu1")
    x = ops.relu(g, _hidden(g, rng, x, "fc2", HIDDEN[1], as_gemm=False), name="relu2")
    g.output(layers.classifier(g, rng, x, x.data, name="fc3", classes=CLASSES), "logits")
    return g.to_model(doc=f"MLP 64-256-128-10, seeded weights (seed {seed})",
                      metadata={"zoo.name": "mlp", "zoo.seed": str(seed)})


def _hidden(g: GraphWriter, rng: np.random.Generator, x: Value, name: str, units: int, *,
            as_gemm: bool) -> Value:
    """He weights; bias = -(mean pre-activation) + BETA_STD standard deviations of noise."""
    weight = layers.he_weight(rng, (units, x.data.shape[1]))
    pre = x.data.astype(np.float64) @ weight.T.astype(np.float64)
    noise = layers.BETA_STD * pre.std(axis=0) * rng.standard_normal(units)
    bias = numeric.round_significant(noise - pre.mean(axis=0))
    if as_gemm:
        return ops.gemm(g, x, g.param(f"{name}.weight", weight), g.param(f"{name}.bias", bias), name=name)
    return ops.linear(g, x, g.param(f"{name}.weight", np.ascontiguousarray(weight.T)),
                      g.param(f"{name}.bias", bias), name=name)


def sample_inputs(count: int, seed: int) -> list[dict[str, np.ndarray]]:
    """Held-out digit images, flattened, in the order of digits.sample_inputs."""
    return [{"input": d["input"].reshape(1, FEATURES)} for d in digits.sample_inputs(count, seed)]
