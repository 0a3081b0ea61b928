"""codesign.run.data: the user's samples and labels, checked against the model before compiling."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from codesign.run.data import DataSource, DataWarning, UserData, load_data, read_labels, warn_synthetic
from codesign.run.inputs import calibration_inputs
from codesign.run.preprocess import Recipe
from compiler.graph.ir import Graph
from hw.errors import InputError


def _graph(shape: tuple[int, ...] = (1, 3, 8, 8), dtype: str = "float32", inputs: int = 1) -> Graph:
    g = Graph("m")
    for i in range(inputs):
        g.add_input(f"x{i}" if inputs > 1 else "x", shape, dtype)
    return g


def _images(folder: Path, count: int, size: tuple[int, int] = (12, 10)) -> list[Path]:
    folder.mkdir(exist_ok=True)
    rng = np.random.default_rng(0)
    paths = []
    for i in range(count):
        path = folder / f"im{i}.png"
        Image.fromarray(rng.integers(0, 256, (size[1], size[0], 3), np.uint8)).save(path)
        paths.append(path)
    return paths


def test_npz_with_a_sample_axis_in_front(tmp_path: Path) -> None:
    x = np.arange(5 * 3 * 8 * 8, dtype=np.float32).reshape(5, 1, 3, 8, 8)
    np.savez(tmp_path / "d.npz", x=x)
    data = load_data(str(tmp_path / "d.npz"), _graph())
    assert len(data.samples) == 5 and data.labels is None
    np.testing.assert_array_equal(data.samples[3]["x"], x[3])


def test_npz_as_the_models_batch_split_into_samples(tmp_path: Path) -> None:
    x = np.arange(6 * 3 * 8 * 8, dtype=np.float64).reshape(6, 3, 8, 8)
    np.savez(tmp_path / "d.npz", images=x, labels=np.arange(6))
    data = load_data(str(tmp_path / "d.npz"), _graph())  # one array for a one-input model: any name
    assert len(data.samples) == 6 and data.samples[2]["x"].shape == (1, 3, 8, 8)
    assert data.samples[2]["x"].dtype == np.float32
    np.testing.assert_array_equal(data.samples[2]["x"][0], x[2].astype(np.float32))
    np.testing.assert_array_equal(data.labels, np.arange(6))
    np.savez(tmp_path / "e.npz", images=x)
    batch2 = load_data(str(tmp_path / "e.npz"), _graph((2, 3, 8, 8)))
    assert len(batch2.samples) == 3 and batch2.samples[0]["x"].shape == (2, 3, 8, 8)


def test_npz_shape_mismatch_is_refused_with_both_accepted_layouts(tmp_path: Path) -> None:
    np.savez(tmp_path / "d.npz", x=np.zeros((4, 3, 8, 7), np.float32))
    with pytest.raises(InputError, match=r"--eval-data .*d.npz: array 'x' is \[4, 3, 8, 7\], the model input "
                                         r"takes \[1,3,8,8\]: give \[N,1,3,8,8\] or \[N\*1,3,8,8\]"):
        load_data(str(tmp_path / "d.npz"), _graph())
    np.savez(tmp_path / "e.npz", x=np.zeros((4, 3, 8, 8), np.int64))
    with pytest.raises(InputError, match="array 'x' is int64, the model input takes float32"):
        load_data(str(tmp_path / "e.npz"), _graph())


def test_npz_missing_inputs_and_unequal_counts(tmp_path: Path) -> None:
    np.savez(tmp_path / "d.npz", x0=np.zeros((2, 1, 3, 8, 8), np.float32), y=np.zeros(2))
    with pytest.raises(InputError, match=r"no array for model input 'x1' \(arrays: x0, y\)"):
        load_data(str(tmp_path / "d.npz"), _graph(inputs=2))
    np.savez(tmp_path / "d.npz", x0=np.zeros((2, 1, 3, 8, 8), np.float32),
             x1=np.zeros((3, 1, 3, 8, 8), np.float32))
    with pytest.raises(InputError, match=r"the inputs have different sample counts \[2, 3\]"):
        load_data(str(tmp_path / "d.npz"), _graph(inputs=2))


def test_missing_and_unreadable_paths(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="--calibration-data .*nope: no such file or folder"):
        load_data(str(tmp_path / "nope"), _graph(), option="--calibration-data")
    (tmp_path / "junk.npz").write_bytes(b"junk")
    with pytest.raises(InputError, match="junk.npz: not an npz file of samples"):
        load_data(str(tmp_path / "junk.npz"), _graph())
    np.savez(tmp_path / "objects.npz", x=np.array([{"a": 1}], dtype=object))  # a pickle inside
    with pytest.raises(InputError, match=r"^--eval-data .*objects.npz: not an npz file of samples"):
        load_data(str(tmp_path / "objects.npz"), _graph())
    with pytest.raises(InputError, match=r"^--eval-data /dev/zero: neither a regular file nor a folder$"):
        load_data("/dev/zero", _graph())


def test_image_folder_in_name_order_with_the_recipe(tmp_path: Path) -> None:
    paths = _images(tmp_path / "imgs", 3)
    (tmp_path / "imgs" / "notes.txt").write_text("not an image")
    data = load_data(str(tmp_path / "imgs"), _graph(), Recipe(resize=8, std=(255.0,) * 3))
    assert data.names == tuple(p.name for p in paths)
    x = data.samples[0]["x"]
    assert x.shape == (1, 3, 8, 8) and x.dtype == np.float32 and x.min() >= 0.0 and x.max() <= 1.0


def test_unreadable_image_and_empty_folder(tmp_path: Path) -> None:
    _images(tmp_path / "imgs", 1)
    (tmp_path / "imgs" / "broken.jpg").write_bytes(b"not a jpeg")
    with pytest.raises(InputError, match=r"broken.jpg: not a readable image \(UnidentifiedImageError\)"):
        load_data(str(tmp_path / "imgs"), _graph())
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="empty: no image files"):
        load_data(str(tmp_path / "empty"), _graph())


def test_image_folder_needs_one_batch1_float_input(tmp_path: Path) -> None:
    _images(tmp_path / "imgs", 1)
    with pytest.raises(InputError, match="a folder of images feeds a model with one input, not 2"):
        load_data(str(tmp_path / "imgs"), _graph(inputs=2))
    with pytest.raises(InputError, match="images feed a float32 input; x is int64"):
        load_data(str(tmp_path / "imgs"), _graph(dtype="int64"))
    with pytest.raises(InputError, match=r"images feed a batch-1 input; x is \[2, 3, 8, 8\]"):
        load_data(str(tmp_path / "imgs"), _graph((2, 3, 8, 8)))


def test_labels_by_order_by_name_and_npy(tmp_path: Path) -> None:
    _images(tmp_path / "imgs", 3)
    (tmp_path / "order.txt").write_text("4\n7\n\n9\n")
    data = load_data(str(tmp_path / "imgs"), _graph(), labels=str(tmp_path / "order.txt"))
    np.testing.assert_array_equal(data.labels, [4, 7, 9])
    (tmp_path / "named.txt").write_text("im2.png 1\nim0 5\nim1.png 3\n")
    np.testing.assert_array_equal(read_labels(str(tmp_path / "named.txt"), ("im0.png", "im1.png", "im2.png")),
                                  [5, 3, 1])
    np.save(tmp_path / "l.npy", np.array([1, 2, 3]))
    np.testing.assert_array_equal(read_labels(str(tmp_path / "l.npy"), ()), [1, 2, 3])


def test_label_errors(tmp_path: Path) -> None:
    _images(tmp_path / "imgs", 3)
    (tmp_path / "short.txt").write_text("4\n7\n")
    with pytest.raises(InputError, match="short.txt: 2 labels for 3 samples"):
        load_data(str(tmp_path / "imgs"), _graph(), labels=str(tmp_path / "short.txt"))
    (tmp_path / "named.txt").write_text("im0.png 1\nim1.png 2\n")
    with pytest.raises(InputError, match="--labels .*named.txt: no label for im2.png"):
        load_data(str(tmp_path / "imgs"), _graph(), labels=str(tmp_path / "named.txt"))
    (tmp_path / "bad.txt").write_text("1\ncat\n")
    with pytest.raises(InputError, match="bad.txt: line 2 is not 'LABEL' or 'NAME LABEL'"):
        read_labels(str(tmp_path / "bad.txt"), ())
    with pytest.raises(InputError, match="--labels .*none.txt: no such file"):
        read_labels(str(tmp_path / "none.txt"), ())
    np.save(tmp_path / "f.npy", np.zeros(3))
    with pytest.raises(InputError, match=r"f.npy: a 1-d integer array, not float64\[3\]"):
        read_labels(str(tmp_path / "f.npy"), ())


def test_source_limit_and_user_data(tmp_path: Path) -> None:
    np.savez(tmp_path / "d.npz", x=np.ones((5, 3, 8, 8), np.float32), labels=np.arange(5))
    source = DataSource(str(tmp_path / "d.npz"), limit=2)
    data = UserData(evaluation=source).load_evaluation(_graph())
    assert data is not None and len(data.samples) == 2
    np.testing.assert_array_equal(data.labels, [0, 1])
    assert UserData().load_evaluation(_graph()) is None


def test_calibration_on_synthetic_inputs_warns(tmp_path: Path) -> None:
    with pytest.warns(DataWarning, match="m is calibrated on synthetic inputs, which are not representative"):
        samples = calibration_inputs(_graph(), None, 2)
    assert len(samples) == 2
    np.savez(tmp_path / "d.npz", x=np.ones((3, 3, 8, 8), np.float32))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        given = calibration_inputs(_graph(), None, 2, DataSource(str(tmp_path / "d.npz")))
    assert len(given) == 3  # the user's samples, all of them
    with pytest.warns(DataWarning, match="give --calibration-data"):
        warn_synthetic("x")
