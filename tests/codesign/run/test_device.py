"""Devices run whole models: the accelerator on each simulator, and onnxruntime."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest

from codesign import zoo
from codesign.run.device import AcceleratorDevice, OnnxRuntimeDevice
from codesign.run.inputs import sample_inputs
from codesign.run.model import Loaded, load_model
from hw.config import PRESETS
from sim.backends import make_backend


@pytest.fixture(scope="module")
def mlp(tmp_path_factory) -> Loaded:
    path = tmp_path_factory.mktemp("device") / "mlp.onnx"
    path.write_bytes(zoo.build("mlp").SerializeToString())
    return load_model(str(path), PRESETS["tiny"])


def test_the_accelerator_device_is_the_compiled_model_on_its_backend(mlp):
    feeds = sample_inputs(mlp.model.graph, mlp.zoo_name, 1, seed=0)[0]
    fsim = AcceleratorDevice(mlp.model, make_backend("fsim", PRESETS["tiny"])).infer(feeds)
    direct = mlp.model.run(feeds, make_backend("fsim", PRESETS["tiny"]))
    assert fsim.outputs.keys() == direct.outputs.keys() == set(mlp.model.graph.outputs)
    assert all(np.array_equal(fsim.outputs[k], direct.outputs[k]) for k in direct.outputs)
    assert fsim.latency_s is None  # fsim counts no cycles


def test_an_accelerator_device_on_the_timing_model_has_a_modeled_latency(mlp):
    feeds = sample_inputs(mlp.model.graph, mlp.zoo_name, 1, seed=0)[0]
    run = AcceleratorDevice(mlp.model, make_backend("timing", PRESETS["tiny"])).infer(feeds)
    assert run.detail is not None and run.detail.cycles > 0
    clock_hz = PRESETS["tiny"].clock_mhz * 1e6
    assert run.latency_s == run.detail.cycles / clock_hz + run.detail.host_s


def test_onnxruntime_device_names_its_outputs(mlp):
    assert mlp.onnx_bytes is not None
    feeds = sample_inputs(mlp.model.graph, mlp.zoo_name, 2, seed=3)
    device = OnnxRuntimeDevice(mlp.onnx_bytes)
    session = ort.InferenceSession(mlp.onnx_bytes, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    for x in feeds:
        run = device.infer(x)
        assert list(run.outputs) == names and run.latency_s is not None and run.latency_s > 0
        np.testing.assert_array_equal(run.outputs[names[0]], session.run(None, x)[0])
