"""Every long engine operation the window starts is a job: a frozen request dataclass and a
generator of events (progress, notices, results as they come: a trial, a sweep point) that
returns the job's result. `run_job(request)` runs one the same way everywhere: the CLI
drives it in its own process, the engine host runs it in a child process of its own for the
window (engine/run/host_jobs.py), the tests drive it directly. Cancelling is Ctrl+C
(KeyboardInterrupt) inside the generator: a job that records keeps what it measured.

A job on the loaded model (a load run, a calibration: `ON_LOADED_MODEL`) takes that model
too; the engine host runs it on a thread beside the live loop, which it pauses, so that it
serves exactly what the window shows (engine/run/serving_jobs.py).

Adding a job: its request dataclass, its generator, and one line in `JOBS` (or
`ON_LOADED_MODEL`), naming both by module path so that the engine host imports only the
jobs it is asked to run."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Generator
from typing import Any

from engine.errors import OpScopeError

JobFn = Callable[..., Generator[Any, None, Any]]

# request class (module.Class) -> the generator that runs it (module:function)
JOBS: dict[str, str] = {
    "engine.tune.sweep_job.SweepRequest": "engine.tune.sweep_job:sweep_job",
    "engine.tune.tune_job.TuneRequest": "engine.tune.tune_job:tune_job",
    "engine.tune.prompt_sweep.PromptSweepRequest": "engine.tune.prompt_sweep:prompt_sweep_job",
    "engine.serve.llm.study.LLMStudyRequest": "engine.run.llm_study_job:llm_study_job",
    "engine.backends.genai.hf_import.ImportRequest": "engine.backends.genai.hf_import:import_hf",
    "engine.machine.peaks.PeaksRequest": "engine.machine.peaks:peaks_job",
    "engine.analysis.export_job.ExportRequest": "engine.analysis.export_job:export_job",
    "engine.run.memory_request.MemoryRequest": "engine.run.memory_job:memory_job",
    "engine.run.graph_job.GraphRequest": "engine.run.graph_job:graph_job",
}

# the same, for jobs whose generator also takes the loaded model (a LoadedModel)
ON_LOADED_MODEL: dict[str, str] = {
    "engine.run.serving_jobs.LoadRunRequest": "engine.run.serving_jobs:load_run_job",
    "engine.run.serving_jobs.CalibrateRequest": "engine.run.serving_jobs:calibrate_job",
}


def key_of(request: object) -> str:
    cls = type(request)
    return f"{cls.__module__}.{cls.__qualname__}"


def on_loaded_model(request: object) -> bool:
    """Whether `request`'s job serves the loaded model (run in the engine host)."""
    return key_of(request) in ON_LOADED_MODEL


def job_for(request: object) -> JobFn:
    """The generator registered for `request`'s type."""
    target = JOBS.get(key_of(request)) or ON_LOADED_MODEL.get(key_of(request))
    if target is None:
        raise OpScopeError(f"no job runs a {type(request).__name__}")
    module, name = target.split(":")
    fn: JobFn = getattr(importlib.import_module(module), name)
    return fn


def run_job(request: object, *model: Any) -> Generator[Any, None, Any]:
    """Run the job `request` asks for (on `model`, the loaded one, for a job of
    `ON_LOADED_MODEL`): its events, then its result."""
    result = yield from job_for(request)(request, *model)
    return result


def job_name(request: object) -> str:
    """A short name for messages: 'sweep', 'tune', 'LLM study'..."""
    return str(getattr(request, "job_name", type(request).__name__.removesuffix("Request")))
