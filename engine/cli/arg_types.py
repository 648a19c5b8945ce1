"""The checked argument types every command's flags use: a bad value is argparse's one
line and exit 2, naming the flag. Every number has bounds: a value past them cannot be
meant (a seed numpy refuses, a week of timing, a billion sequences at once), and refusing
it here costs nothing, where running it would end in a traceback, a hang or the machine's
memory."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import NoReturn

MAX_INT = 2**31 - 1  # the largest count any flag takes (C ints downstream)
MAX_SEED = 2**32 - 1  # numpy's seeds: 0 to 2**32 - 1
MAX_SECONDS = 7 * 86_400.0  # a week: longer runs are not meant
MAX_MS = 3_600_000.0  # an hour, in ms: delays, timeouts and latency targets
MAX_REQUESTS = 50_000_000  # requests a schedule holds (engine.serve.traffic.schedule's limit)
MAX_BATCH = 1 << 20  # samples in a batch (the memory estimate refuses most before this)
MAX_INSTANCES = 256  # model instances, or LLM prefill and decode instances


def int_in(lo: int, hi: int, name: str = "integer") -> Callable[[str], int]:
    """An integer from `lo` to `hi`, both included."""

    def parse(text: str) -> int:
        try:
            value = int(text.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"must be {_range(lo, hi)}, got {text.strip()}")
        return value

    parse.__name__ = name
    return parse


def float_in(
    lo: float, hi: float, *, lo_open: bool = False, name: str = "number"
) -> Callable[[str], float]:
    """A finite number from `lo` (excluded when `lo_open`) to `hi`: never nan or inf."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        inside = (lo < value if lo_open else lo <= value) and value <= hi
        if not inside or not math.isfinite(value):
            low = f"above {lo:g}" if lo_open else f"at least {lo:g}"
            raise argparse.ArgumentTypeError(
                f"must be a finite number {low} and at most {hi:g}, got {text.strip()}"
            )
        return value

    parse.__name__ = name
    return parse


def _range(lo: int, hi: int) -> str:
    return f"at least {lo:,}" if hi == MAX_INT else f"at least {lo:,} and at most {hi:,}"


positive_int = int_in(1, MAX_INT, "positive_int")
nonneg_int = int_in(0, MAX_INT, "nonneg_int")
seed = int_in(0, MAX_SEED, "seed")
positive_float = float_in(0.0, 1e12, lo_open=True, name="positive_float")
nonneg_float = float_in(0.0, 1e12, name="nonneg_float")
seconds = float_in(0.0, MAX_SECONDS, lo_open=True, name="seconds")
nonneg_seconds = float_in(0.0, MAX_SECONDS, name="seconds")
milliseconds = float_in(0.0, MAX_MS, name="milliseconds")
positive_ms = float_in(0.0, MAX_MS, lo_open=True, name="milliseconds")
percent = float_in(0.0, 1e6, name="percent")
share = float_in(0.0, 0.999999, name="share")  # below 1: a share of requests


def unit_interval(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not 0.0 < value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be within (0, 1], got {text}")
    return value


class OneLineParser(argparse.ArgumentParser):
    """argparse, with a bad argument told in one line (and where the usage is), not the
    whole usage block first: `opscope simulate: error: argument --confirm: must be a
    positive number, got -1 (opscope simulate --help for usage)`. Its subcommands' parsers
    are of this class too (argparse makes them of the parent's class)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} ({self.prog} --help for usage)\n")
