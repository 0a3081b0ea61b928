"""The GPU device check, one script for a session that has an NVIDIA GPU (under ~8 minutes):
ResNet-18, MobileNetV2 and bert-tiny on our GPU target against onnxruntime fp32 (agreement and
latency) and PyTorch eager / CUDA graphs where torch is installed, and the largest ResNet-18
convolution in GFLOP/s against the device's fp32 peak.  Prints JSON (codesign.bench.gpu).

    python benchmarks/gpu_check.py            # on the GPU machine
    python benchmarks/gpu_check.py --offline  # anywhere: every kernel compiled to PTX + ptxas
"""

from __future__ import annotations

import json
import sys

from codesign.bench.gpu import main_report

if __name__ == "__main__":
    print(json.dumps(main_report(offline="--offline" in sys.argv[1:]), indent=1))
