"""The `rtl` backend: the Amaranth design in Verilator (C++ harness, and pyverilator signals)."""
