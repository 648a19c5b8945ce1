"""engine/measure/roofline.py against hand-computed values."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from engine.measure.op_stats import OpStat
from engine.measure.roofline import (
    attainable_gflops,
    bound_of,
    machine_balance,
    peak_fraction,
    roof_curve,
    roofline_fields,
)

GBPS, GFLOPS = 10.0, 100.0  # ridge at 10 FLOP/byte


def op(gflops: float | None, intensity: float | None, gbps: float | None = 1.0) -> OpStat:
    return OpStat(
        name="n",
        op_type="MatMul",
        provider="CPUExecutionProvider",
        calls=1,
        time_ms=1.0,
        p50_ms=1.0,
        p99_ms=1.0,
        share=0.5,
        bytes=1000,
        gbps=gbps,
        flops=None if gflops is None else 1,
        gflops=gflops,
        intensity=intensity,
    )


def test_balance_and_attainable() -> None:
    assert machine_balance(GBPS, GFLOPS) == 10.0
    assert attainable_gflops(2.0, GBPS, GFLOPS) == 20.0  # under the bandwidth roof
    assert attainable_gflops(50.0, GBPS, GFLOPS) == 100.0  # flat compute roof


def test_bound() -> None:
    assert bound_of(2.0, GBPS, GFLOPS) == "memory"
    assert bound_of(10.0, GBPS, GFLOPS) == "compute"
    assert bound_of(64.0, GBPS, GFLOPS) == "compute"
    assert bound_of(None, GBPS, GFLOPS) == "memory"


def test_peak_fraction() -> None:
    assert peak_fraction(op(5.0, 2.0), GBPS, GFLOPS) == pytest.approx(0.25)  # 5 of 20
    assert peak_fraction(op(80.0, 64.0), GBPS, GFLOPS) == pytest.approx(0.8)  # 80 of 100
    # no FLOP model: bandwidth only
    assert peak_fraction(op(None, None, gbps=2.5), GBPS, GFLOPS) == pytest.approx(0.25)
    assert peak_fraction(op(None, None, gbps=None), GBPS, GFLOPS) is None


def test_fields() -> None:
    assert roofline_fields(op(80.0, 64.0), GBPS, GFLOPS) == {
        "bound": "compute",
        "peak_fraction": 0.8,
    }
    f = roofline_fields(replace(op(None, None), gbps=5.0), GBPS, GFLOPS)
    assert f == {"bound": "memory", "peak_fraction": 0.5}


def test_roof_curve_corners() -> None:
    xs, ys = roof_curve(GBPS, GFLOPS, lo=0.1, hi=1000.0)
    assert xs == [0.1, 10.0, 1000.0]
    assert ys == [pytest.approx(1.0), 100.0, 100.0]


def test_profile_json_has_roofline_and_bench_does_not(tmp_path: Path) -> None:
    from tests.conftest import DEMO_CNN
    from tests.test_cli import FAST, opscope

    out = tmp_path / "p.json"
    proc = opscope("profile", DEMO_CNN, *FAST, "--runs", "3", "--json", out)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    machine = data["machine"]
    assert machine["peak_gbps"] > 0 and machine["peak_gflops"] > 0
    for row in data["ops"] + data["op_types"]:
        assert row["bound"] in ("memory", "compute")
        if row["intensity"] is None:
            assert row["bound"] == "memory"
    conv = next(r for r in data["op_types"] if r["intensity"])
    ridge = machine["peak_gflops"] / machine["peak_gbps"]
    assert conv["bound"] == ("compute" if conv["intensity"] >= ridge else "memory")
    assert "bound" in proc.stdout and "roofline   peaks" in proc.stdout
    bench = tmp_path / "b.json"
    proc = opscope("bench", DEMO_CNN, *FAST, "--json", bench)
    assert proc.returncode == 0, proc.stderr
    assert "machine" not in json.loads(bench.read_text())
