"""A generation run's rows (kind `generate`): written as the run goes (its shape when it
starts, each timed generation's passes, its figures at the end) and read back type-checked
like every other value of a session."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.events import GenerationStarted, GenerationSteps
from engine.session.spec import Column, RecordSpec
from engine.session.trust import json_text, req, typed

GENERATION: RecordSpec[dict[str, Any]] = RecordSpec(
    "generation",
    (
        Column("run_id", int),
        *(Column(n, int) for n in ("prompt_len", "new_tokens", "batch")),
        Column("sampling", str),
        *(Column(n, int) for n in ("context_length", "kv_bytes_per_token")),
        Column("summary", dict),  # `opscope generate --json`'s figures, once it ended
    ),
)
# One row per pass of each timed generation: step 0 the prefill (with the generation's
# start, ns from the timing origin), then each decode step
STEPS: RecordSpec[dict[str, Any]] = RecordSpec(
    "steps",
    (
        Column("run_id", int),
        Column("generation", int),
        Column("step", int),
        Column("start_ns", int, nullable=True),
        Column("dur_ns", int),
    ),
)


def start_generation(conn: sqlite3.Connection, run_id: int, ev: GenerationStarted) -> None:
    GENERATION.write(
        conn,
        "INSERT OR REPLACE",
        run_id=run_id,
        prompt_len=ev.prompt_len,
        new_tokens=ev.new_tokens,
        batch=ev.batch,
        sampling=ev.sampling,
        context_length=ev.context_length,
        kv_bytes_per_token=ev.kv_bytes_per_token,
    )


def add_steps(conn: sqlite3.Connection, run_id: int, chunk: list[GenerationSteps]) -> int:
    """Append generations' passes; returns how many rows. Joins an open transaction."""
    rows = [
        STEPS.row(run_id=run_id, generation=g.index, step=step,
                  start_ns=g.start_ns if step == 0 else None, dur_ns=int(dur))
        for g in chunk
        for step, dur in enumerate(np.asarray(g.steps_ns, np.int64).tolist())
    ]  # fmt: skip
    conn.executemany(STEPS.insert(), rows)
    return len(rows)


def set_generation_summary(conn: sqlite3.Connection, run_id: int, summary: dict[str, Any]) -> None:
    GENERATION.update(conn, {"run_id": run_id}, summary=json_text(summary))


@dataclass(frozen=True)
class GenerationRun:
    run_id: int
    prompt_len: int
    new_tokens: int
    batch: int
    sampling: str
    context_length: int
    kv_bytes_per_token: int
    summary: dict[str, Any] | None  # `opscope generate --json`'s figures, once it ended
    ttft_ns: np.ndarray  # one per timed generation
    tpot_ns: np.ndarray  # every decode step of every timed generation
    starts_ns: np.ndarray  # each generation's start, from the timing origin
    decode_counts: np.ndarray  # decode steps of each timed generation (tpot_ns in order)

    def decode_steps(self) -> list[np.ndarray]:
        """Each timed generation's decode steps (ns), in order (none without generations:
        np.split of an empty array would give one empty part)."""
        if not self.decode_counts.size:
            return []
        return np.split(self.tpot_ns, np.cumsum(self.decode_counts)[:-1].tolist())

    def decode_starts_ns(self) -> np.ndarray:
        """When each decode step started, ns from the timing origin: the store keeps only a
        generation's start, and its passes ran back to back from there (prefill first)."""
        if not self.tpot_ns.size:
            return np.zeros(0, np.int64)
        first = np.repeat(self.starts_ns + self.ttft_ns, self.decode_counts)
        within = [np.cumsum(d) - d for d in self.decode_steps()]
        return first + np.concatenate(within).astype(np.int64)


def read_generation(conn: sqlite3.Connection, run_id: int) -> GenerationRun | None:
    """The generation run `run_id`, or None when the run is not one."""
    row = conn.execute(GENERATION.select("WHERE run_id = ?"), [run_id]).fetchone()
    if row is None:
        return None
    names = ("generation", "step", "start_ns", "dur_ns")
    sql = STEPS.select("WHERE run_id = ?", "ORDER BY generation, step", names)
    steps = conn.execute(sql, [run_id]).fetchall()
    ttft: list[int] = []
    tpot: list[int] = []
    starts: list[int] = []
    counts: list[int] = []
    current: int | None = None
    for gen, step, start, dur in steps:
        req(gen, int, "steps.generation")
        d = req(dur, int, "steps.dur_ns")
        if d < 0:
            raise ValueError("steps.dur_ns is negative")
        if req(step, int, "steps.step") == 0:
            ttft.append(d)
            starts.append(typed(start, int, "steps.start_ns", nullable=True) or 0)
            counts.append(0)
            current = gen
        elif gen == current:
            tpot.append(d)
            counts[-1] += 1
        else:
            raise ValueError(f"steps: generation {gen} has decode steps but no first token")
    return GenerationRun(
        **GENERATION.values(row),
        ttft_ns=np.asarray(ttft, np.int64),
        tpot_ns=np.asarray(tpot, np.int64),
        starts_ns=np.asarray(starts, np.int64),
        decode_counts=np.asarray(counts, np.int64),
    )
