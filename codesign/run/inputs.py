"""Where a model's inputs come from: the zoo's own data for zoo models (calibration, seeded
samples), seeded random tensors of the right shapes for other models, or the user's npz file."""

from __future__ import annotations

import numpy as np

from codesign.run.data import DataSource, warn_synthetic
from compiler.driver import is_qdq
from compiler.graph.ir import Graph
from hw.errors import InputError

Inputs = dict[str, np.ndarray]
CALIBRATION_SEED = 1000  # calibration never sees the evaluation inputs (seeds 0, 1, ...)


def zoo_name(onnx_bytes: bytes) -> str | None:
    """The zoo model a file was exported from (its producer and graph name), if any."""
    import onnx

    from codesign import zoo

    model = onnx.load_from_string(onnx_bytes)
    if model.producer_name == "codesign.zoo" and model.graph.name in zoo.names():
        return model.graph.name
    return None


REAL_DATA_MODELS = ("digits", "mlp", "efficientnet-lite1")  # zoo models whose own samples are real data


def calibration_inputs(graph: Graph, name: str | None, count: int,
                       data: DataSource | None = None) -> list[Inputs]:
    """The user's `data` where given (codesign.run.data); else zoo models calibrate on their own
    kind of data (digits and the MLP on digits, EfficientNet-Lite on photos); other models on
    seeded random inputs of the right shapes, with a warning that those are not representative."""
    if data is not None:
        return data.load(graph).samples
    if name not in REAL_DATA_MODELS and not is_qdq(graph):  # a QDQ model keeps its own scales
        warn_synthetic(name or graph.name)
    if name == "efficientnet-lite1":  # the calibration photos; its samples are the evaluation ones
        from codesign.zoo import efficientnet_lite

        return efficientnet_lite.calibration_samples(count)
    if name == "digits":
        from codesign import zoo

        images = zoo.digits_split().train_images[:count]
        return [{"input": image[None].copy()} for image in images]
    return sample_inputs(graph, name, count, CALIBRATION_SEED)


def sample_inputs(graph: Graph, name: str | None, count: int, seed: int) -> list[Inputs]:
    if name is not None:
        from codesign import zoo

        return zoo.sample_inputs(name, count, seed)
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        feeds = {}
        for n in graph.inputs:
            v = graph.values[n]
            if np.issubdtype(np.dtype(v.dtype), np.integer):
                feeds[n] = rng.integers(0, 100, v.shape).astype(v.dtype)
            else:
                feeds[n] = rng.standard_normal(v.shape).astype(v.dtype)
        out.append(feeds)
    return out


def check_inputs(graph: Graph, feeds: Inputs) -> None:
    """Each input has the model's shape and dtype and, if floating point, finite values (a NaN
    quantizes to an arbitrary integer that the integer reference reproduces, so the run would
    pass as correct while meaning nothing)."""
    for n in graph.inputs:
        v, a = graph.values[n], feeds[n]
        if a.shape != v.shape or a.dtype.name != v.dtype:
            raise InputError(f"input {n!r} is {a.dtype.name}{list(a.shape)}, the model takes "
                             f"{v.dtype}{list(v.shape)}")
        if np.issubdtype(a.dtype, np.floating) and not np.isfinite(a).all():
            bad = np.argwhere(~np.isfinite(a))
            raise InputError(f"input {n!r} holds {len(bad)} NaN or infinite value(s), the first at "
                             f"index {tuple(int(i) for i in bad[0])}; inputs must be finite")
