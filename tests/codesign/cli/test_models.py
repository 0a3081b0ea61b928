"""`codesign models list|export` through codesign.cli.main."""

import json

import onnx
import pytest

from codesign import zoo
from codesign.cli import main


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_list_shows_every_model(capsys):
    code, out, _ = run(capsys, "models", "list")
    lines = out.splitlines()
    assert code == 0 and lines[0].split()[:4] == ["name", "parameters", "opsets", "inputs"]
    assert [line.split()[0] for line in lines[1:]] == zoo.names()
    assert "11,689,512" in out and "input_ids int64[1,128]" in out


def test_list_json(capsys):
    code, out, _ = run(capsys, "models", "list", "--json")
    models = json.loads(out)
    assert code == 0 and [m["name"] for m in models] == zoo.names()
    assert models[4]["inputs"] == [{"name": "input", "dtype": "float32", "shape": [1, 3, 224, 224]}]


def test_export_writes_the_zoo_model(capsys, tmp_path):
    path = tmp_path / "mlp.onnx"
    code, out, _ = run(capsys, "models", "export", "mlp", "-o", str(path), "--opset", "13", "--seed", "2")
    assert code == 0 and out.startswith(f"wrote {path}: mlp, ")
    assert path.read_bytes() == zoo.build("mlp", 2, opset=13).SerializeToString()
    onnx.checker.check_model(str(path), full_check=True)


def test_export_json_and_sequence_length(capsys, tmp_path):
    path = tmp_path / "bert.onnx"
    code, out, _ = run(capsys, "models", "export", "bert-tiny", "-o", str(path), "--seq-len", "8", "--json")
    report = json.loads(out)
    assert code == 0 and report["bytes"] == path.stat().st_size and report["opset"] == zoo.DEFAULT_OPSET
    assert [d.dim_value for d in onnx.load(str(path)).graph.input[0].type.tensor_type.shape.dim] == [1, 8]


@pytest.mark.parametrize(("argv", "message"), [
    (["nope"], "unknown model 'nope'; known models: bert-tiny, digits, efficientnet-lite1, mlp, mobilenetv2, "
               "resnet18"),
    (["mlp", "--seq-len", "4"], "mlp takes no option 'seq_len'"),
    (["mobilenetv2", "--opset", "8"], "mobilenetv2 supports opsets 9 to"),
    (["bert-tiny", "--seq-len", "1"], "bert-tiny sequence length must be in 2..512, not 1"),
])
def test_bad_export_is_one_line_and_exit_status_2(capsys, tmp_path, argv, message):
    code, _, err = run(capsys, "models", "export", *argv, "-o", str(tmp_path / "x.onnx"))
    assert code == 2 and message in err and err.count("\n") == 1
    assert not (tmp_path / "x.onnx").exists()


def test_export_to_a_missing_directory_is_a_user_error(capsys, tmp_path):
    code, _, err = run(capsys, "models", "export", "mlp", "-o", str(tmp_path / "no" / "x.onnx"))
    assert code == 2 and "No such file or directory" in err
