"""One Workload (engine/model/workload.py) is what every job request that runs a model
carries: the model, its config and its inputs, never copied field by field into the
request, and the CLI builds it once from a command's flags."""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import typing

from engine.config import RunConfig
from engine.model.workload import DATA_FILES, JobInputs, Workload

# what a Workload holds: none of it may sit flat in a request beside (or instead of) one
FLAT = {"model", "model_path", "config", "base", "inputs", "shapes", "dims", *DATA_FILES}
# the requests that run a model, and where their workload sits among their fields
RUN_A_MODEL = {
    "engine.backends.base.PrepareRequest": 0,
    "engine.run.bench.BenchRequest": 0,
    "engine.run.graph_job.GraphRequest": 0,
    "engine.run.memory_request.MemoryRequest": 0,
    "engine.run.generation.GenerateRequest": 0,
    "engine.tune.tune_job.TuneRequest": 0,
    "engine.tune.trial.TrialRequest": 0,
    "engine.tune.recheck.RecheckRequest": 0,
    "engine.serve.llm.study.LLMStudyRequest": 1,  # after its kind
}


def _class(path: str) -> type:
    module, name = path.rsplit(".", 1)
    cls: type = getattr(importlib.import_module(module), name)
    return cls


def _requests() -> dict[str, type]:
    """Every request class: engine.api's, the job registry's, the ones above, and each
    request nested in one (a sweep's bench)."""
    import engine.api as api
    from engine.run.jobs import JOBS, ON_LOADED_MODEL

    found: dict[str, type] = {}
    todo: list[type] = [getattr(api, n) for n in api.__all__ if n.endswith("Request")]
    todo += [_class(p) for p in (*JOBS, *ON_LOADED_MODEL, *RUN_A_MODEL)]
    while todo:
        cls = todo.pop()
        name = f"{cls.__module__}.{cls.__qualname__}"
        if name not in found and dataclasses.is_dataclass(cls):
            found[name] = typing.cast(type, cls)
        else:
            continue
        hints = typing.get_type_hints(cls)
        todo += [
            h for h in hints.values() if isinstance(h, type) and h.__name__.endswith("Request")
        ]
    return found


def test_every_job_request_that_runs_a_model_carries_one_workload_and_no_copy_of_it() -> None:
    requests = _requests()
    assert set(RUN_A_MODEL) <= set(requests), set(RUN_A_MODEL) - set(requests)
    wrong: list[str] = []
    for name, cls in sorted(requests.items()):
        hints = typing.get_type_hints(cls)
        fields = [f.name for f in dataclasses.fields(cls)]
        carried = [f for f in fields if hints[f] is Workload]
        flat = sorted(FLAT & set(fields))
        if flat:
            wrong.append(f"{name}: flat {', '.join(flat)}")
        if name in RUN_A_MODEL:
            if carried != ["workload"]:
                wrong.append(f"{name}: carries {carried or 'no workload'}")
            elif fields.index("workload") != RUN_A_MODEL[name]:
                wrong.append(f"{name}: its workload is field {fields.index('workload')}")
        elif carried:
            wrong.append(f"{name}: carries a workload but is not listed as running a model")
    assert not wrong, wrong
    assert len(requests) >= 16  # every job's request, and the nested bench and prepare


def test_the_bridges_between_flat_requests_and_job_inputs_are_gone() -> None:
    assert importlib.util.find_spec("engine.run.job_inputs") is None
    assert not hasattr(JobInputs, "of") and not hasattr(JobInputs, "data_files")
    from engine.run.bench import BenchRequest

    assert not hasattr(BenchRequest, "of")
    import engine.api as api

    assert api.Workload is Workload and api.JobInputs is JobInputs


def test_a_workload_names_its_model_and_its_inputs_name_their_files() -> None:
    assert Workload.local_files == ("model",) and JobInputs.local_files == DATA_FILES
    hints = typing.get_type_hints(Workload)
    assert [(f.name, hints[f.name]) for f in dataclasses.fields(Workload)] == [
        ("model", str), ("config", RunConfig), ("inputs", JobInputs),
    ]  # fmt: skip
    work = Workload("m.onnx")
    assert work.config == RunConfig() and work.inputs == JobInputs()
    other = work.with_config(RunConfig(batch=4)).with_inputs(JobInputs(dims={"seq": 8}))
    assert (other.model, other.config.batch, other.inputs.dims) == ("m.onnx", 4, {"seq": 8})
    assert work == Workload("m.onnx")  # frozen: the helpers made new values


def test_the_cli_builds_a_commands_workload_from_its_flags() -> None:
    from engine.cli.common import workload_of
    from engine.cli.main import build_parser

    args = build_parser().parse_args(
        ["bench", "m.onnx", "--batch", "2", "--shape", "x=1x3", "--dim", "seq=16",
         "--inputs", "d.npz", "--calibration", "c.npz", "--labels", "l.npy"]
    )  # fmt: skip
    work = workload_of(args)
    assert (work.model, work.config.batch) == ("m.onnx", 2)
    assert work.inputs == JobInputs({"x": (1, 3)}, {"seq": 16}, "d.npz", "c.npz", "l.npy")
    assert workload_of(args, RunConfig(threads=3)).config == RunConfig(threads=3)
    assert work.inputs.argv() == [
        "--shape", "x=1x3", "--dim", "seq=16", "--inputs", "d.npz", "--calibration", "c.npz",
        "--labels", "l.npy",
    ]  # fmt: skip
