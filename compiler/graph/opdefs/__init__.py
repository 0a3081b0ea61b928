"""The op table of the graph IR: op name -> `OpDef` (arity, typed attributes, shape rule, numpy
evaluator). The verifier, the reference interpreter and constant folding all read this one table.
"""

from compiler.graph.opdefs import elementwise, nn, qops, quant, tensor  # noqa: F401  (they register)
from compiler.graph.opdefs.base import OPS, AttrSpec, OpDef, TensorType, make_attrs, make_node

__all__ = ["OPS", "AttrSpec", "OpDef", "TensorType", "make_attrs", "make_node"]
