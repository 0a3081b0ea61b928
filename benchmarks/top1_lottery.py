"""How much of a zoo model's top-1 agreement on its 100 test inputs is decided by near-ties;
prints JSON.

The model is quantized as `codesign run` quantizes it for `vta`. Its logit errors against
onnxruntime fp32 are measured on `--validation` other inputs (seeds from 7000). The benchmark
then draws, `--draws` times, one of those error vectors (times a factor) for each of the 100 test
inputs (seeds 0-99, those of `codesign run --inputs 100`), adds it to the test inputs' fp32
logits and counts how often the argmax survives. Per factor, it reports the rms error, the mean
and spread of the resulting top-1 agreement and how often it reaches `--goal`: what top-1 an
int8 model with errors of that size can expect on these inputs, and how much luck decides it.
It also reports the test inputs' fp32 top-2 margins and the observed agreement.

    python benchmarks/top1_lottery.py mobilenetv2
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import numpy as np
import onnx

from codesign import zoo
from codesign.run.model import load_model
from compiler.quant.accuracy import graph_outputs, ort_outputs, ort_session
from hw.config import PRESETS

TEST_SEED, VALIDATION_SEED = 0, 7000
FACTORS = (1.0, 0.8, 0.6, 0.5, 0.4)


def _stack(outputs: list[np.ndarray]) -> np.ndarray:
    return np.concatenate([np.asarray(o, np.float64).reshape(1, -1) for o in outputs])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", choices=("resnet18", "mobilenetv2"))
    parser.add_argument("--validation", type=int, default=400, help="inputs the errors come from")
    parser.add_argument("--draws", type=int, default=2000)
    parser.add_argument("--goal", type=float, default=0.90)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{args.model}.onnx"
        model = zoo.build(args.model)
        onnx.save(model, path)
        graph = load_model(str(path), PRESETS["vta"]).model.graph
    session = ort_session(model)
    test_inputs = zoo.sample_inputs(args.model, 100, TEST_SEED)
    test = _stack(ort_outputs(session, test_inputs))
    observed = _stack(graph_outputs(graph, test_inputs))
    xs = zoo.sample_inputs(args.model, args.validation, VALIDATION_SEED)
    errors = _stack(graph_outputs(graph, xs)) - _stack(ort_outputs(session, xs))
    top = np.sort(test, axis=1)
    margins = top[:, -1] - top[:, -2]
    best = test.argmax(axis=1)
    rms = float(np.sqrt(np.mean(errors**2)))
    rng = np.random.default_rng(0)
    rows = []
    for factor in FACTORS:
        agree = np.empty(args.draws)
        for i in range(args.draws):
            drawn = errors[rng.integers(0, len(errors), len(test))]
            agree[i] = np.mean((test + factor * drawn).argmax(axis=1) == best)
        reached = float(np.mean(agree >= args.goal - 1e-9))
        rows.append({"factor": factor, "rms_err": rms * factor, "top1_mean": float(agree.mean()),
                     "top1_sd": float(agree.std()), "p_goal": reached})
    report = {
        "model": args.model, "classes": int(test.shape[1]), "goal": args.goal,
        "test_top1_observed": float(np.mean(observed.argmax(1) == best)),
        "test_rms_err_observed": float(np.sqrt(np.mean((observed - test) ** 2))),
        "test_margins_below": {str(m): int(np.sum(margins < m)) for m in (0.05, 0.1, 0.2, 0.5)},
        "test_logit_spread": float(test.std(axis=1).mean()),
        "validation_inputs": args.validation, "validation_rms_err": rms, "draws": args.draws,
        "scaled_errors": rows,
    }
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
