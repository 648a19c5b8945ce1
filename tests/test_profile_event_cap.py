"""ONNX Runtime's profiler keeps at most 1,000,000 events per session and then logs its own
colour-coded ERROR line ("[E:onnxruntime:, profiler.cc:176 RecordEventImpl] Maximum
number of events reached"), which reached the terminal raw (`opscope profile` on a
20,000-node chain with --runs 60). The pass asks only for the runs that fit, says so in
one line, and the profiling session's own log stays off the terminal. The real cap takes
a million events (a 900 MB profile) to reach, so these tests lower it through the pass's
`max_events`, and check the profiling session's log level as ORT holds it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from onnx import TensorProto, helper

from engine.backends.ort.inference_session import open_session, plan_session
from engine.backends.ort.profiler import ORT_MAX_EVENTS, profile_pass, runs_that_fit
from engine.config import RunConfig
from engine.events import Notice, OpProfile


def _chain(path: Path, n: int) -> Path:
    names = [f"t{k}" for k in range(n + 1)]
    nodes = [helper.make_node("Relu", [names[k]], [names[k + 1]], name=f"n{k}") for k in range(n)]
    graph = helper.make_graph(
        nodes,
        "chain",
        [helper.make_tensor_value_info("t0", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info(names[-1], TensorProto.FLOAT, [1, 4])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path.write_bytes(model.SerializeToString())
    return path


def test_the_issue_case_is_asked_for_fewer_runs_that_fit_under_the_cap() -> None:
    warmup, runs = runs_that_fit(20_000, 60)
    assert (warmup, runs) == (3, 44)
    assert (warmup + runs) * (int(20_000 * 1.05) + 2) + 2 <= ORT_MAX_EVENTS
    assert runs_that_fit(500, 20) == (3, 20)  # what fits is left alone
    assert runs_that_fit(400_000, 20) == (1, 1)  # warm-up gives way before the one run
    assert runs_that_fit(5_000_000, 20) == (0, 1)  # one run, which the cap will cut


def test_a_pass_past_the_cap_profiles_the_runs_that_fit_and_says_so(tmp_path: Path) -> None:
    model = _chain(tmp_path / "chain.onnx", 200)
    feeds = {"t0": np.ones((1, 4), np.float32)}
    events = list(profile_pass(model, RunConfig(threads=1), feeds, runs=60, max_events=5_000))
    notices = [e.message for e in events if isinstance(e, Notice)]
    (profile,) = [e for e in events if isinstance(e, OpProfile)]
    assert notices == [
        "profiling 20 of the 60 runs asked: 200 nodes x 63 runs would pass ONNX Runtime's "
        "profiler cap of 5,000 events"
    ]
    assert profile.runs == 20  # every run profiled is whole, and none past the cap was asked


def test_the_profiling_sessions_own_log_stays_off_the_terminal(tmp_path: Path) -> None:
    """The cap's line goes through the session's logger at ERROR (checked by hand on a
    20,000-node chain x 52 runs: the line at severity 3, none at 4); a run's errors already
    go through the stoppable run options' logger at FATAL, so nothing cheaper logs an ERROR
    there to look for. The session a profiling plan opens logs FATAL only."""
    model = _chain(tmp_path / "chain.onnx", 3)
    config = RunConfig(threads=1)
    plan = plan_session(
        config, gpu_present=False, profiling=True, profile_prefix=str(tmp_path / "profile")
    )
    profiling = open_session(model, plan)
    timing = open_session(model, plan_session(config, gpu_present=False))
    assert profiling.session.get_session_options().log_severity_level == 4
    assert timing.session.get_session_options().log_severity_level == 3  # errors still said
