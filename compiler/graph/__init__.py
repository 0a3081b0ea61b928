"""Graph level of the compiler: the graph IR, its op table, verifier, printer, interpreter, passes."""

from compiler.graph.interp import run_graph
from compiler.graph.ir import Graph, Node, Value, const
from compiler.graph.opdefs import OPS, make_node
from compiler.graph.printer import print_graph
from compiler.graph.verify import verify

__all__ = ["OPS", "Graph", "Node", "Value", "const", "make_node", "print_graph", "run_graph", "verify"]
