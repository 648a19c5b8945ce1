"""Input planning and generation, against the zoo's real-world input shapes."""

from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from engine.errors import InputError
from engine.model.info import load_model
from engine.model.inputs import (
    generate_inputs,
    load_npz,
    parse_shape_override,
    plan_inputs,
)
from engine.model.sample_axis import fit_batch
from tests.model_zoo import RUNNABLE


def _run(path: Path, feeds: dict[str, np.ndarray]) -> list[object]:
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)


@pytest.mark.parametrize("name", RUNNABLE)
def test_generated_inputs_run(zoo: dict[str, Path], name: str) -> None:
    model, info = load_model(zoo[name])
    plan = plan_inputs(info, batch=3)
    feeds = generate_inputs(model, info, plan, seed=1)
    assert set(feeds) == {v.name for v in info.inputs}
    _run(zoo[name], feeds)


def test_batch_and_shared_names(zoo: dict[str, Path]) -> None:
    _, info = load_model(zoo["int_inputs"])
    plan = plan_inputs(info, batch=4)
    assert set(plan.shapes.values()) == {(4, 128)}
    assert plan.dims == {"batch": 4, "sequence": 128}
    assert any("sequence=128" in n for n in plan.notes)


def test_formula_dims_follow_their_names(zoo: dict[str, Path]) -> None:
    _, info = load_model(zoo["dims_formula"])
    plan = plan_inputs(info, batch=2, overrides={"x": (2, 10)})
    assert plan.shapes == {"x": (2, 10), "x_next": (2, 11)}


def test_token_ids_stay_below_the_vocabulary(zoo: dict[str, Path]) -> None:
    model, info = load_model(zoo["int_inputs"])
    feeds = generate_inputs(model, info, plan_inputs(info, batch=64), seed=0)
    assert feeds["input_ids"].max() < 500
    assert feeds["input_ids"].max() > 100  # spread over the vocabulary, not all zeros
    assert feeds["token_type_ids"].max() < 2
    assert np.all(feeds["attention_mask"] == 1)
    assert feeds["token_type_ids"].dtype == np.int32


def test_generation_is_seeded(zoo: dict[str, Path]) -> None:
    model, info = load_model(zoo["dims_named"])
    plan = plan_inputs(info, batch=2)
    a = generate_inputs(model, info, plan, seed=7)["x"]
    b = generate_inputs(model, info, plan, seed=7)["x"]
    c = generate_inputs(model, info, plan, seed=8)["x"]
    assert np.array_equal(a, b) and not np.array_equal(a, c)


def test_override_validation(zoo: dict[str, Path]) -> None:
    _, info = load_model(zoo["shape_mismatch"])
    with pytest.raises(InputError, match="fixed at 3"):
        plan_inputs(info, 1, {"x": (1, 4, 8, 8)})
    with pytest.raises(InputError, match="rank 4"):
        plan_inputs(info, 1, {"x": (1, 3)})
    with pytest.raises(InputError, match="unknown input 'y'"):
        plan_inputs(info, 1, {"y": (1,)})


@pytest.mark.parametrize("text", ["x", "x=", "=1x2", "x=1xa", "x=-1x2"])
def test_bad_shape_text(text: str) -> None:
    with pytest.raises(InputError):
        parse_shape_override(text)


def test_shape_text_forms() -> None:
    assert parse_shape_override("input_ids=1x128") == ("input_ids", (1, 128))
    assert parse_shape_override("x=2,3") == ("x", (2, 3))


def test_npz_inputs_and_batch_fitting(zoo: dict[str, Path], tmp_path: Path) -> None:
    _, info = load_model(zoo["multi_output"])
    path = tmp_path / "in.npz"
    np.savez(path, a=np.ones((2, 8), np.float64), b=np.zeros((2, 8), np.float32))
    feeds = load_npz(path, info)
    assert feeds["a"].dtype == np.float32  # cast to what the model wants
    fitted = fit_batch(feeds, info, 5)
    assert fitted["a"].shape == (5, 8)
    _run(zoo["multi_output"], fitted)


def test_npz_errors(zoo: dict[str, Path], tmp_path: Path) -> None:
    _, info = load_model(zoo["multi_output"])
    with pytest.raises(InputError, match="not found"):
        load_npz(tmp_path / "none.npz", info)
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"not a zip")
    with pytest.raises(InputError, match="not a readable"):
        load_npz(bad, info)
    partial = tmp_path / "partial.npz"
    np.savez(partial, a=np.ones((2, 8), np.float32))
    with pytest.raises(InputError, match="missing arrays for inputs b"):
        load_npz(partial, info)
    pickled = tmp_path / "pickled.npz"
    np.savez(pickled, a=np.array([{"x": 1}], dtype=object), b=np.ones((2, 8)))
    with pytest.raises(InputError):
        load_npz(pickled, info)  # object arrays need pickle: refused


def _symbolic_cnn(path: Path) -> Path:
    """A convolution over images[batch, 3, height, width] (a detector's signature)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.ones((4, 3, 3, 3), np.float32), "w")
    graph = helper.make_graph(
        [
            helper.make_node("Conv", ["images", "w"], ["c"], name="conv"),
            helper.make_node("GlobalAveragePool", ["c"], ["out"], name="pool"),
        ],
        "cnn",
        [
            helper.make_tensor_value_info(
                "images", TensorProto.FLOAT, ["batch", 3, "height", "width"]
            )
        ],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)],
        [w],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)
    onnx.save(model, path)
    return path


def test_editable_dims_and_the_shapes_the_window_shows(tmp_path: Path) -> None:
    from engine.model.dims import describe_inputs, editable_dims

    _, info = load_model(_symbolic_cnn(tmp_path / "det.onnx"))
    dims = editable_dims(info)
    assert [(d.name, d.default, d.why) for d in dims] == [
        ("height", 224, "default image size"),
        ("width", 224, "default image size"),
    ]  # the batch is the Batch knob's
    plan = plan_inputs(info, 2)
    assert describe_inputs(info, plan.shapes, {}) == ["images 2x3x224x224, default size"]
    plan = plan_inputs(info, 1, dims_set={"height": 320, "width": 320})
    assert plan.shapes["images"] == (1, 3, 320, 320) and not plan.notes
    assert describe_inputs(info, plan.shapes, {"height": 320, "width": 320}) == [
        "images 1x3x320x320, size set"
    ]
    with pytest.raises(InputError, match="'depth' is not a symbolic dim"):
        plan_inputs(info, 1, dims_set={"depth": 3})
    with pytest.raises(InputError, match="height must be a positive integer"):
        plan_inputs(info, 1, dims_set={"height": 0})
