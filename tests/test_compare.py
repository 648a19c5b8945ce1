"""`opscope compare`: the statistics on synthetic samples, op matching, and the exit codes
on real recorded sessions."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from engine.analysis.deltas import (
    CompareError,
    Samples,
    accuracy_delta,
    block_bootstrap,
    block_length,
    compare_metric,
    config_diff,
    diff_ops,
    metric_value,
    row_quantile,
)
from engine.cli.main import main
from engine.measure.stats import latency_stats, throughput
from tests.built_once import demo_session_once
from tests.recorded_sessions import opscope, tampered_copy


def closed_loop(latencies_ms: np.ndarray, gap_ns: int = 20_000, batch: int = 1) -> Samples:
    """Samples as the timing loop records them: each inference starts after the last."""
    lat = (latencies_ms * 1e6).astype(np.int64)
    starts = np.concatenate([[0], np.cumsum(lat[:-1] + gap_ns)]).astype(np.int64)
    return Samples(starts, lat, batch)


def lognormal(seed: int, median_ms: float, n: int = 4000, sigma: float = 0.15) -> np.ndarray:
    return np.random.default_rng(seed).lognormal(np.log(median_ms), sigma, n)


# -- statistics ----------------------------------------------------------------------


@pytest.mark.parametrize("metric", ["p50", "p90", "p99", "mean", "throughput"])
def test_identical_distributions_are_not_a_regression(metric: str) -> None:
    base, cand = closed_loop(lognormal(1, 5.0)), closed_loop(lognormal(2, 5.0))
    d = compare_metric(metric, base, cand, seed=3)
    lo, hi = d.ci_pct
    assert lo < 0 < hi, d
    assert not d.significant and not d.regression(0.0)
    assert lo <= d.delta_pct <= hi


def test_a_30_percent_slowdown_is_a_regression() -> None:
    base, cand = closed_loop(lognormal(1, 5.0)), closed_loop(lognormal(2, 6.5))
    d = compare_metric("p50", base, cand)
    assert d.delta_pct == pytest.approx(30, abs=3)
    assert d.significant and 10 < d.ci_pct[0] < 30 < d.ci_pct[1] < 50
    assert d.regression(10.0) and not d.regression(40.0)
    # the other way round it is an improvement, never a regression
    faster = compare_metric("p50", cand, base)
    assert faster.delta_pct < -20 and faster.slowdown_pct > -30
    assert faster.significant and not faster.regression(0.0)


def test_throughput_higher_is_better() -> None:
    slow, fast = closed_loop(lognormal(1, 6.5)), closed_loop(lognormal(2, 5.0))
    gain = compare_metric("throughput", slow, fast)
    assert gain.higher_is_better and gain.delta_pct > 20
    assert gain.slowdown_pct < -20 and gain.slowdown_ci_pct[1] < 0
    assert not gain.regression(0.0)
    loss = compare_metric("throughput", fast, slow)
    assert loss.delta_pct < -20 and loss.slowdown_pct > 20
    assert loss.regression(10.0)
    # samples/s counts the batch: 8 samples per inference at a third of the rate is better
    batched = closed_loop(lognormal(3, 15.0), batch=8)
    assert not compare_metric("throughput", fast, batched).regression(0.0)
    assert compare_metric("p50", fast, batched).regression(100.0)


def test_point_estimates_match_the_recorded_statistics() -> None:
    s = closed_loop(lognormal(4, 3.0, n=999), batch=4)
    stats = latency_stats(s.latencies_ns)
    assert metric_value("p50", s) == pytest.approx(stats.p50)
    assert metric_value("p99", s) == pytest.approx(stats.p99)
    assert metric_value("mean", s) == pytest.approx(stats.mean)
    tp = throughput(s.starts_ns, s.latencies_ns, 4)
    assert metric_value("throughput", s) == pytest.approx(tp.samples_per_s)


@pytest.mark.parametrize("n", [1, 2, 7, 1000, 1001])
@pytest.mark.parametrize("q", [0.0, 0.5, 0.9, 0.99, 1.0])
def test_row_quantile_is_numpys_linear_quantile(n: int, q: float) -> None:
    rows = np.random.default_rng(n).normal(size=(5, n))
    np.testing.assert_allclose(row_quantile(rows, q), np.quantile(rows, q, axis=1))


def test_blocks_widen_the_interval_of_a_drifting_series() -> None:
    """An AR(1) series (slow drift): an i.i.d. bootstrap (block 1) understates the noise."""
    rng = np.random.default_rng(0)
    x = np.empty(4000)
    x[0] = 0.0
    for i in range(1, x.size):
        x[i] = 0.95 * x[i - 1] + rng.normal()

    def width(block: int) -> float:
        means = block_bootstrap(x, lambda r: r.mean(axis=1), 1000, block, np.random.default_rng(1))
        lo, hi = np.quantile(means, [0.025, 0.975])
        return float(hi - lo)

    assert block_length(x.size) == 63
    assert width(block_length(x.size)) > 2.5 * width(1)


def test_a_million_samples_are_bootstrapped_on_a_capped_subset() -> None:
    base = closed_loop(lognormal(5, 4.0, n=1_000_000))
    cand = closed_loop(lognormal(6, 4.0 * 1.02, n=1_000_000))
    d = compare_metric("p50", base, cand, resamples=500)
    assert d.n == (1_000_000, 1_000_000) and d.n_bootstrap == (20_000, 20_000)
    assert d.ci_pct[0] < 2.0 < d.ci_pct[1] and d.ci_pct[0] < d.delta_pct < d.ci_pct[1]


def test_too_few_samples_or_unknown_metric_is_bad_input() -> None:
    one = closed_loop(np.array([5.0]))
    many = closed_loop(lognormal(1, 5.0, n=100))
    with pytest.raises(CompareError, match="1 latency samples"):
        compare_metric("p50", many, one)
    with pytest.raises(CompareError, match="unknown metric"):
        compare_metric("p42", many, many)


# -- ops, configs, accuracy ------------------------------------------------------------


def op(name: str, op_type: str, time_ms: float, share: float, nbytes: int) -> dict[str, object]:
    return {"name": name, "op_type": op_type, "time_ms": time_ms, "share": share, "bytes": nbytes}


def test_ops_match_by_name_and_renamed_nodes_are_removed_and_added() -> None:
    base = [
        op("conv1", "Conv", 2.0, 0.5, 1000),
        op("relu1", "Relu", 0.5, 0.125, 400),
        op("gemm", "Gemm", 1.5, 0.375, 800),
    ]
    cand = [
        op("conv1", "FusedConv", 2.2, 0.55, 1000),  # Conv+Relu fused, name kept
        op("gemm", "Gemm", 1.1, 0.275, 700),
        op("gemm_quant", "MatMulInteger", 0.8, 0.2, 300),
    ]
    diffs = {d.key: d for d in diff_ops(base, cand)}
    assert set(diffs) == {"conv1", "relu1", "gemm", "gemm_quant"}
    conv = diffs["conv1"]
    assert conv.status == "both" and conv.op_type == "Conv -> FusedConv"
    assert conv.delta_time_ms == pytest.approx(0.2) and conv.delta_time_pct == pytest.approx(10)
    assert conv.delta_share == pytest.approx(0.05) and conv.delta_bytes == 0
    assert diffs["gemm"].status == "both" and diffs["gemm"].delta_bytes == -100
    assert diffs["relu1"].status == "removed" and diffs["relu1"].delta_time_ms == -0.5
    assert diffs["relu1"].delta_time_pct is None
    assert diffs["gemm_quant"].status == "added" and diffs["gemm_quant"].cand_bytes == 300
    order = [d.key for d in diff_ops(base, cand)]
    assert order == ["gemm_quant", "relu1", "gemm", "conv1"]  # largest |Δ time| first
    by_type = {d.key: d.status for d in diff_ops(base, cand, key="op_type")}
    assert by_type == {
        "Conv": "removed",
        "Relu": "removed",
        "Gemm": "both",
        "FusedConv": "added",
        "MatMulInteger": "added",
    }


def test_config_and_accuracy_deltas() -> None:
    assert config_diff(
        {"precision": "fp32", "batch": 1, "fusion": "all"},
        {"precision": "int8-dynamic", "batch": 1, "fusion": "all"},
    ) == {"precision": ["fp32", "int8-dynamic"]}
    acc = accuracy_delta(
        {"cosine": 1.0, "max_abs_err": 0.0, "top1_agreement": 1.0},
        {"cosine": 0.99, "max_abs_err": 0.05, "top1_agreement": None},
    )
    assert acc["cosine"] == pytest.approx(-0.01) and acc["max_abs_err"] == pytest.approx(0.05)
    assert acc["top1_agreement"] is None and acc["mean_abs_err"] is None
    assert accuracy_delta(None, None)["cosine"] is None


# -- the command, on recorded sessions -------------------------------------------------


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return demo_session_once(tmp_path_factory)[0]


@pytest.fixture(scope="module")
def pair_note(tmp_path_factory: pytest.TempPathFactory) -> str | None:
    return demo_session_once(tmp_path_factory)[1]


def test_same_config_twice_passes_a_10_percent_gate(
    session: Path, pair_note: str | None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if pair_note:  # the machine's speed moved between the two runs, every try
        pytest.skip(f"no same-machine pair to compare: {pair_note}")
    out = tmp_path / "same.json"
    code = main(
        ["compare", f"{session}:1", f"{session}:2", "--max-regression", "10", "--json", str(out)]
    )
    stdout = capsys.readouterr().out
    assert code == 0, stdout
    data = json.loads(out.read_text())
    assert data["regression"] is False and data["metric"] == "p50"
    assert data["config_diff"] == {}
    lo, hi = data["ci_pct"]
    assert lo <= data["delta_pct"] <= hi
    assert data["ops"] and all(d["status"] == "both" for d in data["ops"])
    assert data["ops_added"] == [] and data["ops_removed"] == []
    assert "OK:" in stdout and "p50 ms" in stdout


def test_batch_8_against_batch_1_has_no_verdict(session: Path, tmp_path: Path) -> None:
    """Other shapes are other work: the delta is shown, the verdict withheld (exit 4)."""
    out = tmp_path / "batch.json"
    proc = opscope(
        "compare",
        f"{session}:1",
        f"{session}:3",
        "--metric",
        "p50",
        "--max-regression",
        "10",
        "--json",
        out,
    )
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert "NO VERDICT: not like for like (other inputs (image 1x3x64x64 vs image " in proc.stdout
    assert "REGRESSION" not in proc.stdout
    data = json.loads(out.read_text())
    assert data["regression"] is False and data["verdict"] == "unlike"
    assert data["ci_pct"][0] > 10  # the delta itself is still measured and shown
    assert data["config_diff"]["batch"] == [1, 8]
    assert data["config_diff"]["inputs"] == ["image 1x3x64x64", "image 8x3x64x64"]
    assert data["ops"] == []  # run 3 was not profiled
    assert set(data) >= {
        "metric",
        "baseline",
        "candidate",
        "delta_pct",
        "ci_pct",
        "regression",
        "config_diff",
        "accuracy_delta",
        "ops",
        "ops_added",
        "ops_removed",
    }
    # the other way round: no verdict either
    assert main(["compare", f"{session}:3", f"{session}:1", "--max-regression", "10"]) == 4


def test_fusion_off_shows_the_nodes_fusion_renamed(session: Path, tmp_path: Path) -> None:
    copy = tmp_path / "other.opscope"
    copy.write_bytes(session.read_bytes())
    out = tmp_path / "fusion.json"
    # different files; the candidate is FILE, i.e. its last run (4, fusion off)
    assert main(["compare", f"{copy}:1", str(session), "--json", str(out)]) in (0, 3)
    data = json.loads(out.read_text())
    assert data["candidate"]["run_id"] == 4 and data["config_diff"]["fusion"] == ["all", "off"]
    removed = {d["name"] for d in data["ops_removed"]}
    added = {d["op_type"] for d in data["ops_added"]}
    assert any(name.endswith("_nchwc") for name in removed)  # ORT's NCHWc layout nodes
    assert "BatchNormalization" in added and "BatchNormalization" in data["op_types_added"]
    assert all(math.isfinite(v) for v in data["ci_pct"])


def test_bad_input_exits_2(
    session: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    not_session = tmp_path / "notes.txt"
    not_session.write_text("hello")
    empty_run = tampered_copy(
        session, tmp_path / "empty.opscope", [("DELETE FROM latency WHERE run_id = ?", (2,))]
    )
    cases = [
        ([tmp_path / "missing.opscope", session], "file not found"),
        ([not_session, session], "not an OpScope session"),
        ([f"{session}:1", f"{session}:99"], "no run 99"),
        ([f"{empty_run}:1", f"{empty_run}:2"], "0 latency samples"),
    ]
    for refs, message in cases:
        assert main(["compare", *map(str, refs)]) == 2, refs
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1, err


def test_op_families_group_both_engines_op_types() -> None:
    from engine.measure.op_families import group_by_family, op_family

    assert op_family("FusedMatMul") == op_family("aten::linear") == "matmul"
    assert op_family("SkipLayerNormalization") == op_family("aten::layer_norm")
    assert op_family("MyCustomOp") == "MyCustomOp"  # in no family: keeps its name
    rows = group_by_family(
        [
            {"op_type": "MatMul", "time_ms": 1.0, "share": 0.25, "bytes": 10},
            {"op_type": "Gemm", "time_ms": 2.0, "share": 0.5, "bytes": 20},
            {"op_type": "Relu", "time_ms": 1.0, "share": 0.25, "bytes": 5},
        ]
    )
    assert rows[0] == {
        "name": "matmul",
        "op_type": "Gemm, MatMul",
        "time_ms": 3.0,
        "share": 0.75,
        "bytes": 30,
    }
    assert rows[1]["name"] == "activation"


def test_int8_op_types_match_their_float_family() -> None:
    """FP32 against INT8 static of the demo CNN (op-type rows as recorded on 2 vCPUs):
    Conv meets QLinearConv and Gemm meets QGemm instead of all reading added/removed."""
    from engine.analysis.run_compare import quantized_against_float
    from engine.measure.op_families import group_by_family

    fp32 = [
        op("Conv", "Conv", 1.026, 0.98, 4_400_000),
        op("MaxPool", "MaxPool", 0.003, 0.003, 160_000),
        op("Gemm", "Gemm", 0.002, 0.002, 5_600),
    ]
    int8 = [
        op("QLinearConv", "QLinearConv", 0.381, 0.889, 704_000),
        op("QuantizeLinear", "QuantizeLinear", 0.005, 0.012, 60_600),
        op("NhwcMaxPool", "NhwcMaxPool", 0.003, 0.007, 40_000),
        op("QGemm", "QGemm", 0.004, 0.009, 1_500),
    ]
    assert quantized_against_float(fp32, int8) and quantized_against_float(int8, fp32)
    assert not quantized_against_float(fp32, fp32)
    fused = [op("FusedConv", "FusedConv", 1.0, 1.0, 1)]  # fusion alone: op types stay
    assert not quantized_against_float(fp32, fused)
    diffs = {d.key: d for d in diff_ops(group_by_family(fp32), group_by_family(int8), "name")}
    assert diffs["conv"].status == "both" and diffs["conv"].op_type == "Conv -> QLinearConv"
    assert diffs["conv"].delta_time_pct == pytest.approx(-62.9, abs=0.1)
    assert diffs["matmul"].op_type == "Gemm -> QGemm"
    assert diffs["pooling"].status == "both"
    assert diffs["quantize"].status == "added"  # what INT8 really added
