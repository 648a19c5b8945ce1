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

Fitted on what the calibration's stretches of batches agree on: a few seconds of batches
can hold one disturbance (a build, a backup) that this machine does not repeat, and a
process fitted on it predicts that disturbance for every run (bench/results/serve_twin.md,
run 2: p99 over-predicted 4x). The batches are cut into windows of WINDOW; a window whose
share of slow batches stands out from every other window's but its neighbours' (more than
STANDOUT times the next one's) is left out, then the next one is checked, a third of the
windows at most; what was left out is said.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

SLOW = 1.3  # a batch over 1.3x its size's median is in a slow stretch
MIN_BATCHES = 30  # fewer batches in all: no process (its chances cannot be counted)
MAX_RATIOS = 4096  # ratios kept per state (a calibration file stays small)
WINDOW = 32  # batches per window when the windows are checked against each other
MIN_WINDOWS = 4  # fewer windows: all kept (nothing to agree with)
STANDOUT = 2.0  # a window with more than twice the next one's slow share stands out
MIN_SLOW = 4  # and holds this many slow batches at least


@dataclass(frozen=True)
class SlowStretches:
    enter: float  # chance per batch of a normal batch being followed by a slow one
    leave: float  # chance per batch of a slow batch being followed by a normal one
    normal: np.ndarray  # ratios to the size's median, of batches outside stretches
    slow: np.ndarray  # ratios of batches in stretches
    windows: int = 0  # windows of WINDOW batches the fit looked at (0: not windowed)
    left_out: int = 0  # of them, left out as a disturbance the others do not share

    @property
    def slow_share(self) -> float:
        """The long-run share of batches in slow stretches."""
        return self.enter / (self.enter + self.leave) if self.enter + self.leave else 0.0

    @property
    def mean_stretch(self) -> float:
        """Batches in a slow stretch, on average."""
        return 1.0 / self.leave if self.leave else float("inf")

    @classmethod
    def fit(cls, runs: Sequence[np.ndarray], robust: bool = True) -> SlowStretches | None:
        """From sequences of ratios (each batch's time over its size's median), each in the
        order the batches ran; None with fewer than MIN_BATCHES or no slow batch or no
        normal one. `robust`: windows the others disagree with are left out (the module's
        doc); False fits every batch."""
        runs = [np.asarray(r, dtype=float) for r in runs if len(r)]
        if not robust:
            return cls._fit(runs)
        windows = _windows(runs)
        if len(windows) < MIN_WINDOWS:
            return cls._fit(runs)
        out = _disturbed(windows)  # none: the sequences whole, each transition counted
        fitted = cls._fit([w for i, w in enumerate(windows) if i not in out] if out else runs)
        if fitted is None:
            return None
        return dataclasses.replace(fitted, windows=len(windows), left_out=len(out))

    @classmethod
    def _fit(cls, runs: list[np.ndarray]) -> SlowStretches | None:
        ratios = np.concatenate(runs) if runs else np.zeros(0)
        if ratios.size < MIN_BATCHES:
            return None
        slow = ratios > SLOW
        if not slow.any() or slow.all():
            return None
        enter, leave = _chances(runs)
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
            "windows": self.windows,
            "left_out": self.left_out,
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
        windows, left_out = int(data.get("windows", 0)), int(data.get("left_out", 0))
        if not 0 <= left_out <= windows <= 10**7:
            raise ValueError("slow stretches: window counts out of range")
        return cls(enter, leave, normal, slow, windows, left_out)


def _windows(runs: list[np.ndarray]) -> list[np.ndarray]:
    """Each sequence cut into windows of WINDOW batches in order; a tail shorter than half
    a window joins the window before it."""
    out: list[np.ndarray] = []
    for r in runs:
        cuts = list(range(WINDOW, r.size, WINDOW))
        if cuts and r.size - cuts[-1] < WINDOW // 2:
            cuts.pop()
        out.extend(w for w in np.split(r, cuts) if w.size)
    return out


def _disturbed(windows: list[np.ndarray]) -> set[int]:
    """The windows none of the others agree with, a third of them at most: in order of
    slow share, a window is left out when its share is more than STANDOUT times (plus one
    batch) the highest share among the windows neither left out nor next to it, and it
    holds MIN_SLOW slow batches; the first that is not ends the search. Its neighbours are
    no reference: a disturbance that spans two windows makes them agree with each other
    (compared with the next window alone, both passed). Neighbours in the list: the last
    window of one sequence and the first of the next count as such, one reference fewer.
    A machine whose stretches recur shows them in windows far apart, and none stands out."""
    share = [float((w > SLOW).mean()) for w in windows]
    count = [int((w > SLOW).sum()) for w in windows]
    order = sorted(range(len(windows)), key=lambda i: share[i], reverse=True)
    out: set[int] = set()
    for i in order[: len(windows) // 3]:
        others = [share[j] for j in order if j not in out and abs(j - i) > 1]
        if not others or count[i] < MIN_SLOW or share[i] <= STANDOUT * others[0] + 1 / WINDOW:
            break
        out.add(i)
    return out


def _chances(runs: list[np.ndarray]) -> tuple[float, float]:
    """(enter, leave): the chances per batch of a normal batch being followed by a slow one
    and of a slow one by a normal one, counted over the sequences."""
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
    return enter, leave


def stretches_text(st: dict[str, Any] | None) -> str:
    """The calibrated process in words, from its summary ({slow_share, mean_batches,
    windows, left_out}: `summary`); None: times are drawn one by one."""
    if not st:
        return "no slow stretch in the calibration: times drawn one by one"
    text = (
        f"slow stretches as calibrated: {st['slow_share']:.1%} of batches, "
        f"{st['mean_batches']:.1f} in a row on average"
    )
    if st.get("left_out"):
        text += (
            f"; {st['left_out']} of {st['windows']} windows of {WINDOW} batches left out as "
            "a disturbance the others do not share"
        )
    return text


def summary(st: SlowStretches | None) -> dict[str, Any] | None:
    """What `stretches_text` says, as JSON (the CLI's `calibration.slow_stretches`)."""
    if st is None:
        return None
    return {
        "slow_share": round(st.slow_share, 4),
        "mean_batches": round(st.mean_stretch, 2),
        "windows": st.windows,
        "left_out": st.left_out,
    }
