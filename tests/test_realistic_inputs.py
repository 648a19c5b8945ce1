"""Realistic evaluation/calibration samples: texts through a tokenizer, Zipf token ids,
natural-statistics images (engine/model/realistic_inputs, engine/model/natural_images)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from engine.errors import InputError
from engine.model.info import load_model
from engine.model.inputs import plan_inputs
from engine.model.natural_images import IMAGENET_MEAN, IMAGENET_STD, natural_images
from engine.model.realistic_inputs import eval_texts, find_tokenizer, realistic_samples
from tests.tiny_tokenizer import tiny_tokenizer

WORDS = """the a quick brown fox jumps over lazy dog how do i reset my password city council
approved new budget on tuesday preheat oven to degrees this blender is loud but it crushes
ice what difference between virus and bacterium we stopped at small café""".split()  # noqa: SIM905


def _tokenizer(path: Path) -> Path:
    """A WordLevel tokenizer: [PAD] 0, [UNK] 1, [CLS] 2, [SEP] 3, then the words."""
    return tiny_tokenizer(path, WORDS)


def _text_model(
    path: Path, rows: int = 64, batch: str | int = "batch", seq: str | int = "sequence",
    ids_type: int = TensorProto.INT64, mask_type: int = TensorProto.INT64,
) -> Path:  # fmt: skip
    """input_ids -> Gather from a [rows, 4] embedding; attention_mask multiplied in."""
    table = numpy_helper.from_array(np.ones((rows, 4), np.float32), "embedding")
    nodes = [
        helper.make_node("Gather", ["embedding", "input_ids"], ["emb"]),
        helper.make_node("Cast", ["attention_mask"], ["m"], to=TensorProto.FLOAT),
        helper.make_node("Unsqueeze", ["m", "axes"], ["m3"]),
        helper.make_node("Mul", ["emb", "m3"], ["out"]),
    ]
    axes = numpy_helper.from_array(np.array([-1], np.int64), "axes")
    graph = helper.make_graph(
        nodes,
        "text",
        [
            helper.make_tensor_value_info("input_ids", ids_type, [batch, seq]),
            helper.make_tensor_value_info("attention_mask", mask_type, [batch, seq]),
        ],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [batch, seq, 4])],
        [table, axes],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))
    return path


def _image_model(path: Path, shape: list[int | str], meta: dict[str, str] | None = None) -> Path:
    graph = helper.make_graph(
        [helper.make_node("Identity", ["images"], ["out"])],
        "image",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, shape)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    for k, v in (meta or {}).items():
        model.metadata_props.add(key=k, value=v)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))
    return path


def _samples(path: Path, count: int = 16, batch: int = 4, seed: int = 0, **kw):  # type: ignore[no-untyped-def]
    model, info = load_model(path)
    plan = plan_inputs(info, batch)
    return realistic_samples(model, info, plan, count, batch, seed, **kw)


def test_texts_through_the_tokenizer_beside_the_model(tmp_path: Path) -> None:
    _tokenizer(tmp_path / "tokenizer.json")
    r = _samples(_text_model(tmp_path / "model.onnx"), count=16, batch=4)
    assert r.kind == "texts" and r.samples == 16 and len(r.batches) == 4
    assert "16 evaluation texts through" in r.description and "tokens)" in r.description
    widths = set()
    for feeds in r.batches:
        ids, mask = feeds["input_ids"], feeds["attention_mask"]
        assert ids.dtype == np.int64 and mask.dtype == np.int64 and ids.shape == mask.shape
        assert ids.shape[0] == 4
        assert ids.max() < 64 and ids.min() >= 0
        assert (ids[:, 0] == 2).all()  # [CLS]
        lengths = mask.sum(axis=1)
        assert lengths.max() == ids.shape[1]  # padded to the batch's longest
        assert len(set(lengths.tolist())) > 1  # lengths vary within a batch
        for row, n in zip(ids, lengths, strict=True):
            assert row[n - 1] == 3 and (row[n:] == 0).all()  # [SEP], then [PAD] 0
        assert (mask == (np.arange(ids.shape[1]) < lengths[:, None])).all()
        widths.add(ids.shape[1])
    assert len(widths) > 1


def test_tokenizer_in_the_parent_folder_and_given(tmp_path: Path) -> None:
    tok = _tokenizer(tmp_path / "tokenizer.json")
    model = _text_model(tmp_path / "onnx" / "model.onnx")
    assert find_tokenizer(model) == tok
    assert find_tokenizer(model, tmp_path) == tok  # a folder holding one
    assert find_tokenizer(model, tok) == tok
    assert find_tokenizer(tmp_path / "x" / "y" / "m.onnx") is None
    with pytest.raises(InputError, match=r"no tokenizer\.json"):
        find_tokenizer(model, tmp_path / "onnx")
    r = _samples(model)
    assert r.kind == "texts" and f"{tmp_path.name}/tokenizer.json" in r.description


def test_a_broken_tokenizer_is_one_line_naming_the_file(tmp_path: Path) -> None:
    (tmp_path / "tokenizer.json").write_text('{"version": "1.0", "model": ')
    model = _text_model(tmp_path / "model.onnx")
    with pytest.raises(InputError) as err:
        _samples(model)
    text = str(err.value)
    assert str(tmp_path / "tokenizer.json") in text and "not a readable tokenizer" in text
    assert "\n" not in text


def test_a_tokenizer_too_big_for_the_embedding(tmp_path: Path) -> None:
    tok = _tokenizer(tmp_path / "tok" / "tokenizer.json")
    model = _text_model(tmp_path / "m" / "model.onnx", rows=8)
    with pytest.raises(InputError, match="not this model's tokenizer"):
        _samples(model, tokenizer=tok)
    (tmp_path / "m" / "tokenizer.json").write_bytes(tok.read_bytes())
    r = _samples(model)  # found, not given: token ids instead, and said
    assert r.kind == "ids" and "does not fit" in r.description


def test_evaluation_and_calibration_texts_are_disjoint() -> None:
    ev, cal = eval_texts("evaluation"), eval_texts("calibration")
    assert len(ev) >= 80 and len(cal) >= 80
    assert not set(ev) & set(cal)
    lengths = [len(t.split()) for t in ev + cal]
    assert min(lengths) <= 3 and max(lengths) >= 60
    assert any(not t.isascii() for t in ev) and any(not t.isascii() for t in cal)


def test_purpose_picks_the_texts_and_the_seed_repeats(tmp_path: Path) -> None:
    _tokenizer(tmp_path / "tokenizer.json")
    model = _text_model(tmp_path / "model.onnx")
    a = _samples(model, seed=3)
    b = _samples(model, seed=3)
    c = _samples(model, seed=3, purpose="calibration")
    d = _samples(model, seed=4)
    assert all((x["input_ids"] == y["input_ids"]).all()
               for x, y in zip(a.batches, b.batches, strict=True))  # fmt: skip
    assert "calibration texts" in c.description

    def rows(r) -> set[tuple[int, ...]]:  # type: ignore[no-untyped-def]
        return {tuple(row[m > 0]) for f in r.batches
                for row, m in zip(f["input_ids"], f["attention_mask"], strict=True)}  # fmt: skip

    assert rows(a) != rows(d)
    assert len(rows(a) & rows(c)) <= 2  # different texts (short ones may tokenize alike)


def test_fixed_dims_and_int32_bool(tmp_path: Path) -> None:
    _tokenizer(tmp_path / "tokenizer.json")
    model = _text_model(
        tmp_path / "model.onnx", batch=3, seq=12,
        ids_type=TensorProto.INT32, mask_type=TensorProto.BOOL,
    )  # fmt: skip
    r = _samples(model, count=10, batch=4)
    assert r.samples == 12 and len(r.batches) == 4  # the fixed batch of 3
    for f in r.batches:
        assert f["input_ids"].shape == (3, 12) and f["input_ids"].dtype == np.int32
        assert f["attention_mask"].dtype == np.bool_
        assert f["attention_mask"].sum(axis=1).max() <= 12


def test_the_last_batch_is_smaller_when_the_batch_is_dynamic(tmp_path: Path) -> None:
    _tokenizer(tmp_path / "tokenizer.json")
    r = _samples(_text_model(tmp_path / "model.onnx"), count=10, batch=4)
    assert [f["input_ids"].shape[0] for f in r.batches] == [4, 4, 2] and r.samples == 10


def test_token_ids_without_a_tokenizer(tmp_path: Path) -> None:
    model = _text_model(tmp_path / "model.onnx", rows=30522)
    r = _samples(model, count=32, batch=8)
    assert r.kind == "ids"
    assert (
        r.description
        == "generated: 32 token-id rows (Zipf over 30,522 ids, lengths "
        + (r.description.split("lengths ")[1])
    )
    for f in r.batches:
        ids, mask = f["input_ids"], f["attention_mask"]
        assert ids.shape == (8, 128)  # the plan's sequence length
        lengths = mask.sum(axis=1)
        assert lengths.min() >= 8 and len(set(lengths.tolist())) > 3
        assert (mask == (np.arange(128) < lengths[:, None])).all()
        assert (ids[:, 0] == 101).all() and (ids[mask == 0] == 0).all()
        real = ids[:, 1:][mask[:, 1:] > 0]
        assert real.max() < 30522 and (real[real != 102] >= 1000).all()
    ids = np.concatenate([f["input_ids"][f["attention_mask"] > 0] for f in r.batches])
    _, counts = np.unique(ids, return_counts=True)
    assert counts.max() > 20 * np.median(counts)  # few ids reused often


def _power_by_band(images: np.ndarray) -> tuple[float, float]:
    spectrum = np.abs(np.fft.fft2(images - images.mean(axis=(-2, -1), keepdims=True))) ** 2
    h, w = images.shape[-2:]
    f = np.sqrt(np.fft.fftfreq(h)[:, None] ** 2 + np.fft.fftfreq(w)[None, :] ** 2)
    power = spectrum.reshape(-1, h, w).mean(axis=0)
    return float(power[(f > 0) & (f < 0.05)].mean()), float(power[f > 0.3].mean())


def test_images_in_0_1_for_an_ultralytics_export(tmp_path: Path) -> None:
    model = _image_model(
        tmp_path / "yolo.onnx", ["batch", 3, 64, 64], {"stride": "32", "names": "{0: 'a'}"}
    )
    r = _samples(model, count=8, batch=4)
    assert r.kind == "images" and "ultralytics" in r.description
    x = np.concatenate([f["images"] for f in r.batches])
    assert x.shape == (8, 3, 64, 64) and x.dtype == np.float32
    assert x.min() >= 0 and x.max() <= 1 and x.std() > 0.1
    low, high = _power_by_band(x)
    assert low > 100 * high
    corr = np.corrcoef(x[:, 0].ravel(), x[:, 1].ravel())[0, 1]
    assert corr > 0.3  # channels move together


def test_white_noise_has_no_such_fall() -> None:
    low, high = _power_by_band(np.random.default_rng(0).random((8, 3, 64, 64)))
    assert low < 3 * high
    img = natural_images(np.random.default_rng(0), 2, 1, 32, 48)
    assert img.shape == (2, 1, 32, 48)


def test_images_imagenet_normalized_otherwise(tmp_path: Path) -> None:
    r = _samples(_image_model(tmp_path / "cls.onnx", [1, 3, 32, 32]), count=4, batch=2)
    assert (
        r.description == "generated: 4 natural-statistics images normalized with ImageNet mean/std"
    )
    x = np.concatenate([f["images"] for f in r.batches])
    assert x.shape == (4, 3, 32, 32)  # the fixed batch of 1
    mean, std = np.array(IMAGENET_MEAN)[:, None, None], np.array(IMAGENET_STD)[:, None, None]
    pixels = x * std + mean
    assert pixels.min() >= -1e-5 and pixels.max() <= 1 + 1e-5 and x.min() < -1


def test_preprocessor_config_is_honoured(tmp_path: Path) -> None:
    (tmp_path / "preprocessor_config.json").write_text(json.dumps({
        "do_normalize": True, "do_rescale": True, "rescale_factor": 1 / 255,
        "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5],
    }))  # fmt: skip
    r = _samples(_image_model(tmp_path / "onnx" / "vit.onnx", ["n", 3, 32, 32]), count=4)
    assert "preprocessor_config.json (mean 0.5/0.5/0.5, std 0.5/0.5/0.5)" in r.description
    x = r.batches[0]["images"]
    assert x.min() >= -1 and x.max() <= 1 and x.min() < -0.5 and x.max() > 0.5
    (tmp_path / "preprocessor_config.json").write_text("[1, 2")
    with pytest.raises(InputError, match=r"preprocessor_config\.json: not a readable"):
        _samples(_image_model(tmp_path / "onnx" / "vit.onnx", ["n", 3, 32, 32]), count=4)


def test_nhwc_and_uint8_images(tmp_path: Path) -> None:
    graph = helper.make_graph(
        [helper.make_node("Cast", ["x"], ["out"], to=TensorProto.FLOAT)],
        "u8",
        [helper.make_tensor_value_info("x", TensorProto.UINT8, ["n", 32, 40, 3])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["n", 32, 40, 3])],
    )
    onnx.save(helper.make_model(graph), str(tmp_path / "u8.onnx"))
    r = _samples(tmp_path / "u8.onnx", count=3, batch=2)
    x = r.batches[0]["x"]
    assert x.dtype == np.uint8 and x.shape == (2, 32, 40, 3) and x.max() > 200
    assert "0-255 uint8" in r.description and r.batches[1]["x"].shape[0] == 1


def test_other_inputs_fall_back_to_random(tmp_path: Path) -> None:
    graph = helper.make_graph(
        [helper.make_node("Identity", ["audio"], ["out"])],
        "audio",
        [helper.make_tensor_value_info("audio", TensorProto.FLOAT, ["batch", 16000])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["batch", 16000])],
    )
    onnx.save(helper.make_model(graph), str(tmp_path / "a.onnx"))
    r = _samples(tmp_path / "a.onnx", count=4, batch=2)
    assert r.kind == "random" and r.batches[0]["audio"].shape == (2, 16000)
    assert abs(float(r.batches[0]["audio"].std()) - 1) < 0.1


def test_the_tokenizers_own_pad_id(tmp_path: Path) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {"<unk>": 0, **{w: i + 1 for i, w in enumerate(dict.fromkeys(WORDS))}}
    vocab["<pad>"] = len(vocab)
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(tmp_path / "tokenizer.json"))
    r = _samples(_text_model(tmp_path / "model.onnx"), count=8, batch=8)
    ids, mask = r.batches[0]["input_ids"], r.batches[0]["attention_mask"]
    assert (mask == 0).any() and (ids[mask == 0] == vocab["<pad>"]).all()


def test_images_repeat_by_seed_and_differ_by_purpose(tmp_path: Path) -> None:
    model = _image_model(tmp_path / "m.onnx", ["batch", 3, 16, 16])
    a, b = _samples(model, count=2, seed=1), _samples(model, count=2, seed=1)
    c = _samples(model, count=2, seed=1, purpose="calibration")
    assert (a.batches[0]["images"] == b.batches[0]["images"]).all()
    assert not np.allclose(a.batches[0]["images"], c.batches[0]["images"])


def test_a_decoders_mask_covers_the_past(tmp_path: Path) -> None:
    _tokenizer(tmp_path / "tokenizer.json")
    table = numpy_helper.from_array(np.ones((64, 4), np.float32), "embedding")
    graph = helper.make_graph(
        [helper.make_node("Gather", ["embedding", "input_ids"], ["out"])],
        "decoder",
        [
            helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["b", "seq"]),
            helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["b", "total"]),
            helper.make_tensor_value_info("past.0", TensorProto.FLOAT, ["b", 2, "past", 4]),
        ],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["b", "seq", 4])],
        [table],
    )
    onnx.save(helper.make_model(graph), str(tmp_path / "model.onnx"))
    model, info = load_model(tmp_path / "model.onnx")
    plan = plan_inputs(info, 2, dims_set={"seq": 128, "past": 16, "total": 144})
    r = realistic_samples(model, info, plan, 4, 2, 0)
    f = r.batches[0]
    length = f["input_ids"].shape[1]
    assert length < 128 and f["attention_mask"].shape == (2, 16 + length)
    assert (f["attention_mask"][:, :16] == 1).all() and f["past.0"].shape == (2, 2, 16, 4)
    assert (f["attention_mask"][:, 16:].sum(axis=1) >= 1).all()


def test_without_the_texts_file_token_ids_and_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import engine.model.realistic_inputs as ri

    def missing(purpose: str) -> list[str]:
        raise FileNotFoundError("eval_texts.txt")

    monkeypatch.setattr(ri, "eval_texts", missing)
    _tokenizer(tmp_path / "tokenizer.json")
    r = _samples(_text_model(tmp_path / "model.onnx", rows=500))
    assert r.kind == "ids" and "no texts to tokenize (eval_texts.txt)" in r.description
