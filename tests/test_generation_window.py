"""The window for a generating model (issue 51, item 5): each generation a point of TTFT,
TPOT and end to end on the latency plot (a log axis, a legend, p50/p90/p99 from the raw
per-generation values with their count), tokens/s per generation that does not saw, and a
model line that names the KV cache once. Synthetic events through the real controllers
and window; an encoder's plot as before."""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("PySide6")
from PySide6.QtCore import QObject, Signal
from pytestqt.qtbot import QtBot

from app.shell.model_line import inputs_line, kv_layer
from engine.config import RunConfig
from engine.events import GenerationStarted, GenerationSteps, LatencyBatch, Marker, ModelLoaded
from engine.model.info import ModelInfo, ValueInfo
from widgets.latency_plot import LatencyPlot
from widgets.log_axis import log_ticks
from widgets.models.generation_series import GenerationSeries, generation_row

LAYERS = 30
GAP_S = 6.0  # one generation every 6 s, as SmolLM2-135M on a busy 2-core machine
TTFT_MS, STEP_MS, NEW = 500.0, 60.0, 32


def _kv_names(layers: int) -> list[str]:
    return [f"past_key_values.{i}.{kv}" for i in range(layers) for kv in ("key", "value")]


def _info(path: str, inputs: list[ValueInfo]) -> ModelInfo:
    return ModelInfo(path=path, sha256="0" * 64, file_bytes=1, ir_version=8, producer="test",
                     opset={"": 17}, inputs=tuple(inputs), outputs=(), nodes=342,
                     subgraph_nodes=0, op_types={}, params=135_000_000, param_bytes=1)  # fmt: skip


def _llm_info() -> ModelInfo:
    kv = [ValueInfo(n, "tensor", "float32", ("batch_size", 3, "past_sequence_length", 64))
          for n in _kv_names(LAYERS)]  # fmt: skip
    return _info("/models/smollm2-genai/model.onnx", [
        ValueInfo("input_ids", "tensor", "int64", ("batch_size", "sequence_length")),
        ValueInfo("attention_mask", "tensor", "int64", ("batch_size", "total_sequence_length")),
        *kv,
    ])  # fmt: skip


def _steps_ms(k: int) -> np.ndarray:
    """Generation k's passes: the prefill, then NEW - 1 decode steps (a little jitter)."""
    return np.concatenate([[TTFT_MS + 10 * (k % 3)], np.full(NEW - 1, STEP_MS + (k % 2))])


# ------------------------------------------------------------------------------ Qt-free
def test_the_model_line_names_a_kv_cache_once() -> None:
    names = ["input_ids", "attention_mask", *_kv_names(LAYERS)]
    described = ["input_ids 1x128, default size",
                 "attention_mask int64[batch_size, total_sequence_length]",
                 *(f"{n} float32[batch_size, 3, past_sequence_length, 64]"
                   for n in _kv_names(LAYERS))]  # fmt: skip
    assert inputs_line(names, described) == "input_ids 1x128, attention_mask, 30 layers' KV cache"
    assert kv_layer("past_key_values.7.value") == 7 and kv_layer("input_ids") is None
    # an encoder's inputs read as before: every one, numbered ones collapsed
    assert inputs_line(["images"], ["images 1x3x224x224, default size"]) == (
        "images 1x3x224x224, default size"
    )
    assert inputs_line(["a.0.x", "a.1.x"], ["a.0.x float32[1]", "a.1.x float32[1]"]) == (
        "a.*.x float32[1] (x2)"
    )


def test_generation_series_figures_from_raw_generations() -> None:
    series = GenerationSeries(capacity=100, window=8)
    ttft, tpot, e2e, tokens = generation_row(_steps_ms(0), batch=2)
    assert (ttft, tpot, tokens) == (TTFT_MS, STEP_MS, 2 * NEW)  # TPOT: the mean decode step
    assert e2e == pytest.approx(TTFT_MS + (NEW - 1) * STEP_MS)
    assert math.isnan(generation_row([TTFT_MS], 1)[1])  # one token: no decode step
    for k in range(12):
        series.append(10.0 + GAP_S * k, _steps_ms(k), 1)
    stats = series.latest_stats()
    assert (stats["count"], stats["segment"]) == (8, 12)  # the window's last 8 of 12
    last8 = [generation_row(_steps_ms(k), 1) for k in range(4, 12)]
    assert stats["ttft_p50"] == pytest.approx(np.percentile([r[0] for r in last8], 50))
    assert stats["tpot_p99"] == pytest.approx(np.percentile([r[1] for r in last8], 99))
    # tokens/s: the window's tokens over its generating time, not samples in 1 s buckets
    assert stats["tokens_per_s"] == pytest.approx(
        sum(r[3] for r in last8) / (sum(r[2] for r in last8) / 1e3)
    )
    t, rate = series.rates()
    assert t.size == 12 and rate.min() > 0.95 * rate.max()  # steady: no 0, N, 0, N saw
    series.start_segment()
    assert series.latest_stats()["count"] == 0
    series.append(90.0, _steps_ms(0), 1)
    assert series.latest_stats()["count"] == 1


def test_log_ticks_are_1_2_5_values_or_decades_on_a_short_axis() -> None:
    major, _ = log_ticks(math.log10(20), math.log10(5000), size_px=300)
    assert [round(10**v) for v in major] == [20, 50, 100, 200, 500, 1000, 2000, 5000]
    major, minor = log_ticks(math.log10(20), math.log10(5000), size_px=80)  # a short plot
    assert [round(10**v) for v in major] == [100, 1000]  # decades: labels that fit
    assert [round(10**v) for v in minor] == [20, 50, 200, 500, 2000, 5000]


# ------------------------------------------------------------------------------ the window
class _Client(QObject):
    events = Signal(list)
    host_died = Signal(str)
    last_config = RunConfig()

    def set_generation(self, prompt_len: int, new_tokens: int) -> None:
        raise AssertionError("no length was changed in this test")


def _generations(first: int, n: int, t0_s: float) -> list[object]:
    """n generations GAP_S apart, each as the live host sends it: its end-to-end sample
    (LatencyBatch) and its passes (GenerationSteps), times from the timing's origin 0."""
    events: list[object] = []
    for k in range(first, first + n):
        start = int((t0_s + GAP_S * k) * 1e9)
        steps_ns = (_steps_ms(k) * 1e6).astype(np.int64)
        events.append(LatencyBatch(np.asarray([start]), np.asarray([int(steps_ns.sum())]), 0))
        events.append(GenerationSteps(k, start, steps_ns, 0))
    return events


def test_generations_are_points_on_the_latency_plot(qtbot: QtBot) -> None:
    from app.live.live_controller import LiveController
    from app.llm.generation_controller import GenerationController
    from app.shell.main_window import MainWindow

    window = MainWindow(["cpu"])
    qtbot.addWidget(window)
    window.resize(1024, 700)
    window.show()
    client = _Client()
    live = LiveController(window, client, clock=lambda: 0)  # the plot's clock: the origin
    generation = GenerationController(window, live, client)  # kept: its slots live with it
    plot = window.latency
    assert generation.view is window
    client.events.emit([
        ModelLoaded(_llm_info()),
        Marker("load", "smollm2-genai", int(4e9)),
        GenerationStarted(128, NEW, 1, "greedy", 8192, 46080),
    ])  # fmt: skip
    text = window.model_label.text()
    assert text.endswith("input_ids, attention_mask, 30 layers' KV cache"), text
    assert "past_key_values.29.value" in window.model_label.toolTip()
    client.events.emit(_generations(0, 8, t0_s=5.0))
    plot.paint_now()

    starts = 5.0 + GAP_S * np.arange(8)
    rows = [generation_row(_steps_ms(k), 1) for k in range(8)]
    for name, col in (("ttft", 0), ("tpot", 1), ("latency", 2)):
        x, y = plot.drawn(name)
        assert x == pytest.approx(starts)  # one point per generation, at its start
        assert y == pytest.approx(np.log10([r[col] for r in rows]))  # the log axis's units
    assert plot.axis.log
    legend = [label.text for _, label in plot.legend.items]
    assert legend == ["end to end", "TTFT", "TPOT", "p50", "p90", "p99"]
    header = plot.stats_label.text()
    ttft_p50 = np.percentile([r[0] for r in rows], 50)
    assert f"TTFT</b> p50 {ttft_p50:.0f}" in header, header
    assert "over all 8 generations (42 s)" in header, header
    assert "tokens/s" in header and "samples/s" not in header
    # below: each generation's tokens over its own end-to-end time, never 0 between them
    x, rate = plot.drawn("throughput")
    assert x == pytest.approx(starts)
    assert rate == pytest.approx([NEW * 1e3 / r[2] for r in rows])
    assert plot.shown_stats["unit"] == "generation" and plot.shown_stats["count"] == 8
    # a config change: the figures restart from its generations
    client.events.emit([Marker("config", "prompt 48, 32 new", int(60e9))])
    client.events.emit(_generations(10, 2, t0_s=5.0))
    plot._stats_at = 0.0
    plot._dirty = True
    plot.paint_now()
    assert "over all 2 generations" in plot.stats_label.text()

    # an encoder next: its plot as before (linear ms, per inference, samples/s)
    images = ValueInfo("images", "tensor", "float32", (1, 3, 224, 224))
    client.events.emit([ModelLoaded(_info("/models/demo_cnn.onnx", [images]))])
    assert not plot.axis.log
    assert [label.text for _, label in plot.legend.items] == ["per inference", "p50", "p90", "p99"]
    assert plot.drawn("ttft")[0].size == 0
    assert window.model_label.text().endswith("images float32[1, 3, 224, 224]")


def test_a_slow_encoder_paints_its_throughput(qtbot: QtBot) -> None:
    """One inference every 4 s: the smoothed samples/s had more values than bins (numpy's
    "same" convolution is as long as the longer input) and every paint raised."""
    plot = LatencyPlot()
    qtbot.addWidget(plot)
    plot.resize(900, 500)
    plot.show()
    for k in range(6):
        plot.append([4.0 * k], [100.0 + k], 1)
        plot.paint_now()
    x, y = plot.drawn("throughput")
    assert x.size == y.size > 0
    assert not plot.generation.on and plot.drawn("latency")[0].size == 6
