import collections

import numpy as np

from codesign import zoo


def test_layers_are_gemm_then_matmul_add_then_gemm(model):
    m = model("mlp")
    assert [n.op_type for n in m.graph.node] == ["Gemm", "Relu", "MatMul", "Add", "Relu", "Gemm"]
    assert collections.Counter(n.op_type for n in m.graph.node)["Gemm"] == 2


def test_hidden_units_fire_on_about_half_of_the_digits(model):
    """Biases centre each unit on the data: no dead or always-on layer."""
    import onnx
    import onnxruntime as ort

    m = model("mlp")
    for name in ("relu1", "relu2"):
        m.graph.output.append(onnx.helper.make_empty_tensor_value_info(name))
    session = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    runs = [session.run(["relu1", "relu2"], x) for x in zoo.sample_inputs("mlp", 50)]
    for layer in range(2):
        active = np.mean([(run[layer] > 0).mean() for run in runs])
        assert 0.3 < active < 0.7
