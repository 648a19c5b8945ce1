"""A generation run's rows (kind `generate`): written as the run goes (its shape when it
starts, each timed generation's passes, its figures at the end) and read back type-checked
like every other value of a session."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.events import GenerationStarted, GenerationSteps
from engine.session.trust import json_text, parse_json, req, typed


def start_generation(conn: sqlite3.Connection, run_id: int, ev: GenerationStarted) -> None:
    conn.execute(
        "INSERT OR REPLACE INTO generation (run_id, prompt_len, new_tokens, batch, sampling, "
        "context_length, kv_bytes_per_token) VALUES (?, ?, ?, ?, ?, ?, ?)",
        [run_id, ev.prompt_len, ev.new_tokens, ev.batch, ev.sampling, ev.context_length,
         ev.kv_bytes_per_token],
    )  # fmt: skip


def add_steps(conn: sqlite3.Connection, run_id: int, chunk: list[GenerationSteps]) -> int:
    """Append generations' passes; returns how many rows. Joins an open transaction."""
    rows = [
        (run_id, g.index, step, g.start_ns if step == 0 else None, int(dur))
        for g in chunk
        for step, dur in enumerate(np.asarray(g.steps_ns, np.int64).tolist())
    ]
    conn.executemany(
        "INSERT INTO steps (run_id, generation, step, start_ns, dur_ns) VALUES (?, ?, ?, ?, ?)",
        rows,
    )
    return len(rows)


def set_generation_summary(conn: sqlite3.Connection, run_id: int, summary: dict[str, Any]) -> None:
    conn.execute("UPDATE generation SET summary = ? WHERE run_id = ?", [json_text(summary), run_id])


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
    row = conn.execute(
        "SELECT prompt_len, new_tokens, batch, sampling, context_length, kv_bytes_per_token, "
        "summary FROM generation WHERE run_id = ?",
        [run_id],
    ).fetchone()
    if row is None:
        return None
    steps = conn.execute(
        "SELECT generation, step, start_ns, dur_ns FROM steps WHERE run_id = ? "
        "ORDER BY generation, step",
        [run_id],
    ).fetchall()
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
        run_id=run_id,
        prompt_len=req(row[0], int, "generation.prompt_len"),
        new_tokens=req(row[1], int, "generation.new_tokens"),
        batch=req(row[2], int, "generation.batch"),
        sampling=req(row[3], str, "generation.sampling"),
        context_length=req(row[4], int, "generation.context_length"),
        kv_bytes_per_token=req(row[5], int, "generation.kv_bytes_per_token"),
        summary=parse_json(row[6], dict, "generation.summary"),
        ttft_ns=np.asarray(ttft, np.int64),
        tpot_ns=np.asarray(tpot, np.int64),
        starts_ns=np.asarray(starts, np.int64),
        decode_counts=np.asarray(counts, np.int64),
    )
