"""Loop-IR passes for the accelerator, one small module each, run in this order by `build`."""

from compiler.passes.fold_kernels import fold_kernels
from compiler.passes.inject_dma import inject_dma
from compiler.passes.insert_tokens import insert_tokens
from compiler.passes.lower_alu import lower_alu
from compiler.passes.tensorize import tensorize
from compiler.passes.virtual_threads import inject_virtual_threads

__all__ = ["fold_kernels", "inject_dma", "inject_virtual_threads", "insert_tokens", "lower_alu",
           "tensorize"]
