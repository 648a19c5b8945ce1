"""Backends are declared once: the registry finds them by folder, each says what it offers,
and a prepared model runs one request or a stack of them the same way on either engine."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from engine import backends
from engine.backends.base import Prepared, PrepareRequest
from engine.config import RunConfig
from engine.errors import ConfigError
from engine.events import AccuracyResult, Event, OpProfile, RunStarted
from engine.model.workload import Workload
from tests.conftest import DEMO_CNN
from tests.conftest import ROOT as _ROOT


def prepare(req: PrepareRequest) -> tuple[Prepared, list[Event]]:
    events: list[Event] = []
    return backends.prepare(req, events.append), events


def test_registry_finds_both_engines_default_first() -> None:
    assert backends.names()[:1] == ("onnxruntime",)
    assert set(backends.names()) >= {"onnxruntime", "torch"}
    with pytest.raises(ConfigError, match="engine must be one of onnxruntime"):
        backends.get("tvm")


def test_capabilities_check_and_fit() -> None:
    torch_caps = backends.get("torch").capabilities
    with pytest.raises(ConfigError, match="engine torch: fusion must be one of off, all"):
        backends.backend_for(RunConfig(engine="torch", fusion="basic"))
    with pytest.raises(ConfigError, match="precision must be one of fp32, fp16"):
        backends.backend_for(RunConfig(precision="bf16"))
    fitted = torch_caps.fit(
        RunConfig(precision="int8-static", fusion="layout", provider="tensorrt")
    )
    assert (fitted.engine, fitted.precision, fitted.fusion, fitted.provider) == (
        "torch",
        "int8-dynamic",
        "all",
        "cuda",
    )
    ort_caps = backends.get("onnxruntime").capabilities
    assert ort_caps.fit(RunConfig(engine="torch", precision="bf16")).precision == "fp16"
    assert ort_caps.fit(RunConfig()) == RunConfig()


DEMO_LLM = _ROOT / "resources" / "models" / "demo_llm"


def test_backends_say_which_files_they_open() -> None:
    ort, torch = backends.get("onnxruntime"), backends.get("torch")
    assert ort.opens("m.onnx") and ort.opens("m.pt2")  # PyTorch files via an ONNX export
    assert torch.opens("m.PT2") and not torch.opens("m.onnx")
    assert set(backends.model_suffixes()) == {".onnx", ".pt2", ".pt", ".pth", "genai_config.json"}
    assert backends.file_filter().startswith("Models (*.onnx *genai_config.json *.pt2")
    genai = backends.get("genai")  # a generating model: its folder, or the config in it
    assert genai.opens(str(DEMO_LLM)) and genai.opens(str(DEMO_LLM / "genai_config.json"))
    assert not genai.opens("m.onnx") and not ort.opens(str(DEMO_LLM))


def test_a_new_backend_is_one_new_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A package with a BACKEND beside ort/ and pytorch/ is found; nothing else changes."""
    pkg = tmp_path / "echo"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(
        textwrap.dedent(
            """
            from engine.backends.base import Capabilities

            class Echo:
                capabilities = Capabilities(
                    name="echo", label="Echo", suffixes=(".echo",), file_kind="Echo files",
                    precisions=("fp32",), fusions=("off",), providers=("cpu",),
                    fusion_labels={"off": "Off"}, fusion_marks={"off": "plain"},
                )

                def opens(self, path):
                    return path.endswith(".echo")

            BACKEND = Echo()
            """
        )
    )
    monkeypatch.setattr(backends, "__path__", [*backends.__path__, str(tmp_path)])
    backends.all_backends.cache_clear()
    try:
        assert "echo" in backends.names()
        assert ".echo" in backends.model_suffixes()
        changed = backends.describe_change(
            RunConfig(engine="echo", fusion="off"), RunConfig(fusion="all")
        )
        assert changed == "Echo, plain"
    finally:
        backends.all_backends.cache_clear()
        sys.modules.pop("engine.backends.echo", None)


def stacked(prepared: Prepared, n: int) -> dict[str, np.ndarray]:
    return {k: np.concatenate([a] * n) for k, a in prepared.feeds.items()}


def check_prepared(prepared: Prepared, events: list[Event]) -> None:
    started = next(e for e in events if isinstance(e, RunStarted))
    assert prepared.provider_used == started.provider_used
    assert prepared.batch == started.batch == 1
    prepared.run_once()
    one = prepared.run_batch(prepared.feeds)
    three = prepared.run_batch(stacked(prepared, 3))
    assert three[0].shape[0] == 3 * one[0].shape[0]
    np.testing.assert_allclose(three[0][: one[0].shape[0]], one[0], rtol=1e-4, atol=1e-5)
    profile: Iterator[Event] = prepared.profile(3, None)
    assert any(isinstance(e, OpProfile) and e.runs == 3 for e in profile)
    prepared.close()


def test_onnxruntime_prepared_runs_one_request_or_a_stack() -> None:
    prepared, events = prepare(PrepareRequest(Workload(str(DEMO_CNN), RunConfig(threads=1))))
    check_prepared(prepared, events)


def test_onnxruntime_accuracy_of_a_variant() -> None:
    req = PrepareRequest(Workload(str(DEMO_CNN), RunConfig(precision="int8-dynamic", threads=1)))
    prepared, _ = prepare(req)
    result = [e for e in prepared.accuracy(True) if isinstance(e, AccuracyResult)]
    assert len(result) == 1 and 0.9 < result[0].cosine <= 1.0 + 1e-9
    prepared.close()


@pytest.mark.slow
def test_torch_prepared_runs_one_request_or_a_stack(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    import torch

    from tests.torch_models import mlp, save_pt2

    path = save_pt2(mlp(), torch.randn(2, 16), tmp_path / "mlp.pt2")
    config = RunConfig(engine="torch", fusion="off", threads=1)
    prepared, events = prepare(PrepareRequest(Workload(str(path), config)))
    check_prepared(prepared, events)


def test_the_window_asks_the_backend_which_providers_this_machine_has() -> None:
    from engine.backends.ort.inference_session import gpu_present

    usable = backends.get(backends.DEFAULT).capabilities.usable_providers()
    assert usable[0] == "cpu" and "auto" not in usable
    if not gpu_present():  # no GPU: CUDA and TensorRT are not offered
        assert usable == ("cpu",)


def test_generate_offers_what_the_generating_backend_has() -> None:
    from engine.backends.genai import CAPABILITIES
    from engine.cli.main import build_parser

    parser = build_parser()
    gen = next(
        a.choices["generate"]
        for a in parser._actions
        if isinstance(a.choices, dict) and "generate" in a.choices
    )
    flags = {a.dest: a for a in gen._actions}
    assert tuple(flags["precision"].choices) == CAPABILITIES.precisions
    assert tuple(flags["fusion"].choices) == CAPABILITIES.fusions
    assert tuple(flags["provider"].choices) == CAPABILITIES.providers
    args = parser.parse_args(["generate", "m", "--precision", "int4"])  # the short name
    assert args.precision == "int4-weights"
