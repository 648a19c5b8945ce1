"""What the INT8 target search costs and says (#29): "attempt n of N" and the time left in
every Progress, the jump to keeping nodes in FP32 when settings cannot close the gap,
work shared across attempts (one pre-processing, one calibration per method), Cancel
between calibration batches, and "built in" being the whole search's time."""

from __future__ import annotations

import json
import math
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from engine.backends.ort import variants
from engine.backends.ort.int8_choice import choose_int8
from engine.backends.ort.int8_target import candidate_settings, meet_target
from engine.backends.ort.variants import Reuse, build_variant
from engine.config import RunConfig
from engine.events import Notice, Progress, VariantReady
from engine.model.info import load_model
from tests.conftest import DEMO_CNN, DEMO_TRANSFORMER
from tests.test_int8_target import _fake, _run, build_quant_sensitive

ATTEMPT = re.compile(r"attempt (\d+) of (\d+)")


def test_every_progress_of_the_search_says_attempt_n_of_n_and_the_time_left() -> None:
    ranking = [(["a"], 0.3), (["b"], 0.2), (["c"], 0.1)]
    best = json.dumps(candidate_settings("int8-dynamic", "avx2")[0], sort_keys=True)
    cosine = {(best, ()): 0.9, (best, ("a", "b", "c")): 0.995}
    how, _ = _fake(cosine, {}, ranking)
    inner = how.build

    def build(settings: dict[str, Any], excluded: list[str]) -> Any:
        yield Progress("calibration", 1, 4, "calibration batch 1/4")  # a build's own
        return (yield from inner(settings, excluded))

    how.build = build
    now = [0.0]

    def clock() -> float:  # every call: 1 s later (each attempt takes a few)
        now[0] += 1.0
        return now[0]

    events, out = _run(meet_target("int8-dynamic", 0.99, "avx2", how, clock=clock))
    assert out.met
    progress = [e for e in events if isinstance(e, Progress)]
    assert progress
    seen = []
    for ev in progress:
        m = ATTEMPT.search(ev.message)
        assert m, ev.message
        n, total = int(m.group(1)), int(m.group(2))
        assert 1 <= n <= total and ev.total == total and 0 <= ev.done <= total
        seen.append(n)
    assert seen == sorted(seen) and seen[-1] == len(out.attempts)  # counts up to the last
    assert "estimating" in progress[0].message  # nothing measured yet
    later = [e.message for e in progress if ATTEMPT.search(e.message).group(1) != "1"]  # type: ignore[union-attr]
    assert later and all(re.search(r"about \d+ s left", m) for m in later)
    assert any("calibration batch 1/4" in e.message for e in progress)  # the build's own


def test_a_first_pick_that_misses_by_far_goes_straight_to_the_nodes() -> None:
    """MiniLM: the CPU's first pick reads 0.966 for a 0.99 target; the other settings
    reach 0.985 at best, so the search keeps nodes in FP32 without building them."""
    tries = candidate_settings("int8-dynamic", "vnni")
    first = json.dumps(tries[0], sort_keys=True)
    ranking = [(["a"], 0.3)]
    how, (built, _) = _fake({(first, ()): 0.96, (first, ("a",)): 0.992}, {}, ranking)
    how.start, how.far = dict(tries[0]), 2.0
    events, out = _run(meet_target("int8-dynamic", 0.99, "vnni", how))
    assert out.met and out.chosen.excluded == ["a"] and len(out.attempts) == 2
    assert [b[0] for b in built] == [first, first]  # no other setting built
    assert any(isinstance(e, Notice) and "instead of trying" in e.message for e in events)
    # a near miss (1.5x the allowed error) still tries the other settings
    how, (built, _) = _fake({(first, ()): 0.985}, {}, ranking)
    how.start, how.far = dict(tries[0]), 2.0
    _run(meet_target("int8-dynamic", 0.99, "vnni", how))
    assert len({b[0] for b in built}) == len(tries)


def _calibration(count: list[int], shape: tuple[int, ...], name: str) -> Any:
    def batches() -> Iterator[dict[str, np.ndarray]]:
        count[0] += 1
        rng = np.random.default_rng(0)
        for _ in range(4):
            yield {name: rng.standard_normal(shape).astype(np.float32)}

    return batches


def _ready(events: Any) -> VariantReady:
    return next(e for e in events if isinstance(e, VariantReady))


def test_static_attempts_share_one_preprocessing_and_one_calibration_per_method(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    _, info = load_model(DEMO_CNN)
    runs = [0]
    calibration = _calibration(runs, (2, 3, 64, 64), "image")
    reuse = Reuse(tmp_path / "search")
    settings = [
        {"per_channel": True, "reduce_range": False},
        {"per_channel": False, "reduce_range": True},
        {"per_channel": True, "reduce_range": True},
    ]
    paths = set()
    for s in settings:
        paths.add(
            _ready(build_variant(info, "int8-static", calibration, "t", 4, s, (), reuse)).path
        )
    excluded = _ready(
        build_variant(info, "int8-static", calibration, "t", 4, settings[0], ["/conv1/Conv"], reuse)
    )
    assert len(paths) == 3 and excluded.path not in paths  # four different variants
    assert reuse.calibrations == 1 and runs == [1] and reuse.preprocessed == 1
    _ready(
        build_variant(info, "int8-static", calibration, "t", 4, {"method": "Percentile"}, (), reuse)
    )
    assert reuse.calibrations == 2 and runs == [2]  # another method: its own ranges
    # without it, each build pre-processes and calibrates
    runs[0] = 0
    _ready(build_variant(info, "int8-static", calibration, "t2", 4, settings[1]))
    _ready(build_variant(info, "int8-static", calibration, "t2", 4, settings[2]))
    assert runs == [2]


def test_cancel_stops_static_int8_between_calibration_batches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cancel used to let ORT compute ranges and quantize from the batches read so far
    (seconds on a MiniLM) before the build stopped; now the next batch asked for ends it."""
    monkeypatch.setenv("OPSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    _, info = load_model(DEMO_CNN)
    quantized: list[int] = []
    from onnxruntime.quantization import qdq_quantizer

    original = qdq_quantizer.QDQQuantizer.quantize_model

    def spy(self: Any) -> Any:
        quantized.append(1)
        return original(self)

    monkeypatch.setattr(qdq_quantizer.QDQQuantizer, "quantize_model", spy)
    gate = threading.Event()
    taken = [0]

    def calibration() -> Iterator[dict[str, np.ndarray]]:
        rng = np.random.default_rng(0)
        for i in range(16):
            if i == 2:
                gate.wait(30)  # held until the test has cancelled
            taken[0] += 1
            yield {"image": rng.standard_normal((2, 3, 64, 64)).astype(np.float32)}

    gen = build_variant(info, "int8-static", calibration, "cancel", 16)
    for ev in gen:
        if isinstance(ev, Progress) and ev.message == "calibration batch 2/16":
            break
    closer = threading.Thread(target=gen.close)
    closer.start()
    time.sleep(0.1)
    gate.set()
    closer.join(30)
    assert not closer.is_alive()
    # (the batch asked for before the cancel may still be read; none after it)
    assert taken[0] <= 3 and quantized == []  # nothing quantized from the batches so far
    assert not list((tmp_path / "cache").rglob("model.onnx"))  # nothing half-built kept


def test_built_in_is_the_whole_search_and_the_model_is_preprocessed_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    _, info = load_model(build_quant_sensitive(tmp_path))
    rng = np.random.default_rng(1)
    feeds = [{"x": rng.standard_normal((8, 64)).astype(np.float32)} for _ in range(3)]
    config = RunConfig(precision="int8-dynamic", min_cosine=0.999, threads=1)
    t0 = time.perf_counter()
    events, variant = _run(choose_int8(info, config, None, "none", 0, feeds, "t", False))
    wall = time.perf_counter() - t0
    int8 = variant.details["int8"]
    assert int8["met"] and "mm_sensitive" in int8["excluded_nodes"]
    assert len(int8["attempts"]) >= 2 and int8["search"]["preprocessed"] == 1
    assert not variant.cached
    # the whole search, not its last build (that was a fraction of it)
    assert 0.8 * wall <= variant.build_s <= wall
    for ev in events:
        if isinstance(ev, Progress):
            assert ATTEMPT.search(ev.message), ev.message
    again = _run(choose_int8(info, config, None, "none", 0, feeds, "t", False))[1]
    assert again.details["int8"]["excluded_nodes"] == int8["excluded_nodes"]
    assert math.isfinite(again.build_s)


def test_leave_one_out_finds_the_node_that_matters_without_rebuilding(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from engine.backends.ort.int8_loo import leave_one_out
    from engine.events import drive
    from engine.measure.accuracy import compare_outputs

    monkeypatch.setenv("OPSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    _, info = load_model(build_quant_sensitive(tmp_path))
    reuse = Reuse(tmp_path / "search")
    built = _ready(build_variant(info, "int8-dynamic", reuse=reuse))
    assert reuse.source is not None
    rng = np.random.default_rng(2)
    feeds = [{"x": rng.standard_normal((8, 64)).astype(np.float32)}]
    import onnxruntime as ort

    ref = ort.InferenceSession(str(reuse.source), providers=["CPUExecutionProvider"])
    reference = [ref.run(None, f) for f in feeds]
    calls = []
    monkeypatch.setattr(variants, "_build_int8_dynamic", lambda *a: calls.append(a))
    names = ["mm_in", "mm_sensitive", "mm_mid", "mm_out"]
    gains = drive(
        leave_one_out(
            str(reuse.source), built.path, names, feeds,
            lambda got: compare_outputs(["y"], reference, got).cosine, tmp_path / "loo",
        )
    )  # fmt: skip
    assert gains[0][0] == ["mm_sensitive"] and gains[0][1] > 0.01
    assert len(gains) >= 3 and calls == []  # no rebuild


def test_a_transformer_search_reuses_its_calibration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Static INT8 held to a target the demo transformer's defaults cannot meet: every
    attempt after the first reuses the first one's calibrated ranges."""
    monkeypatch.setenv("OPSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    model, info = load_model(DEMO_TRANSFORMER)
    from engine.backends.ort.generated import GeneratedFeeds
    from engine.model.inputs import plan_inputs

    gen = GeneratedFeeds(model, info, plan_inputs(info, 2, {}), 0)
    runs = [0]

    def calibration() -> Iterator[Any]:
        runs[0] += 1
        for i in range(4):
            yield gen.feeds(i)

    feeds = [gen.feeds(10 + i) for i in range(2)]
    config = RunConfig(precision="int8-static", min_cosine=0.999, threads=1)
    _, variant = _run(choose_int8(info, config, calibration, "gen", 4, feeds, "g", False))
    int8 = variant.details["int8"]
    ranges = {
        (a["settings"].get("method", "MinMax"), json.dumps(a["settings"].get("op_types")))
        for a in int8["attempts"]
    }  # what calibration depends on
    # one calibration per distinct key, however many attempts share one: which attempts a
    # search needs depends on the kernels' numerics (where this was written, more attempts
    # than keys; an AMD EPYC on 2026-12-02 met the target in 3 attempts of 3 keys)
    assert len(int8["attempts"]) >= len(ranges) >= 1
    assert int8["search"]["calibrations"] == runs[0] == len(ranges)
