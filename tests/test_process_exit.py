"""An interrupted `opscope` process ends without the interpreter's teardown (where ONNX
Runtime's threads met their library's destructors and aborted with -6 under load); any
other code ends as usual. The console script and `python -m` both go through it."""

from __future__ import annotations

import signal
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = """
import atexit, sys
from engine.cli.process_exit import end_process
atexit.register(lambda: print("teardown ran", flush=True))
print("measured", end="")
end_process(int(sys.argv[1]))
"""


def _end(code: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", SCRIPT, str(code)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )


def test_an_interrupted_process_skips_the_teardown_and_keeps_its_output() -> None:
    done = _end(130)
    assert done.returncode == 130
    assert done.stdout == "measured"  # flushed, though no newline ended it
    assert "teardown ran" not in done.stdout


def test_every_other_code_ends_as_usual() -> None:
    for code in (0, 2):
        done = _end(code)
        assert done.returncode == code
        assert done.stdout == "measuredteardown ran\n"


def test_the_console_script_and_module_entries_end_through_it() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert project["project"]["scripts"]["opscope"] == "app.entry:run"
    for path in ("engine/cli/main.py", "app/entry.py", "packaging/opscope_main.py"):
        tail = (ROOT / path).read_text().split('if __name__ == "__main__":')[-1]
        assert "end_process(main())" in tail or tail.strip() == "run()", path


LATE_SIGNAL = """
import atexit, os, signal, sys, time
from engine.cli.process_exit import end_process

class Late:
    def __del__(self):  # runs in the module teardown, after Python reset its handlers
        os.kill(os.getpid(), signal.SIG{sig})
        time.sleep(0.2)

late = Late()
if sys.argv[1] == "atexit":  # while Python code still runs: the handlers run
    atexit.register(lambda: os.kill(os.getpid(), signal.SIG{sig}) or time.sleep(5))
print("measured", end="")
end_process(3)
"""


@pytest.mark.parametrize("sig", ["TERM", "INT", "HUP"])
@pytest.mark.parametrize("when", ["atexit", "teardown"])
def test_a_signal_after_the_command_ended_keeps_its_code_and_output(sig: str, when: str) -> None:
    """A finished command that meets a signal in the interpreter's teardown (a second or
    more: its modules, ONNX Runtime's sessions) exits with its own code and its whole
    output; before, the teardown's default action ended it by the signal (-15, stdout
    lost)."""
    done = subprocess.run(
        [sys.executable, "-c", LATE_SIGNAL.replace("{sig}", sig), when],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        preexec_fn=_default_signals,
    )
    assert (done.returncode, done.stdout, done.stderr) == (3, "measured", "")


def _default_signals() -> None:
    """The child starts with the default actions (a background job ignores SIGINT)."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)
