"""tests/in_process.py's `cli` shows what `opscope` in a process of its own would have
printed on stderr: native output at the file descriptor, log records of warning level and
above, warnings under Python's default filters (a deprecation stays quiet), so a test of a
one-line refusal run in the test's process still sees a flood of library lines."""

from __future__ import annotations

import logging
import os
import sys
import warnings
from collections.abc import Sequence

import pytest

from tests.in_process import Cli


def test_cli_in_this_process_shows_what_a_process_of_its_own_would(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    import engine.cli.main as opscope_cli

    def noisy(argv: Sequence[str] | None = None) -> int:
        logging.getLogger("onnxruntime.somewhere").warning("a library's warning")
        logging.getLogger("onnxruntime.somewhere").info("a library's info")
        warnings.warn("a user warning", UserWarning, stacklevel=1)
        warnings.warn("a deprecation", DeprecationWarning, stacklevel=1)
        os.write(2, b"a native library's line\n")
        print("opscope: error: bad input", file=sys.stderr)
        print("the table")
        return 2

    monkeypatch.setattr(opscope_cli, "main", noisy)
    done = cli("bench", "model.onnx")
    assert done.returncode == 2 and done.stdout == "the table\n"
    assert done.stderr.splitlines() == [
        "a native library's line",
        "opscope: error: bad input",
        "a library's warning",
        "UserWarning: a user warning",
    ]


def test_cli_in_this_process_gives_argparses_exit_code(cli: Cli) -> None:
    done = cli("bench")
    assert done.returncode == 2 and "required: model" in done.stderr
