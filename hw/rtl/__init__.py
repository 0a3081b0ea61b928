"""Amaranth RTL of the accelerator; every block is generated from an `AcceleratorConfig`.

`hw.rtl.top.Accelerator` is the top level; CONTRACT.md gives its ports and semantics.
"""
