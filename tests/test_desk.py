"""The desk (app/desk/desk.py): its workload follows the host's events, the client's inputs
and the configuration's signal; `run_on_workload` is the rooms' one recipe."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from unittest.mock import MagicMock

import pytest
from PySide6.QtCore import QSettings

from app.desk import NO_MODEL, Desk
from app.desk.desk import Shell
from app.host.job_runner import JobRunner
from engine.api import (
    CommandFailed,
    GraphRequest,
    JobInputs,
    ModelInfo,
    ModelLoaded,
    OpScopeError,
    RunConfig,
    Workload,
)

pytestmark = pytest.mark.usefixtures("qapp")


def _desk(tmp_path: Path) -> tuple[Desk, Any, Any, Any]:
    shell = MagicMock(spec=Shell)
    jobs = MagicMock(spec=JobRunner)
    jobs.busy.return_value = False
    recording = MagicMock()
    recording.path = tmp_path / "s.opscope"
    settings = QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat)
    return Desk(shell, jobs, recording, settings, RunConfig()), shell, jobs, recording


def _loaded(path: str) -> ModelLoaded:
    info = MagicMock(spec=ModelInfo)
    info.configure_mock(path=path, name=Path(path).stem)
    return ModelLoaded(info)


def test_the_workload_is_the_model_the_host_loaded_on_the_inputs_and_config_shown(
    tmp_path: Path,
) -> None:
    desk, *_ = _desk(tmp_path)
    seen: list[Any] = []
    desk.workload_changed.connect(seen.append)
    inputs = JobInputs(dims={"sequence": 64})
    desk.loading("/models/a.onnx", inputs)
    assert desk.workload is None  # asked for, not loaded: no job runs on it yet
    desk.on_events([_loaded("/host/copy/a.onnx")])  # a remote host names its own copy
    assert desk.workload == Workload("/models/a.onnx", RunConfig(), inputs)
    int8 = RunConfig(precision="int8-dynamic")
    desk.config_changed(int8)
    assert desk.workload is not None and desk.workload.config == int8
    desk.inputs_changed(JobInputs(dims={"sequence": 128}))
    assert desk.workload.inputs.dims == {"sequence": 128}
    # a load that fails leaves the running model current
    desk.loading("/models/broken.onnx", JobInputs())
    desk.on_events([CommandFailed("load", "not an ONNX model")])
    desk.on_events([_loaded("/models/a.onnx")])  # timing resumed re-announces it
    assert desk.workload.model == "/models/a.onnx"
    assert [w.config.precision if w else None for w in seen][-1] == "int8-dynamic"


def test_run_on_workload_pauses_flushes_builds_starts_and_resumes_on_every_end(
    tmp_path: Path,
) -> None:
    desk, shell, jobs, recording = _desk(tmp_path)
    failed: list[str] = []
    assert not desk.run_on_workload(
        "graph", GraphRequest, on_done=lambda r: None, on_failed=failed.append
    )
    assert failed == [NO_MODEL] and not jobs.start.called
    desk.loading("/m.onnx", JobInputs())
    desk.on_events([_loaded("/m.onnx")])
    done: list[Any] = []
    assert desk.run_on_workload(
        "graph", GraphRequest, on_done=done.append, on_failed=failed.append, pause="paused: x"
    )
    shell.pause_for.assert_called_once_with("graph", "paused: x")
    recording.flush.assert_called_once()
    concern, request = jobs.start.call_args.args
    assert concern == "graph" and request == GraphRequest(Workload("/m.onnx"))
    jobs.start.call_args.kwargs["on_done"]({"ok": 1})
    shell.resume_after.assert_called_once_with("graph")
    assert done == [{"ok": 1}]
    jobs.start.call_args.kwargs["on_cancelled"]()
    assert shell.resume_after.call_count == 2

    # busy: nothing; a request refused while made: one line, timing resumed
    jobs.busy.return_value = True
    assert not desk.run_on_workload("graph", GraphRequest, on_done=done.append,
                                    on_failed=failed.append)  # fmt: skip
    assert jobs.start.call_count == 1
    jobs.busy.return_value = False

    def refuse(_w: Workload) -> object:
        raise OpScopeError("sequence=0: a size must be 1 or more")

    assert not desk.run_on_workload(
        "graph", refuse, on_done=done.append, on_failed=failed.append, pause="p"
    )
    assert failed[-1] == "sequence=0: a size must be 1 or more"
    assert shell.resume_after.call_count == 3 and jobs.start.call_count == 1


def test_notify_is_the_one_path_to_the_user(tmp_path: Path) -> None:
    desk, shell, *_ = _desk(tmp_path)
    desk.notify("error", "graph: failed", key="graph")
    shell.notify.assert_called_once_with("error", "graph: failed", "graph", None)
