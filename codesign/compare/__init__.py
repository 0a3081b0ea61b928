"""`codesign compare`: the same model on the accelerator (simulated), our own CPU target and
onnxruntime, in one table and one figure (compare.py, records.py, peak.py, figure.py)."""

from codesign.compare.compare import BACKENDS, CompareRequest, compare
from codesign.compare.figure import compare_figure, write_figure
from codesign.compare.peak import Peak, accelerator_peak, cpu_peak
from codesign.compare.records import BackendResult, CompareReport, Latency

__all__ = ["BACKENDS", "BackendResult", "CompareReport", "CompareRequest", "Latency", "Peak",
           "accelerator_peak", "compare", "compare_figure", "cpu_peak", "write_figure"]
