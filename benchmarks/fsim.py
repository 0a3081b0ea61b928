"""Functional simulator speed on ResNet-18's conv2 as a matrix product; prints JSON.

fsim runs BLAS on one thread, so this measures one core (the goal is stated for one core).
"""

import json

from codesign.bench.fsim import run
from hw.config import PRESETS

if __name__ == "__main__":
    print(json.dumps(run(PRESETS["vta"]).to_json()))
