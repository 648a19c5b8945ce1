"""A load run's schedule is planned once (engine/run/serving_jobs.py: load_schedule): the
schedule `opscope load` checks its flags and fits the warm-up on is, request for request,
the one its job serves from the request the command sends it."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from engine.cli.main import build_parser
from engine.cli.serve_cmds import plan_load
from engine.cli.serve_replay import fill_serving_args
from engine.errors import ConfigError
from engine.run import serving_jobs
from engine.run.serving_jobs import LoadRunRequest, load_run_job
from engine.serve.traffic.schedule import Schedule

CASES = {
    "poisson": ["--traffic", "poisson:200", "--duration", "0.5"],
    "bursts, repeats": [
        "--traffic", "bursts:100,400,0.2,0.3", "--duration", "0.4", "--repeat", "0.3",
        "--seed", "7",
    ],
    "first N requests": ["--traffic", "constant:50", "--requests", "30", "--warmup-s", "0"],
    "closed loop": ["--traffic", "closed:4", "--closed-requests", "25", "--repeat", "0.5"],
}  # fmt: skip


class _Served(Exception):
    """The job reached the serving loop: what it would serve is kept."""


def _args(flags: list[str]) -> Any:
    args = build_parser().parse_args(["load", "model.onnx", *flags])
    fill_serving_args(args, None)
    return args


def _served(req: LoadRunRequest, monkeypatch: pytest.MonkeyPatch) -> Schedule:
    """The schedule the load job hands its serving loop, the model left out."""
    seen: dict[str, Schedule] = {}

    def loop(run_batch: object, feeds: object, schedule: Schedule, *a: object, **k: object) -> None:
        seen["schedule"] = schedule
        raise _Served

    def serving(prepared: object, policy: object, path: str) -> SimpleNamespace:
        return SimpleNamespace(policy=policy, notices=[], run_batch=None, request_feeds=None)

    monkeypatch.setattr(serving_jobs, "ServingLoop", loop)
    monkeypatch.setattr(serving_jobs, "prepare_serving", serving)
    model = SimpleNamespace(
        batch1=lambda: None, stopping=threading.Event(), model_path="model.onnx", facts=[]
    )
    with pytest.raises(_Served):
        list(load_run_job(req, model))  # type: ignore[arg-type]
    return seen["schedule"]


@pytest.mark.parametrize("flags", CASES.values(), ids=CASES.keys())
def test_the_command_checks_the_schedule_its_job_serves(
    flags: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    args = _args(flags)
    req, checked = plan_load(args)
    served = _served(req, monkeypatch)
    assert len(checked) and len(served) == len(checked)
    np.testing.assert_array_equal(served.times, checked.times)
    np.testing.assert_array_equal(served.keys, checked.keys)
    assert req.warmup_s == args.warmup_s  # the warm-up fitted to it is the one sent


def test_a_warmup_past_the_traffic_is_dropped_from_the_request_the_job_gets() -> None:
    """The default warm-up (1 s) keeps every request of a 0.3 s run out: the command drops
    it (said on stderr), and the job is sent the warm-up it fitted."""
    args = _args(["--traffic", "poisson:100", "--duration", "0.3"])
    req, _ = plan_load(args)
    assert req.warmup_s == 0.0


def test_the_command_refuses_a_repeat_of_one_in_its_flags_words() -> None:
    """The flag's type refuses it first; a value that reaches the planning (a replayed
    run's) is refused there, named as the flag."""
    args = _args(["--traffic", "poisson:100"])
    args.repeat = 1.0
    with pytest.raises(ConfigError, match=r"^--repeat must be below 1, got 1$"):
        plan_load(args)
    req = LoadRunRequest(traffic="poisson:100", batching={}, repeat=1.0)
    with pytest.raises(ConfigError, match=r"^repeat must be below 1, got 1$"):
        list(load_run_job(req, SimpleNamespace()))  # type: ignore[arg-type]
