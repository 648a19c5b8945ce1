"""What a memory job is asked (MemoryRequest) and the two steps every kind of memory job
shares: the probe run in a process of its own, and the report recorded in a session. Kept
apart from the jobs (engine/run/memory_job.py for ONNX Runtime and PyTorch,
engine/run/llm_memory.py for generating models) so neither imports the other."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from engine.errors import OpScopeError
from engine.model.workload import Workload
from engine.run.child_job import describe_exit
from engine.run.isolated import run_isolated
from engine.run.job_start import IF_WARM

PROBE_TIMEOUT_S = 600.0


@dataclass(frozen=True)
class MemoryRequest:
    # the workload's data files are the window's Inputs panel's (or --inputs/--calibration/
    # --labels): an INT8 variant is built, or taken from the cache, from the run's samples
    workload: Workload
    seed: int = 0
    runs: int = 10  # inferences after the first, for the steady-state resident memory
    # a generating model: the prompt's tokens and the tokens generated after it (None: the
    # --shape input_ids=BxL given, else the genai engine's defaults); a decoder ONNX's past
    # KV inputs are sized for a prefill of prompt_len tokens
    prompt_len: int | None = None
    new_tokens: int | None = None
    session: str | None = None  # where the report is recorded
    job_name: ClassVar[str] = "memory"


def measured_apart(probe: Any, args: tuple[Any, ...]) -> dict[str, Any]:
    """The probe's result, run in a process of its own; its failure is one line. The
    process is forked from the fork server where this process runs one already (its
    imports done: engine/run/job_start.py), else spawned: one probe does not pay for a
    server's start (bench/results/job_start_cost.md)."""
    ended = run_isolated(probe, args, PROBE_TIMEOUT_S, start=IF_WARM)
    if ended.status != "done":
        if ended.status == "cancelled":
            raise KeyboardInterrupt
        why = {
            "timeout": f"no result after {PROBE_TIMEOUT_S:g} s",
            "failed": ended.error,
            "crashed": describe_exit(ended.exitcode, "the memory probe"),
        }[ended.status]
        raise OpScopeError(f"memory: {why}")
    measured: dict[str, Any] = ended.result
    return measured


def record(req: MemoryRequest, report: dict[str, Any]) -> None:
    """The report into the session file (opened, or created, for this one write)."""
    from engine.session.write_queue import open_waiting

    store = open_waiting(req.session or "", _say)
    try:
        store.add_memory(
            model_path=req.workload.model,
            config=req.workload.config.resolved().to_json(),
            report=report,
        )
    finally:
        store.close()


def _say(line: str) -> None:
    import sys

    print(f"session    {line}", file=sys.stderr, flush=True)
