"""Snapshot tests of the ORT profile parser on real ONNX Runtime 1.31 profiles.

The fixtures come from tests/fixtures/make_profiles.py (5 inferences each, CPU provider).
Durations below were read from the committed files; rerunning the generator changes them.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from engine.measure.op_trace import (
    NodeEvent,
    ProfileFormatError,
    ProfileTrace,
    RunSpan,
    parse_ort_profile,
)

FIXTURES = Path(__file__).resolve().parent / "fixtures"
MLP = FIXTURES / "ort_profile_mlp.json"
CONV = FIXTURES / "ort_profile_conv_nchwc.json"
IF_LOOP = FIXTURES / "ort_profile_if_loop.json"

MLP_NAMES = ["mm1", "add1", "relu1", "gemm2", "ln", "Sigmoid_5", "tr", "sm"]
MLP_OPS = ["MatMul", "Add", "Relu", "Gemm", "LayerNormalization", "Sigmoid", "Transpose", "Softmax"]


def _node(trace: ProfileTrace, run: int, name: str) -> NodeEvent:
    (found,) = [n for n in trace.run_nodes(run) if n.qualified_name == name]
    return found


# --- the MLP at ORT_DISABLE_ALL ---------------------------------------------------------


def test_mlp_runs_are_the_model_run_events() -> None:
    trace = parse_ort_profile(MLP)
    assert trace.runs[0] == RunSpan(run_index=0, start_us=5807.0, dur_us=1235.0)
    assert [r.dur_us for r in trace.runs] == [1235.0, 706.0, 656.0, 594.0, 566.0]
    assert [r.run_index for r in trace.runs] == [0, 1, 2, 3, 4]


def test_mlp_every_run_has_every_node_in_order() -> None:
    trace = parse_ort_profile(MLP)
    assert len(trace.nodes) == 5 * 8
    for run in range(5):
        nodes = trace.run_nodes(run)
        assert [n.name for n in nodes] == MLP_NAMES  # "_kernel_time" stripped
        assert [n.op_type for n in nodes] == MLP_OPS
        assert {n.provider for n in nodes} == {"CPUExecutionProvider"}
        assert all(n.parent == "" and n.self_us == n.dur_us for n in nodes)


def test_same_node_in_different_runs_stays_separate() -> None:
    trace = parse_ort_profile(MLP)
    mm1 = [n for n in trace.nodes if n.name == "mm1"]
    assert [n.run_index for n in mm1] == [0, 1, 2, 3, 4]
    assert [n.dur_us for n in mm1] == [665.0, 382.0, 358.0, 320.0, 318.0]


def test_mlp_snapshot_of_one_node() -> None:
    mm1 = _node(parse_ort_profile(MLP), 0, "mm1")
    assert mm1.start_us == 26.0  # ts 5833 - model_run ts 5807
    assert mm1.dur_us == 665.0
    # MatMul's constant B is pre-packed: ORT lists only A and counts no parameter bytes
    assert mm1.input_shapes == (("float", (64, 256)),)
    assert mm1.output_shapes == (("float", (64, 512)),)
    assert (mm1.activation_bytes, mm1.parameter_bytes, mm1.output_bytes) == (65536, 0, 131072)
    assert mm1.node_index == 0


def test_mlp_sizes_are_parsed_from_strings() -> None:
    trace = parse_ort_profile(MLP)
    gemm = _node(trace, 2, "gemm2")
    assert gemm.input_shapes == (("float", (64, 512)), ("float", (128,)))  # A and bias C
    assert gemm.parameter_bytes == 128 * 4
    assert _node(trace, 2, "add1").parameter_bytes == 512 * 4
    assert _node(trace, 2, "ln").parameter_bytes == 2 * 128 * 4
    assert _node(trace, 2, "tr").output_shapes == (("float", (128, 64)),)


def test_nodes_lie_inside_their_run() -> None:
    for path in (MLP, CONV, IF_LOOP):
        trace = parse_ort_profile(path)
        for node in trace.nodes:
            run = trace.runs[node.run_index]
            assert node.start_us >= 0
            assert node.start_us + node.dur_us <= run.dur_us


# --- the Conv model at ORT_ENABLE_ALL: NCHWc layout and reorder kernels --------------------


def test_conv_at_level_all_runs_nchwc_kernels_and_reorders() -> None:
    trace = parse_ort_profile(CONV)
    assert len(trace.runs) == 5 and len(trace.nodes) == 5 * 6
    nodes = trace.run_nodes(3)
    assert [n.name for n in nodes] == [
        "ReorderInput",
        "r1_nchwc",  # conv1 + relu1 fused, named after its output tensor "r1"
        "c2_nchwc",  # conv2 with the residual Add fused in as a Sum input
        "c3_nchwc",
        "p_nchwc",
        "ReorderOutput",  # also absorbs the channels-last Transpose
    ]
    assert [n.op_type for n in nodes] == [
        "ReorderInput",
        "Conv",
        "Conv",
        "Conv",
        "MaxPool",
        "ReorderOutput",
    ]


def test_conv_nchwc_shapes_and_durations() -> None:
    trace = parse_ort_profile(CONV)
    c2 = _node(trace, 0, "c2_nchwc")
    assert c2.dur_us == 235.0 and c2.start_us == 269.0
    assert c2.input_shapes == (
        ("float", (1, 32, 32, 32)),
        ("float", (32, 32, 3, 3)),
        ("float", (1, 32, 32, 32)),  # the fused Sum operand
    )
    assert (c2.activation_bytes, c2.parameter_bytes, c2.output_bytes) == (262144, 36864, 131072)
    out = _node(trace, 0, "ReorderOutput")
    assert out.output_shapes == (("float", (1, 16, 16, 32)),)
    assert [_node(trace, r, "ReorderInput").dur_us for r in range(5)] == [85, 29, 28, 23, 26]


# --- If and Loop: subgraph nodes nest inside the control-flow node -----------------------


def test_if_branch_nodes_carry_their_parent() -> None:
    trace = parse_ort_profile(IF_LOOP)
    then_runs = {n.run_index for n in trace.nodes if n.name == "then_mm"}
    else_runs = {n.run_index for n in trace.nodes if n.name == "else_mm"}
    assert then_runs == {0, 2, 4} and else_runs == {1, 3}  # the input sign picks the branch
    assert {n.parent for n in trace.nodes if n.name.startswith(("then_", "else_"))} == {"branch"}
    assert _node(trace, 1, "branch > else_sig").qualified_name == "branch > else_sig"


def test_loop_body_runs_once_per_iteration() -> None:
    trace = parse_ort_profile(IF_LOOP)
    assert [len(trace.run_nodes(r)) for r in range(5)] == [15] * 5
    body = [n for n in trace.run_nodes(0) if n.parent == "loop"]
    assert [n.name for n in body] == ["body_mm", "body_tanh", "body_cond"] * 3
    assert [n.dur_us for n in body if n.name == "body_mm"] == [181.0, 230.0, 173.0]
    # node_index restarts in each subgraph: body_cond is 0 like the top-level rsum
    assert {n.node_index for n in body if n.name == "body_cond"} == {0}


def test_control_flow_self_time_excludes_its_subgraph() -> None:
    trace = parse_ort_profile(IF_LOOP)
    branch = _node(trace, 0, "branch")
    assert branch.dur_us == 145.0 and branch.self_us == 145.0 - 105.0 - 16.0
    loop = _node(trace, 0, "loop")
    body = sum(n.dur_us for n in trace.run_nodes(0) if n.parent == "loop")
    assert loop.dur_us == 703.0 and loop.self_us == 703.0 - body == 62.0
    # summing raw durations would count the bodies twice, beyond the whole inference
    run = trace.runs[0]
    assert sum(n.dur_us for n in trace.run_nodes(0)) > run.dur_us
    assert sum(n.self_us for n in trace.run_nodes(0)) <= run.dur_us


# --- drop_runs, inputs ------------------------------------------------------------------


def test_drop_runs_discards_warmup_and_renumbers() -> None:
    trace = parse_ort_profile(MLP)
    kept = trace.drop_runs(1)
    assert [r.run_index for r in kept.runs] == [0, 1, 2, 3]
    assert kept.runs[0].start_us == trace.runs[1].start_us
    assert len(kept.nodes) == 4 * 8
    assert [n.dur_us for n in kept.nodes if n.name == "mm1"] == [382.0, 358.0, 320.0, 318.0]
    assert kept.run_nodes(0) == tuple(replace(n, run_index=0) for n in trace.run_nodes(1))
    with pytest.raises(ValueError, match="cannot drop 5 of 5"):
        trace.drop_runs(5)
    with pytest.raises(ValueError):
        trace.drop_runs(-1)


def test_event_list_and_str_path_give_the_same_trace() -> None:
    events = json.loads(IF_LOOP.read_text())
    assert (
        parse_ort_profile(events) == parse_ort_profile(str(IF_LOOP)) == parse_ort_profile(IF_LOOP)
    )
    assert parse_ort_profile({"traceEvents": events}) == parse_ort_profile(IF_LOOP)  # type: ignore[arg-type]


# --- synthetic events for what the CPU fixtures cannot show ------------------------------


def _run(ts: int, dur: int) -> dict[str, Any]:
    return {"cat": "Session", "name": "model_run", "ph": "X", "ts": ts, "dur": dur, "args": {}}


def _kernel(name: str, ts: int, dur: int, **args: Any) -> dict[str, Any]:
    return {"cat": "Node", "name": name, "ph": "X", "ts": ts, "dur": dur, "args": args}


def test_memcpy_fences_missing_args_and_stray_kernels() -> None:
    events = [
        _kernel("warm_kernel_time", 0, 5, op_name="Relu"),  # outside every model_run: dropped
        _kernel("Memcpy_fence_before", 100, 0, op_name="MemcpyFromHost"),  # pre-1.x fences
        _kernel(
            "Memcpy_kernel_time",
            100,
            7,
            op_name="MemcpyFromHost",
            provider="CUDAExecutionProvider",
            activation_size="4096",
            parameter_size=0,  # numbers are tolerated as well as ORT's strings
            output_size="not a number",
        ),
        _kernel("Memcpy_fence_after", 107, 0, op_name="MemcpyFromHost"),
        {"cat": "Node", "name": "bare_kernel_time", "ph": "X", "ts": 110, "dur": 3},  # no args
        _kernel("Memcpy_token_1_kernel_time", 115, 4, op_name="MemcpyToHost", input_type_shape=[]),
        {"cat": "Kernel", "name": "volta_sgemm", "ph": "X", "ts": 101, "dur": 2},  # CUPTI rows
        _run(95, 30),
    ]
    trace = parse_ort_profile(events)
    assert [(n.name, n.op_type, n.start_us) for n in trace.nodes] == [
        ("Memcpy", "MemcpyFromHost", 5.0),
        ("bare", "", 15.0),
        ("Memcpy_token_1", "MemcpyToHost", 20.0),
    ]
    memcpy, bare, _ = trace.nodes
    assert memcpy.provider == "CUDAExecutionProvider"
    assert (memcpy.activation_bytes, memcpy.parameter_bytes, memcpy.output_bytes) == (4096, 0, 0)
    assert (bare.provider, bare.input_shapes, bare.node_index) == ("", (), -1)


def test_nested_control_flow_gets_a_path() -> None:
    events = [
        _kernel("inner_kernel_time", 12, 3, op_name="Relu"),
        _kernel("branch_kernel_time", 11, 6, op_name="If"),
        _kernel("after_kernel_time", 18, 2, op_name="Add"),
        _kernel("loop_kernel_time", 10, 10, op_name="Loop"),
        _kernel("next_kernel_time", 20, 0, op_name="Relu"),  # starts where the loop ends
        _run(0, 30),
    ]
    nodes = parse_ort_profile(events).nodes
    assert [(n.qualified_name, n.self_us) for n in nodes] == [
        ("loop", 2.0),
        ("loop > branch", 3.0),
        ("loop > branch > inner", 3.0),
        ("loop > after", 2.0),
        ("next", 0.0),
    ]


# --- malformed files ----------------------------------------------------------------------


def _fails(path: Path, match: str) -> str:
    with pytest.raises(ProfileFormatError, match=match) as info:
        parse_ort_profile(path)
    message = str(info.value)
    assert str(path) in message and "\n" not in message
    assert isinstance(info.value, ValueError)
    return message


def test_empty_file(tmp_path: Path) -> None:
    empty = tmp_path / "onnxruntime_profile_empty.json"
    empty.write_text("")  # what ORT leaves behind when the model fails to load
    _fails(empty, "empty profile")
    blank = tmp_path / "blank.json"
    blank.write_text(" \n")
    _fails(blank, "empty profile")


def test_not_json(tmp_path: Path) -> None:
    path = tmp_path / "notes.json"
    path.write_text("model_run took 5 ms\n")
    _fails(path, "not JSON")


def test_truncated_json(tmp_path: Path) -> None:
    text = MLP.read_text()
    path = tmp_path / "cut.json"
    path.write_text(text[: len(text) // 2])
    _fails(path, "truncated JSON")


def test_json_without_model_run(tmp_path: Path) -> None:
    events = [e for e in json.loads(MLP.read_text()) if e["name"] != "model_run"]
    path = tmp_path / "no_runs.json"
    path.write_text(json.dumps(events))
    _fails(path, "no model_run")
    (tmp_path / "empty_list.json").write_text("[]")
    _fails(tmp_path / "empty_list.json", "no model_run")


def test_wrong_structure(tmp_path: Path) -> None:
    obj = tmp_path / "object.json"
    obj.write_text('{"name": "model_run"}')
    _fails(obj, "list of trace events")
    scalar = tmp_path / "scalars.json"
    scalar.write_text("[1, 2]")
    _fails(scalar, "event 0 is not a JSON object")
    no_time = tmp_path / "no_time.json"
    no_time.write_text(json.dumps([{"cat": "Session", "name": "model_run", "ts": "1"}]))
    _fails(no_time, "numeric ts/dur")
    _fails(tmp_path / "missing.json", "cannot read")
