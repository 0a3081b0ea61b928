import numpy as np

from codesign import zoo

FIRST_HELD_OUT_LABELS = [2, 6, 1, 8, 1, 0, 5, 5, 1, 5]


def test_split_is_fixed_disjoint_and_covers_every_digit():
    split = zoo.digits_split()
    assert split.train_images.shape == (1437, 1, 8, 8) and split.test_images.shape == (360, 1, 8, 8)
    assert split.train_images.dtype == np.float32 and split.test_labels.dtype == np.int64
    assert split.train_images.min() >= 0.0 and split.train_images.max() <= 1.0
    assert set(split.test_labels.tolist()) == set(range(10)) and len(set(split.train_labels.tolist())) == 10
    train_rows = {row.tobytes() for row in split.train_images}
    assert sum(row.tobytes() in train_rows for row in split.test_images) < 5  # the data has a few duplicates
    assert not split.test_images.flags.writeable
    # The split does not depend on anything but the data: the first held-out labels are fixed.
    assert split.test_labels[:10].tolist() == FIRST_HELD_OUT_LABELS



def test_sample_inputs_are_the_held_out_images_in_order():
    split = zoo.digits_split()
    samples = zoo.sample_inputs("digits", 3, seed=0)
    assert all(np.array_equal(s["input"], split.test_images[i][None]) for i, s in enumerate(samples))
    wrapped = zoo.sample_inputs("digits", 2, seed=359)
    assert np.array_equal(wrapped[1]["input"], split.test_images[0][None])


def test_trained_model_reaches_95_percent_on_the_held_out_digits(model, session):
    split = zoo.digits_split()
    run = session("digits").run
    predictions = [run(None, {"input": image[None]})[0].argmax() for image in split.test_images]
    accuracy = float(np.mean(np.array(predictions) == split.test_labels))
    assert accuracy >= 0.95
    # The accuracy the build measured on its own numpy forward pass is onnxruntime's.
    props = {p.key: p.value for p in model("digits").metadata_props}
    assert props["zoo.heldout_accuracy"] == f"{accuracy:.4f}"
