"""The LLM serving study as a job (engine/run/jobs.py): the window's LLM Serving dock runs
it, and `opscope simulate --llm` / `load --llm` record their studies the same way. The
study itself is engine/serve/llm/study.py's; this adds the recording into a session file
(the session room sits above the serving room, so the serving code never writes one)."""

from __future__ import annotations

import dataclasses
from collections.abc import Generator
from typing import Any

from engine.config import RunConfig
from engine.errors import ConfigError
from engine.events import Event
from engine.serve.llm.study import LLMStudyRequest, Rows, serve_plan, simulate_plan
from engine.serve.llm.study_plan import LLMPlan


def llm_study_job(req: LLMStudyRequest) -> Generator[Event, None, Rows]:
    """The study's rows: `simulate_plan` or `serve_plan`; recorded in `req.session`."""
    if req.kind not in ("simulate", "real"):
        raise ConfigError(f"an LLM study is 'simulate' or 'real', not {req.kind!r}")
    study = simulate_plan if req.kind == "simulate" else serve_plan
    model, config = req.workload.model, req.workload.config
    rows = yield from study(req)
    if req.session:  # an interrupted real run is kept, marked partial
        partial = any(row.get("unfinished") for row in rows)
        record_llm_study(req.session, model, req.kind, config, plan_json(req.plan), rows,
                         partial)  # fmt: skip
    return rows


def plan_json(plan: LLMPlan) -> dict[str, Any]:
    """The plan as recorded (engine/session/llm_study_rows.py's PLAN)."""
    return dataclasses.asdict(plan)


def record_llm_study(
    session: str,
    model: str,
    kind: str,
    config: RunConfig,
    plan: dict[str, Any],
    rows: Rows,
    partial: bool = False,
) -> int:
    """A study's rows into the session file (opened, or created, for this one write);
    `partial`: a real run interrupted before its last request. Returns the study's id."""
    from engine.session.write_queue import open_waiting

    store = open_waiting(session, _say)
    try:
        return store.add_llm_study(model_path=model, kind=kind, config=config.to_json(),
                                   plan=plan, rows=rows, partial=partial)  # fmt: skip
    finally:
        store.close()


def _say(line: str) -> None:
    import sys

    print(f"session    {line}", file=sys.stderr, flush=True)
