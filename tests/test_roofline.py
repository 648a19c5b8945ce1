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
    time_ms: float = 1.0,
) -> OpStat:
    return OpStat(
        name="n",
        op_type=op_type,
        provider="CPUExecutionProvider",
        calls=calls,
        time_ms=time_ms,
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
        assert row["bound"] in ("memory", "compute", "overhead") and row["level"] in levels
        if row["intensity"] is None:
            assert row["bound"] in ("memory", "overhead")
        if row["op_type"] in ("Reshape", "Flatten", "Shape"):  # they move no data
            assert row["gbps"] is None and row["bound"] == "overhead"
    assert "bound" in proc.stdout and "roofline   " in proc.stdout and "DRAM" in proc.stdout
    bench = tmp_path / "b.json"
    proc = opscope("bench", DEMO_CNN, *FAST, "--json", bench)
    assert proc.returncode == 0, proc.stderr
    machine = json.loads(bench.read_text()).get("machine", {})  # its contention, no roofs
    assert "roofs" not in machine and "peak_gbps" not in machine


def test_shape_only_ops_are_overhead_with_no_fraction() -> None:
    """A Reshape read 'L2 94%, 154 GB/s': its output shares its input's buffer, so the bytes
    it 'moved' over its time is no bandwidth (a session recorded before still has a GB/s)."""
    reshape = place(op(None, None, gbps=154.0, nbytes=32 * 1024, op_type="Reshape"), LEVELS)
    assert reshape.bound == "overhead" and reshape.fraction is None
    assert reshape.label == "overhead"
    assert place(op(None, None, gbps=None, op_type="Gather"), LEVELS).label == "overhead"
    assert roofline_fields(op(None, None, op_type="Unsqueeze"), LEVELS)["bound"] == "overhead"


def test_tiny_ops_far_below_their_roof_are_overhead() -> None:
    """SkipLayerNorm read 'compute 1-3%': an op the roof would finish within one fixed
    per-op cost, taking at least twice that, is bound by the overhead, not by a roof."""
    from engine.measure.roofline import FIXED_COST_US

    # 2 us at 1% of L1: the roof would take 0.02 us: overhead, its fraction kept for sorting
    tiny = place(op(None, None, gbps=2.0, nbytes=4096, time_ms=0.002), LEVELS)
    assert tiny.bound == "overhead" and tiny.label == "overhead"
    assert tiny.fraction == pytest.approx(0.01)
    # the same rate over 10 ms: the roof's work is 100 us, far above any fixed cost: slow,
    # and the table says how slow
    slow = place(op(None, None, gbps=2.0, nbytes=4096, time_ms=10.0), LEVELS)
    assert slow.bound == "memory" and slow.label == "L1 1%"
    # small but close to its roof: the roof explains it
    near = place(op(None, None, gbps=150.0, nbytes=4096, time_ms=0.002), LEVELS)
    assert near.label == "L1 75%"
    # compute: 1% of the fp32 roof for 3 us (roof time 0.03 us) vs for 5 ms
    assert place(op(1.0, 64.0, nbytes=4096, time_ms=0.003), LEVELS).label == "overhead"
    assert place(op(1.0, 64.0, nbytes=4096, time_ms=5.0), LEVELS).label == "compute 1%"
    # per call: 100 calls of 3 us each are 100 small ops, not one 300 us op
    many = op(None, None, gbps=2.0, nbytes=100 * 4096, calls=100, time_ms=0.3)
    assert place(many, LEVELS).bound == "overhead"
    # small work, but 950 us for it (a preempted SkipLayerNorm on a busy machine): far past
    # what a fixed cost explains, so it keeps its roof and its low fraction
    slow_small = place(op(None, None, gbps=0.2, nbytes=193_500, time_ms=0.95), LEVELS)
    assert slow_small.bound == "memory" and slow_small.label == "L2 0%"
    # at 1% of L1: 12 us is within 3x of a fixed cost plus the work (15.4 us), 25 us is not
    assert place(op(None, None, gbps=2.0, nbytes=4096, time_ms=0.012), LEVELS).label == ("overhead")
    assert place(op(None, None, gbps=2.0, nbytes=4096, time_ms=0.025), LEVELS).label == "L1 1%"
    # the edge: roof time just under the fixed cost, at just under half the roof
    edge_ms = FIXED_COST_US * 0.99 / 0.49 / 1e3
    assert place(op(None, None, gbps=98.0, nbytes=4096, time_ms=edge_ms), LEVELS).label == (
        "overhead"
    )


def test_ops_that_move_no_data_carry_no_rates() -> None:
    """op_stats gives a Reshape, and arithmetic on int64 shape vectors, no GB/s (nor FLOP
    rate or intensity); the bytes stay (they are what the profile listed)."""
    from engine.measure.op_stats import moves_no_data, node_stats
    from engine.measure.op_trace import NodeEvent, ProfileTrace, RunSpan, Shapes

    def node(name: str, op_type: str, ins: Shapes, outs: Shapes) -> NodeEvent:
        return NodeEvent(run_index=0, name=name, op_type=op_type,
                         provider="CPUExecutionProvider", start_us=0.0, dur_us=10.0,
                         input_shapes=ins, output_shapes=outs, activation_bytes=4096,
                         parameter_bytes=0, output_bytes=4096)  # fmt: skip

    f32: Shapes = (("float", (32, 32)),)
    reshape = node("r", "Reshape", (*f32, ("int64", (2,))), f32)
    gather = node("g", "Gather", (("int64", (4,)), ("int64", ())), (("int64", ()),))
    add = node("a", "Add", (*f32, *f32), f32)
    embed = node("e", "Gather", (("float", (1000, 32)), ("int64", (8,))), (("float", (8, 32)),))
    assert moves_no_data(reshape) and moves_no_data(gather)
    assert not moves_no_data(add) and not moves_no_data(embed)
    trace = ProfileTrace(runs=(RunSpan(0, 0.0, 100.0),), nodes=(reshape, gather, add, embed))
    stats = {s.name: s for s in node_stats(trace)}
    assert stats["r"].gbps is None and stats["g"].gbps is None and stats["r"].bytes > 0
    assert stats["a"].gbps is not None and stats["e"].gbps is not None
