"""`opscope ARGS` run in the test's own process (`engine.cli.main.main`, which leaves the
process as it was), for refusals and short runs: the exit code and everything the command
printed, as a subprocess would show them, without a Python start and the engine's imports
per call. What the subprocess would also have printed is kept: native libraries' output
(captured at the file descriptors), log records of warning level and above (Python's
last-resort handler prints those on stderr) and warnings under Python's default filters.
A command whose process is the point (signals, a crash, what it imports) stays a
subprocess (tests/test_cli.py's `opscope`)."""

from __future__ import annotations

import logging
import subprocess
import warnings
from collections.abc import Callable

import pytest

Cli = Callable[..., subprocess.CompletedProcess[str]]


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def _python_default_warnings() -> None:
    """The filters a plain `python` starts with (pytest turns more on)."""
    warnings.resetwarnings()
    warnings.simplefilter("default")
    for category in (DeprecationWarning, PendingDeprecationWarning, ImportWarning,
                     ResourceWarning):  # fmt: skip
        warnings.simplefilter("ignore", category)


@pytest.fixture
def cli(capfd: pytest.CaptureFixture[str]) -> Cli:
    import engine.cli.main as opscope_cli

    def run(*args: object) -> subprocess.CompletedProcess[str]:
        argv = [str(a) for a in args]
        capfd.readouterr()  # what came before is not this command's
        logs = _Lines()
        root = logging.getLogger()
        root.addHandler(logs)
        try:
            with warnings.catch_warnings(record=True) as caught:
                _python_default_warnings()
                try:
                    code = opscope_cli.main(argv)
                except SystemExit as exc:  # argparse's usage errors
                    code = exc.code if isinstance(exc.code, int) else 2
        finally:
            root.removeHandler(logs)
        said = capfd.readouterr()
        extra = logs.lines + [f"{w.category.__name__}: {w.message}" for w in caught]
        err = said.err + "".join(f"{line}\n" for line in extra)
        return subprocess.CompletedProcess(["opscope", *argv], code, said.out, err)

    return run
