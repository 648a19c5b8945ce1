"""Loading, validating and describing real-world shapes of models (engine only)."""

import time
from pathlib import Path

import pytest

from engine.errors import ModelError
from engine.model.info import load_model


def test_describe_named_dims(zoo: dict[str, Path]) -> None:
    _, info = load_model(zoo["dims_named"])
    (x,) = info.inputs
    assert (x.name, x.dtype, x.shape) == ("x", "float32", ("batch", 16))
    assert info.op_types == {"MatMul": 1, "Add": 1}
    assert info.params == 16 * 8 + 8
    assert info.param_bytes == info.params * 4
    assert info.opset == {"ai.onnx": 17}
    assert len(info.sha256) == 64


@pytest.mark.parametrize("name", ["dims_unknown", "dims_minus_one"])
def test_unknown_dims_read_as_none(zoo: dict[str, Path], name: str) -> None:
    _, info = load_model(zoo[name])
    assert info.inputs[0].shape == (None, 16)
    assert info.inputs[0].shape_text() == "[?, 16]"


def test_formula_dims_are_kept_as_text(zoo: dict[str, Path]) -> None:
    _, info = load_model(zoo["dims_formula"])
    shapes = {v.name: v.shape for v in info.inputs}
    assert shapes["x_next"] == ("batch", "seq+1")


def test_constant_node_weights_count_as_parameters(zoo: dict[str, Path]) -> None:
    _, info = load_model(zoo["constant_weights"])
    assert info.params == 2762
    assert info.op_types["Constant"] == 4


def test_subgraph_nodes_are_counted(zoo: dict[str, Path]) -> None:
    _, info = load_model(zoo["subgraph_if"])
    assert info.nodes == 3
    assert info.subgraph_nodes == 3
    assert {"If", "Relu", "Neg"} <= set(info.op_types)


def test_sequence_and_map_outputs(zoo: dict[str, Path]) -> None:
    _, info = load_model(zoo["map_output"])
    kinds = {v.name: (v.kind, v.dtype) for v in info.outputs}
    assert kinds["output_probability"] == ("sequence", "map(int64,float32)")
    _, info = load_model(zoo["sequence_output"])
    assert info.outputs[0].kind == "sequence"


def test_external_data_is_found_and_hashed(zoo: dict[str, Path]) -> None:
    _, info = load_model(zoo["external_data"])
    assert info.external_data == ("external_data.onnx.data",)
    assert info.file_bytes > 256 * 256 * 4
    assert info.params == 256 * 256 + 256 or info.params >= 256 * 256


def test_contrib_and_ml_domains_are_qualified(zoo: dict[str, Path]) -> None:
    _, info = load_model(zoo["contrib_ops"])
    assert "com.microsoft.FusedMatMul" in info.op_types
    assert info.opset["com.microsoft"] == 1


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        ("corrupt", "not a valid ONNX file"),
        ("truncated", "not a valid ONNX file"),
        ("external_data_missing", "missing external data file"),
    ],
)
def test_broken_files_give_one_line_errors(zoo: dict[str, Path], name: str, fragment: str) -> None:
    with pytest.raises(ModelError) as err:
        load_model(zoo[name])
    text = str(err.value)
    assert fragment in text
    assert str(zoo[name]) in text
    assert "\n" not in text


def test_missing_file_and_folder(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="file not found"):
        load_model(tmp_path / "nope.onnx")
    with pytest.raises(ModelError, match="folder"):
        load_model(tmp_path)


def test_hash_and_check_are_remembered_until_a_file_changes(
    zoo: dict[str, Path], tmp_path: Path
) -> None:
    """The live engine loads one model at every config change: the files are read once,
    and read again when any of them (the external data included) is rewritten."""
    for f in zoo["external_data"].parent.glob("external_data.onnx*"):
        (tmp_path / f.name).write_bytes(f.read_bytes())
    model = tmp_path / "external_data.onnx"
    data = tmp_path / "external_data.onnx.data"
    _, first = load_model(model)
    reads: list[Path] = []
    real_open = Path.open

    def counting_open(self: Path, *args: object, **kwargs: object) -> object:
        reads.append(self)
        return real_open(self, *args, **kwargs)  # type: ignore[arg-type]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Path, "open", counting_open)
        _, again = load_model(model)
        assert again.sha256 == first.sha256 and data not in reads  # remembered
        blob = bytearray(data.read_bytes())
        blob[0] ^= 0xFF  # one weight changed
        time.sleep(0.05)  # past the file system's timestamp granularity (a few ms on ext4)
        data.write_bytes(bytes(blob))
        _, changed = load_model(model)
    assert data in reads and changed.sha256 != first.sha256
