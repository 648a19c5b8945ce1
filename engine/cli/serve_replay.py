"""`opscope simulate FILE.opscope[:ID]`: simulate a recorded serving run again, its traffic,
batching and cache taken from the file, any flag given overriding them (what if this run
had max batch 8?). The service times come from the calibration a simulated run stored, or,
for a load run, from calibrating its model on this machine when the file is here."""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from typing import Any

from engine.errors import ConfigError, SessionFileError
from engine.session.refs import open_run, resolve_run_ref
from engine.session.rows import RunRow
from engine.session.serving_rows import ServingRun

# The serving flags' defaults. The parser's are None, so that a flag the user gave can be
# told from one a recorded run fills in.
DEFAULTS: dict[str, Any] = {
    "max_batch": 1,
    "preferred": "",
    "delay_ms": 0.0,
    "queue_limit": 0,
    "timeout_ms": 0.0,
    "instances": 1,
    "cache": 0,
    "repeat": 0.0,
    "warmup_s": 1.0,
    "seed": 0,
}


@dataclass(frozen=True)
class Replay:
    """A recorded serving run to simulate again."""

    ref: str
    run: RunRow
    serving: ServingRun

    @property
    def label(self) -> str:
        return f"{self.ref} run {self.run.id} ({self.run.kind})"


def is_session_ref(text: str) -> bool:
    path, _ = resolve_run_ref(text)
    return path.lower().endswith(".opscope")


def read_replay(text: str) -> Replay:
    reader, run = open_run(text)
    try:
        serving = reader.serving(run.id)
    finally:
        reader.close()
    if serving is None:
        raise SessionFileError(
            f"run {run.id} is a {run.kind} run, not a serving run: simulate replays runs "
            "of kind load or simulate (or give it a model file)",
            resolve_run_ref(text)[0],
        )
    return Replay(text, run, serving)


def fill_serving_args(args: argparse.Namespace, replay: Replay | None) -> None:
    """Flags the user left out take the recorded run's values, then the defaults."""
    stored: dict[str, Any] = {}
    if replay is not None:
        s = replay.serving
        b, c = s.batching, s.cache
        stored = {
            "traffic": s.traffic.get("spec"),
            "seed": s.traffic.get("seed"),
            "max_batch": b.get("max_batch"),
            "preferred": ",".join(str(p) for p in b.get("preferred") or []),
            "delay_ms": b.get("delay_ms"),
            "queue_limit": b.get("queue_limit"),
            "timeout_ms": b.get("timeout_ms"),
            "instances": b.get("instances"),
            "cache": c.get("size"),
            "repeat": c.get("repeat"),
            "warmup_s": s.warmup_s,
            "duration": s.traffic.get("duration_s"),
        }
        stored = {k: v for k, v in stored.items() if _usable(v)}
    args.warmup_default = args.warmup_s is None and "warmup_s" not in stored
    for key in ("traffic", "duration", *DEFAULTS):
        if getattr(args, key, None) is None:
            setattr(args, key, stored.get(key, DEFAULTS.get(key)))
    if args.traffic is None:
        raise ConfigError("--traffic SPEC is needed (e.g. poisson:200)")


def _usable(v: object) -> bool:
    if isinstance(v, bool) or v is None:
        return False
    if isinstance(v, float):
        return math.isfinite(v)
    return isinstance(v, int | str)
