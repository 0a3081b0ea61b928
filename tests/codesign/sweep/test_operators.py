"""codesign/sweep/operators.py: the layer shapes a padded run executes."""

from codesign.sweep.operators import padded
from compiler.ops.accel.conv2d import Conv2dSpec
from compiler.ops.accel.dense import DenseSpec


def test_padding_scales_every_layer_with_the_model_batch():
    conv = Conv2dSpec(1, 16, 14, 14, 32, 3, 1, 1)
    tokens, pooler = DenseSpec(128, 64, 64), DenseSpec(1, 64, 64)  # a sequence model's rows: batch x 128
    assert padded(conv, 1, 2).batch == 2
    assert padded(tokens, 1, 2).m == 256   # the model at batch 2 has twice the token rows
    assert padded(pooler, 1, 2).m == 2
    assert padded(tokens, 1, 1) is tokens
    assert padded(DenseSpec(15, 8, 8), 3, 2).m == 20  # batch 3 runs at 4: 5 rows per sample
    assert padded(DenseSpec(7, 8, 8), 3, 2).m == 8    # rows not per sample: padded alone
