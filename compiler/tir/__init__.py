"""The loop IR: statements, a printer."""

from compiler.tir.printer import print_ir
from compiler.tir.stmt import Attr, Buffer, Dma, DmaPad, For, Kernel, Seq, Stmt, Store, Sync, Uop

__all__ = ["Attr", "Buffer", "Dma", "DmaPad", "For", "Kernel", "Seq", "Stmt", "Store", "Sync",
           "Uop", "print_ir"]
