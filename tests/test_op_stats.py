"""Aggregation over real profiles (warm-up dropped) and over small hand-built traces."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from engine.measure.op_stats import (
    OpStat,
    coverage,
    node_stats,
    op_type_stats,
    slow_run_attribution,
    stat_to_json,
)
from engine.measure.op_trace import NodeEvent, ProfileTrace, RunSpan, parse_ort_profile

FIXTURES = Path(__file__).resolve().parent / "fixtures"
NAMES = ("mlp", "conv_nchwc", "if_loop")


def kept(name: str) -> ProfileTrace:
    return parse_ort_profile(FIXTURES / f"ort_profile_{name}.json").drop_runs(1)


def by_name(stats: list[OpStat]) -> dict[str, OpStat]:
    return {s.name: s for s in stats}


# --- invariants on the real fixtures --------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_shares_sum_to_one_and_rows_are_sorted(name: str) -> None:
    for stats in (node_stats(kept(name)), op_type_stats(kept(name))):
        assert math.fsum(s.share for s in stats) == pytest.approx(1.0)
        times = [s.time_ms for s in stats]
        assert times == sorted(times, reverse=True)
        assert all(0.0 <= s.share <= 1.0 and s.p50_ms <= s.p99_ms for s in stats)


@pytest.mark.parametrize("name", NAMES)
def test_op_type_time_is_the_sum_of_its_nodes(name: str) -> None:
    nodes = node_stats(kept(name))
    for group in op_type_stats(kept(name)):
        members = [n for n in nodes if n.op_type == group.name]
        assert group.op_type == group.name
        assert group.calls == len(members)
        assert group.time_ms == pytest.approx(sum(n.time_ms for n in members))
        assert group.bytes == pytest.approx(sum(n.bytes for n in members), abs=len(members))


@pytest.mark.parametrize(
    ("name", "expected", "with_warmup"),
    [("mlp", 0.9270, 0.9191), ("conv_nchwc", 0.9136, 0.8958), ("if_loop", 0.9673, 0.9633)],
)
def test_coverage_of_the_fixtures(name: str, expected: float, with_warmup: float) -> None:
    assert 0.5 < coverage(kept(name)) < 1.0
    assert coverage(kept(name)) == pytest.approx(expected, abs=5e-5)
    full = parse_ort_profile(FIXTURES / f"ort_profile_{name}.json")
    assert coverage(full) == pytest.approx(with_warmup, abs=5e-5)


@pytest.mark.parametrize("name", NAMES)
def test_mean_node_time_adds_up_to_coverage(name: str) -> None:
    trace = kept(name)
    mean_run_ms = sum(r.dur_us for r in trace.runs) / len(trace.runs) / 1e3
    total_ms = sum(s.time_ms for s in node_stats(trace))
    assert total_ms == pytest.approx(coverage(trace) * mean_run_ms)


# --- snapshots ------------------------------------------------------------------------------


def test_mlp_matmul_row() -> None:
    mm1 = by_name(node_stats(kept("mlp")))["mm1"]
    assert (mm1.op_type, mm1.provider, mm1.calls) == ("MatMul", "CPUExecutionProvider", 1)
    assert mm1.time_ms == pytest.approx((382 + 358 + 320 + 318) / 4 / 1e3)
    assert mm1.p50_ms == pytest.approx((320 + 358) / 2 / 1e3)
    assert mm1.p99_ms == pytest.approx(0.381280)  # linear interpolation between 358 and 382
    weight = 256 * 512 * 4  # pre-packed by ORT, so missing from the profile's sizes
    assert mm1.bytes == 65536 + 0 + 131072 + weight
    assert mm1.flops == 16_777_216
    assert mm1.gflops == pytest.approx(16_777_216 / 0.3445e-3 / 1e9)
    assert mm1.gbps == pytest.approx((196_608 + weight) / 0.3445e-3 / 1e9)
    assert mm1.intensity == pytest.approx(16_777_216 / (196_608 + weight))
    assert node_stats(kept("mlp"))[0] == mm1  # the slowest node of the MLP


def test_transpose_moves_bytes_but_no_flops() -> None:
    tr = by_name(node_stats(kept("mlp")))["tr"]
    assert (tr.flops, tr.gflops, tr.intensity) == (0, 0.0, 0.0)
    assert tr.gbps is not None and tr.gbps > 0


def test_conv_op_types() -> None:
    types = by_name(op_type_stats(kept("conv_nchwc")))
    assert list(types) == ["Conv", "MaxPool", "ReorderInput", "ReorderOutput"]
    conv = types["Conv"]
    assert conv.calls == 3 and conv.provider == "CPUExecutionProvider"
    assert conv.flops == 9_469_952 + 18_907_136 + 2_097_152
    assert types["ReorderInput"].flops == 0


def test_subgraph_nodes_and_loop_iterations() -> None:
    stats = by_name(node_stats(kept("if_loop")))
    body = stats["loop > body_mm"]
    assert body.calls == 3  # three Loop iterations per inference
    # runs 1-4 of the file: per-inference sums of the three iterations
    sums_us = [173 + 173 + 159, 125 + 128 + 134, 180 + 122 + 118, 123 + 122 + 120]
    assert body.time_ms == pytest.approx(sum(sums_us) / 4 / 1e3)
    assert body.flops == 3 * 2 * 64 * 256 * 256
    # the then-branch ran in 2 of the 4 kept inferences: the others count as 0
    then_mm = stats["branch > then_mm"]
    assert then_mm.calls == 1 and then_mm.time_ms == pytest.approx((67 + 64) / 4 / 1e3)
    assert then_mm.flops == 2 * 64 * 256 * 128 // 2
    # containers are charged their self time only
    assert stats["loop"].time_ms == pytest.approx((47 + 47 + 62 + 54) / 4 / 1e3)
    assert stats["branch"].time_ms == pytest.approx((14 + 13 + 16 + 17) / 4 / 1e3)
    matmul = by_name(op_type_stats(kept("if_loop")))["MatMul"]
    assert matmul.calls == 3  # loop > body_mm, branch > then_mm, branch > else_mm


def test_slow_run_attribution_on_a_real_profile() -> None:
    # kept run 0 (519 us) is the slowest: c2_nchwc took 230 us against a median of 165 us
    blame = slow_run_attribution(kept("conv_nchwc"))
    assert blame[0] == ("c2_nchwc", pytest.approx(0.065))
    assert [name for name, _ in blame] == [
        "c2_nchwc",
        "r1_nchwc",
        "ReorderOutput",
        "ReorderInput",
        "p_nchwc",
    ]


def test_stat_to_json_keys_and_types() -> None:
    for stat in node_stats(kept("if_loop")) + op_type_stats(kept("conv_nchwc")):
        row = stat_to_json(stat)
        assert list(row) == [
            "name",
            "op_type",
            "provider",
            "calls",
            "time_ms",
            "p50_ms",
            "p99_ms",
            "share",
            "bytes",
            "gbps",
            "flops",
            "gflops",
            "intensity",
        ]
        assert json.loads(json.dumps(row)) == row
        assert all(type(v) in (str, int, float, type(None)) for v in row.values())


# --- hand-built traces ------------------------------------------------------------------------


def event(run: int, name: str, dur: float, op: str = "Relu", provider: str = "CPU") -> NodeEvent:
    shapes = (("float", (10, 10)),)
    return NodeEvent(run, name, op, provider, 0.0, dur, shapes, shapes, 400, 0, 400)


def trace_of(run_us: list[float], *nodes: NodeEvent) -> ProfileTrace:
    runs = tuple(RunSpan(i, 1000.0 * i, d) for i, d in enumerate(run_us))
    return ProfileTrace(runs=runs, nodes=nodes)


def test_slow_runs_are_blamed_on_the_node_that_slowed_down() -> None:
    runs = [300.0, 310.0, 290.0, 800.0, 305.0]
    nodes = [event(r, "steady", 100.0) for r in range(5)]
    nodes += [event(r, "spiky", 600.0 if r == 3 else 100.0) for r in range(5)]
    trace = trace_of(runs, *nodes)
    assert slow_run_attribution(trace) == [("spiky", pytest.approx(0.5))]
    assert slow_run_attribution(trace, quantile=0.0) == [("spiky", pytest.approx(0.1))]
    with pytest.raises(ValueError, match="quantile"):
        slow_run_attribution(trace, quantile=99)


def test_missing_flops_and_zero_time_give_none() -> None:
    trace = trace_of(
        [50.0, 50.0],
        event(0, "custom", 10.0, op="MyCustomOp"),
        event(1, "custom", 30.0, op="MyCustomOp"),
        event(0, "relu", 0.0),
        event(1, "relu", 0.0),
        event(0, "copy", 5.0, op="MemcpyToHost", provider="CUDA"),
        event(1, "copy2", 5.0, op="MemcpyToHost", provider="CPU"),
    )
    stats = by_name(node_stats(trace))
    custom = stats["custom"]
    assert custom.time_ms == pytest.approx(0.02) and custom.p50_ms == pytest.approx(0.02)
    assert (custom.flops, custom.gflops, custom.intensity) == (None, None, None)
    assert custom.gbps == pytest.approx(800 / 20e-6 / 1e9)
    relu = stats["relu"]
    assert (relu.time_ms, relu.share, relu.gbps, relu.gflops) == (0.0, 0.0, None, None)
    assert relu.flops == 100
    copy = by_name(op_type_stats(trace))["MemcpyToHost"]
    assert (copy.provider, copy.calls, copy.time_ms) == ("CPU,CUDA", 2, pytest.approx(0.005))
    assert stats["copy"].time_ms == pytest.approx(0.0025)  # ran in one of the two inferences
    assert coverage(trace) == pytest.approx((40 + 10) / 100)


def test_empty_trace() -> None:
    empty = ProfileTrace(runs=(), nodes=())
    assert node_stats(empty) == [] and op_type_stats(empty) == []
    assert coverage(empty) == 0.0 and slow_run_attribution(empty) == []


def test_prepacked_matmul_weights_are_counted() -> None:
    """ORT leaves pre-packed MatMul weights out of the profile; bytes must include them."""
    from engine.measure.op_stats import prepacked_weight_bytes
    from engine.measure.op_trace import NodeEvent

    def ev(op: str, ins: tuple, outs: tuple) -> NodeEvent:  # type: ignore[type-arg]
        return NodeEvent(0, "n", op, "CPUExecutionProvider", 0.0, 1.0, ins, outs, 0, 0, 0)

    packed = ev("MatMul", (("float", (1, 128, 64)),), (("float", (1, 128, 256)),))
    assert prepacked_weight_bytes(packed) == 64 * 256 * 4
    listed = ev(
        "MatMul", (("float", (1, 128, 64)), ("float", (64, 256))), (("float", (1, 128, 256)),)
    )
    assert prepacked_weight_bytes(listed) == 0
    attention = ev(
        "MatMul",
        (("float", (1, 4, 128, 32)), ("float", (1, 4, 32, 128))),
        (("float", (1, 4, 128, 128)),),
    )
    assert prepacked_weight_bytes(attention) == 0
    int8 = ev("MatMulIntegerToFloat", (("uint8", (1, 16, 64)),), (("float", (1, 16, 32)),))
    assert prepacked_weight_bytes(int8) == 64 * 32
    assert prepacked_weight_bytes(ev("Relu", (("float", (4,)),), (("float", (4,)),))) == 0


def test_a_gather_reads_only_the_rows_it_outputs() -> None:
    """An embedding Gather of 128 tokens from a 30522 x 384 table reads 128 rows, not the
    47 MB table the profile lists as its parameter size (MiniLM read "492 GB/s, >roof")."""
    from engine.measure.op_stats import node_bytes
    from engine.measure.op_trace import NodeEvent

    table, rows = 30522 * 384 * 4, 128 * 384 * 4
    embed = NodeEvent(
        0, "word_embeddings/Gather", "Gather", "CPUExecutionProvider", 0.0, 1.0,
        (("float", (30522, 384)), ("int64", (1, 128))), (("float", (1, 128, 384)),),
        128 * 8, table, rows,
    )  # fmt: skip
    assert node_bytes(embed) == 128 * 8 + rows + rows
    # data from an activation (a Shape's output), index a constant: half the data read
    shape = NodeEvent(
        0, "Gather_1", "Gather", "CPUExecutionProvider", 0.0, 1.0,
        (("int64", (2,)), ("int64", ())), (("int64", ()),), 16, 8, 8,
    )  # fmt: skip
    assert node_bytes(shape) == 8 + 8 + 8
    # unknown shapes: the profile's sizes as they are
    unknown = NodeEvent(0, "g", "Gather", "CPUExecutionProvider", 0.0, 1.0, (), (), 10, 20, 30)
    assert node_bytes(unknown) == 60
    relu = NodeEvent(
        0, "r", "Relu", "CPUExecutionProvider", 0.0, 1.0,
        (("float", (4,)),), (("float", (4,)),), 16, 0, 16,
    )  # fmt: skip
    assert node_bytes(relu) == 32
