"""Slow stretches: this machine's batches are not slow one at a time but in runs (another
process, a frequency step, the OS taking a core), and a run of slow batches is what backs a
queue up into the p99. Drawn one by one from the calibration, the same slow batches are
spread out and queue nothing (bench/results/serve_sim_vs_real.md: p99 under-predicted by up
to 68% where real runs had stalls).

A two-state Markov-modulated multiplier, fitted on the real engine's own batches in the
order they ran: a batch is in a slow stretch when it takes more than SLOW times its size's
median; the chance per batch of entering a stretch and of leaving it are counted from the
sequences; each state keeps its batches' ratios to draw from. Drawn, the multipliers keep
the measured spread (the same ratios) and add its memory: stretches as long, on average,
as they were measured.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

SLOW = 1.3  # a batch over 1.3x its size's median is in a slow stretch
MIN_BATCHES = 30  # fewer batches in all: no process (its chances cannot be counted)
MAX_RATIOS = 4096  # ratios kept per state (a calibration file stays small)


@dataclass(frozen=True)
class SlowStretches:
    enter: float  # chance per batch of a normal batch being followed by a slow one
    leave: float  # chance per batch of a slow batch being followed by a normal one
    normal: np.ndarray  # ratios to the size's median, of batches outside stretches
    slow: np.ndarray  # ratios of batches in stretches

    @property
    def slow_share(self) -> float:
        """The long-run share of batches in slow stretches."""
        return self.enter / (self.enter + self.leave) if self.enter + self.leave else 0.0

    @property
    def mean_stretch(self) -> float:
        """Batches in a slow stretch, on average."""
        return 1.0 / self.leave if self.leave else float("inf")

    @classmethod
    def fit(cls, runs: Sequence[np.ndarray]) -> SlowStretches | None:
        """From sequences of ratios (each batch's time over its size's median), each in the
        order the batches ran; None with fewer than MIN_BATCHES or no slow batch or no
        normal one."""
        runs = [np.asarray(r, dtype=float) for r in runs if len(r)]
        ratios = np.concatenate(runs) if runs else np.zeros(0)
        if ratios.size < MIN_BATCHES:
            return None
        slow = ratios > SLOW
        if not slow.any() or slow.all():
            return None
        n_to_s = s_to_n = from_n = from_s = 0
        for r in runs:
            state = r > SLOW
            prev, nxt = state[:-1], state[1:]
            from_n += int((~prev).sum())
            from_s += int(prev.sum())
            n_to_s += int((~prev & nxt).sum())
            s_to_n += int((prev & ~nxt).sum())
        enter = n_to_s / from_n if from_n else 0.0
        leave = s_to_n / from_s if from_s else 1.0
        if enter == 0.0:  # slow batches only at a sequence's start: count them as entered
            enter = float(slow.sum()) / ratios.size
        rng = np.random.default_rng(0)

        def kept(x: np.ndarray) -> np.ndarray:
            return rng.choice(x, MAX_RATIOS, replace=False) if x.size > MAX_RATIOS else x

        return cls(enter, max(leave, 1e-6), kept(ratios[~slow]), kept(ratios[slow]))

    def multipliers(self, n: int, seed: int = 0) -> np.ndarray:
        """`n` batches' multipliers: states from the chain (stretches of geometric lengths,
        started in its long-run share), each batch's ratio drawn from its state's."""
        rng = np.random.default_rng(seed)
        if n <= 0:
            return np.zeros(0)
        lengths: list[np.ndarray] = []
        states: list[np.ndarray] = []
        slow = bool(rng.random() < self.slow_share)
        total = 0
        while total < n:  # alternate stretches, drawn in blocks
            k = 1 + (n - total) // 8
            normal_len = rng.geometric(max(self.enter, 1e-9), k)
            slow_len = rng.geometric(min(max(self.leave, 1e-9), 1.0), k)
            pair = np.stack([slow_len, normal_len] if slow else [normal_len, slow_len], 1)
            lengths.append(pair.ravel())
            states.append(np.tile([slow, not slow], k))
            total += int(pair.sum())
        state = np.repeat(np.concatenate(states), np.concatenate(lengths))[:n]
        out = rng.choice(self.normal, n)
        out[state] = rng.choice(self.slow, int(state.sum()))
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "enter": self.enter,
            "leave": self.leave,
            "normal": self.normal.round(5).tolist(),
            "slow": self.slow.round(5).tolist(),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SlowStretches:
        """Checked: chances in (0, 1], ratios positive and finite, both states present."""
        enter, leave = float(data["enter"]), float(data["leave"])
        normal = np.asarray(data["normal"], dtype=float)
        slow = np.asarray(data["slow"], dtype=float)
        for x in (normal, slow):
            if x.ndim != 1 or not x.size or not np.isfinite(x).all() or (x <= 0).any():
                raise ValueError("slow stretches: ratios must be positive numbers")
        if not (0 < enter <= 1 and 0 < leave <= 1):
            raise ValueError("slow stretches: chances must lie in (0, 1]")
        return cls(enter, leave, normal, slow)
