"""Helpers for tests of batch-norm statistics: the inputs of every BatchNormalization, run in onnxruntime."""

import numpy as np
import onnx
import onnxruntime as ort

from codesign.zoo import layers


def batch_norm_inputs(m: onnx.ModelProto, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """BN name -> its input on each sample of `batch` (axis 0), stacked [n, C, H, W]."""
    m = onnx.ModelProto.FromString(m.SerializeToString())
    bns = [n for n in m.graph.node if n.op_type == "BatchNormalization"]
    for node in bns:
        m.graph.output.append(onnx.helper.make_empty_tensor_value_info(node.input[0]))
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(m.SerializeToString(), options, providers=["CPUExecutionProvider"])
    wanted = [node.input[0] for node in bns]
    samples = len(next(iter(batch.values())))
    runs = [session.run(wanted, {k: v[i : i + 1] for k, v in batch.items()}) for i in range(samples)]
    return {node.name: np.concatenate([run[j] for run in runs]) for j, node in enumerate(bns)}


def check_batch_norms(m: onnx.ModelProto, inputs: dict[str, np.ndarray]) -> None:
    """Running mean/var equal the statistics of each BN's input (to their 10-bit rounding);
    gamma and beta are away from 1 and 0."""
    params = {t.name: onnx.numpy_helper.to_array(t) for t in m.graph.initializer}
    for name, x in inputs.items():
        mean, var = x.mean(axis=(0, 2, 3)), x.var(axis=(0, 2, 3))
        # Within the 10-bit rounding of the statistics, and onnxruntime's float32 sums.
        error = np.abs(params[f"{name}.running_mean"] - mean)
        assert np.all(error <= 3e-3 * np.abs(mean) + 1e-3 * np.sqrt(var))
        np.testing.assert_allclose(params[f"{name}.running_var"], var, rtol=3e-3)
        gamma, beta = params[f"{name}.weight"], params[f"{name}.bias"]
        low, high = min(layers.GAMMA_RANGE[0], layers.RESIDUAL_GAMMA[0]), layers.GAMMA_RANGE[1]
        assert low <= gamma.min() and gamma.max() <= high and gamma.std() > 0.05
        assert np.abs(beta).max() > 0.01
    variances = np.concatenate([params[f"{name}.running_var"] for name in inputs])
    assert np.abs(np.log(variances)).mean() > 0.1  # running variances are not all near 1
