"""One trial: `opscope bench` of one config in its own process (a crash in the engine ends
that trial only), its figures read from the JSON it writes, its run recorded in the
session by that process."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.config import RunConfig

TRIAL_TIMEOUT_S = 1800.0  # a hung trial (a quantizer that never returns) ends here


@dataclass
class Trial:
    number: int
    config: RunConfig
    status: str = "pending"  # ok | failed
    p50_ms: float = math.nan
    p99_ms: float = math.nan
    samples_per_s: float = math.nan
    cosine: float = math.nan  # against FP32, worst output (1.0 for FP32 itself)
    samples: int = 0
    error: str | None = None
    wall_s: float = 0.0
    details: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "config": self.config.to_json(),
            "status": self.status,
            "latency_ms": {"p50": self.p50_ms, "p99": self.p99_ms, "count": self.samples},
            "throughput": {"samples_per_s": self.samples_per_s},
            "accuracy": {"cosine": self.cosine},
            "error": self.error,
            "wall_s": self.wall_s,
            **self.details,
        }

    def metric(self, name: str) -> float:
        return {
            "p50": self.p50_ms,
            "p99": self.p99_ms,
            "throughput": self.samples_per_s,
        }[name]


def bench_argv(model: str, config: RunConfig, extra: list[str]) -> list[str]:
    """The `opscope bench` command line of a config (what a user runs to reproduce it)."""
    int8 = config.precision.startswith("int8")
    target = ["--min-cosine", f"{config.min_cosine:g}"] if int8 else []
    return [
        "bench", model,
        "--engine", config.engine,
        "--precision", config.precision,
        "--fusion", config.fusion,
        "--batch", str(config.batch),
        "--threads", str(config.threads),
        "--spinning", "on" if config.spinning else "off",
        "--provider", config.provider,
        *target,
        *extra,
    ]  # fmt: skip


def cli_argv() -> list[str]:
    """How to start the CLI again: the frozen app is its own executable."""
    if getattr(sys, "frozen", False):
        return [sys.executable]
    return [sys.executable, "-m", "engine.cli.main"]


def run_trial(
    number: int,
    model: str,
    config: RunConfig,
    extra: list[str],
    duration_s: float,
    session: str | None,
    timeout_s: float = TRIAL_TIMEOUT_S,
) -> Trial:
    """Run the trial to its end; a failure (bad config, crash, timeout) is a failed trial."""
    import time

    trial = Trial(number, config)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="opscope-trial-") as tmp:
        out = Path(tmp) / "trial.json"
        argv = [
            *cli_argv(),
            *bench_argv(model, config, extra),
            "--duration", f"{duration_s:g}",
            "--no-live",
            "--json", str(out),
            *(["--session", session] if session else []),
        ]  # fmt: skip
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            trial.status, trial.error = "failed", f"no result after {timeout_s:g} s"
            return trial
        finally:
            trial.wall_s = time.perf_counter() - t0
        if proc.returncode != 0 or not out.is_file():
            lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
            why = lines[-1].removeprefix("opscope: error: ") if lines else f"exit {proc.returncode}"
            if proc.returncode < 0:
                why = f"the engine crashed (signal {-proc.returncode})"
            trial.status, trial.error = "failed", " ".join(why.split())[:300]
            return trial
        data = json.loads(out.read_text())
    lat, tp, acc = data.get("latency_ms") or {}, data.get("throughput") or {}, data.get("accuracy")
    trial.status = "ok"
    trial.p50_ms = float(lat.get("p50", math.nan))
    trial.p99_ms = float(lat.get("p99", math.nan))
    trial.samples = int(lat.get("count", 0))
    trial.samples_per_s = float(tp.get("samples_per_s", math.nan))
    trial.cosine = 1.0 if config.precision == "fp32" else float((acc or {}).get("cosine", math.nan))
    variant = data.get("variant") or {}
    if variant.get("excluded_nodes"):
        trial.details["excluded_nodes"] = variant["excluded_nodes"]
    trial.details["provider_used"] = data.get("provider_used")
    return trial
