"""CompiledModel: partitioning and execution; host steps run native kernels, outputs equal the
graph interpreter's."""

from __future__ import annotations

import shutil
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from compiler.frontend import import_onnx
from compiler.graph.builder import append
from compiler.graph.interp import evaluate_node, run_graph
from compiler.graph.ir import Graph
from compiler.graph.verify import verify
from compiler.quant.fuse_residual import fuse_residual_adds
from compiler.runtime.model import CompiledModel
from compiler.target import AcceleratorTarget
from hw.config import PRESETS
from sim.backends import make_backend


def _float_model() -> onnx.ModelProto:
    nodes = [
        helper.make_node("MaxPool", ["x"], ["p"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
        helper.make_node("GlobalAveragePool", ["p"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("Softmax", ["f"], ["y"], axis=-1),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 9, 9])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])
    graph = helper.make_graph(nodes, "host_only", [x], [y])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_host_steps_run_native_kernels_and_match_the_interpreter():
    graph = import_onnx(_float_model())
    cfg = PRESETS["tiny"]
    model = CompiledModel.compile(graph, AcceleratorTarget(cfg))
    assert [(s.node.op, s.where) for s in model.steps] == [
        ("MaxPool", "host"), ("GlobalAveragePool", "host"), ("Flatten", "view"), ("Softmax", "host")]
    x = np.random.default_rng(0).standard_normal((1, 8, 9, 9)).astype(np.float32)
    result = model.run({"x": x}, make_backend("fsim", cfg))
    want = run_graph(graph, {"x": x})["y"]
    np.testing.assert_allclose(result.outputs["y"], want, rtol=1e-5, atol=1e-6)
    assert [r.where for r in result.steps] == ["host", "host", "view", "host"]
    assert result.cycles == 0 and model.offloaded_macs_fraction() == 0.0


def _quantized_graph(rng: np.random.Generator, pad_value: int = 0) -> Graph:
    """x -> Quantize -> QConv 3x3 (+ReLU) -> QConv 1x1 -> QAdd (residual, ReLU) -> depthwise QConv
    -> MaxPool -> QGlobalAvgPool -> Flatten -> QGemm -> Dequantize; the 3x3 convolutions' padding
    reads `pad_value`."""
    g = Graph("q")
    g.add_input("x", (1, 5, 8, 8), "float32")
    ep = {"shift": 12, "clip_lo": 0, "clip_hi": 127}

    def conv(x: str, out: str, k: int, c: int, r: int, group: int = 1, **extra: Any) -> None:
        w = g.add_const(f"{out}.w", rng.integers(-127, 128, (k, c // group, r, r)).astype(np.int8))
        b = g.add_const(f"{out}.b", rng.integers(-3000, 3000, k).astype(np.int32))
        m = g.add_const(f"{out}.m", rng.integers(100, 600, k).astype(np.int32))
        attrs = {"strides": (1, 1), "pads": (r // 2,) * 4, "group": group, **ep, **extra}
        append(g, "QConv", [x, w, b, m], [out], attrs)

    append(g, "Quantize", ["x"], ["xq"], {"scale": 0.02})
    conv("xq", "c1", 24, 5, 3, pad_value=pad_value)
    conv("c1", "c2", 24, 24, 1, clip_lo=-128)
    append(g, "QAdd", ["c1", "c2"], ["r"], {"mult_a": 300, "mult_b": 200, **ep, "shift": 9})
    conv("r", "dw", 24, 24, 3, group=24, pad_value=pad_value)
    append(g, "MaxPool", ["dw"], ["p"], {"kernel_shape": (2, 2), "strides": (2, 2), "pads": (0, 0, 0, 0),
                                       "dilations": (1, 1)})
    append(g, "QGlobalAvgPool", ["p"], ["gap"], {"mult": 700, **ep, "shift": 13, "clip_lo": -128})
    append(g, "Flatten", ["gap"], ["f"], {"axis": 1})
    w = g.add_const("fc.w", rng.integers(-127, 128, (10, 24)).astype(np.int8))
    b = g.add_const("fc.b", rng.integers(-3000, 3000, 10).astype(np.int32))
    m = g.add_const("fc.m", rng.integers(100, 600, 10).astype(np.int32))
    append(g, "QGemm", ["f", w, b, m], ["logits_q"], {**ep, "shift": 10, "clip_lo": -128})
    append(g, "Dequantize", ["logits_q"], ["logits"], {"scale": 0.05})
    g.outputs = ["logits"]
    verify(g)
    return g


@pytest.mark.parametrize("name", ["tiny", "vta"])
def test_quantized_graph_on_the_accelerator_equals_the_integer_reference(name):
    rng = np.random.default_rng(7)
    g = _quantized_graph(rng)
    cfg = PRESETS[name]
    model = CompiledModel.compile(g, AcceleratorTarget(cfg), offload_shallow=True)  # c1 reads 5 channels
    where = {s.node.op + ("-dw" if s.node.op == "QConv" and s.node.int_attr("group") > 1 else ""): s.where
             for s in model.steps}
    assert where == {"Quantize": "host", "QConv": "accel", "QAdd": "accel", "QConv-dw": "host",
                     "MaxPool": "host", "QGlobalAvgPool": "host", "Flatten": "view", "QGemm": "accel",
                     "Dequantize": "host"}
    # the convolutions hand their outputs to the residual add packed; only the add's output (read
    # by the host's depthwise conv) and the classifier's (read by Dequantize) are unpacked
    assert model.unpacked == {"r", "logits_q"}
    # one arena for the unpacked activations; c1 and c2 stay packed and need no host buffer
    assert "c1" not in model.memory.offsets and model.memory.arena_bytes < model.memory.unshared_bytes
    fsim = make_backend("fsim", cfg)
    for seed in range(3):
        x = np.random.default_rng(seed).standard_normal((1, 5, 8, 8)).astype(np.float32)
        result = model.run({"x": x}, fsim)
        np.testing.assert_array_equal(result.outputs["logits"], run_graph(g, {"x": x})["logits"])
    assert 0.5 < model.offloaded_macs_fraction() < 1.0
    timed = model.run({"x": x}, make_backend("timing", cfg))
    accel = [r for r in timed.steps if r.where == "accel"]
    assert all(r.cycles and r.gemm_uops is not None for r in accel)
    assert timed.cycles == sum(r.cycles or 0 for r in accel)


def test_a_convolution_padding_with_another_value_runs_on_the_host_exactly():
    """The accelerator's loads pad with zeros: a padded QConv whose padding reads -128 (an unsigned
    input's zero) runs on the host, as a native kernel, and equals the integer reference."""
    plain = _quantized_graph(np.random.default_rng(7))
    g = _quantized_graph(np.random.default_rng(7), pad_value=-128)
    g.outputs.append("dw")  # the logits saturate; the depthwise output shows every border
    cfg = PRESETS["tiny"]
    model = CompiledModel.compile(g, AcceleratorTarget(cfg), offload_shallow=True)
    where = {s.node.outputs[0]: s.where for s in model.steps}
    assert (where["c1"], where["c2"], where["dw"]) == ("host", "accel", "host")  # host, not host-numpy
    for seed in range(2):
        x = np.random.default_rng(seed).standard_normal((1, 5, 8, 8)).astype(np.float32)
        got = model.run({"x": x}, make_backend("fsim", cfg)).outputs
        want = run_graph(g, {"x": x})
        for name in ("logits", "dw"):
            np.testing.assert_array_equal(got[name], want[name])
        unpadded = run_graph(plain, {"x": x}, keep=["dw"])["dw"]
        assert not np.array_equal(got["dw"], unpadded)  # the padding counts


def test_a_shallow_convolution_stays_on_the_host_unless_offloaded():
    """c1 reads 5 channels: at most half of vta's 16-channel block, more than half of tiny's 8."""
    g = _quantized_graph(np.random.default_rng(7))
    placed = {}
    for name, offload_shallow in (("vta", False), ("vta", True), ("tiny", False)):
        model = CompiledModel.compile(g, AcceleratorTarget(PRESETS[name]), offload_shallow=offload_shallow)
        placed[name, offload_shallow] = {s.node.outputs[0]: s.where for s in model.steps}
        x = np.random.default_rng(1).standard_normal((1, 5, 8, 8)).astype(np.float32)
        result = model.run({"x": x}, make_backend("fsim", PRESETS[name]))
        np.testing.assert_array_equal(result.outputs["logits"], run_graph(g, {"x": x})["logits"])
    assert placed["vta", False]["c1"] == "host" and placed["vta", False]["c2"] == "accel"
    assert placed["vta", True]["c1"] == placed["tiny", False]["c1"] == "accel"


@pytest.mark.parametrize("name", ["tiny", "vta"])
def test_a_fused_residual_runs_in_the_convolution_exactly(name):
    g = fuse_residual_adds(_quantized_graph(np.random.default_rng(7)))
    (fused,) = [n for n in g.nodes if n.op == "QConv" and len(n.inputs) == 5]
    assert fused.outputs == ("r",) and "QAdd" not in {n.op for n in g.nodes}
    cfg = PRESETS[name]
    model = CompiledModel.compile(g, AcceleratorTarget(cfg), offload_shallow=True)
    assert {s.node.name: s.where for s in model.steps}[fused.name] == "accel"
    assert model.unpacked == {"r", "logits_q"}  # c1 reaches the fused conv packed, as its residual
    for seed in range(2):
        x = np.random.default_rng(seed).standard_normal((1, 5, 8, 8)).astype(np.float32)
        result = model.run({"x": x}, make_backend("fsim", cfg))
        np.testing.assert_array_equal(result.outputs["logits"], run_graph(g, {"x": x})["logits"])


def test_a_scalar_operand_runs_on_the_native_kernel():
    nodes = [helper.make_node("Mul", ["x", "s"], ["y"])]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    s = helper.make_tensor("s", TensorProto.FLOAT, [], [0.5])
    graph = helper.make_graph(nodes, "scalar", [x], [y], [s])
    g = import_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    model = CompiledModel.compile(g, AcceleratorTarget(PRESETS["tiny"]))
    assert [s.where for s in model.steps] == ["host"]
    data = np.arange(6, dtype=np.float32).reshape(2, 3)
    out = model.run({"x": data}, make_backend("fsim", PRESETS["tiny"])).outputs["y"]
    np.testing.assert_array_equal(out, data * np.float32(0.5))


# -- the device arena against the per-step path -----------------------------------------------


def _per_step(model: CompiledModel, inputs: dict[str, np.ndarray],
              backend: Any) -> tuple[dict[str, Any], list[Any]]:
    """The model run as before the device arena: each accelerator step's Program on its own
    DRAM image (`backend.run`), packed outputs handed over as arrays.  Returns the graph's
    outputs and each accelerator step's Stats."""
    g = model.graph
    env = {k: v.data for k, v in g.values.items() if v.data is not None} | dict(inputs)
    packed: dict[str, tuple[Any, np.ndarray]] = {}
    stats = []
    for step in model.steps:
        node, a = step.node, step.accel
        if a is not None:
            feeds = dict(a.constants)
            for i, name in enumerate(a.activation_inputs(node.inputs)):
                have = packed.get(name)
                same = have is not None and have[0] == a.in_layout(i)
                feeds[a.activations[i]] = have[1] if have is not None and same else a.pack_one(i, env[name])
            program = a.compiled.built.program
            result = backend.run(program, feeds)
            out = result.outputs.get("out", np.zeros(program.region("out").shape, np.int8))
            packed[node.outputs[0]] = (a.out_layout, out)
            env[node.outputs[0]] = a.unpack(out)
            stats.append(result.stats)
            continue
        arrays = [env[x] for x in node.inputs]
        if step.where == "view":
            outputs = [np.asarray(arrays[0]).reshape(g.values[node.outputs[0]].shape)]
        else:
            outputs = step.host(arrays) if step.host is not None else evaluate_node(g, node, arrays)
        env.update(zip(node.outputs, outputs, strict=True))
    return {name: env[name] for name in g.outputs}, stats


def _zoo_model(name: str, cfg_name: str, tmp_path: Any) -> tuple[CompiledModel, list[dict[str, np.ndarray]]]:
    from codesign import zoo
    from codesign.run.inputs import sample_inputs
    from codesign.run.model import load_model

    path = tmp_path / f"{name}.onnx"
    onnx.save(zoo.build(name), path)
    loaded = load_model(str(path), PRESETS[cfg_name])
    return loaded.model, sample_inputs(loaded.model.graph, loaded.zoo_name, 2, 0)


def _assert_same_as_per_step(model: CompiledModel, feeds: dict[str, np.ndarray], backend: Any) -> Any:
    result = model.run(feeds, backend)
    outputs, stats = _per_step(model, feeds, backend)
    assert result.outputs.keys() == outputs.keys()
    for name, want in outputs.items():
        assert result.outputs[name].dtype == want.dtype
        np.testing.assert_array_equal(result.outputs[name], want)
    accel = [r for r in result.steps if r.where == "accel"]
    assert [r.stats for r in accel] == [s.to_dict() for s in stats] and accel
    return result


@pytest.mark.parametrize("backend", ["fsim", "timing"])
@pytest.mark.parametrize("name", ["tiny", "vta"])
def test_the_arena_run_equals_the_per_step_run(name, backend):
    """Outputs bit for bit and every counter, on the graph whose convolutions hand over packed
    (read in place), with and without the fused residual; two inputs through one model."""
    graph = _quantized_graph(np.random.default_rng(7))
    for g in (graph, fuse_residual_adds(graph)):
        model = CompiledModel.compile(g, AcceleratorTarget(PRESETS[name]), offload_shallow=True)
        assert any(model.device.plan.aliased.values())
        sim = make_backend(backend, PRESETS[name])
        for seed in range(2):
            x = np.random.default_rng(seed).standard_normal((1, 5, 8, 8)).astype(np.float32)
            _assert_same_as_per_step(model, {"x": x}, sim)


def test_a_prepared_model_replays_every_accelerator_step_from_its_first_input():
    """`prepare` readies every accelerator step on fsim before any input (none on a backend
    without the step, timing): the first input records nothing and equals the step-by-step run
    bit for bit, counters too."""
    cfg = PRESETS["tiny"]
    model = CompiledModel.compile(_quantized_graph(np.random.default_rng(7)), AcceleratorTarget(cfg),
                                  offload_shallow=True)
    accel = sum(s.accel is not None for s in model.steps)
    fsim = make_backend("fsim", cfg)
    assert accel > 1 and model.prepare(fsim) == accel and model.prepare(make_backend("timing", cfg)) == 0
    recorded: list[int] = []
    real = fsim._record
    fsim._record = lambda *a: recorded.append(1) or real(*a)
    x = np.random.default_rng(3).standard_normal((1, 5, 8, 8)).astype(np.float32)
    got = model.run({"x": x}, fsim)
    want = model.run({"x": x}, make_backend("fsim", cfg, replay=False))
    assert recorded == []
    for name, value in want.outputs.items():
        np.testing.assert_array_equal(got.outputs[name], value)
    assert [r.stats for r in got.steps] == [r.stats for r in want.steps]


@pytest.mark.parametrize("zoo_name", ["mlp", "digits"])
def test_a_zoo_model_in_the_arena_equals_the_per_step_run(zoo_name, tmp_path):
    model, samples = _zoo_model(zoo_name, "tiny", tmp_path)
    for backend in ("fsim", "timing"):
        sim = make_backend(backend, PRESETS["tiny"])
        for feeds in samples:
            _assert_same_as_per_step(model, feeds, sim)


@pytest.mark.rtl
@pytest.mark.skipif(shutil.which("verilator") is None, reason="verilator is not installed")
def test_the_arena_run_on_rtl_equals_fsim_and_timing(tmp_path):
    """The RTL runs the relocated programs in one image: the per-step values, and the cycles of
    the timing model step by step."""
    model, samples = _zoo_model("mlp", "tiny", tmp_path)
    assert any(model.device.plan.aliased.values())  # the second QGemm reads the first's output in place
    rtl, fsim, timing = (make_backend(b, PRESETS["tiny"]) for b in ("rtl", "fsim", "timing"))
    result = _assert_same_as_per_step(model, samples[0], rtl)
    np.testing.assert_array_equal(result.outputs["logits"], model.run(samples[0], fsim).outputs["logits"])
    timed = model.run(samples[0], timing)
    assert [r.cycles for r in result.steps] == [r.cycles for r in timed.steps] and result.cycles > 0
