"""The checked argument types every command's flags use: a bad value is argparse's one
line and exit 2, naming the flag."""

from __future__ import annotations

import argparse
import math
from typing import NoReturn


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {text}")
    return value


def nonneg_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, got {text}")
    return value


def unit_interval(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not 0.0 < value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be within (0, 1], got {text}")
    return value


def positive_float(text: str) -> float:
    value = float(text)
    if not value > 0 or not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text}")
    return value


def nonneg_float(text: str) -> float:
    value = float(text)
    if not value >= 0 or not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must not be negative, got {text}")
    return value


class OneLineParser(argparse.ArgumentParser):
    """argparse, with a bad argument told in one line (and where the usage is), not the
    whole usage block first: `opscope simulate: error: argument --confirm: must be a
    positive number, got -1 (opscope simulate --help for usage)`. Its subcommands' parsers
    are of this class too (argparse makes them of the parent's class)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} ({self.prog} --help for usage)\n")
