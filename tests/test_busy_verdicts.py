"""A difference measured on a busy machine is not a verdict; other shapes are no verdict
either; a real regression measured quietly is still caught. `compare` and `gate` decide
by one rule (engine/analysis/likeness.py), tested here on runs whose samples and
contention are made by hand, so that the outcome does not depend on this machine's load."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from engine.analysis.deltas import Samples
from engine.analysis.gate_report import GateReport, junit_xml, markdown_summary
from engine.analysis.gate_stats import gate_metric
from engine.analysis.likeness import Side, busy, separated, unlike, verdict
from engine.cli.main import main
from engine.config import RunConfig
from engine.events import LatencyBatch, ModelLoaded, RunEnded, RunStarted, TimingDone
from engine.measure.contention import Contention
from engine.measure.stats import is_stable, latency_stats, throughput
from engine.model.info import load_model
from engine.session import Recorder, SessionStore
from tests.conftest import DEMO_CNN

QUIET = Contention(5.0, 2, 0.02, 0.0, 1.0)
BUSY = Contention(5.0, 2, 1.9, 0.0, 0.9)


def record(path: Path, p50_ms: float, load: Contention, batch: int = 1, seed: int = 0) -> None:
    """One run of 400 samples around `p50_ms` (lognormal, 5% spread) with `load`."""
    rng = np.random.default_rng(seed)
    lats = (rng.lognormal(0.0, 0.05, 400) * p50_ms * 1e6).astype(np.int64)
    starts = np.cumsum(lats) - lats[0]
    info = load_model(DEMO_CNN)[1]
    with SessionStore.create_or_open(path) as store:
        rec = Recorder(store, model_path=str(DEMO_CNN))
        rec.feed(ModelLoaded(info))
        rec.feed(
            RunStarted(
                RunConfig(batch=batch, threads=1),
                "CPUExecutionProvider",
                "CPUExecutionProvider",
                ("CPUExecutionProvider",),
                {"image": ((batch, 3, 64, 64), "float32")},
                batch,
                0.1,
            )
        )
        rec.feed(LatencyBatch(starts, lats, 1))
        stats = latency_stats(lats)
        rec.feed(TimingDone(stats, throughput(starts, lats, batch), is_stable(lats), 5, 2.0, load))
        rec.feed(RunEnded("ok"))
        rec.close()


def compare(tmp_path: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    out = tmp_path / "c.json"
    code = main(["compare", *args, "--max-regression", "5", "--json", str(out)])
    return code, capsys.readouterr().out


@pytest.mark.parametrize(
    ("base", "cand", "slower", "code", "said"),
    [
        (QUIET, QUIET, 1.20, 3, "REGRESSION: p50"),  # a real +20%, quiet: caught
        (QUIET, QUIET, 1.00, 0, "OK:"),
        (QUIET, BUSY, 1.20, 4, "INCONCLUSIVE: p50"),  # slower, and the candidate was busy
        (BUSY, QUIET, 1.00, 4, "INCONCLUSIVE:"),  # a busy baseline could hide a regression
        (QUIET, BUSY, 0.95, 0, "OK:"),  # busy and still no slower: no regression to hide
    ],
)
def test_compare_verdicts_follow_the_machines_load(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    base: Contention,
    cand: Contention,
    slower: float,
    code: int,
    said: str,
) -> None:
    path = tmp_path / "s.opscope"
    record(path, 10.0, base, seed=1)
    record(path, 10.0 * slower, cand, seed=2)
    got, out = compare(tmp_path, capsys, f"{path}:1", f"{path}:2")
    assert got == code, out
    assert said in out
    data = json.loads((tmp_path / "c.json").read_text())
    assert data["verdict"] == {0: "ok", 3: "regression", 4: "inconclusive"}[code]
    if base.busy or cand.busy:
        assert "measured busy (other processes used 1.90 of 2 CPUs" in out
        assert data["busy"]
    assert data["candidate"]["contention"]["verdict"] == cand.verdict


def test_other_shapes_get_no_verdict(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "s.opscope"
    record(path, 10.0, QUIET)
    record(path, 30.0, QUIET, batch=4)
    got, out = compare(tmp_path, capsys, f"{path}:1", f"{path}:2")
    assert got == 4
    assert "NO VERDICT: not like for like (other inputs (image 1x3x64x64 vs image 4x3x64x64)" in out
    assert "inputs image 1x3x64x64 -> image 4x3x64x64" in out  # and what changed says so


def test_twenty_identical_pairs_under_load_are_never_a_regression(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The Done-when of issue 49 by construction: identical configs measured busy, where
    contention made the candidate up to 30% slower, are inconclusive, never a REGRESSION."""
    path = tmp_path / "s.opscope"
    rng = np.random.default_rng(7)
    codes = []
    for i in range(20):
        record(path, 10.0, BUSY, seed=100 + i)
        record(path, 10.0 * float(rng.uniform(0.9, 1.3)), BUSY, seed=200 + i)
        got, out = compare(tmp_path, capsys, f"{path}:{2 * i + 1}", f"{path}:{2 * i + 2}")
        assert "REGRESSION" not in out
        codes.append(got)
    assert set(codes) == {4}  # the baseline was busy every time: never a verdict


def _gate_report(base: Contention, cand: Contention, slower: float) -> GateReport:
    rng = np.random.default_rng(3)
    b = [rng.lognormal(0, 0.05, 300) * 10e6 for _ in range(3)]
    c = [rng.lognormal(0, 0.05, 300) * 10e6 * slower for _ in range(3)]
    bs = [x.astype(np.int64) for x in b]
    cs = [x.astype(np.int64) for x in c]
    result = gate_metric(
        "p50",
        [Samples(np.cumsum(x) - x[0], x, 1) for x in bs],
        [Samples(np.cumsum(x) - x[0], x, 1) for x in cs],
        threshold_pct=5,
    )
    sides = [Side("m", None, 1, "onnxruntime", load) for load in (base, cand)]
    return GateReport(
        "demo_cnn.onnx",
        "FP32",
        "b.opscope:1,2,3",
        "c.opscope:1,2,3",
        (result,),
        busy=tuple(busy(*sides)),
        baseline_busy=base.busy,
    )


def test_the_gate_under_load_is_inconclusive_and_junit_skips() -> None:
    report = _gate_report(QUIET, BUSY, 1.2)
    assert report.status == "inconclusive" and not report.regression
    case = ET.fromstring(junit_xml(report).split("\n", 1)[1]).find("testsuite/testcase")
    assert case is not None and case.find("skipped") is not None
    assert case.find("failure") is None
    assert markdown_summary(report).startswith("## ⚠️ Inconclusive")
    caught = _gate_report(QUIET, QUIET, 1.2)  # the same +20%, quiet: a failure
    assert caught.status == "regression"
    case = ET.fromstring(junit_xml(caught).split("\n", 1)[1]).find("testsuite/testcase")
    assert case is not None and case.find("failure") is not None


def test_likeness_rules() -> None:
    a = Side("sha", {"x": {"shape": [1, 128]}}, 1, "onnxruntime", QUIET)
    b = Side("sha", {"x": {"shape": [1, 256]}}, 1, "onnxruntime", QUIET)
    assert unlike(a, a) == []
    assert unlike(a, b) == ["other inputs (x 1x128 vs x 1x256)"]
    other = Side("sha2", {"x": [1, 128]}, 1, "pytorch", None)
    assert unlike(a, other) == ["other models", "other engines (onnxruntime vs pytorch)"]
    assert unlike(a, other, same_model=False) == []
    assert busy(a, Side("sha", None, 1, None, BUSY))[0].startswith("the candidate was measured")
    assert verdict(True, [], [], False) == "regression"
    assert verdict(True, ["other inputs"], [], False) == "unlike"
    assert separated((1.0, 2.0), (2.5, 3.0)) and not separated((1.0, 2.6), (2.5, 3.0))
    assert not separated(None, (1.0, 2.0))


def test_the_report_names_busy_runs_and_colours_no_delta_against_them(tmp_path: Path) -> None:
    from engine.analysis.report import write_report

    path = tmp_path / "s.opscope"
    record(path, 10.0, QUIET, seed=1)
    record(path, 13.0, BUSY, seed=2)
    out = tmp_path / "r.html"
    write_report(str(path), str(out))
    html = out.read_text()
    assert "1 of 2 runs were measured on a busy machine" in html
    assert "run 2: busy: other processes used 1.90 of 2 CPUs" in html
    assert "no verdict: the candidate was measured busy" in html
    rows = html.split('id="comparison"')[1].split("<tbody>")[1].split("</table>")[0]
    assert 'class="worse"' not in rows and 'class="same"' in rows


def test_a_sweep_says_which_points_were_timed_busy() -> None:
    from engine.tune.sweep import SweepPoint, growth_caveat

    sizes = (16, 32, 64, 128, 256, 512)
    points = [SweepPoint(n, float(n), n / 10, 50, contention=QUIET) for n in sizes]
    assert growth_caveat(points) is None
    points[4].contention = BUSY
    caveat = growth_caveat(points)
    assert caveat is not None and caveat.startswith("points 256 were timed on a busy machine")
    assert points[4].to_json()["machine"]["contention"]["verdict"] == "busy"
