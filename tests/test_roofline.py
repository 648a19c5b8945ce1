"""engine/measure/roofline.py against hand-computed values."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest

from engine.measure.op_stats import OpStat
from engine.measure.roofline import (
    MemoryRoof,
    Roofs,
    above_roof,
    attainable_gflops,
    place,
    roof_curve,
    roofline_fields,
    simple_roofs,
)

GBPS, GFLOPS = 10.0, 100.0  # ridge at 10 FLOP/byte
ROOFS = simple_roofs(GBPS, GFLOPS)
# a hierarchy: L1 64 KiB at 200 GB/s, L2 2 MiB at 100, DRAM 10; fp32 100 GFLOP/s, int8 400
LEVELS = Roofs(
    (MemoryRoof("L1", 64 * 1024, 200.0), MemoryRoof("L2", 2 * 2**20, 100.0),
     MemoryRoof("DRAM", math.inf, 10.0)),
    100.0,
    400.0,
)  # fmt: skip


def op(
    gflops: float | None,
    intensity: float | None,
    gbps: float | None = 1.0,
    nbytes: int = 1000,
    op_type: str = "MatMul",
    calls: int = 1,
) -> OpStat:
    return OpStat(
        name="n",
        op_type=op_type,
        provider="CPUExecutionProvider",
        calls=calls,
        time_ms=1.0,
        p50_ms=1.0,
        p99_ms=1.0,
        share=0.5,
        bytes=nbytes,
        gbps=gbps,
        flops=None if gflops is None else 1,
        gflops=gflops,
        intensity=intensity,
    )


def test_attainable() -> None:
    assert attainable_gflops(2.0, GBPS, GFLOPS) == 20.0  # under the bandwidth roof
    assert attainable_gflops(50.0, GBPS, GFLOPS) == 100.0  # flat compute roof


def test_bound_and_fraction_against_one_roof() -> None:
    assert place(op(5.0, 2.0), ROOFS).bound == "memory"
    assert place(op(5.0, 2.0), ROOFS).fraction == pytest.approx(0.25)  # 5 of 20
    assert place(op(80.0, 10.0), ROOFS).bound == "compute"
    assert place(op(80.0, 64.0), ROOFS).fraction == pytest.approx(0.8)  # 80 of 100
    # no FLOP model: bandwidth only
    assert place(op(None, None, gbps=2.5), ROOFS).fraction == pytest.approx(0.25)
    assert place(op(None, None, gbps=2.5), ROOFS).bound == "memory"
    assert place(op(None, None, gbps=None), ROOFS).fraction is None


def test_an_op_is_placed_against_the_level_its_working_set_fits_in() -> None:
    small = place(op(None, None, gbps=150.0, nbytes=32 * 1024), LEVELS)  # fits L1
    assert small.level.name == "L1" and small.label == "L1 75%"
    mid = place(op(None, None, gbps=50.0, nbytes=1 * 2**20), LEVELS)  # fits L2
    assert mid.level.name == "L2" and mid.label == "L2 50%"
    big = place(op(None, None, gbps=5.0, nbytes=64 * 2**20), LEVELS)
    assert big.level.name == "DRAM" and big.label == "DRAM 50%"
    # the working set is one execution's: 8 calls of 16 KiB each fit L1
    assert place(op(None, None, nbytes=8 * 16 * 1024, calls=8), LEVELS).level.name == "L1"
    edge = place(op(None, None, nbytes=64 * 1024), LEVELS)  # exactly the capacity: fits
    assert edge.level.name == "L1"


def test_integer_ops_are_placed_against_the_integer_roof() -> None:
    """An INT8 QLinearConv at 300 GOP/s read '>roof' against the 100 GFLOP/s float roof."""
    conv = place(op(300.0, 100.0, nbytes=3 * 2**20, op_type="QLinearConv"), LEVELS)
    assert conv.compute_name == "int8" and conv.compute == 400.0
    assert conv.bound == "compute" and conv.label == "int8 75%"
    fp = place(op(80.0, 100.0, nbytes=3 * 2**20), LEVELS)
    assert fp.compute_name == "fp32" and fp.label == "compute 80%"
    assert place(op(1.0, 1.0, op_type="MatMulInteger"), LEVELS).compute_name == "int8"
    assert place(op(1.0, 1.0, op_type="MatMulNBits"), LEVELS).compute_name == "fp32"
    # no integer roof measured: the float one, as before
    assert place(op(1.0, 1.0, op_type="QLinearConv"), ROOFS).compute_name == "fp32"


def test_ops_above_their_roofs_are_found() -> None:
    fine = op(80.0, 64.0)
    over = op(150.0, 64.0)  # 150 of 100: the roofs were measured on a busier machine
    just = op(109.0, 64.0)  # within 10%: noise
    assert above_roof([fine, over, just], ROOFS) == [over]


def test_fields() -> None:
    assert roofline_fields(op(80.0, 64.0), ROOFS) == {
        "bound": "compute",
        "level": "DRAM",
        "compute_roof": "fp32",
        "peak_fraction": 0.8,
    }
    f = roofline_fields(replace(op(None, None), gbps=5.0), ROOFS)
    assert f["bound"] == "memory" and f["peak_fraction"] == 0.5


def test_roofs_describe_themselves() -> None:
    assert LEVELS.describe() == (
        "L1 200 GB/s (64 KiB) · L2 100 GB/s (2 MiB) · DRAM 10 GB/s; fp32 100 GFLOP/s, "
        "int8 400 GOP/s"
    )
    assert LEVELS.to_json()["memory"][-1] == {"name": "DRAM", "bytes": None, "gbps": 10.0}


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
    levels = [m["name"] for m in machine["roofs"]["memory"]]
    assert levels[-1] == "DRAM"
    for row in data["ops"] + data["op_types"]:
        assert row["bound"] in ("memory", "compute") and row["level"] in levels
        if row["intensity"] is None:
            assert row["bound"] == "memory"
    assert "bound" in proc.stdout and "roofline   " in proc.stdout and "DRAM" in proc.stdout
    bench = tmp_path / "b.json"
    proc = opscope("bench", DEMO_CNN, *FAST, "--json", bench)
    assert proc.returncode == 0, proc.stderr
    assert "machine" not in json.loads(bench.read_text())
