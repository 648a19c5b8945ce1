"""`opscope simulate --llm` on a trace too large for the machine (issue 53: ten million
rows): a simulation holds about a kilobyte a request, so a trace of 50 million (what a
trace may hold) ran for hours and was then killed for memory. It is refused in one line
once the trace is read, before the calibration and the simulation start."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from engine.cli.main import main
from tests.conftest import DEMO_LLM


def _azure_trace(path: Path, n: int) -> Path:
    t = np.cumsum(np.full(n, 0.005))
    stamps = np.datetime64("2023-11-16T18:00:00", "ns") + (t * 1e9).astype("timedelta64[ns]")
    rows = (
        f"{str(s).replace('T', ' ')},{100 + k % 300},{16 + k % 100}" for k, s in enumerate(stamps)
    )
    path.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n" + "\n".join(rows) + "\n")
    return path


def test_a_trace_larger_than_the_free_memory_is_refused_before_calibrating(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import psutil

    trace = _azure_trace(tmp_path / "azure.csv", 20_000)
    real = psutil.virtual_memory()
    free = 10 * 2**20  # a machine with 10 MB free: 20,000 requests take about 20 MB
    monkeypatch.setattr(psutil, "virtual_memory", lambda: SimpleNamespace(
        total=real.total, available=free, percent=real.percent))  # fmt: skip
    code = main(["simulate", str(DEMO_LLM), "--llm", "--traffic", f"trace:{trace}",
                 "--duration", "1000", "--layout", "colocated"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert lines[-1].startswith("opscope: error: 20,000 requests: simulating them takes about")
    assert "--requests N" in lines[-1]
    assert not any("calibrat" in ln for ln in lines), err  # refused before calibrating
