import pytest

pytest.register_assert_rewrite("tests.compiler.frontend.onnx_models")
