"""`opscope gate`: the hierarchical bootstrap over several runs a side, its renderers
(JUnit XML, Markdown, JSON), `compare FILE:1,2,3`, and the command end to end."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from engine.analysis.deltas import CompareError, Samples, compare_metric
from engine.analysis.gate_report import GateReport, junit_xml, markdown_summary, verdict
from engine.analysis.gate_stats import ONE_RUN_NOTE, gate_metric, pooled_metric_delta
from engine.errors import SessionFileError
from engine.session.reader import SessionReader
from engine.session.refs import is_run_list, resolve_run_refs
from tests.conftest import DEMO_CNN, DEMO_TRANSFORMER, ROOT
from tests.recorded_sessions import forget_load, opscope

# each run's own median (ms): between processes they differ by up to ~15%, as measured
BASE_MEDIANS = (5.0, 5.5, 4.7, 5.3, 4.9)
CAND_MEDIANS = (5.6, 4.8, 5.2, 5.45, 5.0)


def closed_loop(latencies_ms: np.ndarray, gap_ns: int = 20_000, batch: int = 1) -> Samples:
    lat = (latencies_ms * 1e6).astype(np.int64)
    starts = np.concatenate([[0], np.cumsum(lat[:-1] + gap_ns)]).astype(np.int64)
    return Samples(starts, lat, batch)


def run_of(median_ms: float, seed: int, n: int = 2000, sigma: float = 0.05) -> Samples:
    rng = np.random.default_rng(seed)
    return closed_loop(rng.lognormal(np.log(median_ms), sigma, n))


def runs_of(medians: tuple[float, ...], seed: int, n: int = 2000) -> list[Samples]:
    return [run_of(m, seed * 100 + i, n) for i, m in enumerate(medians)]


# -- statistics ----------------------------------------------------------------------


def test_between_run_spread_alarms_a_single_run_compare_but_not_the_gate() -> None:
    base, cand = runs_of(BASE_MEDIANS, 1), runs_of(CAND_MEDIANS, 2)
    # one process each: 5.0 vs 5.6 ms is a tight, 'significant' 12% slowdown
    single = compare_metric("p50", base[0], cand[0])
    assert single.regression(5.0), single
    g = gate_metric("p50", base, cand, threshold_pct=5.0)
    assert not g.regression, g
    assert g.runs == (5, 5) and g.notes == ()
    # the interval is as wide as the spread between processes, not the noise within one
    lo, hi = g.slowdown_ci_pct
    assert lo < g.slowdown_pct < hi and hi - lo > 8.0
    assert g.slowdown_bound_pct == pytest.approx(lo, abs=3.0) and g.slowdown_bound_pct > lo


def test_a_30_percent_regression_is_caught() -> None:
    base = runs_of(BASE_MEDIANS, 1)
    cand = runs_of(tuple(1.3 * m for m in CAND_MEDIANS), 2)
    g = gate_metric("p50", base, cand, threshold_pct=5.0)
    assert g.slowdown_pct == pytest.approx(30, abs=5)
    assert g.regression and g.slowdown_bound_pct > 10
    assert not gate_metric("p50", base, cand, threshold_pct=40.0).regression
    # the other way round it is an improvement, never a regression
    better = gate_metric("p50", cand, base, threshold_pct=0.0)
    assert better.slowdown_pct < -20 and not better.regression


def test_throughput_higher_is_better() -> None:
    slow = runs_of(tuple(1.3 * m for m in BASE_MEDIANS), 1)
    fast = runs_of(CAND_MEDIANS, 2)
    gain = gate_metric("throughput", slow, fast, threshold_pct=0.0)
    assert gain.higher_is_better and gain.unit == "samples/s"
    assert gain.candidate > gain.baseline and gain.slowdown_pct < -15
    assert not gain.regression
    loss = gate_metric("throughput", fast, slow, threshold_pct=5.0)
    assert loss.slowdown_pct > 15 and loss.regression
    lo, hi = loss.slowdown_ci_pct
    assert lo < loss.slowdown_pct < hi


def test_one_run_a_side_is_the_within_run_bootstrap_and_says_so() -> None:
    base, cand = runs_of(BASE_MEDIANS[:1], 1), runs_of(CAND_MEDIANS[:1], 2)
    g = gate_metric("p50", base, cand, threshold_pct=5.0)
    assert g.notes == (ONE_RUN_NOTE,)
    assert g.regression  # like compare: it cannot tell a slower process from a regression
    single = compare_metric("p50", base[0], cand[0])
    assert g.slowdown_pct == pytest.approx(single.slowdown_pct)
    assert g.slowdown_bound_pct == pytest.approx(single.slowdown_ci_pct[0], abs=1.5)


def test_seeded_and_deterministic() -> None:
    base, cand = runs_of(BASE_MEDIANS, 1), runs_of(CAND_MEDIANS, 2)
    a = gate_metric("p99", base, cand, threshold_pct=5.0, seed=7, resamples=300)
    b = gate_metric("p99", base, cand, threshold_pct=5.0, seed=7, resamples=300)
    c = gate_metric("p99", base, cand, threshold_pct=5.0, seed=8, resamples=300)
    assert a == b or a.to_json() == b.to_json()
    assert c.slowdown_bound_pct != a.slowdown_bound_pct
    assert c.slowdown_pct == a.slowdown_pct  # the point estimate uses every sample


def test_false_alarms_and_detection_on_synthetic_processes() -> None:
    """Many draws of 5 + 5 processes whose medians spread ~8% (lognormal): the gate at 5%
    seldom alarms on identical configs and nearly always catches a 30% slowdown, while
    one process a side, as `compare` sees it, alarms on identical configs often."""
    rng = np.random.default_rng(11)
    alarms = single_alarms = caught = 0
    trials = 30
    for t in range(trials):
        medians = 5.0 * np.exp(rng.normal(0.0, 0.08, size=10))
        base = runs_of(tuple(medians[:5]), 3 * t, n=400)
        cand = runs_of(tuple(medians[5:]), 3 * t + 1, n=400)
        slower = runs_of(tuple(1.3 * medians[5:]), 3 * t + 2, n=400)
        kw = {"threshold_pct": 5.0, "resamples": 400, "per_run": 200, "seed": t}
        alarms += gate_metric("p50", base, cand, **kw).regression  # type: ignore[arg-type]
        caught += gate_metric("p50", base, slower, **kw).regression  # type: ignore[arg-type]
        single_alarms += compare_metric("p50", base[0], cand[0], resamples=300).regression(5.0)
    assert alarms / trials <= 0.05
    assert caught / trials >= 0.9
    assert single_alarms / trials >= 0.1  # ~0.2-0.3 expected: a slower process alarms it


def test_bad_runs_are_bad_input() -> None:
    base = runs_of(BASE_MEDIANS[:2], 1)
    batched = [run_of(5.0, 3), closed_loop(np.full(100, 5.0), batch=8)]
    with pytest.raises(CompareError, match="batch size"):
        gate_metric("p50", base, batched, threshold_pct=5.0)
    with pytest.raises(CompareError, match="latency samples"):
        gate_metric("p50", base, [closed_loop(np.array([5.0]))], threshold_pct=5.0)
    with pytest.raises(CompareError, match="confidence"):
        gate_metric("p50", base, base, threshold_pct=5.0, confidence=1.0)
    with pytest.raises(CompareError, match="no runs"):
        gate_metric("p50", base, [], threshold_pct=5.0)


@pytest.mark.parametrize("metric", ["p50", "p99", "mean", "throughput"])
def test_an_all_zero_side_is_bad_input_never_a_pass(metric: str) -> None:
    """An all-zero baseline (a hostile or broken file) made every ratio NaN, and the gate
    said "OK: p50 nan% faster" and passed; `compare` (one run a side, and several) too."""
    zeros = Samples(np.zeros(200, dtype=np.int64), np.zeros(200, dtype=np.int64))
    real = runs_of(BASE_MEDIANS[:2], 1)
    for base, cand, side in (([zeros], real, "baseline"), (real, [zeros, zeros], "candidate")):
        with pytest.raises(CompareError, match=f"the {side}'s {metric} is"):
            gate_metric(metric, base, cand, threshold_pct=5.0)
        with pytest.raises(CompareError, match=f"the {side}'s {metric} is"):
            pooled_metric_delta(metric, base, cand)
        with pytest.raises(CompareError, match=f"the {side}'s {metric} is"):
            compare_metric(metric, base[0], cand[0])


def test_pooled_metric_delta_is_compares_two_sided_interval() -> None:
    base, cand = runs_of(BASE_MEDIANS, 1), runs_of(CAND_MEDIANS, 2)
    d = pooled_metric_delta("p50", base, cand)
    assert d.runs == (5, 5) and d.to_json()["runs"] == [5, 5]
    lo, hi = d.ci_pct
    assert lo < d.delta_pct < hi and not d.regression(5.0)
    assert d.n == (10_000, 10_000) and d.n_bootstrap == (5000, 5000)


# -- run references ------------------------------------------------------------------


def test_run_lists_resolve() -> None:
    assert resolve_run_refs("a.opscope") == ("a.opscope", None)
    assert resolve_run_refs("a.opscope:3") == ("a.opscope", [3])
    assert resolve_run_refs("a.opscope:1,2,3") == ("a.opscope", [1, 2, 3])
    assert resolve_run_refs("C:1,2") == ("C:1,2", None)  # a path on drive C
    assert is_run_list("a.opscope:1,2") and not is_run_list("a.opscope:1")
    with pytest.raises(SessionFileError, match="bad run list"):
        resolve_run_refs("a.opscope:1,x")
    with pytest.raises(SessionFileError, match="twice"):
        resolve_run_refs("a.opscope:1,1")


# -- renderers -----------------------------------------------------------------------


def gate_report(regress: bool, model: str = "demo_cnn.onnx") -> GateReport:
    base = runs_of(BASE_MEDIANS, 1)
    cand = runs_of(tuple((1.3 if regress else 1.0) * m for m in CAND_MEDIANS), 2)
    results = tuple(
        gate_metric(m, base, cand, threshold_pct=5.0, resamples=300) for m in ("p50", "throughput")
    )
    return GateReport(
        model=model,
        config="FP32 fusion=all batch=1 threads=1",
        baseline_ref="main.opscope:1,2,3,4,5",
        candidate_ref="cand.opscope:1,2,3,4,5",
        results=results,
        wall_s=12.5,
        notes=("the model file differs from the baseline's (another sha256)",),
    )


@pytest.mark.parametrize("regress", [False, True])
def test_junit_has_one_testcase_per_metric_and_a_failure_when_it_regresses(regress: bool) -> None:
    root = ET.fromstring(junit_xml(gate_report(regress)))
    assert root.tag == "testsuites"
    (suite,) = root.findall("testsuite")
    cases = suite.findall("testcase")
    assert [c.get("name") for c in cases] == ["p50 within 5%", "throughput within 5%"]
    failures = [c.find("failure") for c in cases]
    assert [f is not None for f in failures] == [regress, regress]
    assert suite.get("tests") == "2" and suite.get("failures") == str(2 * regress)
    if regress:
        assert failures[0] is not None
        assert failures[0].get("message", "").startswith("REGRESSION: p50")
        assert "differs from the baseline" in (failures[0].text or "")
    else:
        assert (cases[0].findtext("system-out") or "").startswith("OK: p50")
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props["baseline"] == "main.opscope:1,2,3,4,5"


def test_hostile_names_stay_valid_xml_and_inert_markdown() -> None:
    report = gate_report(True, model="evil\x1b[31m\x00<x>&|`*.onnx")
    root = ET.fromstring(junit_xml(report))  # control characters would make it invalid XML
    assert "<x>&" in (root.find("testsuite").get("name") or "")  # type: ignore[union-attr]
    md = markdown_summary(report)
    assert "\x1b" not in md and "\x00" not in md
    assert "\\<x\\>" in md and "\\|" in md and "\\`" in md


def test_markdown_summary_and_json() -> None:
    md = markdown_summary(gate_report(True))
    assert md.startswith("## ❌ Performance regression: demo\\_cnn.onnx")
    rows = [ln for ln in md.splitlines() if ln.startswith("| p50") or ln.startswith("| thr")]
    assert len(rows) == 2 and all("**regression**" in r for r in rows)
    assert "5 runs" in md and "hierarchical bootstrap" in md
    ok = markdown_summary(gate_report(False))
    assert ok.startswith("## ✅ No performance regression") and "**regression**" not in ok
    data = gate_report(True).to_json()
    assert data["regression"] is True and [m["metric"] for m in data["metrics"]] == [
        "p50",
        "throughput",
    ]
    assert data["metrics"][0]["runs"] == [5, 5]
    assert verdict(gate_report(False).results[0]).startswith("OK: p50")


# -- the command ---------------------------------------------------------------------

QUICK = ["--duration", "0.3", "--warmup", "3", "--no-live", "--no-accuracy"]


@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Runs 1 and 2: one thread; run 3: two threads (not the same config)."""
    path = tmp_path_factory.mktemp("gate") / "main.opscope"
    for threads in ("1", "1", "2"):
        proc = opscope("bench", DEMO_CNN, *QUICK, "--threads", threads, "--session", path)
        assert proc.returncode == 0, proc.stderr
    forget_load(path)  # these tests are about the gate's statistics, not the machine's load
    return path


def test_gate_end_to_end(baseline: Path, tmp_path: Path) -> None:
    junit, summary, out = tmp_path / "ci" / "gate.xml", tmp_path / "gate.md", tmp_path / "g.json"
    proc = opscope(
        "gate", baseline, DEMO_CNN, "--threads", "1", "--runs", "2", "--duration", "0.3",
        "--warmup", "3", "--metric", "p50", "--metric", "p99", "--max-regression", "50",
        "--junit", junit, "--summary", summary, "--json", out,
    )  # fmt: skip
    # on a busy shared machine a 50% regression at 95% is not expected from noise; a
    # candidate measured busy that reads slower is inconclusive (4), never a regression
    assert proc.returncode in (0, 3, 4), proc.stderr
    assert "Traceback" not in proc.stderr
    cases = ET.parse(junit).getroot().findall("testsuite/testcase")
    assert [c.get("name") for c in cases] == ["p50 within 50%", "p99 within 50%"]
    data = json.loads(out.read_text())
    assert data["regression"] == (proc.returncode == 3)
    assert data["verdict"] == {0: "ok", 3: "regression", 4: "inconclusive"}[proc.returncode]
    if proc.returncode == 4:  # said in words, and JUnit skips rather than fails
        assert data["busy"] and "INCONCLUSIVE: measured on a busy machine" in proc.stdout
        assert all(c.find("skipped") is not None for c in cases)
    assert data["baseline"] == f"{baseline}:1,2"
    assert [m["runs"] for m in data["metrics"]] == [[2, 2], [2, 2]]
    assert summary.read_text().startswith("## ")
    # the candidate runs were recorded beside the JUnit file, one process each
    with SessionReader.open(junit.with_suffix(".opscope")) as reader:
        runs = reader.runs()
        assert len(runs) == 2 and all(r.status == "ok" for r in runs)


def test_a_baseline_with_default_threads_gates_a_candidate_with_default_threads(
    tmp_path: Path,
) -> None:
    """As CI uses it: `bench --session base.opscope` then `gate base.opscope` with neither
    naming threads. The run records the threads it used; the gate once compared that with
    the candidate's unresolved 0 ("threads 2 vs 0") and found no baseline. And a baseline
    file holding runs at other input shapes: only those at the candidate's are pooled (it
    once failed: "runs 2 and 6 cannot be pooled")."""
    base, out = tmp_path / "base.opscope", tmp_path / "g.json"
    for dims in ([], ["--dim", "sequence=16"]):  # and a run at other shapes (a tune's, say)
        proc = opscope("bench", DEMO_TRANSFORMER, *QUICK, *dims, "--session", base)
        assert proc.returncode == 0, proc.stderr
    forget_load(base)  # a busy baseline would make it inconclusive (tests/test_busy_verdicts)
    proc = opscope("gate", base, DEMO_TRANSFORMER, "--runs", "1", "--duration", "0.2",
                   "--warmup", "3", "--max-regression", "1000", "--json", out)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert json.loads(out.read_text())["baseline"] == f"{base}:1"  # the shapes it will run
    proc = opscope("gate", base, DEMO_TRANSFORMER, "--dim", "sequence=48", "--runs", "1")
    assert proc.returncode == 2 and "config and inputs (the closest, run 2:" in proc.stderr


def test_gate_bad_input_exits_2(baseline: Path, tmp_path: Path) -> None:
    cases = [
        ([tmp_path / "missing.opscope", DEMO_CNN], "missing.opscope"),
        ([baseline, DEMO_TRANSFORMER], "no finished runs of demo_transformer.onnx"),
        ([baseline, DEMO_CNN, "--threads", "1", "--fusion", "basic"], "fusion all vs basic"),
        ([f"{baseline}:1,3", DEMO_CNN, "--threads", "1"], "run 3 has another config"),
        ([f"{baseline}:1,9", DEMO_CNN, "--threads", "1"], "no run 9"),
        ([baseline, tmp_path / "nope.onnx"], "nope.onnx"),
        ([baseline, DEMO_CNN, "--threads", "1", "--session", baseline], "baseline"),
        (
            [baseline, DEMO_CNN, "--threads", "1", "--session", tmp_path / "no" / "c.opscope"],
            "does not exist",
        ),
    ]
    for args, why in cases:
        proc = opscope("gate", *args, "--runs", "1", "--duration", "0.2")
        assert proc.returncode == 2, (args, proc.stderr)
        (line,) = proc.stderr.strip().splitlines()
        assert line.startswith("opscope: error:") and why in line, line


def test_compare_pools_several_runs(baseline: Path, tmp_path: Path) -> None:
    out = tmp_path / "c.json"
    proc = opscope("compare", f"{baseline}:1,2", f"{baseline}:2,1", "--json", out)
    assert proc.returncode == 0, proc.stderr
    assert "hierarchical bootstrap" in proc.stdout and "pools runs 1, 2" in proc.stdout
    data = json.loads(out.read_text())
    assert data["bootstrap"]["runs"] == [2, 2]
    assert abs(data["delta_pct"]) < 1e-9  # the same samples on both sides
    # a single run a side is the within-run bootstrap, as before
    proc = opscope("compare", f"{baseline}:1", f"{baseline}:2", "--json", out)
    assert proc.returncode in (0, 3), proc.stderr
    assert json.loads(out.read_text())["bootstrap"]["runs"] == [1, 1]
    # runs of two configs cannot be pooled on one side
    proc = opscope("compare", f"{baseline}:1,3", f"{baseline}:2")
    assert proc.returncode == 2 and "cannot be pooled" in proc.stderr, proc.stderr
    assert "threads 1 vs 2" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_sigterm_stops_the_candidate_and_keeps_its_run(baseline: Path, tmp_path: Path) -> None:
    session = tmp_path / "cand.opscope"
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.entry", "gate", str(baseline), str(DEMO_CNN),
         "--threads", "1", "--runs", "3", "--duration", "30", "--session", str(session)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # until the first child records samples
        time.sleep(0.3)
        try:
            with SessionReader.open(session) as reader:
                runs = reader.runs()
                if runs and reader.latency(runs[0].id)[1].size > 50:
                    break
        except Exception:  # not created yet, or mid-write
            continue
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert stderr.strip().splitlines()[-1] == "opscope: interrupted"
    assert "0 candidate runs recorded before the interruption" in stderr
    assert "Traceback" not in stderr
    with SessionReader.open(session) as reader:
        (run,) = reader.runs()  # the child stopped: it ended its run, and no other began
        assert run.status == "cancelled" and reader.latency(run.id)[1].size > 50
