"""The liveness pass (engine/measure/liveness.py) on hand-built graphs, peaks by hand."""

from __future__ import annotations

from engine.measure.liveness import liveness, weights_by_dtype
from engine.model.graph_io import NodeIO


def test_a_chain_with_a_skip_peaks_where_both_branches_are_alive() -> None:
    # x(100) -A-> a(200) -B-> b(50); C(a, b) -> y(10), the graph output
    nodes = [
        NodeIO("A", "MatMul", ("x", "w"), ("a",)),
        NodeIO("B", "Relu", ("a",), ("b",)),
        NodeIO("C", "Add", ("a", "b"), ("y",)),
    ]
    sizes = {"x": 100, "a": 200, "b": 50, "y": 10, "w": 10_000}
    live = liveness(nodes, sizes, ["x"], ["y"], weights=frozenset({"w"}))
    # A: x + a = 300; B: x + a + b = 350; C: x + a + b + y = 360, then a and b are freed
    assert live.timeline == (("A", 300.0), ("B", 350.0), ("C", 360.0))
    assert live.peak_bytes == 360.0 and live.at_node == "C"
    assert [(t.name, t.bytes, t.producer) for t in live.alive_at_peak] == [
        ("a", 200.0, "A"), ("x", 100.0, "input"), ("b", 50.0, "B"), ("y", 10.0, "C"),
    ]  # fmt: skip
    assert live.unknown == 0  # the weight is not an activation


def test_a_tensor_is_freed_after_its_last_reader() -> None:
    # x(10) -A-> big(1000) -B-> s(5) -C-> t(5) -D-> y(1): the peak is at B (10+1000+5)
    nodes = [
        NodeIO("A", "Conv", ("x",), ("big",)),
        NodeIO("B", "GlobalAveragePool", ("big",), ("s",)),
        NodeIO("C", "Flatten", ("s",), ("t",)),
        NodeIO("D", "Gemm", ("t",), ("y",)),
    ]
    sizes = {"x": 10, "big": 1000, "s": 5, "t": 5, "y": 1}
    live = liveness(nodes, sizes, ["x"], ["y"])
    assert [b for _, b in live.timeline] == [1010.0, 1015.0, 20.0, 16.0]
    assert live.at_node == "B" and live.peak_bytes == 1015.0


def test_unknown_sizes_are_counted_not_zeroed_silently() -> None:
    nodes = [NodeIO("A", "Custom", ("x", ""), ("u",)), NodeIO("B", "Relu", ("u",), ("y",))]
    live = liveness(nodes, {"x": 8, "y": 8}, ["x"], ["y"])
    assert live.unknown == 1 and live.peak_bytes == 16.0  # u unknown: left out, and said


def test_a_dead_output_lives_while_its_node_runs() -> None:
    nodes = [NodeIO("A", "Split", ("x",), ("p", "dead")), NodeIO("B", "Relu", ("p",), ("y",))]
    live = liveness(nodes, {"x": 4, "p": 2, "dead": 2, "y": 2}, ["x"], ["y"])
    assert live.timeline == (("A", 8.0), ("B", 8.0))


def test_weights_by_dtype_largest_first() -> None:
    assert weights_by_dtype([("float32", 400.0), ("int8", 100.0), ("float32", 40.0)]) == {
        "float32": 440.0,
        "int8": 100.0,
    }
