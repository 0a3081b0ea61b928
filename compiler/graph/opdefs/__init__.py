"""The op table of the graph IR: op name -> `OpDef` (arity, typed attributes, shape rule, numpy
evaluator). The verifier, the reference interpreter and constant folding all read this one table.
"""

from compiler.graph.opdefs import elementwise, logic, nn, qops, quant, tensor, vision  # noqa: F401  (they register)  # noqa: F401, I001  (they register)
from compiler.graph.opdefs.base import OPS, AttrSpec, OpDef, TensorType, make_attrs, make_node

__all__ = ["OPS", "AttrSpec", "OpDef", "TensorType", "make_attrs", "make_node"]
