import functools

import onnx
import onnxruntime as ort
import pytest

from codesign import zoo


@functools.cache
def _built(name: str) -> bytes:
    return zoo.build(name).SerializeToString()


@functools.cache
def _session(name: str) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1  # the suite runs on two workers
    return ort.InferenceSession(_built(name), options, providers=["CPUExecutionProvider"])


@pytest.fixture(scope="session")
def built():
    """name -> the serialized model at seed 0 and the default opset, built once per test worker."""
    return _built


@pytest.fixture(scope="session")
def model():
    """name -> the parsed model (a fresh copy each call, so tests may change it)."""
    return lambda name: onnx.load_from_string(_built(name))


@pytest.fixture(scope="session")
def session():
    """name -> an onnxruntime session of the built model, one thread."""
    return _session
