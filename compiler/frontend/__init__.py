"""ONNX -> graph IR: `import_onnx`, and the table of supported operators."""

from compiler.frontend.onnx_import import import_onnx
from compiler.frontend.registry import SUPPORTED, supported_ops_markdown

__all__ = ["SUPPORTED", "import_onnx", "supported_ops_markdown"]
