"""Fuzzers of the inputs a user hands the workbench: seeded, bounded, each failure reduced to
a reproduction a corpus keeps (`onnx_models`: ONNX files through import, quantization and
compile)."""
