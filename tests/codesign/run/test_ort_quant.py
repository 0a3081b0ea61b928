"""codesign/run/ort_quant.py: onnxruntime's int8 reference keeps a transformer faithful."""

import numpy as np
import onnxruntime as ort

from codesign import zoo
from codesign.run.inputs import calibration_inputs
from codesign.run.ort_quant import TRANSFORMER_OPS, _op_types, ort_qdq
from compiler.frontend import import_onnx


def test_only_a_transformer_is_limited_to_its_matrix_products():
    assert _op_types(zoo.build("bert-tiny").SerializeToString()) == TRANSFORMER_OPS
    assert _op_types(zoo.build("mlp").SerializeToString()) is None


def test_bert_tiny_int8_stays_close_to_fp32():
    model = zoo.build("bert-tiny")
    data = model.SerializeToString()
    calibration = calibration_inputs(import_onnx(model), "bert-tiny", 8)
    fp32, int8 = ort.InferenceSession(data), ort.InferenceSession(ort_qdq(data, calibration))
    cosines = []
    for feeds in zoo.sample_inputs("bert-tiny", 4, seed=3):
        a, b = fp32.run(None, feeds)[0].ravel(), int8.run(None, feeds)[0].ravel()
        cosines.append(a @ b / np.linalg.norm(a) / np.linalg.norm(b))
    assert np.mean(cosines) > 0.95  # every operator quantized: 0.64
